"""A work session's CALL answers, read off its socket in the run's event loop.

A streaming CALL (workload.py) sends one result set per interval: a row of one JSON column.
Reading each through PyMySQL took a worker thread blocked in recv() per session, woken for
every result, and PyMySQL's packet layer in that thread: ~0.3 ms of client CPU per result,
as much again for the hand-offs (256 sessions: ~7 % of a 2-vCPU host). Here the event loop
waits until the socket is readable (as the PostgreSQL backend does with libpq), takes what
has arrived and cuts it into packets; a result set is parsed when it is whole.

The MySQL/MariaDB text protocol as PyMySQL negotiates it (no CLIENT_DEPRECATE_EOF): a
result set is a column count, the column definitions, an EOF packet, the rows, an EOF
packet whose status says whether more results follow (a CALL's last one is its own OK
packet); an ERR packet (a kill: 1317) raises PyMySQL's own exception for it. PyMySQL
reads nothing of this answer: its buffered reader holds no bytes of it (it read the
previous answer exactly), and it is used again (ROLLBACK, close) only once the CALL's
answer is whole. A session over TLS (a remote server that negotiated it) reads in a worker
thread instead: a readable socket is not a whole TLS record. The test suite does not run
that path (the private servers have no certificates); it was checked by hand against a
mariadbd with a self-signed certificate: streamed result sets, an error, the connection
usable after.
"""

from __future__ import annotations

import asyncio
import socket
import ssl
from concurrent.futures import Executor

import pymysql

from openslob.engines.common.aio import Readable

MAX_PAYLOAD = 0xFFFFFF  # a payload this long continues in the next packet
MORE_RESULTS = 0x0008  # SERVER_MORE_RESULTS_EXISTS in an EOF / OK packet's status
LOST = 2013  # CR_SERVER_LOST, as PyMySQL raises it
RECV_BYTES = 1 << 16


class AnswerReader:
    """The packets of one connection's answers, as they arrive."""

    def __init__(self, sock: socket.socket, executor: Executor) -> None:
        self.sock = sock
        self.buf = bytearray()
        # A TLS record may span several segments: a readable socket does not mean a whole
        # record, and recv() would block the event loop until it has one. Such a session
        # waits in a worker thread instead (a remote server that negotiated TLS).
        self.executor = executor if isinstance(sock, ssl.SSLSocket) else None
        self.readable = Readable()  # registered while answers are awaited (release())

    def _take(self) -> bytes | None:
        """One whole payload from the buffer (continuations joined), or None."""
        payload, at = bytearray(), 0
        while True:
            if len(self.buf) < at + 4:
                return None
            length = int.from_bytes(self.buf[at : at + 3], "little")
            if len(self.buf) < at + 4 + length:
                return None
            payload += self.buf[at + 4 : at + 4 + length]
            at += 4 + length
            if length < MAX_PAYLOAD:
                del self.buf[:at]
                return bytes(payload)

    async def packet(self) -> bytes:
        """The next packet's payload, waiting (in the event loop) until it is whole."""
        while (payload := self._take()) is None:
            try:
                if self.executor is not None:
                    loop = asyncio.get_running_loop()
                    data = await loop.run_in_executor(self.executor, self.sock.recv, RECV_BYTES)
                else:
                    await self.readable.wait(self.sock.fileno())
                    # what has arrived; a wake-up with nothing there waits again
                    data = self.sock.recv(RECV_BYTES, socket.MSG_DONTWAIT)
            except BlockingIOError:
                continue
            except (OSError, ValueError) as exc:  # reset, timed out, or closed (fileno -1)
                lost = f"Lost connection to server: {exc}"
                raise pymysql.err.OperationalError(LOST, lost) from exc
            if not data:
                raise pymysql.err.OperationalError(LOST, "Lost connection to server during query")
            self.buf += data
        return payload

    def release(self) -> None:
        """Before PyMySQL reads the socket again, or it is closed: no more waits for now."""
        self.readable.release()

    async def result(self) -> tuple[str | None, bool]:
        """The next result set's first value (None: an OK packet, no rows) and whether more
        results follow it in the same answer."""
        first = await self.packet()
        _raise_if_error(first)
        if first[0] == 0x00:  # OK: a statement without a result set (the CALL's status)
            at = _skip_lenenc(first, _skip_lenenc(first, 1))
            return None, bool(int.from_bytes(first[at : at + 2], "little") & MORE_RESULTS)
        for _ in range(_lenenc(first, 0)[0]):  # the column definitions
            await self.packet()
        _raise_if_error(await self.packet())  # the EOF after them
        value: str | None = None
        while True:
            row = await self.packet()
            _raise_if_error(row)
            if row[0] == 0xFE and len(row) < 9:  # EOF: the rows are done
                return value, bool(int.from_bytes(row[3:5], "little") & MORE_RESULTS)
            if value is None and row[0] != 0xFB:  # 0xFB: NULL
                length, at = _lenenc(row, 0)
                value = row[at : at + length].decode("utf-8")


def _raise_if_error(payload: bytes) -> None:
    if payload and payload[0] == 0xFF:
        pymysql.err.raise_mysql_exception(payload)


def _lenenc(data: bytes, at: int) -> tuple[int, int]:
    """A length-encoded integer at `at`: (value, where the next field starts)."""
    first = data[at]
    if first < 0xFB:
        return first, at + 1
    size = {0xFC: 2, 0xFD: 3, 0xFE: 8}[first]
    return int.from_bytes(data[at + 1 : at + 1 + size], "little"), at + 1 + size


def _skip_lenenc(data: bytes, at: int) -> int:
    return _lenenc(data, at)[1]
