"""A skeleton engine plug-in: every member a new engine provides, in one commented file.

Not registered (registry.py lists the engines openslob knows). To write an engine:

1. copy this folder to engines/<name>/ and rename the classes;
2. fill each method: the docstrings in engines/api.py say what it must return, the comments
   here say where the two real engines (engines/postgres/, engines/mariadb/) do it;
3. add `<NAME>.plugin.PLUGIN` to registry.PLUGINS;
4. run `python -m pytest tests/unit` (test_engine_contract.py and test_engine_roles.py check
   the plug-in's roles, terms, metrics, options, its private server and its imports), then
   the integration tests with its server (tests/integration/test_engines.py).

Everything of the engine stays in its folder: nothing else may import it but registry.py.
A member marked OPTIONAL has a default in EnginePlugin (or Engine) that fits an engine
without the feature; delete it from your copy if the default is right. The methods here
raise NotImplementedError (or return the "cannot say" answer): the skeleton runs nothing.
Like fio's engines/skeleton_external.c, it compiles (passes mypy --strict) and tells you
which hooks exist; it does not work.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from openslob.config.resolve import Config
from openslob.engines.api import (
    Capabilities,
    ConfigView,
    DatasetLock,
    Engine,
    EnginePlugin,
    Finding,
    KeptIntervals,
    Monitor,
    PrivateServer,
    ProgressCallback,
    RewriteExtent,
    RunBackend,
    ServerState,
    Session,
    Settings,
    SetupResult,
    Snapshot,
    Target,
    VerifyResult,
    WaitSamples,
    WindowStats,
)
from openslob.model.loop import Answer

TODO = "skeleton engine: not implemented"


# ------------------------------------------------------------------- WindowStats (figures)


class SkeletonWindow(WindowStats):
    """The window's figures from two Monitor.snapshot()s (postgres/stats.py,
    mariadb/stats.py). Pure functions of the snapshots: no connection, no I/O."""

    def metrics(
        self,
        before: Snapshot,
        after: Snapshot,
        seconds: float,
        settings: Settings,
        own_commits: int,
    ) -> dict[str, Any]:
        # The metrics table's database keys (model/metrics.py core_keys("database")), null
        # where the engine cannot measure one: never 0 for "unknown". `own_commits`: commits
        # the run's own sessions made that are not SLOB work (subtract them).
        raise NotImplementedError(TODO)

    def details(self, before: Snapshot, after: Snapshot, settings: Settings) -> dict[str, Any]:
        # {"io": ..., "statements": ..., "notes": [...], "history_length": ...}: None for
        # what it does not have.
        return {"io": None, "statements": None, "notes": [], "history_length": None}

    def ops_from_statements(
        self, before: Snapshot | None, after: Snapshot | None
    ) -> dict[str, int] | None:
        # OPTIONAL in spirit: None when the engine counts no statements per kind.
        return None

    def work_per_op(
        self,
        before: Snapshot,
        after: Snapshot,
        settings: Settings,
        config: Any,
        ops: dict[str, int] | None,
    ) -> dict[str, Any] | None:
        # Blocks per SLOBop kind, measured, beside what the layout predicts; None: unknown.
        return None


# --------------------------------------------------------------------- the run (RunBackend)


class SkeletonMonitor(Monitor):
    """One sampler connection (postgres/runner.py PgMonitor, mariadb/runner.py)."""

    def snapshot(self) -> Snapshot:
        # Every cumulative counter SkeletonWindow needs, read in as few statements as it can.
        # Must not hold a snapshot or cleanup horizon between calls, nor touch the data set.
        raise NotImplementedError(TODO)

    def interval_snapshot(self) -> Snapshot:
        # The cheap subset read every sampling interval: no catalog or data-set reads.
        raise NotImplementedError(TODO)

    def horizon(self, snapshot: Snapshot | None = None) -> dict[str, Any]:
        # The oldest holder of the cleanup horizon now (model/horizon.py reads it).
        return {}

    def read_file(self, path: str) -> str | None:
        # The server host's /proc file through the database; None: it cannot.
        return None

    def clock_epoch(self) -> float:
        # The server's clock in one short statement (runner/clocks.py times the round trip).
        raise NotImplementedError(TODO)

    def sample_waits(
        self, application_name: str, start_epoch: float, end_epoch: float | None, hz: float
    ) -> WaitSamples:
        # Only with Capabilities(wait_sampling=True).
        raise NotImplementedError(TODO)

    def cancel(self) -> None:
        pass

    def close(self) -> None:
        pass


class SkeletonRunBackend(RunBackend):
    """Work sessions and monitors of one run on one instance (postgres/runner.py)."""

    def __init__(self, target: Target, application_name: str, sessions: int) -> None:
        self.target = target
        self.application_name = application_name  # every session's, for leftovers and waits
        self.sessions = sessions

    async def open_session(self, session_id: int, schema: str) -> Session:
        # Connect, install nothing: the loop procedures exist (Engine.install_procedures).
        raise NotImplementedError(TODO)

    async def call(self, session: Session, conf: dict[str, Any]) -> Answer:
        # One CALL and its result: send, then receive.
        await self.send(session, conf)
        return await self.receive(session)

    async def send(self, session: Session, conf: dict[str, Any]) -> None:
        # Send a CALL of the schema's work loop with the JSON conf (runner/loopconf.py)
        # without reading the answer of the one running: the run keeps one CALL queued
        # behind the running one (PostgreSQL: libpq pipeline mode, a Sync per CALL;
        # MariaDB: the next COM_QUERY written before the answer is read). The loop must
        # keep its `next` in the session (a setting, a user variable) for a conf with
        # `carry`, and compute its interval's end from `interval_s` (model/loop.py).
        raise NotImplementedError(TODO)

    async def receive(self, session: Session) -> Answer:
        # The answer of the oldest CALL in flight: the loop's JSON (counts, histograms,
        # own_commits, interval, next); a cancelled CALL raises.
        raise NotImplementedError(TODO)

    async def pending(self, session: Session) -> KeptIntervals:
        # Only with Capabilities(batches_intervals=True): the results the loop kept for its
        # next answer when a stop cancelled its CALL.
        return KeptIntervals([], 0)

    async def publish_stats(self, session: Session) -> bool:
        # Make the session's statistics visible to the monitor; True if that committed.
        return False

    async def cancel(self, session: Session) -> None:
        raise NotImplementedError(TODO)

    def cancel_now(self, session: Session) -> None:
        # From another thread (Ctrl-C): ask the server to cancel the session's statement.
        raise NotImplementedError(TODO)

    async def close(self, session: Session) -> None:
        raise NotImplementedError(TODO)

    def shutdown(self) -> None:
        pass

    def monitor(self, role: str) -> Monitor:
        return SkeletonMonitor()

    def host_files_reason(self) -> str | None:
        return "the skeleton engine reads no host files"

    def terminate_leftovers(self) -> int:
        return 0

    def settings(self) -> Settings:
        # The server settings the figures depend on (cache size, page size, data directory).
        raise NotImplementedError(TODO)

    def connection_lost(self, exc: BaseException) -> bool:
        return False


# ----------------------------------------------------------------- the data set (Engine)


class SkeletonEngine(Engine):
    """The data set's lifecycle on one target (postgres/engine.py, mariadb/engine.py; much of
    it is shared in engines/common/engine.py)."""

    name = "skeleton"

    def __init__(self, target: Target) -> None:
        self.target = target

    def describe(self) -> dict[str, Any]:
        # {name, version, target (no password), settings}: run.json engine.
        raise NotImplementedError(TODO)

    def setup(self, config: Config, progress: ProgressCallback | None = None) -> SetupResult:
        # Create or repair the tables (engines/common/tables.py plans them), incompressible
        # data unless COMPRESS_RATIO asks otherwise; leave valid tables untouched.
        raise NotImplementedError(TODO)

    def bytes_to_load(self, config: Config) -> int:
        raise NotImplementedError(TODO)

    def verify(self, config: Config) -> VerifyResult:
        # Measure rows per block, index depth, seeds: each a Check with the measured value.
        raise NotImplementedError(TODO)

    def destroy(self) -> list[str]:
        raise NotImplementedError(TODO)

    def cancel(self) -> None:
        pass

    def missing_tables(self, config: Config, schemas: list[str]) -> dict[str, str]:
        raise NotImplementedError(TODO)

    def recorded_dataset(self) -> dict[str, float] | None:
        return None

    def has_data(self) -> bool:
        return False

    def install_procedures(self, schemas: list[str]) -> None:
        # The work loop inside the database (postgres/workload.py, mariadb/workload.py).
        raise NotImplementedError(TODO)

    def data_bytes(self, rows: int) -> int:
        raise NotImplementedError(TODO)

    def identity(self) -> tuple[str, str]:
        raise NotImplementedError(TODO)

    def rewrite_plan(self, config: Config) -> list[RewriteExtent]:
        # `slob precondition --mode engine`: cf1 and cf2 of each schema as units (pages, or
        # rows where the engine addresses rows). Leave the three out and precondition says
        # the engine cannot (Engine's defaults): --mode seq|random still works.
        raise NotImplementedError(TODO)

    def rewrite(self, extent: RewriteExtent, first: int, count: int) -> None:
        # One committed batch: new random bytes of the same length and compressibility, so
        # rows per page and what the storage sees stay (postgres/precondition.py).
        raise NotImplementedError(TODO)

    def flush_writes(self, extents: list[RewriteExtent]) -> None:
        # The engine's checkpoint, so that the writes reach the device.
        raise NotImplementedError(TODO)

    def lock_dataset(self, purpose: str) -> DatasetLock:
        # One run, setup or destroy at a time (postgres/guard.py: an advisory lock).
        raise NotImplementedError(TODO)

    def lock_holder(self) -> str | None:
        return None

    def leftover_loops(self) -> list[tuple[int, str]]:
        return []

    def end_loops(self, ids: list[int]) -> str:
        raise NotImplementedError(TODO)

    def end_loops_advice(self, ids: list[int]) -> str:
        return "end those sessions"


# ------------------------------------------------------------ the private server (optional)


class SkeletonServer(PrivateServer):
    """A server openslob creates and runs itself in DATA_DIR (postgres/server.py)."""

    def __init__(self, data_dir: Path) -> None:
        self.data_dir = data_dir

    @property
    def label(self) -> str:
        return "skeleton"  # how reports and messages name it

    @property
    def instance_dir(self) -> Path:
        return self.data_dir / "skeleton"  # everything of it, under DATA_DIR

    @property
    def files_dir(self) -> Path:
        return self.instance_dir / "data"  # its devices are the ones measured

    @property
    def page_bytes(self) -> int:
        return 8192  # the size of one single-block read on it

    def start(
        self,
        profile: str | None = None,
        *,
        tcp: bool | None = None,
        port: int | None = None,
        max_connections: int | None = None,
    ) -> ServerState:
        # profile: one of api.PROFILES (pio, lio, redo); tcp/port: listen on loopback TCP
        # too; max_connections: room for the run's sessions and monitors.
        raise NotImplementedError(TODO)

    def would_restart(
        self,
        profile: str | None = None,
        *,
        tcp: bool | None = None,
        port: int | None = None,
        max_connections: int | None = None,
    ) -> bool:
        return False

    def stop(self, *, timeout: float = 60) -> bool:
        return False

    def status(self) -> ServerState:
        # Must not start or create anything (test_engine_contract.py checks it).
        return ServerState(state="absent", data_dir=str(self.instance_dir))

    def destroy(self) -> None:
        pass

    def kill_orphans(self) -> None:
        pass

    def conninfo(self) -> str:
        return f"skeleton:{self.instance_dir}"

    @contextlib.contextmanager
    def bulk_load(self, notice: Callable[[str], None]) -> Iterator[None]:
        yield


# -------------------------------------------------------------------------- the plug-in


class SkeletonPlugin(EnginePlugin):
    # Terms: run.json engine.name and title, and its words for what the reports name
    # (api.REQUIRED_TERMS; each capability's api.CAPABILITY_TERMS).
    api_version = 3  # the engines/api.py ENGINE_API_VERSION this plug-in is written for
    name = "skeleton"
    title = "Skeleton"
    capabilities = Capabilities(
        terms={
            "log": "log",
            "log_long": "the write-ahead log",
            "cache": "the buffer cache",
            "db_io": "the engine's I/O statistics",
            "read_event": "data file read",
            "write_event": "data file write",
            "log_sync_event": "log sync",
            "horizon": "the oldest snapshot",
            "direct_io": "the engine's direct I/O",
        },
        # True when each session is a server process that leads its own session (setsid),
        # as PostgreSQL's backends: the client then raises its priority for the run
        # (host/priority.py). Threads of one server process: leave it False.
        session_processes=False,
    )
    # Extensions: options (config/option.py Option) and metrics (model/metrics.py Metric) it
    # adds to the shared tables. OPTIONAL: none.
    options = ()
    metrics = ()
    # Targets
    private_target = "embedded-skeleton"
    target_help = "'embedded-skeleton' (the skeleton has no other)"

    def claims(self, target: str) -> bool:
        return target == self.private_target

    def check_target(self, target: str) -> None:
        # ConfigError naming the malformed part, never the password.
        pass

    def resolve(
        self, target: str, data_dir: Path | None, config: ConfigView, *, start: bool
    ) -> Target:
        server = self.private_server(data_dir, config)
        if start:
            server.start()
        return Target(self.name, server.conninfo(), server.conninfo(), server)

    # PrivateServers (private_cluster, server_key: OPTIONAL)
    def private_server(self, data_dir: Path | None, config: ConfigView) -> PrivateServer:
        return SkeletonServer(data_dir or Path("/var/lib/openslob"))

    # Provisioning
    def engine(self, target: Target) -> Engine:
        return SkeletonEngine(target)

    # Workload
    def run_backend(
        self, target: Target, application_name: str, sessions: int, *, prefetch: bool = False
    ) -> RunBackend:
        # prefetch (PREFETCH=on): read the WORK_UNIT rows with the engine's read-ahead;
        # off is SLOB's single-block read. Say in settings() what the sessions set.
        return SkeletonRunBackend(target, application_name, sessions)

    def rows_per_mb(self, settings: Settings) -> int:
        # SLOB rows in a MB of cf1: (1 MiB / page size) x rows per page of its layout.
        return (1 << 20) // 8192

    def data_directory(self, settings: Settings) -> str | None:
        return None  # unknown: device counters are read for no device

    def pid_file(self, settings: Settings) -> str | None:
        return None  # unknown: the server's CPU is not measured (null)

    # WindowStatistics (run_notes: OPTIONAL)
    def window(self) -> WindowStats:
        return SkeletonWindow()

    def cache_bytes(self, settings: Settings) -> int:
        return 0  # 0: unknown (the cache-size warning is not given)

    def table_bytes(self, settings: Settings, rows: int) -> int:
        return rows * 8192

    # Diagnostics (error_hint: OPTIONAL)
    def diagnose(self, target: Target, config: Config, sessions: int) -> list[Finding]:
        return [Finding("skeleton", "no checks", "warn", "write the engine's doctor")]

    # Advice: horizon_effect, horizon_advice, fast_update_cause, is_bloated, window_warnings
    # are OPTIONAL (EnginePlugin's defaults say nothing engine-specific).


PLUGIN = SkeletonPlugin()
