"""Build the kernel programs of the latency layers: data/layers.bpf.c → data/layers.bpf.o.

The object is shipped with the package, so that tracing needs nothing on the database's
host but root and libbpf (host/ebpf.py); it is built here, by a developer, whenever the
source changes, and a test rebuilds it and compares the bytes (tests/unit/test_bpf_object.py),
so that the shipped object is always its source's. What the build needs: clang (Debian's
`clang`, 14 here) for the BPF target, libbpf's headers (`libbpf-dev`), llvm-strip (`llvm`).

The object is CO-RE (compiled once, relocated by libbpf against the running kernel's BTF)
and reproducible: the source's directory is mapped to `.` and DWARF is stripped (the BTF
that CO-RE needs stays), so the same toolchain gives the same bytes anywhere.

    python -m openslob.host.bpfbuild            # rewrites src/openslob/data/layers.bpf.o
"""

from __future__ import annotations

import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

DATA = Path(__file__).resolve().parent.parent / "data"
SOURCE = DATA / "layers.bpf.c"
OBJECT = DATA / "layers.bpf.o"
CLANG_FLAGS = ("-O2", "-g", "-target", "bpf", "-Wall", "-Werror")


class BuildError(Exception):
    """A tool missing or failing, in one line."""


def _tool(*names: str) -> str:
    for name in names:
        path = shutil.which(name)
        if path is not None:
            return path
    raise BuildError(f"{names[0]} is not installed (apt-get install clang llvm libbpf-dev)")


def _multiarch_include(clang: str) -> list[str]:
    """<asm/types.h>, which linux/bpf.h includes, lives in the host's multiarch directory."""
    arch = subprocess.run(
        [clang, "-print-multiarch"], capture_output=True, text=True, check=False
    ).stdout.strip()
    directory = Path("/usr/include") / arch
    return ["-idirafter", str(directory)] if arch and directory.is_dir() else []


def build(source: Path = SOURCE, out: Path = OBJECT) -> None:
    """Compile `source` for the BPF target and strip its DWARF into `out`. The source is
    compiled from a copy in a directory of its own, mapped to `.`: the object is the same
    wherever the checkout is."""
    clang, strip = _tool("clang", "clang-14"), _tool("llvm-strip", "llvm-strip-14")
    with tempfile.TemporaryDirectory(prefix="slob-bpf-") as tmp:
        work = Path(tmp)
        shutil.copyfile(source, work / SOURCE.name)
        unstripped, stripped = work / "unstripped.o", work / OBJECT.name
        compile_ = [clang, *CLANG_FLAGS, *_multiarch_include(clang)]
        compile_ += [f"-ffile-prefix-map={work}=.", "-c", str(work / SOURCE.name)]
        for step in (
            [*compile_, "-o", str(unstripped)],
            [strip, "-g", str(unstripped), "-o", str(stripped)],
        ):
            done = subprocess.run(step, capture_output=True, text=True, check=False, cwd=work)
            if done.returncode != 0:
                raise BuildError(f"{Path(step[0]).name} failed: {done.stderr.strip()}")
        shutil.copyfile(stripped, out)


def main() -> int:
    try:
        build()
    except BuildError as exc:
        print(f"bpfbuild: error: {exc}", file=sys.stderr)
        return 1
    print(f"built {OBJECT} ({OBJECT.stat().st_size:,} bytes) from {SOURCE.name}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
