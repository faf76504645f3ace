"""Doctor findings both engines word the same way."""

from __future__ import annotations

from openslob.engines.api import Finding

# Connections a run opens besides its sessions: two monitors and the snapshot connection.
EXTRA_CONNECTIONS = 3


def capacity(limit: int, free: int, sessions: int, *, restart: bool) -> Finding:
    """Whether `sessions` (and the run's own connections) fit in the `free` connections."""
    need = sessions + EXTRA_CONNECTIONS
    ok = free >= need
    advice = f"raise max_connections to at least {limit - free + need}"
    return Finding(
        "connections",
        f"{need} needed, {free} free of max_connections {limit}",
        "ok" if ok else "fail",
        "" if ok else advice + (" (restart)" if restart else ""),
    )
