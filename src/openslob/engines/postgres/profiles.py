"""postgresql.conf profiles for the private server.

pio  - physical I/O: direct I/O for data files, a small buffer cache (the default data set is
       more than 10x larger), synchronous single-block reads, I/O timing on. The default.
lio  - logical I/O: a buffer cache large enough to hold the data set; measures CPU/LIO rate.
redo - WAL/commit stress: a large cache (reads stay in memory) and room for WAL so that
       commits and WAL flushes dominate, with WAL I/O timing on.
load - internal: buffered I/O and a large cache while `slob setup` loads, so the load and
       its VACUUM are not written and re-read 8 KiB at a time through direct I/O.
"""

from __future__ import annotations

from pathlib import Path

from openslob.engines.api import PROFILES
from openslob.engines.common.server import large_cache_mb

__all__ = ["DIRECT_IO_PROFILES", "LOAD_PROFILE", "PROFILES", "render_profile"]
# Internal, never chosen by users: `slob setup` runs a bulk load in it (see
# EmbeddedServer.bulk_load), then restarts the server into its test profile.
LOAD_PROFILE = "load"
DIRECT_IO_PROFILES = ("pio", "redo")

# Pages each connection may pin at once in the worst case (index descent + heap fetch +
# slack); the pio cache must never run out of unpinned buffers at high session counts.
_PINNED_PAGES_PER_CONNECTION = 8
_PIO_BASE_MB = 16


def pio_shared_buffers_kb(max_connections: int) -> int:
    return _PIO_BASE_MB * 1024 + _PINNED_PAGES_PER_CONNECTION * 8 * max_connections


_COMMON = {
    "track_io_timing": "on",
    "track_wal_io_timing": "on",
    "shared_preload_libraries": "'pg_stat_statements'",
    # Nested statements run inside the work procedure; 'top' would hide them.
    "pg_stat_statements.track": "'all'",
    "jit": "off",
    "huge_pages": "try",
    "fsync": "on",
    "synchronous_commit": "on",
    "full_page_writes": "on",
    "max_wal_size": "'4GB'",
    "checkpoint_timeout": "'15min'",
    "log_checkpoints": "on",
    "lc_messages": "'C'",
    "log_timezone": "'UTC'",
    "timezone": "'UTC'",
}

_PER_PROFILE = {
    # io_method=sync: every buffer miss is one pread() by the session itself, like SLOB's
    # "db file sequential read" and fio's psync engine, so latencies compare one to one.
    "pio": {"debug_io_direct": "'data'", "io_method": "'sync'"},
    "lio": {"io_method": "'sync'"},
    "load": {"io_method": "'sync'"},
    "redo": {
        "debug_io_direct": "'data'",
        "io_method": "'sync'",
        "wal_buffers": "'64MB'",
        "max_wal_size": "'16GB'",
        "checkpoint_timeout": "'1h'",
    },
}


def render_profile(
    profile: str, *, port: int, socket_dir: Path, listen_tcp: bool, max_connections: int
) -> str:
    """The openslob.conf include file for one profile."""
    if profile == "pio":
        shared_buffers = f"'{pio_shared_buffers_kb(max_connections)}kB'"
    else:
        shared_buffers = f"'{large_cache_mb()}MB'"
    settings = {
        **_COMMON,
        **_PER_PROFILE[profile],
        "shared_buffers": shared_buffers,
        "max_connections": str(max_connections),
        "port": str(port),
        "listen_addresses": "'127.0.0.1'" if listen_tcp else "''",
        "unix_socket_directories": f"'{socket_dir}'",
        "unix_socket_permissions": "0700",
    }
    lines = [f"# openslob profile '{profile}' - written by `slob server start`; do not edit"]
    lines += [f"{name} = {value}" for name, value in settings.items()]
    return "\n".join(lines) + "\n"
