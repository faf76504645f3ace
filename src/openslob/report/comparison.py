"""Renderers of a comparison (analysis/compare.Comparison): text, CSV and JSON.

They read the comparison and the rule results only. Unmeasured figures print as n/a and are
null in JSON, empty in CSV; the method and the real confidence of each interval are printed
beside the numbers, and a change without repeats says it cannot be told from noise.
"""

from __future__ import annotations

import csv
import io
import json
import textwrap
from collections.abc import Sequence
from typing import Any

from openslob.analysis.compare import NOT_RECORDED, Change, Comparison, Side, side_warnings
from openslob.analysis.rules import RuleResult
from openslob.analysis.stats import Spread, range_text
from openslob.report.blocks import WIDTH

NA = "n/a"
CSV_FIELDS = (
    "point",
    "figure",
    "unit",
    "base_n",
    "base_median",
    "base_min",
    "base_max",
    "base_cv_pct",
    "cand_n",
    "cand_median",
    "cand_min",
    "cand_max",
    "cand_cv_pct",
    "change_pct",
    "ci_low_pct",
    "ci_high_pct",
    "confidence",
    "verdict",
)


def _num(value: float | None, digits: int) -> str:
    return NA if value is None else f"{value:,.{digits}f}"


def spread_cell(stats: Spread, digits: int) -> str:
    return range_text(stats, lambda v: _num(v, digits), NA)


def _signed(value: float | None) -> str:
    return NA if value is None else f"{value:+.1f} %"


def interval_cell(change: Change) -> str:
    if change.ci_low_pct is None or change.ci_high_pct is None:
        return NA
    confidence = f"{change.confidence * 100:.0f} %" if change.confidence is not None else NA
    return f"{change.ci_low_pct:+.1f} … {change.ci_high_pct:+.1f} % ({confidence})"


def _count(n: int, what: str) -> str:
    return f"{n} {what}" if n == 1 else f"{n} {what}s"


def _wrapped(text: str, indent: str = "      ") -> list[str]:
    """A line cut at WIDTH between words (a path longer than WIDTH stays whole)."""
    return textwrap.wrap(
        text, WIDTH, subsequent_indent=indent, break_long_words=False, break_on_hyphens=False
    )


def _side_line(name: str, side: Side) -> list[str]:
    counts = f"{_count(len(side.points), 'point')}, {_count(len(side.refs), 'run')}"
    return _wrapped(f"  {name:<9} {side.label}  {side.path}  ({counts})", " " * 12)


def _values(values: Sequence[str]) -> str:
    return ", ".join(v if v else "''" for v in values)  # an empty setting is still a value


def warning_lines(comparison: Comparison) -> list[str]:
    """Each side's warnings, before anything else: a figure a warning invalidates gets no
    verdict below (analysis/validity.py)."""
    lines = []
    for name, side in (("base", comparison.base), ("candidate", comparison.cand)):
        found = side_warnings(side)
        if not found:
            lines.append(f"Warnings of the {name}: none")
            continue
        lines.append(f"Warnings of the {name} ({_count(len(side.refs), 'run')}):")
        for w in found:
            mark = "!" if w.invalidating else "-"
            what = f"{w.kind} (no verdicts on it): " if w.invalidating else ""
            lines += textwrap.wrap(
                f"{mark} {w.runs}/{len(side.refs)} runs: {what}{w.example}",
                100,
                subsequent_indent="    ",
            )
    return lines


def _differences(comparison: Comparison) -> list[str]:
    shown = [d for d in comparison.differences if NOT_RECORDED not in (*d.base, *d.cand)]
    lines = ["Differences (base → candidate):"]
    if not shown:
        lines.append("  none in configuration, engine settings, version, host or devices")
    width = max((len(d.key) for d in shown), default=0)
    for d in shown:
        note = ""
        if d.workload:  # set aside only with --force; else the points pair on its values
            forced = d.key.removeprefix("config.") in comparison.pairing.set_aside
            note = "  (workload: compared because of --force)" if forced else ""
            note = note or "  (workload: points paired on it)"
        lines.append(f"  {d.key:<{width}}  {_values(d.base)}  →  {_values(d.cand)}{note}")
    for side, index in (("base", 0), ("candidate", 1)):
        missing = [
            d.key for d in comparison.differences if (d.base, d.cand)[index] == [NOT_RECORDED]
        ]
        if missing:
            lines.append(f"  not recorded by the {side}: {', '.join(missing)}")
    return lines


def _pairing(comparison: Comparison) -> list[str]:
    lines = []
    pairing = comparison.pairing
    for key, (b, c) in pairing.set_aside.items():
        lines.append(f"Compared across {key}: {', '.join(b)} (base) vs {', '.join(c)} (candidate)")
    for name, points in (("base", pairing.only_base), ("candidate", pairing.only_cand)):
        if points:
            texts = "; ".join(comparison.point_name(p.params) for p in points)
            lines.append(f"Only in the {name}, not compared: {texts}")
    for name, side in (("base", comparison.base), ("candidate", comparison.cand)):
        if side.left_out:
            lines.append(f"Left out of the {name} (not complete): {', '.join(side.left_out)}")
    return lines


def method_lines(comparison: Comparison) -> list[str]:
    text = (
        f"Method: {comparison.method}. Verdicts at {comparison.level * 100:g} % confidence "
        "where the runs allow it; fewer runs give a wider interval whose real confidence is "
        "printed beside it (3 + 3 runs: at most 90 %). One run on a side: no verdict, the "
        "change cannot be separated from noise."
    )
    return textwrap.wrap(text, WIDTH)


def _point_table(changes: Sequence[Change], wide: bool = False) -> list[str]:
    """One row per figure; a table wider than WIDTH (repeats: median (min–max) cells) puts
    base → candidate on a second line under each figure, unless `wide`."""
    header = ("FIGURE", "BASE", "CANDIDATE", "CHANGE", "INTERVAL (CONFIDENCE)", "VERDICT")
    rows = [
        (
            f"{c.label} ({c.unit})",
            spread_cell(c.base, c.digits),
            spread_cell(c.cand, c.digits),
            _signed(c.change_pct),
            interval_cell(c),
            c.verdict.partition(":")[0],  # its reason once, under the table
        )
        for c in changes
    ]
    widths = [max(len(r[i]) for r in [header, *rows]) for i in range(len(header))]
    right = (False, True, True, True, True, False)

    def line(cells: Sequence[str]) -> str:
        return (
            "  "
            + "  ".join(
                cell.rjust(w) if r else cell.ljust(w)
                for cell, w, r in zip(cells, widths, right, strict=True)
            ).rstrip()
        )

    reasons = dict.fromkeys(c.verdict for c in changes if ":" in c.verdict)
    notes = [
        w
        for reason in reasons
        for w in textwrap.wrap(reason, WIDTH, initial_indent="  ", subsequent_indent="    ")
    ]
    if wide or len(line(header)) <= WIDTH:
        return [line(header), *(line(r) for r in rows), *notes]
    return [*_two_line_rows(header, rows), *notes]


def _two_line_rows(header: Sequence[str], rows: Sequence[Sequence[str]]) -> list[str]:
    """FIGURE, CHANGE, INTERVAL and VERDICT on a row; base → candidate indented under it."""
    keep = (0, 3, 4, 5)
    widths = [max(len(r[i]) for r in [header, *rows]) for i in keep]
    right = (False, True, True, False)

    def cells(row: Sequence[str]) -> str:
        picked = (row[i] for i in keep)
        text = "  ".join(
            c.rjust(w) if r else c.ljust(w) for c, w, r in zip(picked, widths, right, strict=True)
        )
        return "  " + text.rstrip()

    lines = [cells(header), f"      {header[1].lower()} → {header[2].lower()}"]
    for row in rows:
        lines += [cells(row), f"      {row[1]} → {row[2]}"]
    return lines


def render_rules(results: Sequence[RuleResult]) -> list[str]:
    return [part for line in _rule_lines(results) for part in _wrapped(line, " " * 9)]


def _rule_lines(results: Sequence[RuleResult]) -> list[str]:
    lines = []
    for result in results:
        held = [v for v in result.points if v.holds]
        if held:
            for v in held:
                basis = (
                    f"interval {interval_cell(v.change)}"
                    if v.noise_estimate
                    else f"{v.change.verdict.partition(':')[0]}: judged on the change alone"
                )
                lines.append(
                    f"  FAIL {result.rule.text}: {v.point}: {_signed(v.change.change_pct)} "
                    f"({basis})"
                )
        elif result.refused:
            lines.append(
                f"  REFUSED {result.rule.text}: runs warned the figure invalid at "
                + "; ".join(result.refused)
            )
        else:
            lines.append(
                f"  pass {result.rule.text}: not beyond noise at any of {len(result.points)} points"
            )
        if result.not_judged:
            lines.append(
                f"       {result.rule.text}: not judged (not measured on both sides) at "
                + "; ".join(result.not_judged)
            )
    return lines


def render_text(
    comparison: Comparison, rules: Sequence[RuleResult] = (), wide: bool = False
) -> str:
    """The comparison in WIDTH columns (`wide`: each point's table on one line per figure)."""
    lines = [
        "slob compare",
        *_side_line("base", comparison.base),
        *_side_line("candidate", comparison.cand),
        "",
        *warning_lines(comparison),
        "",
        *_differences(comparison),
        *_pairing(comparison),
        "",
        *method_lines(comparison),
    ]
    for point in comparison.points:
        lines += [
            "",
            f"{point.shown}   (base {_count(len(point.base_runs), 'run')}, candidate "
            f"{_count(len(point.cand_runs), 'run')})",
            *_point_table(point.changes, wide),
        ]
    if rules:
        lines += ["", "--fail-if:", *render_rules(rules)]
    return "\n".join(lines) + "\n"


def csv_rows(comparison: Comparison) -> list[dict[str, Any]]:
    rows = []
    for point in comparison.points:
        for c in point.changes:
            row: dict[str, Any] = {"point": point.shown, "figure": c.figure, "unit": c.unit}
            for side, stats in (("base", c.base), ("cand", c.cand)):
                for key, item in stats.as_dict().items():
                    row[f"{side}_{key}"] = item
            row.update(
                change_pct=c.change_pct,
                ci_low_pct=c.ci_low_pct,
                ci_high_pct=c.ci_high_pct,
                confidence=c.confidence,
                verdict=c.verdict,
            )
            rows.append(row)
    return rows


def render_csv(comparison: Comparison) -> str:
    buf = io.StringIO()
    writer = csv.DictWriter(buf, CSV_FIELDS, lineterminator="\n")
    writer.writeheader()
    for row in csv_rows(comparison):
        writer.writerow({k: "" if row.get(k) is None else row[k] for k in CSV_FIELDS})
    return buf.getvalue()


def rules_dict(results: Sequence[RuleResult]) -> list[dict[str, Any]]:
    return [
        {
            "rule": r.rule.text,
            "holds": r.holds,
            "points": [
                {
                    "point": v.point,
                    "holds": v.holds,
                    "noise_estimate": v.noise_estimate,
                    "change_pct": v.change.change_pct,
                    "ci_low_pct": v.change.ci_low_pct,
                    "ci_high_pct": v.change.ci_high_pct,
                }
                for v in r.points
            ],
            "not_judged": r.not_judged,
            "refused": r.refused,
        }
        for r in results
    ]


def render_json(comparison: Comparison, rules: Sequence[RuleResult] = ()) -> str:
    data = comparison.as_dict()
    data["rules"] = rules_dict(rules)
    data["failed"] = any(r.holds or r.refused for r in rules)
    return json.dumps(data, indent=2, default=str) + "\n"
