"""RAC: global reports (awrgrpt) and instance reports of one snapshot pair -> cluster figures.

Contract:
- parse_global(doc) reads a 12.2+/19c "WORKLOAD REPOSITORY REPORT (RAC)" into a cluster
  OracleReport (scope "cluster") whose sections carry the same names as a single-instance
  report, so every awr_info definition applies unchanged:
    Instance Activity Stats  <- System Statistics (Global): Total, per Second (= cluster total
                                ÷ elapsed), per Trans
    Load Profile             <- DB Time(s) / DB CPU(s) / Background CPU(s): the Time Model
                                Sum row ÷ elapsed; Executes, Logical read, Redo size,
                                Physical read/write (blocks): execute count, session logical
                                reads, redo size, physical reads/writes per Second of System
                                Statistics (Global) -- the statistics the instance Load
                                Profile rows are made of
    Foreground/Background Wait Events <- the "(Global)" tables (cluster totals per event)
    Top events               <- Top Timed Foreground Events, the cluster ('*') block
  plus one report per instance (scope "instance") from the per-instance rows: Time Model,
  System Statistics - Per Second, and that instance's Top Timed Foreground/Background Events
  block. A global report prints no per-instance I/O requests or bytes, and only each
  instance's top 10 events: those figures are n/a with a note saying so.
- combine(reports) adds up instance reports of the same database and snapshot pair from
  different instances into one cluster report (rates and wait totals add; latency = summed
  wait time ÷ summed waits), their own reports kept as its instances. Instance reports of a
  snapshot pair a global report covers become that global report's instance rows instead.
"""

from __future__ import annotations

from collections import defaultdict
from typing import Any

from openslob.oracle.awr import OracleReport, WaitEvent, check_end, wait_event
from openslob.oracle.text import Doc, Grid, parse_number

MIN = 60.0
NO_IO_NOTE = (
    "PREADS, PWRITES, READ_MBS, WRITE_MBS: a global report prints I/O requests and bytes "
    "for the cluster only"
)
TOP_NOTE = "latencies: only events among this instance's top 10 in the global report"


def _grid(doc: Doc, title: str, closed: bool = True) -> Grid | None:
    idx = doc.find(title)
    return None if idx is None else doc.grid(idx, title, closed=closed)


def _value(grid: Grid, row: list[str], *names: str) -> float | None:
    col = grid.col(*names)
    return None if col is None or col >= len(row) else parse_number(row[col])


def _text(grid: Grid, row: list[str], *names: str) -> str | None:
    col = grid.col(*names)
    return None if col is None or col >= len(row) else row[col] or None


def _by_instance(grid: Grid | None) -> dict[str, list[str]]:
    """Rows keyed by their I# cell ('1', '2', 'Sum', 'Avg', ...)."""
    return {row[0]: row for row in (grid.rows if grid else []) if row and row[0]}


def _summary(doc: Doc) -> dict[str, Any]:
    grid = _grid(doc, "Database Summary", closed=False)
    if grid is None or not grid.rows or grid.col("Id") is None:
        raise doc.error("Database Summary", "not in the 12.2+/19c global report layout")
    row = grid.rows[0]
    ends = [i for i, h in enumerate(grid.header) if h in ("Begin", "End")]
    snaps = [parse_number(row[i]) for i in ends[:2]] if len(ends) >= 2 else [None, None]
    elapsed = _value(grid, row, "Elapsed time")
    if snaps[0] is None or snaps[1] is None or elapsed is None:
        raise doc.error("Database Summary", "no snapshot ids or elapsed time")
    return {
        "db_id": _text(grid, row, "Id"),
        "db_name": _text(grid, row, "Name"),
        "rac": _text(grid, row, "RAC"),
        "cdb": _text(grid, row, "CDB"),
        "begin_snap": int(snaps[0]),
        "end_snap": int(snaps[1]),
        "db_time_min": _value(grid, row, "DB time"),
        "elapsed_min": elapsed,
    }


def _instances(doc: Doc) -> list[dict[str, Any]]:
    grid = _grid(doc, "Database Instances Included In Report", closed=False)
    if grid is None or grid.col("I#") is None:
        doc.note("Database Instances Included In Report", "not in the 12.2+/19c layout")
        return []
    return [
        {
            "inst_num": int(parse_number(row[0]) or 0),
            "instance": _text(grid, row, "Instance"),
            "host": _text(grid, row, "Host"),
            "release": _text(grid, row, "Release"),
            "platform": _text(grid, row, "Platform"),
            "begin_time": _text(grid, row, "Begin Snap Time"),
            "end_time": _text(grid, row, "End Snap Time"),
            "elapsed_min": _value(grid, row, "Elapsed Time(min)"),
            "db_time_min": _value(grid, row, "DB time(min)"),
        }
        for row in grid.rows
        if parse_number(row[0]) is not None
    ]


def _event_blocks(grid: Grid | None) -> dict[str, list[WaitEvent]]:
    """Top Timed Events tables: the '*' (cluster) and per-instance blocks of wait rows."""
    blocks: dict[str, list[WaitEvent]] = defaultdict(list)
    key = ""
    if grid is None:
        return blocks
    for row in grid.rows:
        key = row[0] or key
        ev = _wait_row(grid, row)
        if ev is not None:
            blocks[key].append(ev)
    return blocks


def _wait_row(grid: Grid, row: list[str]) -> WaitEvent | None:
    pct = _text(grid, row, "%DB time", "%bg time") or ""
    return wait_event(
        _text(grid, row, "Event") or "",
        _text(grid, row, "Waits") or "",
        _text(grid, row, "Total(s)") or "",
        _text(grid, row, "Avg Wait") or "",
        pct,
        _text(grid, row, "Class") or "",
    )


def _global_waits(doc: Doc, title: str) -> list[WaitEvent] | None:
    grid = _grid(doc, title)
    if grid is None:
        return None
    return [ev for row in grid.rows if (ev := _wait_row(grid, row)) is not None and ev.event]


def _global_stats(doc: Doc) -> dict[str, dict[str, float | None]] | None:
    grid = _grid(doc, "System Statistics (Global)")
    if grid is None:
        return None
    return {
        row[0]: {
            "total": _value(grid, row, "Total"),
            "per_second": _value(grid, row, "per Second"),
            "per_trans": _value(grid, row, "per Trans"),
        }
        for row in grid.rows
        if row[0]
    }


def _time_model(grid: Grid | None, key: str) -> dict[str, dict[str, float | None]] | None:
    row = _by_instance(grid).get(key)
    if grid is None or row is None:
        return None
    return {
        name: {"time_s": _value(grid, row, heading)}
        for name, heading in (
            ("DB time", "DB time (s)"),
            ("DB CPU", "DB CPU (s)"),
            ("background cpu time", "bg CPU (s)"),
        )
    }


def _per_second(value: float | None, elapsed_min: float | None) -> float | None:
    return None if value is None or not elapsed_min else value / (elapsed_min * MIN)


def _cpu_rows(
    model: dict[str, dict[str, float | None]] | None, elapsed_min: float | None
) -> dict[str, dict[str, float | None]]:
    """Load Profile DB Time(s) / DB CPU(s) / Background CPU(s) from Time Model seconds."""
    rows = {}
    for lp_name, name in (
        ("DB Time(s)", "DB time"),
        ("DB CPU(s)", "DB CPU"),
        ("Background CPU(s)", "background cpu time"),
    ):
        seconds = (model or {}).get(name, {}).get("time_s")
        rows[lp_name] = {"per_second": _per_second(seconds, elapsed_min)}
    return rows


# Load Profile row <- System Statistics statistic (what the instance Load Profile row counts)
_LP_STATS = {
    "Executes (SQL)": "execute count",
    "Logical read (blocks)": "session logical reads",
    "Redo size (bytes)": "redo size",
    "Physical read (blocks)": "physical reads",
    "Physical write (blocks)": "physical writes",
}
# Load Profile row <- System Statistics - Per Second column, and its unit in bytes
_LP_PER_INSTANCE = {
    "Executes (SQL)": ("Execs/s", 1),
    "Logical read (blocks)": ("Reads/s", 1),  # 'Logical Reads/s' heading cut by the group
    "Redo size (bytes)": ("Size (k)/s", 1024),  # Redo Size (k): 11,498 k = 11,774,196 bytes
    "Physical read (blocks)": ("Reads/s", 1),
    "Physical write (blocks)": ("Writes/s", 1),
}


def _instance_rates(grid: Grid | None, key: str) -> dict[str, dict[str, float | None]]:
    row = _by_instance(grid).get(key)
    out: dict[str, dict[str, float | None]] = {}
    if grid is None or row is None:
        return out
    reads = [i for i, h in enumerate(grid.header) if h == "Reads/s"]  # logical, physical
    for lp_name, (heading, unit) in _LP_PER_INSTANCE.items():
        col = grid.col(heading)
        if heading == "Reads/s" and len(reads) == 2:
            col = reads[0] if lp_name.startswith("Logical") else reads[1]
        value = parse_number(row[col]) if col is not None and col < len(row) else None
        out[lp_name] = {"per_second": None if value is None else value * unit}
    return out


def parse_global(doc: Doc) -> OracleReport:
    summary = _summary(doc)
    instances = _instances(doc)
    releases = {i["release"] for i in instances if i["release"]}
    header: dict[str, Any] = {
        **summary,
        "instance": "+".join(i["instance"] or str(i["inst_num"]) for i in instances) or None,
        "inst_num": None,
        "release": releases.pop() if len(releases) == 1 else None,
        "begin_time": instances[0]["begin_time"] if instances else None,
        "end_time": instances[0]["end_time"] if instances else None,
    }
    time_grid = _grid(doc, "Time Model")
    rates_grid = _grid(doc, "System Statistics - Per Second")
    stats = _global_stats(doc)
    model = _time_model(time_grid, "Sum")
    load = _cpu_rows(model, summary["elapsed_min"])
    for lp_name, stat in _LP_STATS.items():
        load[lp_name] = {"per_second": (stats or {}).get(stat, {}).get("per_second")}
    fg_top = _event_blocks(_grid(doc, "Top Timed Foreground Events"))
    bg_top = _event_blocks(_grid(doc, "Top Timed Background Events"))
    report = OracleReport(
        name=doc.name,
        kind="awr",
        header=header,
        load_profile=load,
        instance_activity=stats,
        foreground_waits=_global_waits(doc, "Foreground Wait Events (Global)"),
        background_waits=_global_waits(doc, "Background Wait Events (Global)"),
        top_events=fg_top.get("*"),
        time_model=model,
        scope="cluster",
    )
    for inst in instances:
        key = str(inst["inst_num"])
        part = OracleReport(name=doc.name, kind="awr", header={**header, **inst, "rac": "YES"})
        part.time_model = _time_model(time_grid, key)
        part.load_profile = _cpu_rows(part.time_model, inst["elapsed_min"])
        part.load_profile.update(_instance_rates(rates_grid, key))
        part.top_events, part.background_waits = fg_top.get(key), bg_top.get(key)
        part.notes = [NO_IO_NOTE, TOP_NOTE]
        report.instances.append(part)
    check_end(doc)
    report.problems = doc.problems
    return report


# --- instance reports of one snapshot pair --------------------------------------------------


def snap_key(report: OracleReport) -> tuple[Any, ...]:
    h = report.header
    return (h.get("db_id"), h.get("begin_snap"), h.get("end_snap"))


def combine(reports: list[OracleReport]) -> list[OracleReport]:
    """The reports as runs: a global report takes the instance reports of its snapshot pair
    as its instance rows; instance reports of one pair from 2+ instances become one cluster
    report; any other report stays as it is. Order: first appearance."""
    groups: dict[tuple[Any, ...], list[OracleReport]] = defaultdict(list)
    for report in reports:
        groups[snap_key(report)].append(report)
    out: list[OracleReport] = []
    for report in reports:
        group = groups[snap_key(report)]
        if report is not group[0] or snap_key(report)[0] is None:
            if snap_key(report)[0] is None:
                out.append(report)
            continue
        out.extend(_combine_group(group))
    return out


def _combine_group(group: list[OracleReport]) -> list[OracleReport]:
    clusters = [r for r in group if r.scope == "cluster"]
    parts = [r for r in group if r.scope == "instance"]
    if clusters:
        for cluster in clusters:
            own = {r.header.get("inst_num"): r for r in parts}
            cluster.instances = [own.pop(p.header.get("inst_num"), p) for p in cluster.instances]
            cluster.instances += list(own.values())
        return clusters
    if len({r.header.get("inst_num") for r in parts}) < 2 or len(parts) != len(
        {r.header.get("inst_num") for r in parts}
    ):
        return parts  # one instance, or the same instance twice: nothing to add up
    return [_add_up(sorted(parts, key=lambda r: r.header.get("inst_num") or 0))]


def _sum(values: list[float | None]) -> float | None:
    present = [v for v in values if v is not None]
    return sum(present) if values and len(present) == len(values) else None


def _add_rows(
    tables: list[dict[str, dict[str, float | None]] | None], cols: tuple[str, ...]
) -> dict[str, dict[str, float | None]] | None:
    """Rows every instance prints, column by column added up (a row one instance lacks is
    unknown for the cluster, not the others' sum)."""
    present = [t for t in tables if t is not None]
    if len(present) < len(tables):
        return None
    names = set.intersection(*(set(t) for t in present))
    return {n: {c: _sum([t[n].get(c) for t in present]) for c in cols} for n in names}


def _add_waits(lists: list[list[WaitEvent] | None]) -> list[WaitEvent] | None:
    """Per event: waits and time added up over the instances (an event an instance does not
    list had no waits there). The average: the instances' printed averages weighted by their
    waits, when every instance prints one (19c prints totals in whole seconds beside
    '740.74us': the averages are the precise figure), with its rounding error weighted too."""
    if any(events is None for events in lists):
        return None
    merged: dict[str, WaitEvent] = {}
    weighted: dict[str, list[tuple[float, float, float] | None]] = {}
    for events in lists:
        for ev in events or []:
            acc = merged.setdefault(
                ev.event, WaitEvent(ev.event, 0, 0, None, None, ev.wait_class, 0)
            )
            acc.waits = _sum([acc.waits, ev.waits])
            acc.time_s = _sum([acc.time_s, ev.time_s])
            acc.time_err_s = _sum([acc.time_err_s, ev.time_err_s])
            waits, avg, err = ev.waits, ev.avg_wait_ms, ev.avg_err_ms
            known = None if waits is None or avg is None or err is None else (waits, avg, err)
            weighted.setdefault(ev.event, []).append(known)
    for name, parts in weighted.items():
        acc = merged[name]
        complete = [part for part in parts if part is not None]
        if acc.waits and len(complete) == len(parts):
            acc.avg_wait_ms = sum(w * avg for w, avg, _ in complete) / acc.waits
            acc.avg_err_ms = sum(w * err for w, _, err in complete) / acc.waits
    return sorted(merged.values(), key=lambda ev: ev.time_s or 0, reverse=True)


def _agreed(parts: list[OracleReport], attr: str) -> int | None:
    """A value the instance reports' names give, when all give the same (never the first
    instance's: a cluster run's values would change with the files beside it)."""
    values = {getattr(p, attr) for p in parts}
    return values.pop() if len(values) == 1 else None


def _add_up(parts: list[OracleReport]) -> OracleReport:
    first = parts[0].header
    elapsed = [p.header.get("elapsed_min") for p in parts]
    header = {
        **{k: first.get(k) for k in ("db_name", "db_id", "release", "rac", "cdb")},
        **{k: first.get(k) for k in ("begin_snap", "end_snap", "begin_time", "end_time")},
        "instance": "+".join(str(p.header.get("instance")) for p in parts),
        "inst_num": None,
        "elapsed_min": max(e for e in elapsed if e is not None) if any(elapsed) else None,
        "db_time_min": _sum([p.header.get("db_time_min") for p in parts]),
    }
    cluster = OracleReport(
        name=" + ".join(p.name for p in parts),
        kind=parts[0].kind,
        header=header,
        load_profile=_add_rows([p.load_profile for p in parts], ("per_second",)),
        instance_activity=_add_rows([p.instance_activity for p in parts], ("total", "per_second")),
        foreground_waits=_add_waits([p.foreground_waits for p in parts]),
        background_waits=_add_waits([p.background_waits for p in parts]),
        time_model=_add_rows([p.time_model for p in parts], ("time_s",)),
        scope="cluster",
        instances=parts,
        update_pct=_agreed(parts, "update_pct"),
        sessions=_agreed(parts, "sessions"),
        directory=parts[0].directory,
    )
    cluster.top_events = _cluster_top(cluster)
    for attr, name in (("update_pct", "UPDATE_PCT"), ("sessions", "SESSIONS")):
        named = sorted({getattr(p, attr) for p in parts if getattr(p, attr) is not None})
        if getattr(cluster, attr) is None and named:
            cluster.notes.append(f"{name}: n/a, the instance reports' names disagree {named}")
    return cluster


def _cluster_top(cluster: OracleReport) -> list[WaitEvent] | None:
    """Top events of the added-up cluster: every event in an instance's top list, with its
    cluster wait time, and DB CPU; % of the cluster's DB time; largest first.

    The share is of the Time Model's 'DB time' added up (the statistic % DB time names), never
    of the header's 'DB Time (mins)', rounded to 0.01 min: on a quiet window that rounding
    alone put the cluster's DB CPU share outside both instances' own. Without a Time Model
    DB time the shares are n/a."""
    db_time_s = (cluster.time_model or {}).get("DB time", {}).get("time_s")
    names = {ev.event for p in cluster.instances for ev in p.top_events or []}
    events = []
    for name in names:
        if name in ("DB CPU", "CPU time"):
            cpu = (cluster.time_model or {}).get("DB CPU", {}).get("time_s")
            events.append(WaitEvent(name, None, cpu, None))
        elif (ev := cluster.wait(name)) is not None:
            events.append(WaitEvent(name, ev.waits, ev.time_s, None, None, ev.wait_class))
    if not events:
        return None
    for ev in events:
        if ev.time_s is not None and db_time_s:
            ev.pct_time = round(ev.time_s / db_time_s * 100, 1)
    return sorted(events, key=lambda ev: ev.time_s or 0, reverse=True)
