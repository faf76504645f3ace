"""Whether a window measured the data set SLOB describes, and the warnings when it did not.

Three views of one instance over the window, all measured:
- its tables before and after (pages, live and dead row versions, where the engine reports
  them), so a table that grew during the run shows;
- who held back its cleanup horizon (model.horizon.HorizonWatch), with what the engine says
  to do about it;
- the blocks each SLOBop kind cost against what the layout predicts (engine work_per_op):
  a bloated table or a held horizon makes every op visit more blocks than WORK_UNIT rows
  and the index need, and the op latencies then measure that extra work.
"""

from __future__ import annotations

from typing import Any

from openslob.model.engine import Advice
from openslob.model.plan import schema_order

WORK_EXCESS_PCT = 15.0  # blocks per op above the prediction that deserve a warning
MIN_OPS = 20  # fewer ops of a kind say little about its cost
TABLE_GROWTH_PCT = 1.0  # pages added during the window
TABLE_FIGURES = ("pages", "live_rows", "dead_rows", "index_pages")
OWN_APPLICATION = "openslob"


def table_changes(
    before: dict[str, Any] | None, after: dict[str, Any] | None, schemas: list[str]
) -> dict[str, Any] | None:
    """{"userN.cfX": {"before": {...}, "after": {...}}} for the schemas the run used; None
    where the engine does not report its tables."""
    first, last = (before or {}).get("tables"), (after or {}).get("tables")
    if first is None and last is None:
        return None
    names = {n for n in (*(first or {}), *(last or {})) if n.split(".")[0] in schemas}

    def pick(facts: dict[str, Any] | None) -> dict[str, Any] | None:
        return None if facts is None else {k: facts.get(k) for k in TABLE_FIGURES}

    return {
        name: {"before": pick((first or {}).get(name)), "after": pick((last or {}).get(name))}
        for name in sorted(names, key=lambda n: (schema_order(n.split(".")[0]), n))
    }


def grown_tables(tables: dict[str, Any] | None) -> list[str]:
    """ "user1.cf1 8,192 -> 9,000 pages (+9.9 %), dead row versions 10 -> 5,000" for each
    table that grew by more than TABLE_GROWTH_PCT during the window."""
    grown = []
    for name, change in (tables or {}).items():
        first, last = change.get("before") or {}, change.get("after") or {}
        b, a = first.get("pages"), last.get("pages")
        if not b or a is None or (a - b) / b * 100 <= TABLE_GROWTH_PCT:
            continue
        dead = ""
        if first.get("dead_rows") is not None and last.get("dead_rows") is not None:
            dead = f", dead row versions {first['dead_rows']:,} -> {last['dead_rows']:,}"
        grown.append(f"{name} {b:,} -> {a:,} pages (+{(a - b) / b * 100:.1f} %){dead}")
    return grown


def _holder_text(hold: dict[str, Any]) -> str:
    who = [f"{hold['kind']} {hold['holder']}"]
    details = [
        f"{label} {hold[key]}"
        for key, label in (("role", "role"), ("application", "application"), ("state", "state"))
        if hold.get(key)
    ]
    if hold.get("since"):
        details.append(f"since {hold['since']}")
    if hold.get("query"):
        details.append(f"query '{hold['query'][:60]}'")
    return who[0] + (f" ({', '.join(details)})" if details else "")


def horizon_warnings(plugin: Advice, entry: dict[str, Any], updates: bool) -> list[str]:
    """A held horizon while updates ran, naming the holder and what to do."""
    holds = [h for h in (entry.get("horizon") or {}).get("holds", []) if h["held_s"] >= 2.0]
    if not updates or not holds:
        return []
    warnings = []
    for hold in holds[:3]:
        ours = (hold.get("application") or "").startswith(OWN_APPLICATION)
        effect = plugin.horizon_effect()
        what = (
            "openslob's own connection did (a defect of openslob: please report it)"
            if ours
            else plugin.horizon_advice(hold)
        )
        warnings.append(
            f"the cleanup horizon was held back for {hold['held_s']:.0f} s of the run by "
            f"{_holder_text(hold)}: {effect}. {what[0].upper()}{what[1:]}; `slob setup` "
            "then repairs the data set"
        )
    return warnings


def work_warnings(entry: dict[str, Any], causes: list[str]) -> list[str]:
    """Each op kind whose blocks per op exceed the layout's prediction by WORK_EXCESS_PCT."""
    work = entry.get("work_per_op") or {}
    warnings = []
    cause = "; ".join(causes) if causes else "cause not found (`slob verify` measures the layout)"
    for kind in ("select", "update", "scan", "all"):
        figures = work.get(kind)
        if not figures or figures["ops"] < MIN_OPS:
            continue
        for key, predicted, label in (
            ("lio", "lio_predicted", "logical reads"),
            ("pio", "pio_max_predicted", "physical reads"),
        ):
            want, got = figures.get(predicted), figures.get(key)
            if not want or got is None or got <= want * (1 + WORK_EXCESS_PCT / 100):
                continue
            name = "ops of all kinds" if kind == "all" else f"{kind.upper()} ops"
            bound = "at most " if key == "pio" else ""
            warnings.append(
                f"{name} did {got:,.1f} {label} each, {(got / want - 1) * 100:.0f} % more than "
                f"the {bound}{want:,.1f} the layout predicts: {cause}"
            )
    return warnings


def warnings(plugin: Advice, entry: dict[str, Any], seconds: float) -> list[str]:
    """Every warning about one instance's data set and work per op, causes first (`plugin`:
    the instance's engine, from the run)."""
    metrics = entry.get("metrics") or {}
    updates = metrics.get("updates_per_s")
    update_commits = None if updates is None else updates * seconds
    held = horizon_warnings(plugin, entry, bool(updates))
    grown = grown_tables(entry.get("tables"))
    found, causes = [], ["the cleanup horizon was held (above)"] if held else []
    tables = entry.get("tables") or {}
    if grown:
        refused = any(plugin.is_bloated(c.get("after")) for c in tables.values())
        why = "" if held else plugin.fast_update_cause(entry.get("horizon") or {})
        found.append(
            f"tables grew during the window ({'; '.join(grown[:3])}"
            f"{'; ...' if len(grown) > 3 else ''}): updated rows left their pages{why}"
            + ("; `slob run` refuses the data set until `slob setup` reloads it" if refused else "")
        )
        causes.insert(0, "the tables grew during the window (above)")
    bloated = [
        f"{name} {change['before']['pages']:,} pages"
        for name, change in tables.items()
        if plugin.is_bloated(change.get("before"))
    ]
    if bloated:
        causes.insert(0, f"the run started on bloated tables ({', '.join(bloated[:3])})")
    own = plugin.window_warnings(entry, update_commits)
    return held + found + work_warnings(entry, causes) + own
