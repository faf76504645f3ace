"""The roles an engine plug-in plays, each a Protocol a reader takes in at once.

engines/api.py composes them into EnginePlugin and re-exports them; Terms, WindowStatistics
and Advice, the roles results reads, are declared in model/engine.py.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Protocol, runtime_checkable

from openslob.config.option import Option
from openslob.config.resolve import Config
from openslob.engines.records import Finding
from openslob.model.engine import Advice, ConfigView, Settings, Terms, WindowStatistics
from openslob.model.metrics import Metric

if TYPE_CHECKING:  # api.py imports this module: its types are only named here
    from openslob.engines.api import Engine, PrivateCluster, PrivateServer, RunBackend, Target


@runtime_checkable
class Extensions(Protocol):
    """The rows it adds to the shared tables."""

    options: tuple[Option, ...]  # parameters it adds (slob.conf / flags)
    metrics: tuple[Metric, ...]  # figures it adds to run.json metrics


@runtime_checkable
class Targets(Protocol):
    """Which --target strings are its own, and how they become a Target."""

    private_target: str  # --target of its private server ("embedded", ...)
    target_help: str  # how its --target strings look, for --help

    def claims(self, target: str) -> bool:
        """Whether a --target string is this engine's."""

    def check_target(self, target: str) -> None:
        """ConfigError (no password in it) when the string is malformed."""

    def resolve(
        self, target: str, data_dir: Path | None, config: ConfigView, *, start: bool
    ) -> Target:
        """The Target of a string it claims (its private server started when `start`)."""

    def service_targets(self, base: str, count: int) -> list[str] | None:
        """SLOB's SQLNET_SERVICE_BASE1..MAX as target strings (None: not this engine's)."""


@runtime_checkable
class PrivateServers(Protocol):
    """The servers openslob creates and runs itself."""

    def private_server(self, data_dir: Path | None, config: ConfigView) -> PrivateServer: ...

    def private_cluster(
        self, data_dir: Path | None, config: ConfigView, nodes: int
    ) -> PrivateCluster:
        """Its private cluster of `nodes` servers (`slob server … --cluster N`);
        ConfigError for an engine that has none."""

    def server_key(self, config: ConfigView) -> str:
        """Sweep points with the same key run on the same private server."""


@runtime_checkable
class Provisioning(Protocol):
    """The data set's lifecycle on a target: setup, verify, destroy, locks, and rewriting
    its pages for `slob precondition` (Engine.rewrite_plan, rewrite, flush_writes)."""

    def engine(self, target: Target) -> Engine: ...


@runtime_checkable
class Workload(Protocol):
    """What a run drives and watches on one instance."""

    def run_backend(
        self, target: Target, application_name: str, sessions: int, *, prefetch: bool = False
    ) -> RunBackend:
        """Work sessions and monitor connections of one run on `target`."""

    def rows_per_mb(self, settings: Settings) -> int:
        """SLOB rows in one MB of cf1 on this server (its page size and rows per page): what
        HOTSPOT_MB and HOTSPOT_OFFSET_MB mean in keys (runner/loopconf.py)."""

    def data_directory(self, settings: Settings) -> str | None:
        """Where the server keeps its data files (its devices are the ones measured)."""

    def pid_file(self, settings: Settings) -> str | None:
        """The server's pid file, relative to its data directory (or absolute)."""


@runtime_checkable
class Diagnostics(Protocol):
    """`slob doctor`, and hints for the errors of its driver."""

    def diagnose(self, target: Target, config: Config, sessions: int) -> list[Finding]: ...

    def error_hint(self, exc: BaseException) -> tuple[str, str | None] | None:
        """(message, hint) for a driver error the user can act on (privilege, read-only,
        ...); None for an error that is not its driver's."""


# The roles a plug-in plays (Terms, WindowStatistics and Advice are results' view of it:
# model/engine.py). tests/unit/test_engine_roles.py checks every plug-in and the skeleton.
ROLES: tuple[type, ...] = (
    Terms,
    Extensions,
    Targets,
    PrivateServers,
    Provisioning,
    Workload,
    WindowStatistics,
    Diagnostics,
    Advice,
)
