"""`--fail-if` rules for CI gates: 'pio_reads_per_s<-5%', 'select.p99_us>+10%'.

Grammar: FIGURE OP THRESHOLD%, where FIGURE is an address of analysis/figures.py, OP is
`<` (the change is below the threshold) or `>` (above it), and THRESHOLD a signed number of
percent (the change of the candidate's median over the base's). Spaces are allowed.

A rule holds at a point when the change is beyond the threshold beyond noise: with 2 or more
runs on each side, the whole confidence interval of the change lies beyond it (OP `<`: its
upper end is below; `>`: its lower end is above). With one run on a side there is no noise
estimate: the rule then holds when the change itself is beyond the threshold, and says so
(a CI gate that passed only because nobody repeated the runs would hide a regression; the
output and JSON mark the point as judged without a noise estimate). A figure that was 0 on
every run of both sides changed by exactly 0.
A point where the figure is not measured on both sides is not judged (named as such).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from openslob.analysis.compare import SAME, Change, Comparison
from openslob.analysis.figures import metric_for
from openslob.model.errors import ConfigError

_RULE = re.compile(r"\s*([A-Za-z0-9_.]+)\s*([<>])\s*([+-]?(?:\d+(?:\.\d*)?|\.\d+))\s*%\s*")
FORM = "FIGURE<-N% or FIGURE>+N%, e.g. 'pio_reads_per_s<-5%' or 'select.p99_us>+10%'"


@dataclass(frozen=True)
class Rule:
    text: str
    figure: str
    op: str  # "<" | ">"
    threshold_pct: float


def parse_rule(text: str) -> Rule:
    """A rule, or ConfigError (exit 2) naming it and the allowed form."""
    match = _RULE.fullmatch(text)
    if match is None:
        raise ConfigError(f"--fail-if {text!r}: not a rule; the form is {FORM}")
    figure, op, number = match.groups()
    try:
        metric_for(figure)
    except ConfigError as exc:
        raise ConfigError(f"--fail-if {text!r}: {exc}") from None
    return Rule(text.strip(), figure, op, float(number))


@dataclass
class Verdict:
    """One rule at one point."""

    point: str
    change: Change
    holds: bool
    noise_estimate: bool  # False: judged on the change alone (one run on a side)


@dataclass
class RuleResult:
    rule: Rule
    points: list[Verdict] = field(default_factory=list)
    not_judged: list[str] = field(default_factory=list)  # points without the figure
    # points whose runs warned the figure invalid (analysis/validity): the gate cannot pass
    refused: list[str] = field(default_factory=list)

    @property
    def holds(self) -> bool:
        return any(v.holds for v in self.points)


def _beyond(rule: Rule, low: float, high: float) -> bool:
    return high < rule.threshold_pct if rule.op == "<" else low > rule.threshold_pct


def evaluate(rule: Rule, comparison: Comparison) -> RuleResult:
    result = RuleResult(rule)
    for point in comparison.points:
        found = next((c for c in point.changes if c.figure == rule.figure), None)
        if found is None or found.change_pct is None:
            result.not_judged.append(point.shown)
            continue
        if found.invalid:  # runs warned the figure invalid: neither pass nor fail on it
            result.refused.append(f"{point.shown} ({found.invalid})")
            continue
        if found.verdict == SAME:  # 0 on every run: the change is exactly 0, no noise
            result.points.append(Verdict(point.shown, found, _beyond(rule, 0, 0), True))
        elif found.ci_low_pct is not None and found.ci_high_pct is not None:
            holds = _beyond(rule, found.ci_low_pct, found.ci_high_pct)
            result.points.append(Verdict(point.shown, found, holds, True))
        else:
            holds = _beyond(rule, found.change_pct, found.change_pct)
            result.points.append(Verdict(point.shown, found, holds, False))
    return result


def evaluate_all(rules: list[Rule], comparison: Comparison) -> list[RuleResult]:
    return [evaluate(rule, comparison) for rule in rules]
