"""The interfaces of an engine plug-in: what the runner, the CLI and run.json may use.

An engine is one folder under engines/ holding everything of one database: SQL and the work
loop, statistics, doctor, its private server. It hands the rest of openslob one EnginePlugin
(registry.py lists them, and refuses one written for another ENGINE_API_VERSION). The
plug-in plays these roles (each a Protocol; EnginePlugin composes them):

    Terms             name, title, Capabilities: its own words for what the reports name
    Extensions        the options and metrics it adds to the shared tables
    Targets           which --target strings are its own, and how they resolve to a Target
    PrivateServers    the server (and cluster) openslob runs itself
    Provisioning      an Engine for a Target: the data set's lifecycle and locks
    Workload          a RunBackend for a Target, rows per MB, where its files and pid are
    WindowStatistics  its WindowStats, cache and table bytes, notes on its settings
    Diagnostics       `slob doctor`, hints for its driver's errors
    Advice            what it says about a data set that did not stay as SLOB describes it

and hands out these objects:

    Engine          the data set's lifecycle (setup, verify, destroy, locks)
    RunBackend      work sessions (one long CALL per phase) and Monitor connections
    Monitor         snapshots, live counters, the horizon, host files, wait samples
    WindowStats     the window's figures from two snapshots (run.json keys, metrics table)
    PrivateServer   the server openslob runs itself (start, stop, status, bulk loads)

The roles are declared in roles.py (and model/engine.py), the plain records engines return
(SetupResult, VerifyResult, Finding, ServerState, WaitSamples, ...) in records.py; import
all of them from here. engines/skeleton/ is a commented plug-in showing every member (not
registered). Nothing
outside engines/<name>/ asks which engine it talks to: the runner holds the plug-in and hands
it to results (model/engine.py: the roles results reads), and the renderers read the engine's
terms from run.json (engine.terms).
"""

from __future__ import annotations

import contextlib
from abc import ABC, abstractmethod
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol, runtime_checkable

from openslob.config.option import Option
from openslob.config.resolve import Config
from openslob.engines.records import (
    PROFILES,
    Check,
    Finding,
    KeptIntervals,
    RewriteExtent,
    ServerState,
    SetupResult,
    TableLoad,
    VerifyResult,
    WaitSamples,
)
from openslob.engines.roles import (
    ROLES,
    Diagnostics,
    Extensions,
    PrivateServers,
    Provisioning,
    Targets,
    Workload,
)
from openslob.model.compressibility import Compressibility
from openslob.model.engine import (
    CAPABILITY_TERMS,
    REQUIRED_TERMS,
    Advice,
    Capabilities,
    ConfigView,
    Settings,
    Snapshot,
    Terms,
    WindowStatistics,
    WindowStats,
)
from openslob.model.errors import ConfigError, OpenslobError
from openslob.model.loop import Answer
from openslob.model.metrics import Metric

__all__ = [  # what an engine and its users import from here (records and model's included)
    "CAPABILITY_TERMS",
    "ENGINE_API_VERSION",
    "PROFILES",
    "REQUIRED_TERMS",
    "ROLES",
    "Advice",
    "Capabilities",
    "Check",
    "ClusterState",
    "ConfigView",
    "DatasetLock",
    "Diagnostics",
    "Engine",
    "EngineAPIError",
    "EnginePlugin",
    "Extensions",
    "Finding",
    "KeptIntervals",
    "Monitor",
    "PrivateCluster",
    "PrivateServer",
    "PrivateServers",
    "ProgressCallback",
    "Provisioning",
    "RewriteExtent",
    "RunBackend",
    "ServerState",
    "Session",
    "Settings",
    "SetupResult",
    "Snapshot",
    "TableLoad",
    "Target",
    "Targets",
    "Terms",
    "VerifyResult",
    "WaitSamples",
    "WindowStatistics",
    "WindowStats",
    "Workload",
    "check_api",
]

# Called with (rows loaded so far, rows to load in total) while setup runs.
ProgressCallback = Callable[[int, int], None]
# An engine's own work session (RunBackend.open_session): only its RunBackend looks inside.
Session = Any


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

    # `slob precondition --mode engine` (runner/precondition.py): the data set's pages
    # written over with the engine's own writes. An engine that cannot says so here.
    def rewrite_plan(self, config: Config) -> list[RewriteExtent]:
        """The tables of the data set (cf1 and cf2 of every schema `config` names) as the
        units rewrite() takes, in the order they are rewritten."""
        raise ConfigError(f"{self.name} cannot rewrite its data set: use --mode seq or random")

    def rewrite(self, extent: RewriteExtent, first: int, count: int) -> None:
        """Write units [first, first + count) of `extent` over with new random bytes of the
        same length and compressibility (layout and rows per page unchanged), committed."""
        raise ConfigError(f"{self.name} cannot rewrite its data set")

    def flush_writes(self, extents: list[RewriteExtent]) -> None:
        """The engine's checkpoint: the rewritten pages of `extents` reach the device."""
        raise ConfigError(f"{self.name} cannot rewrite its data set")

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

    def snapshot(self) -> Snapshot:
        """Every cumulative counter the window's figures are computed from."""

    def interval_snapshot(self) -> Snapshot:
        """The counters WindowStats.metrics needs, read once per sampling interval while the
        loops run: cheap, and without touching the data set or this database's catalogs
        (their buffer hits would count as the run's logical reads)."""

    def horizon(self, snapshot: Snapshot | None = None) -> dict[str, Any]:
        """The oldest holder of the cleanup horizon now ({kind, holder, xmin, age_xids, role,
        application, state, since, query}), "figures" for the time series and "read_epoch"
        (when it was read, this host's clock). `snapshot`: the interval snapshot of the row
        it goes with; a monitor that read the holder with that snapshot gives that reading
        instead of reading again."""

    def read_file(self, path: str) -> str | None:
        """A file of the server's host (its /proc), None where the engine cannot read one."""

    def clock_epoch(self) -> float:
        """The server's clock now, as Unix epoch seconds (the clock its work loop reads), in
        one short statement: the runner times the round trip (runner/clocks.py)."""

    def sample_waits(
        self, application_name: str, start_epoch: float, end_epoch: float | None, hz: float
    ) -> WaitSamples:
        """Wait samples of the window (Capabilities.wait_sampling): {samples, waits, commits}."""

    def server_task(self) -> int | None:
        """The OS id of what serves this connection on the server's host (a backend process,
        or a server thread), read once at connect; None where the engine cannot tell. The
        run reads its CPU from that host's /proc over the window: what measuring cost the
        server (run.json client.monitors_server_cpu_s)."""
        return None

    def cancel(self) -> None: ...

    def close(self) -> None: ...


@runtime_checkable
class RunBackend(Protocol):
    """What the run lifecycle needs from one instance."""

    application_name: str

    async def open_session(self, session_id: int, schema: str) -> Session: ...

    async def call(self, session: Session, conf: dict[str, Any]) -> Answer:
        """One CALL of the session's loop and its JSON result (send, then receive)."""

    async def send(self, session: Session, conf: dict[str, Any]) -> None:
        """Send a CALL of the session's loop without waiting for the one running: the
        server starts it the moment that one ends (the run keeps two queued, so no session
        waits for the client between intervals). Each CALL is its own transaction."""

    async def receive(self, session: Session) -> Answer:
        """The JSON result of the session's oldest CALL in flight (counts, histograms,
        `own_commits`, `interval`, and `next`: what the next CALL continues from, which the
        loop also keeps in the server for a CALL sent with `carry`). With `stream` in its
        conf (Capabilities.streams_intervals) a CALL returns one result per interval as each
        ends, `call_ended` false but for its last: the CALL stays in flight until then."""

    async def pending(self, session: Session) -> KeptIntervals:
        """After a stop cancelled the session's CALL (nothing in flight): the interval
        results its loop had kept for its next answer (conf `batch` > 1), fetched and
        cleared; no results when none, `fetched` False when they could not be read (the
        session gone or busy). Only with Capabilities(batches_intervals=True)."""

    async def publish_stats(self, session: Session) -> bool:
        """Make the session publish its statistics; True when that ran one transaction."""

    async def cancel(self, session: Session) -> None: ...

    def cancel_now(self, session: Session) -> None: ...

    async def close(self, session: Session) -> None: ...

    def shutdown(self) -> None: ...

    def monitor(self, role: str) -> Monitor: ...

    def host_files_reason(self) -> str | None:
        """None when the server host's /proc is readable through the database, else why not."""

    def terminate_leftovers(self) -> int: ...

    def settings(self) -> Settings:
        """Settings the run's figures depend on."""

    def connection_lost(self, exc: BaseException) -> bool:
        """Whether `exc` says the server (or the connection to it) is gone."""


# ----------------------------------------------------------------------- the private server


@runtime_checkable
class PrivateServer(Protocol):
    """A server openslob creates, starts and stops itself (one data directory)."""

    # Read-only for its users (an engine may compute them: properties).
    @property
    def label(self) -> str: ...

    @property
    def files_dir(self) -> Path:
        """The data files' directory: its devices are the ones measured."""

    @property
    def instance_dir(self) -> Path: ...

    @property
    def page_bytes(self) -> int:
        """The page size it runs with (the size of one single-block read)."""

    def start(
        self,
        profile: str | None = None,
        *,
        tcp: bool | None = None,
        port: int | None = None,
        max_connections: int | None = None,
    ) -> ServerState:
        """Start it (or restart it with other settings); None keeps what it runs with."""

    def would_restart(
        self,
        profile: str | None = None,
        *,
        tcp: bool | None = None,
        port: int | None = None,
        max_connections: int | None = None,
    ) -> bool:
        """Whether start() with these settings would restart it while it runs."""

    def stop(self, *, timeout: float = 60) -> bool: ...

    def status(self) -> ServerState: ...

    def destroy(self) -> None: ...

    def kill_orphans(self) -> None:
        """After its main process died: kill what is left of its sessions."""

    def conninfo(self) -> str: ...

    def bulk_load(self, notice: Callable[[str], None]) -> contextlib.AbstractContextManager[Any]:
        """A context in which a large load runs fastest (then back to the test profile)."""


class ClusterState(Protocol):
    """What `slob server status --cluster N` prints of a private cluster."""

    def as_dict(self) -> dict[str, Any]: ...


@runtime_checkable
class PrivateCluster(Protocol):
    """A private cluster of N servers (`slob server … --cluster N`)."""

    @property
    def instance_dir(self) -> Path: ...

    def start(
        self, profile: str | None = None, *, max_connections: int | None = None
    ) -> ClusterState: ...

    def stop(self) -> bool: ...

    def destroy(self) -> None: ...

    def status(self) -> ClusterState: ...


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


# ------------------------------------------------------------------ the plug-in's roles

# The version of this interface. A plug-in states the version it was written for
# (EnginePlugin.api_version, set in its own class); registry.py refuses one that differs,
# in one line. Bump it when a role gains, loses or changes a member.
ENGINE_API_VERSION = 3


class EngineAPIError(OpenslobError):
    """A plug-in written for another version of this interface."""


def check_api(plugin: EnginePlugin) -> None:
    """EngineAPIError (one line) unless the plug-in speaks ENGINE_API_VERSION."""
    version = getattr(plugin, "api_version", None)
    if version != ENGINE_API_VERSION:
        raise EngineAPIError(
            f"engine plug-in {getattr(plugin, 'name', type(plugin).__name__)!r} "
            f"({type(plugin).__module__}) is written for engine API {version}, this openslob "
            f"speaks {ENGINE_API_VERSION}: update the plug-in (engines/api.py, "
            "engines/skeleton/)"
        )


class EnginePlugin(
    Terms,
    Extensions,
    Targets,
    PrivateServers,
    Provisioning,
    Workload,
    WindowStatistics,
    Diagnostics,
    Advice,
    ABC,
):
    """One engine, as the rest of openslob sees it: the roles above in one object, with the
    members an engine must write abstract and the others' usual answers as defaults
    (engines/skeleton/plugin.py shows each one)."""

    api_version: int  # ENGINE_API_VERSION it was written for: set in the plug-in's class
    name: str  # run.json engine.name
    title: str  # "PostgreSQL"
    private_target: str  # --target of its private server ("embedded", ...)
    capabilities: Capabilities
    options: tuple[Option, ...] = ()  # parameters it adds (slob.conf / flags)
    metrics: tuple[Metric, ...] = ()  # figures it adds to run.json metrics
    target_help: str = ""  # how its --target strings look, for --help

    # -- Targets
    @abstractmethod
    def claims(self, target: str) -> bool:
        """Whether a --target string is this engine's."""

    @abstractmethod
    def check_target(self, target: str) -> None:
        """ConfigError (no password in it) when the string is malformed."""

    @abstractmethod
    def resolve(
        self, target: str, data_dir: Path | None, config: ConfigView, *, start: bool
    ) -> Target:
        """The Target of a string it claims (its private server started when `start`)."""

    def service_targets(self, base: str, count: int) -> list[str] | None:
        """SLOB's SQLNET_SERVICE_BASE1..MAX as target strings (None: not this engine's)."""
        return None

    # -- PrivateServers
    @abstractmethod
    def private_server(self, data_dir: Path | None, config: ConfigView) -> PrivateServer: ...

    def private_cluster(
        self, data_dir: Path | None, config: ConfigView, nodes: int
    ) -> PrivateCluster:
        """Its private cluster of `nodes` servers; ConfigError for an engine that has none."""
        raise ConfigError(f"--cluster: {self.title} has no private cluster (MariaDB has)")

    def server_key(self, config: ConfigView) -> str:
        """Sweep points with the same key run on the same private server."""
        return ""

    # -- Provisioning
    @abstractmethod
    def engine(self, target: Target) -> Engine: ...

    # -- Workload
    @abstractmethod
    def run_backend(
        self, target: Target, application_name: str, sessions: int, *, prefetch: bool = False
    ) -> RunBackend: ...

    @abstractmethod
    def rows_per_mb(self, settings: Settings) -> int:
        """SLOB rows in one MB of cf1 on this server (its page size and rows per page): what
        HOTSPOT_MB and HOTSPOT_OFFSET_MB mean in keys (runner/loopconf.py)."""

    @abstractmethod
    def data_directory(self, settings: Settings) -> str | None:
        """Where the server keeps its data files (its devices are the ones measured)."""

    @abstractmethod
    def pid_file(self, settings: Settings) -> str | None:
        """The server's pid file, relative to its data directory (or absolute)."""

    # -- WindowStatistics
    @abstractmethod
    def window(self) -> WindowStats: ...

    @abstractmethod
    def cache_bytes(self, settings: Settings) -> int:
        """The database's own block cache."""

    @abstractmethod
    def table_bytes(self, settings: Settings, rows: int) -> int:
        """Bytes of one schema's cf1 of `rows` rows on this server."""

    def run_notes(self, settings: Settings) -> list[str]:
        """Warnings about settings that leave figures unmeasured (e.g. timing off)."""
        return []

    # -- Terms
    def run_description(self, settings: Settings) -> dict[str, Any]:
        """run.json engine fields from its settings: page_size_bytes, variant (a label that
        tells runs of different server builds apart in plots, e.g. a page size)."""
        return {}

    # -- Diagnostics
    @abstractmethod
    def diagnose(self, target: Target, config: Config, sessions: int) -> list[Finding]: ...

    def error_hint(self, exc: BaseException) -> tuple[str, str | None] | None:
        """(message, hint) for a driver error the user can act on (privilege, read-only,
        ...); None for an error that is not its driver's."""
        return None

    # -- Advice: the data set's health
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
