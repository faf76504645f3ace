"""The shipped kernel programs (data/layers.bpf.o): they are what their source builds to,
the kernel loads them, and the bucket formula they run is model/histogram.py's.

Fast and server-free, but real: the object is rebuilt with clang (host/bpfbuild.py) and
compared byte for byte, and the bucket formula runs in the kernel (BPF_PROG_TEST_RUN of the
object's `bucket_of`, the same inline function the tracepoints call) for ~1,000 values."""

from __future__ import annotations

import random
from pathlib import Path

import pytest

from openslob.host import bpfbuild, ebpf, libbpf
from openslob.model.histogram import SLOTS, bucket_index


def test_the_shipped_object_is_what_its_source_builds_to(tmp_path: Path) -> None:
    rebuilt = tmp_path / "layers.bpf.o"
    bpfbuild.build(bpfbuild.SOURCE, rebuilt)
    assert rebuilt.read_bytes() == bpfbuild.OBJECT.read_bytes(), (
        "data/layers.bpf.o is not its source's: run `python -m openslob.host.bpfbuild` "
        "and commit the object"
    )


def _load() -> libbpf.BpfObject:
    return libbpf.BpfObject(bpfbuild.OBJECT.read_bytes(), bytes(ebpf.config(1, [])))


def test_the_kernel_buckets_are_the_op_histograms() -> None:
    if not ebpf.may_trace():  # then the kernel must refuse, and say why
        with pytest.raises(libbpf.BpfError, match="loading the BPF programs"):
            _load()
        return
    rng = random.Random(26)
    values = list(range(300)) + [rng.randrange(1 << rng.randrange(7, 40)) for _ in range(700)]
    values += [127, 128, 129, 255, 256, 8191, 8192, 2**37 - 1, 2**37, 2**40, 2**63]
    # durations in ns: the bucket of their whole µs (the multiply-shift below 2**31 ns, the
    # division above), around every power of two and every multiple of 1000 that matters
    nanos = [v * 1000 + d for v in values[:400] for d in (0, 1, 999)]
    nanos += [(1 << b) + d for b in range(10, 64) for d in (-1, 0, 1)]
    nanos += [rng.randrange(1 << 32) for _ in range(2000)] + [2**31 - 1, 2**31, 2**64 - 1]
    bpf = _load()
    try:
        got = {v: bpf.test_run("bucket_of", [v]) for v in values}
        got_ns = {n: bpf.test_run("bucket_of_ns", [n]) for n in nanos}
    finally:
        bpf.close()
    assert got == {v: bucket_index(v) for v in values}
    assert max(got.values()) == SLOTS - 1
    assert got_ns == {n: bucket_index(n // 1000) for n in nanos}


def test_the_programs_attach_where_their_sections_say() -> None:
    """Every tracepoint the tracer attaches exists in this kernel's BTF, and closing the
    object detaches them (no program of ours stays attached)."""
    if not ebpf.may_trace():
        return  # the refusal is checked above; nothing can be attached here
    bpf = _load()
    try:
        bpf.attach(ebpf.PROGRAMS)
        assert bpf.attached == list(ebpf.PROGRAMS)
        assert all(fd > 0 for fd in bpf.program_fds(ebpf.PROGRAMS))
    finally:
        bpf.close()
    assert bpf.attached == []
