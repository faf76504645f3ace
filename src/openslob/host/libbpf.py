"""The few calls of libbpf (the kernel's own BPF loader library, Debian's `libbpf1`) that
host/ebpf.py needs, through ctypes: open an object from memory with its read-only config,
load it (CO-RE relocation against the kernel's BTF, the verifier), attach programs by name,
read per-CPU array maps, run a program once (BPF_PROG_TEST_RUN), close.

Everything lives in this process: the programs are attached through links that are file
descriptors of ours, so a client that dies, even killed outright, detaches them (the kernel
closes its descriptors); nothing is pinned. libbpf's own messages go to stderr only with
SLOB_DEBUG=1; errors are `BpfError`s naming the step and the kernel's errno text.
"""

from __future__ import annotations

import ctypes
import os
from collections.abc import Sequence
from ctypes import POINTER, c_char_p, c_int, c_size_t, c_uint32, c_void_p

LIBRARY = "libbpf.so.1"


class BpfError(Exception):
    """A step of loading or attaching that failed, with the reason."""


class _TestRunOpts(ctypes.Structure):
    """struct bpf_test_run_opts (libbpf 1.x; `sz` tells libbpf which fields we know)."""

    _fields_ = (
        ("sz", c_size_t),
        ("data_in", c_void_p),
        ("data_out", c_void_p),
        ("data_size_in", c_uint32),
        ("data_size_out", c_uint32),
        ("ctx_in", c_void_p),
        ("ctx_out", c_void_p),
        ("ctx_size_in", c_uint32),
        ("ctx_size_out", c_uint32),
        ("retval", c_uint32),
        ("repeat", c_int),
        ("duration", c_uint32),
        ("flags", c_uint32),
        ("cpu", c_uint32),
        ("batch_size", c_uint32),
    )


_SIGNATURES = {
    "libbpf_set_print": (c_void_p, [c_void_p]),
    "libbpf_num_possible_cpus": (c_int, []),
    "bpf_object__open_mem": (c_void_p, [c_void_p, c_size_t, c_void_p]),
    "bpf_object__next_map": (c_void_p, [c_void_p, c_void_p]),
    "bpf_object__find_map_by_name": (c_void_p, [c_void_p, c_char_p]),
    "bpf_object__find_program_by_name": (c_void_p, [c_void_p, c_char_p]),
    "bpf_object__load": (c_int, [c_void_p]),
    "bpf_object__close": (None, [c_void_p]),
    "bpf_map__name": (c_char_p, [c_void_p]),
    "bpf_map__fd": (c_int, [c_void_p]),
    "bpf_map__value_size": (c_uint32, [c_void_p]),
    "bpf_map__set_initial_value": (c_int, [c_void_p, c_void_p, c_size_t]),
    "bpf_program__attach": (c_void_p, [c_void_p]),
    "bpf_program__fd": (c_int, [c_void_p]),
    "bpf_link__destroy": (c_int, [c_void_p]),
    "bpf_map_lookup_elem": (c_int, [c_int, c_void_p, c_void_p]),
    "bpf_prog_test_run_opts": (c_int, [c_int, POINTER(_TestRunOpts)]),
}
_lib: ctypes.CDLL | None = None
_missing: str | None = None


def load_library(name: str = LIBRARY) -> tuple[ctypes.CDLL | None, str | None]:
    """libbpf by its soname, with our signatures; (None, why) when it cannot be used."""
    try:
        lib = ctypes.CDLL(name, use_errno=True)
        for function_name, (restype, argtypes) in _SIGNATURES.items():
            function = getattr(lib, function_name)
            function.restype, function.argtypes = restype, argtypes
    except (OSError, AttributeError) as exc:
        return None, f"{name} cannot be used ({exc}; apt-get install libbpf1)"
    if not os.environ.get("SLOB_DEBUG"):
        lib.libbpf_set_print(None)  # its warnings would land in the user's terminal
    return lib, None


def library() -> ctypes.CDLL | None:
    """libbpf, loaded once (None when it is not installed: `missing()` says so)."""
    global _lib, _missing
    if _lib is None and _missing is None:
        _lib, _missing = load_library()
    return _lib


def missing() -> str | None:
    """Why libbpf cannot be used (None: it can)."""
    library()
    return _missing


def _need() -> ctypes.CDLL:
    lib = library()
    if lib is None:
        raise BpfError(missing() or LIBRARY)
    return lib


def _failed(step: str, code: int | None = None) -> BpfError:
    errno = abs(code) if code else ctypes.get_errno()
    return BpfError(f"{step}: {os.strerror(errno) if errno else 'failed'}")


class BpfObject:
    """One loaded object: its programs (attached on request) and maps."""

    def __init__(self, image: bytes, rodata: bytes) -> None:
        """Open `image` (an ELF object), give its `.rodata` the bytes `rodata` (the
        programs' `const volatile` config, exactly its size), load it into the kernel."""
        lib = _need()
        self._lib = lib
        self._image = ctypes.create_string_buffer(image, len(image))  # libbpf keeps a pointer
        self._links: list[int] = []
        self.attached: list[str] = []
        self._obj = lib.bpf_object__open_mem(self._image, len(image), None)
        if not self._obj:
            raise _failed("opening the BPF object")
        try:
            self._set_rodata(rodata)
            code = lib.bpf_object__load(self._obj)
            if code != 0:
                raise _failed("loading the BPF programs", code)
        except BpfError:
            self.close()
            raise

    def _section_map(self, suffix: str) -> int:
        """The map libbpf made of a global data section (`.rodata`, `.bss`): its name is
        the object's name cut short, then the section's."""
        current = self._lib.bpf_object__next_map(self._obj, None)
        while current:
            if (self._lib.bpf_map__name(current) or b"").endswith(suffix.encode()):
                return int(current)
            current = self._lib.bpf_object__next_map(self._obj, current)
        raise BpfError(f"the BPF object has no {suffix}")

    def _set_rodata(self, rodata: bytes) -> None:
        found = self._section_map(".rodata")
        size = self._lib.bpf_map__value_size(found)
        if size != len(rodata):
            raise BpfError(f"the object's config is {size} bytes, not {len(rodata)}")
        buffer = ctypes.create_string_buffer(rodata, len(rodata))
        code = self._lib.bpf_map__set_initial_value(found, buffer, len(rodata))
        if code != 0:
            raise _failed("setting the programs' config", code)

    def _program(self, name: str) -> int:
        program = self._lib.bpf_object__find_program_by_name(self._obj, name.encode())
        if not program:
            raise BpfError(f"the BPF object has no program {name!r}")
        return int(program)

    def attach(self, names: Sequence[str]) -> None:
        """Attach these programs (their section names say where)."""
        for name in names:
            link = self._lib.bpf_program__attach(self._program(name))
            if not link:
                raise _failed(f"attaching {name}")
            self._links.append(link)
            self.attached.append(name)

    def detach(self, name: str) -> None:
        """Detach one attached program (the others run on)."""
        if name in self.attached:
            index = self.attached.index(name)
            self._lib.bpf_link__destroy(self._links.pop(index))
            self.attached.pop(index)

    def program_fds(self, names: Sequence[str]) -> list[int]:
        """The descriptors of those of these programs that are attached (their
        /proc/self/fdinfo counters)."""
        return [self._lib.bpf_program__fd(self._program(n)) for n in names if n in self.attached]

    def map_fd(self, name: str) -> int:
        found = self._lib.bpf_object__find_map_by_name(self._obj, name.encode())
        if not found:
            raise BpfError(f"the BPF object has no map {name!r}")
        return int(self._lib.bpf_map__fd(found))

    def section(self, suffix: str) -> bytes:
        """The current bytes of a global data section (`.bss`, `.data`) the programs write:
        an array map of one entry, the whole section."""
        found = self._section_map(suffix)
        buffer = ctypes.create_string_buffer(self._lib.bpf_map__value_size(found))
        self.lookup(self._lib.bpf_map__fd(found), 0, buffer)
        return buffer.raw

    def lookup(self, fd: int, key: int, buffer: ctypes.Array[ctypes.c_char]) -> None:
        """The value of u32 `key` into `buffer` (a per-CPU map: one value per possible CPU,
        each rounded up to 8 bytes)."""
        key_c = c_uint32(key)
        if self._lib.bpf_map_lookup_elem(fd, ctypes.byref(key_c), buffer) != 0:
            raise _failed(f"reading map entry {key}")

    def test_run(self, name: str, args: Sequence[int]) -> int:
        """Run program `name` once on a raw tracepoint's arguments; its return value."""
        ctx = (ctypes.c_uint64 * len(args))(*args)
        opts = _TestRunOpts(sz=ctypes.sizeof(_TestRunOpts))
        opts.ctx_in, opts.ctx_size_in = ctypes.cast(ctx, c_void_p), ctypes.sizeof(ctx)
        fd = self._lib.bpf_program__fd(self._program(name))
        code = self._lib.bpf_prog_test_run_opts(fd, ctypes.byref(opts))
        if code != 0:
            raise _failed(f"running {name}", code)
        return int(opts.retval)

    def close(self) -> None:
        """Detach every program and free the object (idempotent)."""
        for link in self._links:
            self._lib.bpf_link__destroy(link)
        self._links, self.attached = [], []
        if self._obj:
            self._lib.bpf_object__close(self._obj)
            self._obj = None


def possible_cpus() -> int:
    """CPUs a per-CPU map holds a value for (the kernel's possible CPUs)."""
    count = int(_need().libbpf_num_possible_cpus())
    if count <= 0:
        raise BpfError("the number of possible CPUs is unknown")
    return count
