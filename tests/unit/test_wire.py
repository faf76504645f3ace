"""The MariaDB answer reader's framing (engines/mariadb/wire.py), on bytes alone.

The reader's protocol handling runs against real mariadbd's in tests/integration
(test_mariadb_engine.py: streamed results, kills, a dead server); what those never send
is checked here: packets that arrive in pieces, a payload long enough to continue in a
second packet, and the wider length-encoded integers."""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor

import pytest

from openslob.engines.mariadb.wire import MAX_PAYLOAD, AnswerReader, _lenenc


def _packet(payload: bytes, seq: int = 1) -> bytes:
    return len(payload).to_bytes(3, "little") + bytes([seq]) + payload


@pytest.fixture()
def reader() -> AnswerReader:
    # no socket is read: _take works on the buffer alone
    return AnswerReader(None, ThreadPoolExecutor(1))  # type: ignore[arg-type]


def test_a_packet_is_taken_only_once_whole(reader: AnswerReader) -> None:
    data = _packet(b"\x01") + _packet(b"abc", 2)
    for cut in range(len(data)):  # the bytes as they might arrive, in two pieces
        reader.buf = bytearray(data[:cut])
        taken = []
        while (payload := reader._take()) is not None:
            taken.append(payload)
        reader.buf += data[cut:]
        while (payload := reader._take()) is not None:
            taken.append(payload)
        assert taken == [b"\x01", b"abc"] and not reader.buf


def test_a_payload_of_the_maximum_length_continues_in_the_next_packet(
    reader: AnswerReader,
) -> None:
    head, tail = b"x" * MAX_PAYLOAD, b"yz"
    reader.buf = bytearray(_packet(head) + _packet(tail, 2)[:-1])
    assert reader._take() is None  # the continuation is not whole yet
    reader.buf += b"z"
    assert reader._take() == head + tail and not reader.buf


@pytest.mark.parametrize(
    ("encoded", "value", "end"),
    [
        (b"\xfa", 250, 1),
        (b"\xfc\x34\x12", 0x1234, 3),
        (b"\xfd\x56\x34\x12", 0x123456, 4),
        (b"\xfe" + (2**40 + 7).to_bytes(8, "little"), 2**40 + 7, 9),
    ],
)
def test_length_encoded_integers(encoded: bytes, value: int, end: int) -> None:
    assert _lenenc(b"\x00" + encoded, 1) == (value, end + 1)
