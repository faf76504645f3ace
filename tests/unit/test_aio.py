"""A session socket's waits (engines/common/aio.Readable) on a real socket pair."""

from __future__ import annotations

import asyncio
import socket

from openslob.engines.common.aio import Readable


def _registered(loop: asyncio.AbstractEventLoop, fd: int) -> bool:
    selector = loop._selector  # type: ignore[attr-defined]
    try:
        selector.get_key(fd)
    except KeyError:
        return False
    return True


async def _read(readable: Readable, sock: socket.socket) -> tuple[bytes, int]:
    """What the engines do: wait, read without blocking, wait again when nothing came.
    Returns the bytes and how many waits it took."""
    waits = 0
    async with asyncio.timeout(2):
        while True:
            await readable.wait(sock.fileno())
            waits += 1
            try:
                return sock.recv(16, socket.MSG_DONTWAIT), waits
            except BlockingIOError:
                continue


def test_waits_end_when_bytes_come_the_socket_stays_registered_and_none_is_spurious() -> None:
    async def scenario() -> list[tuple[bytes, int, bool]]:
        loop = asyncio.get_running_loop()
        ours, theirs = socket.socketpair()
        readable, seen = Readable(), []
        try:
            for n in range(4):
                loop.call_later(0.01, theirs.send, b"x%d" % n)
                data, waits = await _read(readable, ours)
                seen.append((data, waits, _registered(loop, ours.fileno())))
            readable.release()
            assert not _registered(loop, ours.fileno())
        finally:
            ours.close()
            theirs.close()
        return seen

    assert asyncio.run(scenario()) == [(b"x%d" % n, 1, True) for n in range(4)]


def test_bytes_with_nobody_waiting_let_the_socket_go_then_a_wait_takes_it_again() -> None:
    async def scenario() -> tuple[bool, bytes, bool]:
        loop = asyncio.get_running_loop()
        ours, theirs = socket.socketpair()
        readable = Readable()
        try:
            loop.call_soon(theirs.send, b"a")
            await _read(readable, ours)
            theirs.send(b"b")  # nobody waits: a level-triggered wake-up at every turn
            for _ in range(4):
                await asyncio.sleep(0)
            let_go = not _registered(loop, ours.fileno())
            data, _ = await _read(readable, ours)
            again = _registered(loop, ours.fileno())
            readable.release()
        finally:
            ours.close()
            theirs.close()
        return let_go, data, again

    assert asyncio.run(scenario()) == (True, b"b", True)
