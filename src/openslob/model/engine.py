"""What results/ knows of a run's engine: the roles it reads, typed, and no engine's code.

The runner holds each instance's plug-in (engines/api.EnginePlugin) and hands it to results
in the run's record (results/build.InstanceInfo.engine_view); results reads it through the
three roles below, never by looking the engine up by name:

    Terms             its title and Capabilities: its own words for what the reports name
    WindowStatistics  the window's figures from two snapshots (WindowStats), and what the
                      run's warnings need of its settings (cache and table bytes, notes)
    Advice            what it says about a data set that did not stay as SLOB describes it

EngineView is the three together: every engine plug-in is one (tests/unit checks it).

A run.json written before engines declared their words (engine.terms) is read after the run,
with no plug-in at hand: engines/registry.py announces each plug-in here (`announce`) and
`known` returns it by run.json engine.name. This is the one place a name leads to an engine.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Protocol, runtime_checkable

Snapshot = dict[str, Any]  # Monitor.snapshot(): every cumulative counter of one instance
Settings = dict[str, str]  # RunBackend.settings(): the settings its figures depend on


class ParamsView(Protocol):
    """The typed parameters (config.params.Params) an engine reads of a run's config."""

    @property
    def scale(self) -> int: ...
    @property
    def work_unit(self) -> int: ...
    @property
    def scan_table_sz(self) -> int: ...
    @property
    def page_size(self) -> str: ...


class ConfigView(Protocol):
    """A config.resolve.Config as engines see it (model sits below config): its typed
    parameters."""

    @property
    def p(self) -> ParamsView: ...


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
    # each session is a server process of its own that leads its own session (setsid): with
    # the kernel's autogroups each is then a scheduling group, and the client, one group among
    # them, needs its priority raised to keep up (host/priority.py); threads of one server
    # process share its group and leave the client its share
    session_processes: bool = False
    # its loop can run a whole phase in one CALL and return each interval's result as the
    # interval ends (the database's counters move while a statement runs, so the sampler's
    # reads as an interval closes are its own): no CALL ends at each boundary (issue 30)
    streams_intervals: bool = False
    # its loop keeps k intervals' results in the session and answers every k-th boundary
    # (the conf's `batch`), with RunBackend.pending to fetch what a cancelled CALL kept
    batches_intervals: bool = False


@runtime_checkable
class WindowStats(Protocol):
    """The window's figures from the two snapshots of one instance."""

    def metrics(
        self,
        before: Snapshot,
        after: Snapshot,
        seconds: float,
        settings: Settings,
        own_commits: int,
    ) -> dict[str, Any]:
        """run.json metrics (the metrics table's keys; null where it cannot say). Also each
        sampling interval's, from two interval snapshots (Monitor.interval_snapshot)."""

    def details(self, before: Snapshot, after: Snapshot, settings: Settings) -> dict[str, Any]:
        """{io, statements, notes, history_length}: the breakdowns it has (null otherwise)."""

    def ops_from_statements(
        self, before: Snapshot | None, after: Snapshot | None
    ) -> dict[str, int] | None:
        """Window op counts from statement statistics, when the loops' own were lost."""

    def work_per_op(
        self,
        before: Snapshot,
        after: Snapshot,
        settings: Settings,
        config: ConfigView,
        ops: dict[str, int] | None,
    ) -> dict[str, Any] | None:
        """Blocks per SLOBop kind, measured and as the layout predicts them."""


@runtime_checkable
class Terms(Protocol):
    """The engine's name and its own words (run.json engine.name, title, terms)."""

    name: str  # run.json engine.name
    title: str  # "PostgreSQL"
    capabilities: Capabilities

    def run_description(self, settings: Settings) -> dict[str, Any]:
        """run.json engine fields from its settings: page_size_bytes, variant (a label that
        tells runs of different server builds apart in plots, e.g. a page size)."""


@runtime_checkable
class WindowStatistics(Protocol):
    """The window's figures, and what the run's warnings need of the server's settings."""

    def window(self) -> WindowStats: ...

    def cache_bytes(self, settings: Settings) -> int:
        """The database's own block cache."""

    def table_bytes(self, settings: Settings, rows: int) -> int:
        """Bytes of one schema's cf1 of `rows` rows on this server."""

    def run_notes(self, settings: Settings) -> list[str]:
        """Warnings about settings that leave figures unmeasured (e.g. timing off)."""


@runtime_checkable
class Advice(Protocol):
    """What the engine says when the data set did not stay as SLOB describes it."""

    def horizon_effect(self) -> str:
        """What a held cleanup horizon did to the data set."""

    def horizon_advice(self, hold: dict[str, Any]) -> str:
        """What to do about the holder (a run.json horizon hold)."""

    def fast_update_cause(self, horizon: dict[str, Any]) -> str:
        """Why tables grew although nothing held the horizon ("" when it cannot say)."""

    def is_bloated(self, facts: dict[str, Any] | None) -> bool:
        """Whether a table's facts (run.json tables[...] before/after) say it is bloated."""

    def window_warnings(self, entry: dict[str, Any], update_commits: float | None) -> list[str]:
        """Its own warnings about one instance of a run (run.json instances[] entry)."""


@runtime_checkable
class EngineView(Terms, WindowStatistics, Advice, Protocol):
    """Everything results/ reads of an engine (each plug-in is one)."""


_KNOWN: dict[str, EngineView] = {}


def announce(engine: EngineView) -> None:
    """Make an engine known by its run.json name (engines/registry.py, on import; the first
    announced is the default engine, that of a run.json naming none)."""
    _KNOWN.setdefault(engine.name, engine)


def known(name: str | None) -> EngineView | None:
    """The engine a run.json names (no name: the default), None when this openslob does not
    know it."""
    if name is None:
        return next(iter(_KNOWN.values()), None)
    return _KNOWN.get(name)
