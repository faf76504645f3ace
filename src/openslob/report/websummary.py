"""The summary at the top of the HTML report: what was found, then what was tested.

- Peak physical IOPS and MB/s, with the latency measured at that point (DB read, SLOBop p99).
- The knee of each petal curve: the point of most I/O per µs of latency (Kleinrock's "power",
  throughput ÷ latency: beyond it, more sessions buy latency faster than I/O), and what the
  curve's last point adds beyond the knee.
- Latency at the user's target rates (RATE runs): offered vs achieved, saturation, p50/p99
  from the intended start.
- The runs' warnings, and what was tested: engine, version, settings, host, devices, data set,
  and what varies between the runs.

Reads results only (RunRefs). Every figure shown is a measured one; a figure no run measured
is left out of the summary, and a cell that was not measured is "n/a".
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from openslob.analysis.awrinfo import Column
from openslob.analysis.compare import described
from openslob.model.histogram import merged_ops
from openslob.report import escape
from openslob.report.petal import LATENCY_LABELS, LATENCY_TITLES, PetalPoint, petal_points
from openslob.report.webcharts import petal_curves
from openslob.report.webtable import table
from openslob.results.collect import RunRef

X_UNITS = {"iops": "IOPS", "mbps": "MB/s"}


def _points(refs: Sequence[RunRef], x: str) -> tuple[list[PetalPoint], str]:
    """Petal points with DB read latency, else (databases that time no reads) SLOBop p99."""
    for latency in ("db_read", "op_p99"):
        points, _ = petal_points(refs, x, latency)
        if points:
            return points, latency
    return [], "db_read"


def _where(point: PetalPoint) -> str:
    return f"{point.sessions} sessions, {point.update_pct:g} % update ({point.label})"


def _op_p99(refs: Sequence[RunRef], x: str, point: PetalPoint) -> float | None:
    others, _ = petal_points(refs, x, "op_p99")
    for other in others:
        if (other.label, other.update_pct, other.sessions) == (
            point.label,
            point.update_pct,
            point.sessions,
        ):
            return other.y
    return None


def _card(title: str, value: str, detail: str) -> str:
    return (
        f'<div class="card"><div class="card-k">{escape.text(title)}</div>'
        f'<div class="card-v">{escape.text(value)}</div>'
        f'<div class="card-d">{escape.text(detail)}</div></div>'
    )


def card_row(cards: Sequence[tuple[str, str, str]]) -> str:
    """Cards of (title, value, detail)."""
    return f'<div class="cards">{"".join(_card(*c) for c in cards)}</div>' if cards else ""


def peak_cards(refs: Sequence[RunRef]) -> str:
    """The highest physical I/O and MB/s of the runs ("peak" only among several points),
    and what they count: the database's own I/O, beside the device's."""
    cards = []
    for x, what in (("iops", "physical I/O"), ("mbps", "physical MB/s")):
        points, latency = _points(refs, x)
        if not points:
            continue
        peak = max(points, key=lambda p: p.x)
        what = f"Peak {what}" if len(points) > 1 else f"Database {what}"
        digits = 0 if x == "iops" else 1
        detail = f"at {_where(peak)}; {LATENCY_TITLES[latency]} {peak.y:,.0f} µs"
        p99 = _op_p99(refs, x, peak) if latency != "op_p99" else None
        if p99 is not None:
            detail += f"; SLOBop p99 {p99:,.0f} µs"
        if peak.runs > 1:
            detail += f"; median of {peak.runs} runs"
        cards.append((what, f"{peak.x:,.{digits}f} {X_UNITS[x]}", detail))
    return card_row(cards) + (_io_explained(refs) if cards else "")


def _io_explained(refs: Sequence[RunRef]) -> str:
    """Why the database's I/O and the device's (the time series' steady level, the report's
    I/O profile) differ, with this run's two figures when there is one run."""
    terms = (refs[0].run.get("engine") or {}).get("terms") or {}
    source = terms.get("db_io", "the database's statistics")
    text = (
        f"Physical I/O here is the database's own reads and writes of data pages ({source}): "
        "what SLOB's work asked of the storage. The device (/proc/diskstats) also counts the "
        "write-ahead log, checkpoints, read-ahead and any other process on it, so device "
        "IOPS (the time series, the report's I/O profile) may be higher or lower."
    )
    if len(refs) == 1:
        m = refs[0].run.get("metrics") or {}
        pairs = (
            ("pio_reads_per_s", "pio_writes_per_s"),
            ("device_reads_per_s", "device_writes_per_s"),
        )
        db, dev = ([v for v in (m.get(r), m.get(w)) if v is not None] for r, w in pairs)
        if len(db) == 2 and len(dev) == 2:
            text += (
                f" This run: database {sum(db):,.0f} IOPS, device {sum(dev):,.0f} IOPS "
                f"({m['device_reads_per_s']:,.0f} reads/s vs the database's "
                f"{m['pio_reads_per_s']:,.0f})."
            )
    return f'<p class="explain">{escape.text(text)}</p>'


NOT_REACHED = "not reached"
KNEE_COLUMNS = [
    Column("curve", "Curve", ""),
    Column("points", "Points", "", digits=0),
    Column("knee_sessions", "Knee at", "sessions", digits=0, missing=NOT_REACHED),
    Column("knee_x", "IOPS at knee", "1/s", digits=0, missing="-"),
    Column("knee_y", "Latency at knee", "µs", digits=0, missing="-"),
    Column("last_sessions", "Last point", "sessions", digits=0),
    Column("more_x_pct", "IOPS beyond knee", "%", digits=1, missing="-"),
    Column("more_y_pct", "Latency beyond knee", "%", digits=1, missing="-"),
]


def knee(curve: Sequence[PetalPoint]) -> PetalPoint:
    """The point of most throughput per unit of latency (Kleinrock's power)."""
    return max(curve, key=lambda p: p.x / p.y if p.y > 0 else 0.0)


def _change(value: float, base: float) -> float | None:
    return (value / base - 1) * 100 if base else None


def knee_rows(refs: Sequence[RunRef]) -> tuple[list[dict[str, Any]], str]:
    points, latency = _points(refs, "iops")
    rows = []
    for (label, pct), curve in petal_curves(points).items():
        if len(curve) < 2:
            continue  # one point has no knee
        best, last = knee(curve), curve[-1]
        beyond = last is not best  # else the curve has not bent yet: no knee to show
        rows.append(
            {
                "curve": f"{label} · {pct:g} % update",
                "points": len(curve),
                "knee_sessions": best.sessions if beyond else None,
                "knee_x": best.x if beyond else None,
                "knee_y": best.y if beyond else None,
                "last_sessions": last.sessions,
                "more_x_pct": _change(last.x, best.x) if beyond else None,
                "more_y_pct": _change(last.y, best.y) if beyond else None,
            }
        )
    return rows, latency


def knees(refs: Sequence[RunRef]) -> str:
    rows, latency = knee_rows(refs)
    if not rows:
        return ""
    explain = (
        f"Knee: the point of most physical I/O per µs of {LATENCY_LABELS[latency]} (throughput ÷ "
        "latency, Kleinrock's power). Beyond it, more sessions buy latency faster than I/O; "
        "the last two columns say what the curve's last point adds. Not reached: the last "
        "point is the best so far, more sessions may still add I/O at a fair price."
    )
    return (
        "<h3>Knee of each petal curve</h3>"
        + table(rows, KNEE_COLUMNS)
        + f'<p class="explain">{escape.text(explain)}</p>'
    )


RATE_COLUMNS = [
    Column("run", "Run", ""),
    Column("offered", "Offered", "ops/s", digits=0),
    Column("achieved", "Achieved", "ops/s", digits=0),
    Column("achieved_pct", "Achieved", "%", digits=1),
    Column("saturated", "Saturated", ""),
    Column("p50", "p50 intended", "µs", digits=0),
    Column("p99", "p99 intended", "µs", digits=0),
    Column("p99_service", "p99 service", "µs", digits=0),
    Column("late_10ms", "Late > 10 ms", "ops", digits=0),
]


def rate_rows(refs: Sequence[RunRef]) -> list[dict[str, Any]]:
    rows = []
    for ref in refs:
        metrics = ref.run.get("metrics") or {}
        offered = metrics.get("offered_rate")
        if not offered:
            continue
        achieved = metrics.get("achieved_rate")
        intended, service = (
            merged_ops(ref.run.get("latency_intended")),
            merged_ops(ref.run.get("latency")),
        )
        saturated = metrics.get("saturated")
        rows.append(
            {
                "run": ref.name,
                "offered": offered,
                "achieved": achieved,
                "achieved_pct": achieved / offered * 100 if achieved is not None else None,
                "saturated": None if saturated is None else ("yes" if saturated else "no"),
                "p50": intended.percentile_us(50) if intended else None,
                "p99": intended.percentile_us(99) if intended else None,
                "p99_service": service.percentile_us(99) if service else None,
                "late_10ms": metrics.get("late_ops_10ms"),
            }
        )
    return rows


def rates(refs: Sequence[RunRef]) -> str:
    rows = rate_rows(refs)
    if not rows:
        return ""
    saturated = [r["run"] for r in rows if r["saturated"] == "yes"]
    said = (
        f"Saturated (the sessions did not keep up with the offered rate): {', '.join(saturated)}."
        if saturated
        else "No run was saturated: every offered rate was delivered."
    )
    return (
        "<h3>Latency at the target rates</h3>"
        + table(rows, RATE_COLUMNS)
        + f'<p class="explain">Latency from each op\'s scheduled start (coordinated omission '
        f"corrected). {escape.text(said)}</p>"
    )


def warnings(refs: Sequence[RunRef]) -> str:
    seen: dict[str, list[str]] = {}
    for ref in refs:
        for text in ref.run.get("warnings") or []:
            seen.setdefault(str(text), []).append(ref.name)
    if not seen:
        return ""
    items = []
    for text, runs in seen.items():
        where = runs[0] if len(runs) == 1 else f"{len(runs)} runs"
        items.append(
            f"<li>{escape.text(text)} <span class='where'>({escape.text(where)})</span></li>"
        )
    return f'<div class="warn"><strong>Warnings</strong><ul>{"".join(items)}</ul></div>'


# --- what was tested ----------------------------------------------------------------------------

DATASET_KEYS = ("SCHEMAS", "SCALE", "SCAN_TABLE_SZ", "SEED", "LOAD_PARALLEL_DEGREE")
WORKLOAD_KEYS = (
    "SESSIONS",
    "UPDATE_PCT",
    "SCAN_PCT",
    "WORK_UNIT",
    "REDO_STRESS",
    "RUN_TIME",
    "WORK_LOOP",
    "WARMUP",
    "RATE",
    "SAMPLE_INTERVAL",
    "THREADS_PER_SCHEMA",
)
CONFIG_GROUPS = (("Data set", DATASET_KEYS), ("Workload", WORKLOAD_KEYS))
TESTED_GROUPS = (
    ("Engine", "engine.", ("engine.terms", "engine.settings.", "engine.target")),
    ("Target", "engine.target", ()),
    ("Engine settings", "engine.settings.", ()),
    ("Host", "host.", ("host.devices.",)),
    ("Devices", "host.devices.", ()),
)


def _gib(value: str) -> str:
    try:
        return f"{int(value) / 2**30:,.1f} GiB"
    except ValueError:
        return value


# What the table calls a parameter: a reader's name, then SLOB's key (what slob.conf says).
READABLE = {
    "SCHEMAS": "Schemas",
    "SCALE": "Rows per schema",
    "SCAN_TABLE_SZ": "Scan table rows",
    "SEED": "Seed",
    "LOAD_PARALLEL_DEGREE": "Load streams",
    "SESSIONS": "Sessions (as run)",
    "UPDATE_PCT": "Updates, % of ops",
    "SCAN_PCT": "Scans, % of selects",
    "WORK_UNIT": "Rows per op",
    "REDO_STRESS": "Redo stress",
    "RUN_TIME": "Run time, s",
    "WORK_LOOP": "Ops per session",
    "WARMUP": "Warm-up, s",
    "RATE": "Target rate, ops/s",
    "SAMPLE_INTERVAL": "Sampling interval, s",
    "THREADS_PER_SCHEMA": "Threads per schema",
    "page_size_bytes": "Page size",
}


def _name(key: str, prefix: str) -> str:
    short = key.removeprefix(prefix) or key
    readable = READABLE.get(short)
    return f"{readable} ({short})" if readable else short


def _shown(key: str, value: str) -> str:
    if key.startswith("host.") and key.endswith(("memory_bytes", "size_bytes")):
        return _gib(value)
    if key == "engine.page_size_bytes" and value.isdigit():
        return f"{int(value) // 1024} KiB"
    return value


def _as_run(ref: RunRef) -> dict[str, str]:
    """What a run says about how it was made, with what it ran in place of what it was
    asked: the sessions that ran (SESSIONS=0 means one per schema), and no PAGE_SIZE (an
    engine option: the page size the engine reported is the Engine's page_size_bytes)."""
    facts = described(ref.run)
    sessions = ref.run.get("sessions")
    if isinstance(sessions, list) and sessions:
        facts["config.SESSIONS"] = str(len(sessions))
    facts.pop("config.PAGE_SIZE", None)
    return facts


def _facts(title: str, prefix: str, chosen: Sequence[str], values: dict[str, list[str]]) -> str:
    chosen = [k for k in chosen if values.get(k)]
    if not chosen:
        return ""
    items = "".join(
        f"<tr><th>{escape.text(_name(k, prefix))}</th>"
        f"<td>{escape.text(', '.join(_shown(k, v) for v in values[k]))}"
        f"{' <em>(varies)</em>' if len(values[k]) > 1 else ''}</td></tr>"
        for k in chosen
    )
    return (
        f'<div class="facts"><h4>{escape.text(title)}</h4><table class="kv">{items}</table></div>'
    )


def _recorded(key: str, described_runs: Sequence[dict[str, str]]) -> list[str]:
    """The distinct values the runs record for a key; runs that record none are counted as
    such, never taken for agreement ("helicon" from one run of five is not the five's host)."""
    seen = [d.get(key) for d in described_runs]
    found = list(dict.fromkeys(v for v in seen if v not in (None, "null", "")))
    missing = sum(v in (None, "null", "") for v in seen)
    if found and missing:
        found.append(f"not recorded ({missing} of {len(seen)} runs)")
    return found


def tested(refs: Sequence[RunRef]) -> str:
    """Every recorded fact about how the runs were made: one value when the runs agree, the
    list when they differ (those keys are also listed under "varies")."""
    described_runs = [_as_run(ref) for ref in refs]
    keys = list(dict.fromkeys(k for d in described_runs for k in d))
    values = {k: _recorded(k, described_runs) for k in keys}
    groups = [
        (title, prefix, [k for k in keys if k.startswith(prefix) and not k.startswith(exclude)])
        for title, prefix, exclude in TESTED_GROUPS
    ]
    groups += [(title, "config.", [f"config.{n}" for n in names]) for title, names in CONFIG_GROUPS]
    shown = {k for _, _, chosen in groups for k in chosen}
    others = [k for k in keys if k.startswith("config.") and k not in shown]
    sections = [_facts(title, prefix, chosen, values) for title, prefix, chosen in groups]
    rest = _facts("Other parameters", "config.", others, values)
    if rest:
        sections.append(
            f"<details><summary>{len(others)} other parameters</summary>{rest}</details>"
        )
    varies = [k.removeprefix("config.") for k in keys if len(values[k]) > 1]
    line = (
        f"<p><strong>Varies between the {len(refs)} runs:</strong> "
        f"{escape.text(', '.join(varies))}</p>"
        if varies and len(refs) > 1
        else ""
    )
    grid = "".join(section for section in sections if section)
    return f'<h3>What was tested</h3>{line}<div class="facts-grid">{grid}</div>'


def summary(refs: Sequence[RunRef]) -> str:
    """The summary section: findings first, then the facts."""
    found = [peak_cards(refs), knees(refs) if len(refs) > 1 else "", rates(refs), warnings(refs)]
    return '<section id="summary"><h2>Summary</h2>' + "".join(found) + tested(refs) + "</section>"
