"""The records engines hand the rest of openslob: plain data, no behaviour of an engine.

engines/api.py re-exports each of them (import them from there): load and verify results,
doctor findings, wait samples, a private server's state and the profiles it offers.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any


@dataclass(frozen=True)
class RewriteExtent:
    """One table of the data set as `slob precondition --mode engine` rewrites it: `units`
    (pages, or rows where the engine addresses rows) numbered 0..units-1, `unit_bytes` each."""

    relation: str  # schema.table
    units: int
    unit_bytes: int

    @property
    def bytes(self) -> int:
        return self.units * self.unit_bytes


@dataclass
class TableLoad:
    """One line of the load summary."""

    schema: str
    table: str
    rows: int
    pages: int
    bytes: int
    seconds: float
    action: str  # "loaded" | "valid" (already there, untouched)

    @property
    def mb_per_s(self) -> float | None:
        if self.action != "loaded" or self.seconds <= 0:
            return None
        return self.bytes / (1 << 20) / self.seconds


@dataclass
class SetupResult:
    tables: list[TableLoad]
    notes: list[str] = field(default_factory=list)
    seconds: float = 0.0


@dataclass
class Check:
    """One verification finding: what was measured, what was expected, and the verdict."""

    schema: str
    name: str
    measured: Any
    expected: str
    ok: bool


@dataclass
class Finding:
    """One `slob doctor` finding: what was read from the server, the verdict, what to do."""

    check: str
    value: str
    verdict: str  # ok | warn | fail
    advice: str = ""


@dataclass
class VerifyResult:
    checks: list[Check]

    @property
    def ok(self) -> bool:
        return all(check.ok for check in self.checks)


@dataclass
class WaitSamples:
    """What an in-database wait sampler saw over the window (Monitor.sample_waits)."""

    samples: int
    waits: dict[str, int]  # wait event -> samples
    commits: int  # the sampler's own transactions, all inside the window


@dataclass
class KeptIntervals:
    """What a cancelled CALL's loop had kept for its next answer (RunBackend.pending)."""

    results: list[dict[str, Any]]  # interval results, as the loop returns them
    own_commits: int  # transactions the fetching ran (they count in the window's commits)
    # False: they could not be read (the connection gone or still busy): whatever the loop
    # kept is lost, and the run counts the window's ops another way (results/build.py)
    fetched: bool = True


# What every private server offers (SLOB's test modes): pio, direct I/O and a small cache, the
# default; lio, the data set cached; redo, commits and log flushes dominate.
PROFILES = ("pio", "lio", "redo")


@dataclass
class ServerState:
    """What `slob server status` reports (fields an engine has no use for stay None)."""

    state: str  # "running" | "stopped" | "absent"
    data_dir: str
    profile: str | None = None
    version: str | None = None
    pid: int | None = None
    uri: str | None = None
    page_size: str | None = None
    socket: str | None = None
    socket_dir: str | None = None
    tcp_port: int | None = None
    service_user: str | None = None
    settings: dict[str, str] | None = None

    def as_dict(self) -> dict[str, Any]:
        """The fields that apply (an engine's unused ones dropped; the core ones always)."""
        return {k: v for k, v in self.__dict__.items() if v is not None or k in _ALWAYS}


_ALWAYS = {"state", "data_dir", "profile", "version", "pid", "uri", "tcp_port", "settings"}
