"""The interfaces of an engine plug-in: what the runner, the CLI and run.json may use.

An engine is one folder under engines/ holding everything of one database: SQL and the work
loop, statistics, doctor, its private server. It hands the rest of openslob one EnginePlugin
(registry.py lists them), through which everything else is reached:

    EnginePlugin    names, capabilities and terms, options and metrics it adds; which --target
                    strings are its own; its private server; an Engine, a RunBackend and its
                    WindowStats for a resolved Target
    Engine          the data set's lifecycle (setup, verify, destroy, locks) and the doctor
    RunBackend      work sessions (one long CALL per phase) and Monitor connections
    Monitor         snapshots, live counters, the horizon, host files, wait samples
    WindowStats     the window's figures from two snapshots (run.json keys, metrics table)
    PrivateServer   the server openslob runs itself (start, stop, status, bulk loads)
    Capabilities    what it can measure, and its own words for what the reports name

Nothing outside engines/<name>/ asks which engine it talks to: it asks the plug-in, and the
renderers read the engine's terms from run.json (engine.terms).
"""

from __future__ import annotations

import contextlib
from abc import ABC, abstractmethod
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol, runtime_checkable

from openslob.config.option import Option
from openslob.config.resolve import Config
from openslob.model.compressibility import Compressibility
from openslob.model.errors import ConfigError
from openslob.model.metrics import Metric

# Called with (rows loaded so far, rows to load in total) while setup runs.
ProgressCallback = Callable[[int, int], None]


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


@runtime_checkable
class DatasetLock(Protocol):
    """One run, setup or destroy per data set at a time (engines' guard modules)."""

    guard: dict[str, Any]  # what the work loop needs to see its client (passed in its conf)

    def ensure(self) -> None:
        """Hold the lock again if a restart of the server ended its connection."""

    def release(self) -> None: ...


class Engine(ABC):
    name: str

    @abstractmethod
    def describe(self) -> dict[str, Any]:
        """{name, version, target (no password), settings {...}}."""

    @abstractmethod
    def setup(self, config: Config, progress: ProgressCallback | None = None) -> SetupResult:
        """Create or repair the SLOB data set; leave valid data untouched."""

    @abstractmethod
    def bytes_to_load(self, config: Config) -> int:
        """What setup would write: the tables that are missing, stale or half loaded."""

    @abstractmethod
    def verify(self, config: Config) -> VerifyResult:
        """Measure the data set against what the config asks for."""

    @abstractmethod
    def destroy(self) -> list[str]:
        """Drop everything setup created; returns the schemas dropped."""

    @abstractmethod
    def cancel(self) -> None:
        """Cancel server-side work of this engine (from another thread, e.g. on Ctrl-C)."""

    @abstractmethod
    def missing_tables(self, config: Config, schemas: list[str]) -> dict[str, str]:
        """`schema.table` -> why, for the tables of `schemas` a run with this config needs and
        cannot use as they are (absent, half loaded, loaded with other parameters, changed
        by hand, bloated)."""

    @abstractmethod
    def recorded_dataset(self) -> dict[str, float] | None:
        """SCHEMAS, SCALE, SCAN_TABLE_SZ and SEED of the data set setup recorded on this
        target (its bookkeeping, read only); None when there is none. A command not given
        them works on this data set (runner/dataset.py)."""

    @abstractmethod
    def has_data(self) -> bool:
        """Whether any SLOB schema exists (a first run creates the default data set)."""

    @abstractmethod
    def install_procedures(self, schemas: list[str]) -> None:
        """(Re)create the work loop of each schema (and helpers the run needs)."""

    @abstractmethod
    def data_bytes(self, rows: int) -> int:
        """Bytes that `rows` SLOB rows occupy on this server (pages times page size)."""

    def compressibility(self, config: Config, schemas: list[str]) -> Compressibility:
        """What the storage sees of the data set's tables in `schemas`: compression and
        dedupe ratios measured on a sample of their data files (model/compressibility.py)."""
        return Compressibility.unmeasured(f"{self.name}: not measured by this engine")

    @abstractmethod
    def identity(self) -> tuple[str, str]:
        """(server, database): equal for two targets that reach the same data."""

    def data_group(self) -> str | None:
        """Equal for servers that share one data set though each is a server of its own
        (the nodes of a multi-primary cluster): the data set is loaded through one of
        them. None for a server whose data is its own."""
        return None

    def catch_up(self) -> None:
        """Wait until this server has applied what its data group's other servers committed
        (a cluster node applies the others' changes a little later); nothing elsewhere."""
        return None

    @abstractmethod
    def lock_dataset(self, purpose: str) -> DatasetLock:
        """Hold the data set for this process ("run", "setup", ...); BusyError names the
        holder when another openslob process has it."""

    @abstractmethod
    def lock_holder(self) -> str | None:
        """Who holds the data set now (None: nobody)."""

    @abstractmethod
    def leftover_loops(self) -> list[tuple[int, str]]:
        """(session id, application) of openslob run sessions still connected: call with
        the lock held, when they belong to no live run."""

    @abstractmethod
    def end_loops(self, ids: list[int]) -> str:
        """End those sessions (a private server's); returns how, for a message."""

    @abstractmethod
    def end_loops_advice(self, ids: list[int]) -> str:
        """The statement that ends them, for the owner of an existing server."""


# ------------------------------------------------------------------------------ the run


@runtime_checkable
class Monitor(Protocol):
    """One sampler's connection: it must hold back no cleanup horizon between its queries."""

    def snapshot(self) -> dict[str, Any]:
        """Every cumulative counter the window's figures are computed from."""

    def interval_snapshot(self) -> dict[str, Any]:
        """The counters WindowStats.metrics needs, read once per sampling interval while the
        loops run: cheap, and without touching the data set or this database's catalogs
        (their buffer hits would count as the run's logical reads)."""

    def horizon(self) -> dict[str, Any]:
        """The oldest holder of the cleanup horizon now ({kind, holder, xmin, age_xids, role,
        application, state, since, query}) and "figures" for the time series."""

    def read_file(self, path: str) -> str | None:
        """A file of the server's host (its /proc), None where the engine cannot read one."""

    def clock_epoch(self) -> float:
        """The server's clock now, as Unix epoch seconds (the clock its work loop reads), in
        one short statement: the runner times the round trip (runner/clocks.py)."""

    def sample_waits(
        self, application_name: str, start_epoch: float, end_epoch: float | None, hz: float
    ) -> Any:
        """Wait samples of the window (Capabilities.wait_sampling): {samples, waits, commits}."""

    def cancel(self) -> None: ...

    def close(self) -> None: ...


@runtime_checkable
class RunBackend(Protocol):
    """What the run lifecycle needs from one instance."""

    application_name: str

    async def open_session(self, session_id: int, schema: str) -> Any: ...

    async def call(self, session: Any, conf: dict[str, Any]) -> dict[str, Any]:
        """The session's CALL of its loop for one sampling interval; the loop's JSON result
        (counts, histograms, `own_commits`, and `next`: what the next CALL continues from)."""

    async def publish_stats(self, session: Any) -> bool:
        """Make the session publish its statistics; True when that ran one transaction."""

    async def cancel(self, session: Any) -> None: ...

    def cancel_now(self, session: Any) -> None: ...

    async def close(self, session: Any) -> None: ...

    def shutdown(self) -> None: ...

    def monitor(self, role: str) -> Monitor: ...

    def host_files_reason(self) -> str | None:
        """None when the server host's /proc is readable through the database, else why not."""

    def terminate_leftovers(self) -> int: ...

    def settings(self) -> dict[str, str]:
        """Settings the run's figures depend on."""

    def connection_lost(self, exc: BaseException) -> bool:
        """Whether `exc` says the server (or the connection to it) is gone."""


@runtime_checkable
class WindowStats(Protocol):
    """The window's figures from the two snapshots of one instance."""

    def metrics(
        self,
        before: dict[str, Any],
        after: dict[str, Any],
        seconds: float,
        settings: dict[str, str],
        own_commits: int,
    ) -> dict[str, Any]:
        """run.json metrics (the metrics table's keys; null where it cannot say). Also each
        sampling interval's, from two interval snapshots (Monitor.interval_snapshot)."""

    def details(
        self, before: dict[str, Any], after: dict[str, Any], settings: dict[str, str]
    ) -> dict[str, Any]:
        """{io, statements, notes, history_length}: the breakdowns it has (null otherwise)."""

    def ops_from_statements(
        self, before: dict[str, Any] | None, after: dict[str, Any] | None
    ) -> dict[str, int] | None:
        """Window op counts from statement statistics, when the loops' own were lost."""

    def work_per_op(
        self,
        before: dict[str, Any],
        after: dict[str, Any],
        settings: dict[str, str],
        config: Config,
        ops: dict[str, int] | None,
    ) -> dict[str, Any] | None:
        """Blocks per SLOBop kind, measured and as the layout predicts them."""


# ----------------------------------------------------------------------- the private server

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


@runtime_checkable
class PrivateServer(Protocol):
    """A server openslob creates, starts and stops itself (one data directory)."""

    label: str
    files_dir: Path  # the data files' directory: its devices are the ones measured
    instance_dir: Path
    page_bytes: int  # the page size it runs with (the size of one single-block read)

    def start(self, profile: str | None = None, **settings: Any) -> ServerState: ...

    def would_restart(self, profile: str | None = None, **settings: Any) -> bool:
        """Whether start() with these settings would restart it while it runs."""

    def stop(self, *, timeout: float = 60) -> bool: ...

    def status(self) -> ServerState: ...

    def destroy(self) -> None: ...

    def kill_orphans(self) -> None:
        """After its main process died: kill what is left of its sessions."""

    def conninfo(self) -> str: ...

    def bulk_load(self, notice: Callable[[str], None]) -> contextlib.AbstractContextManager[Any]:
        """A context in which a large load runs fastest (then back to the test profile)."""


# ------------------------------------------------------------------------------- a target


@dataclass
class Target:
    """A resolved target: its engine, how to connect, and the private server when it is ours.

    `printable` never holds a password; `connect` is the engine's own way in (libpq's
    conninfo, a driver's keyword arguments)."""

    engine: str
    printable: str
    connect: Any
    server: PrivateServer | None = None

    @property
    def label(self) -> str:
        return self.server.label if self.server is not None else self.printable


# The terms every engine declares (the reports and metric labels name them), and those a
# capability brings with it (a report section that exists only with the capability).
REQUIRED_TERMS = (
    "log",
    "log_long",
    "cache",
    "db_io",
    "read_event",
    "write_event",
    "log_sync_event",
    "horizon",
    "direct_io",
)
CAPABILITY_TERMS = {"host_files": ("host_files",), "statement_stats": ("statements",)}


@dataclass(frozen=True)
class Capabilities:
    """What an engine can measure, and its own words (run.json engine.terms) for what the
    reports name: log (WAL / redo log), cache, db_io (where its I/O figures come from),
    io_breakdown, statements, horizon (its cleanup horizon), direct_io (how its data I/O
    bypasses the OS cache), host_files (how a remote server's /proc is read)."""

    terms: dict[str, str]
    wait_sampling: bool = False  # Monitor.sample_waits
    host_files: bool = False  # Monitor.read_file of a remote server's /proc
    statement_stats: bool = False  # per-statement figures (details' statements, op counts)


class EnginePlugin(ABC):
    """One engine, as the rest of openslob sees it (see the module docstring)."""

    name: str  # run.json engine.name
    title: str  # "PostgreSQL"
    private_target: str  # --target of its private server ("embedded", ...)
    capabilities: Capabilities
    options: tuple[Option, ...] = ()  # parameters it adds (slob.conf / flags)
    metrics: tuple[Metric, ...] = ()  # figures it adds to run.json metrics
    target_help: str = ""  # how its --target strings look, for --help

    @abstractmethod
    def claims(self, target: str) -> bool:
        """Whether a --target string is this engine's."""

    @abstractmethod
    def check_target(self, target: str) -> None:
        """ConfigError (no password in it) when the string is malformed."""

    @abstractmethod
    def private_server(self, data_dir: Path | None, config: Any) -> PrivateServer: ...

    def private_cluster(self, data_dir: Path | None, config: Any, nodes: int) -> Any:
        """Its private cluster of `nodes` servers (`slob server … --cluster N`): an object
        with start(profile, max_connections=), stop(), destroy(), status().as_dict() and
        instance_dir. ConfigError for an engine that has none."""
        raise ConfigError(f"--cluster: {self.title} has no private cluster (MariaDB has)")

    @abstractmethod
    def resolve(self, target: str, data_dir: Path | None, config: Any, *, start: bool) -> Target:
        """The Target of a string it claims (its private server started when `start`)."""

    @abstractmethod
    def engine(self, target: Target) -> Engine: ...

    @abstractmethod
    def run_backend(
        self, target: Target, application_name: str, sessions: int, *, prefetch: bool = False
    ) -> RunBackend: ...

    @abstractmethod
    def window(self) -> WindowStats: ...

    @abstractmethod
    def diagnose(self, target: Target, config: Config, sessions: int) -> list[Finding]: ...

    # -- what a run needs to know of its settings
    @abstractmethod
    def cache_bytes(self, settings: dict[str, str]) -> int:
        """The database's own block cache."""

    @abstractmethod
    def table_bytes(self, settings: dict[str, str], rows: int) -> int:
        """Bytes of one schema's cf1 of `rows` rows on this server."""

    @abstractmethod
    def data_directory(self, settings: dict[str, str]) -> str | None:
        """Where the server keeps its data files (its devices are the ones measured)."""

    @abstractmethod
    def pid_file(self, settings: dict[str, str]) -> str | None:
        """The server's pid file, relative to its data directory (or absolute)."""

    def run_notes(self, settings: dict[str, str]) -> list[str]:
        """Warnings about settings that leave figures unmeasured (e.g. timing off)."""
        return []

    def run_description(self, settings: dict[str, str]) -> dict[str, Any]:
        """run.json engine fields from its settings: page_size_bytes, variant (a label that
        tells runs of different server builds apart in plots, e.g. a page size)."""
        return {}

    def service_targets(self, base: str, count: int) -> list[str] | None:
        """SLOB's SQLNET_SERVICE_BASE1..MAX as target strings (None: not this engine's)."""
        return None

    def server_key(self, config: Any) -> str:
        """Sweep points with the same key run on the same private server."""
        return ""

    # -- the data set's health
    def horizon_effect(self) -> str:
        return "old row versions could not be cleaned up"

    def horizon_advice(self, hold: dict[str, Any]) -> str:
        return "end that transaction"

    def fast_update_cause(self, horizon: dict[str, Any]) -> str:
        return ""

    def is_bloated(self, facts: dict[str, Any] | None) -> bool:
        return False

    def window_warnings(self, entry: dict[str, Any], update_commits: float | None) -> list[str]:
        """Its own warnings about one instance of a run (run.json instances[] entry)."""
        return []

    def error_hint(self, exc: BaseException) -> str | None:
        """A hint for a driver error the user can act on (privilege, read-only, ...)."""
        return None
