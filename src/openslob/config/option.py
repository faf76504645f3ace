"""One parameter (Option) and how its values parse: sizes, durations, booleans, ranges.

A value is parsed and range-checked in one place (parse_value) for slob.conf and flags alike;
an error is one line naming the parameter, the value and what is allowed. The table of all
parameters is options.py.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable
from dataclasses import dataclass
from fractions import Fraction
from typing import Any, Literal

from openslob.model.errors import ConfigError

BLOCK_SIZE = 8192
"""Database block size in bytes: SLOB's default, and SCALE's unit when given in bytes."""

MAX_SESSIONS = 4096
"""SLOB caps a run at 4096 sessions; so do we."""

Kind = Literal["int", "float", "bool", "blocks", "mb", "seconds", "choice", "str", "path"]

# Commands that take options. "sweep" repeats runs, so it takes everything "run" takes.
DATA_SCOPES = frozenset({"setup", "verify", "destroy", "run", "sweep"})
SETUP_SCOPES = frozenset({"setup"})
RUN_SCOPES = frozenset({"run", "sweep"})
SCOPES = DATA_SCOPES

MIB = 1024 * 1024
DAY = 86400


@dataclass(frozen=True)
class Option:
    """One parameter: its slob.conf key, type, default, limits and help."""

    name: str
    kind: Kind
    default: Any
    help: str
    scopes: frozenset[str]
    slob: bool = True
    minimum: int | float | None = None
    maximum: int | float | None = None
    choices: tuple[str, ...] = ()
    unit: str = ""
    metavar: str = ""
    # Part of the workload itself (what the database is asked to do): runs compare point to
    # point only when these agree (`slob compare`); the others (durations, hooks, the
    # harness) are listed as differences but do not change what a point is.
    workload: bool = False
    # The option that switches this one on (HOTSPOT_MB does nothing unless DO_HOTSPOT): while
    # that one is 0 or FALSE, this one's value is no part of the workload.
    needs: str = ""
    # May be a comma list in `slob sweep` (an axis); a harness setting such as REPEAT is not.
    listable: bool = True

    def __post_init__(self) -> None:
        # Fill unit/metavar from the kind so the table only spells out the exceptions.
        if not self.unit:
            object.__setattr__(self, "unit", _KIND_UNIT.get(self.kind, ""))
        if not self.metavar:
            metavar = "|".join(self.choices) if self.choices else _KIND_METAVAR[self.kind]
            object.__setattr__(self, "metavar", metavar)

    @property
    def flag(self) -> str:
        """The command-line flag: UPDATE_PCT -> --update-pct."""
        return "--" + self.name.lower().replace("_", "-")

    @property
    def param(self) -> str:
        """The keyword click passes to the command function: UPDATE_PCT -> update_pct."""
        return self.name.lower()


_KIND_UNIT: dict[str, str] = {"blocks": "rows", "mb": "MB", "seconds": "seconds"}
_KIND_METAVAR: dict[str, str] = {
    "int": "N",
    "float": "NUMBER",
    "bool": "TRUE|FALSE",
    "blocks": "ROWS|SIZE",
    "mb": "MB|SIZE",
    "seconds": "SECONDS",
    "choice": "CHOICE",
    "str": "TEXT",
    "path": "FILE",
}

# --------------------------------------------------------------------------- values

_INT = re.compile(r"[+-]?\d+")
_DECIMAL = re.compile(r"[+-]?(?:\d+(?:\.\d*)?|\.\d+)(?:[eE][+-]?\d+)?")  # 1e7, 2.5E-3
_SIZE = re.compile(r"(\d+(?:\.\d*)?|\.\d+)\s*(?:([KMGT])(?:I?B)?|B)?", re.IGNORECASE)
_DURATION = re.compile(r"([+-]?(?:\d+(?:\.\d*)?|\.\d+))\s*([SMH]?)", re.IGNORECASE)
_SIZE_POWER = {"K": 1, "M": 2, "G": 3, "T": 4}
_DURATION_SECONDS = {"": 1, "S": 1, "M": 60, "H": 3600}
_TRUE = frozenset({"true", "yes", "on", "1"})
_FALSE = frozenset({"false", "no", "off", "0"})

_WHAT = {
    "int": "a whole number",
    "float": "a number",
    "bool": "TRUE or FALSE",
    "blocks": "a row count or size",
    "mb": "a size in MB",
    "seconds": "a duration",
    "choice": "a valid choice",
}


def parse_size_bytes(raw: str) -> int:
    """Bytes in a size such as ``80M``, ``1.5G``, ``64MB``, ``512KiB`` (powers of 1024).

    A bare number is bytes. Exact arithmetic (Fraction) so ``1.5G`` is not off by a float ulp;
    the result is rounded down. Raises ValueError when ``raw`` is not a size.
    """
    match = _SIZE.fullmatch(raw.strip())
    if match is None:
        raise ValueError(f"not a size: {raw!r}")
    number, prefix = match.groups()
    power = _SIZE_POWER[prefix.upper()] if prefix else 0
    return int(Fraction(number) * 1024**power)


def _has_unit(text: str) -> bool:
    return bool(text) and text[-1].isalpha()


def _parse_int(option: Option, text: str) -> int:
    if not _INT.fullmatch(text):  # int() would also take "1_000" and " 1 "
        raise ValueError(text)
    return int(text)


def _parse_float(option: Option, text: str) -> float:
    if not _DECIMAL.fullmatch(text):  # float() would also take "nan" and "inf"
        raise ValueError(text)
    value = float(text)
    if not math.isfinite(value):  # 1e999
        raise ValueError(text)
    return value


def _parse_bool(option: Option, text: str) -> bool:
    lowered = text.lower()
    if lowered in _TRUE:
        return True
    if lowered in _FALSE:
        return False
    raise ValueError(text)


def _parse_blocks(option: Option, text: str) -> int:
    """A bare whole number is rows; a size is converted to whole 8 KiB blocks (SLOB's rule)."""
    if text.isdigit():
        return int(text)
    if not _has_unit(text):
        raise ValueError(text)
    size = parse_size_bytes(text)
    rows = size // BLOCK_SIZE
    if rows == 0 and size > 0:
        # Rounding down to 0 would silently mean "no table" for SCAN_TABLE_SZ.
        raise ConfigError(
            f"{option.name}={text} is smaller than one {BLOCK_SIZE}-byte block "
            f"(allowed: {range_text(option)})"
        )
    return rows


def _parse_mb(option: Option, text: str) -> int:
    if text.isdigit():
        return int(text)
    if not _has_unit(text):
        raise ValueError(text)
    return parse_size_bytes(text) // MIB


def _parse_seconds(option: Option, text: str) -> float:
    match = _DURATION.fullmatch(text)
    if match is None:
        raise ValueError(text)
    number, suffix = match.groups()
    return float(number) * _DURATION_SECONDS[suffix.upper()]


def _parse_choice(option: Option, text: str) -> str:
    upper = text.upper()
    if upper not in option.choices:
        raise ValueError(text)
    return upper


def _parse_text(option: Option, text: str) -> str:
    return text


_PARSERS: dict[str, Callable[[Option, str], Any]] = {
    "int": _parse_int,
    "float": _parse_float,
    "bool": _parse_bool,
    "blocks": _parse_blocks,
    "mb": _parse_mb,
    "seconds": _parse_seconds,
    "choice": _parse_choice,
    "str": _parse_text,
    "path": _parse_text,
}


def number_text(value: float) -> str:
    """2**40 as 1099511627776 and 0.1 as 0.1: no exponents, no trailing .0."""
    return str(int(value)) if float(value).is_integer() else str(value)


def range_text(option: Option) -> str:
    """What the option accepts, as shown in errors and in --help."""
    if option.kind == "bool":
        return "TRUE/FALSE, YES/NO, ON/OFF, 1/0"
    if option.kind == "choice":
        return ", ".join(option.choices) + " (any case)"
    if option.kind in ("str", "path"):
        return "any text" if option.kind == "str" else "a file name, or empty for none"
    low = number_text(option.minimum if option.minimum is not None else 0)
    unit = f" {option.unit}" if option.kind in ("blocks", "mb", "seconds") else ""
    if option.maximum is None:
        span = f"{low}{unit} or more"
    else:
        span = f"{low}–{number_text(option.maximum)}{unit}"
    examples = {"blocks": "a size like 80M, 1G", "mb": "a size like 512M, 1G"}
    examples["seconds"] = "a duration like 90s, 5m, 2h"
    return f"{span}, or {examples[option.kind]}" if option.kind in examples else span


def shown_value(text: str) -> str:
    """The value as echoed in an error: one line, bounded length."""
    if text.isprintable() and len(text) <= 80:
        return text
    return repr(text[:80])


def parse_value(option: Option, raw: str) -> Any:
    """Parse and range-check one raw value (from slob.conf or a flag).

    Raises ConfigError with one line naming the parameter, the value and what is allowed,
    because this is what a user reads when a run refuses to start.
    """
    text = raw.strip()
    if not text and option.kind not in ("str", "path"):
        raise ConfigError(f"{option.name} is empty (allowed: {range_text(option)})")
    try:
        value = _PARSERS[option.kind](option, text)
    except ValueError:
        raise ConfigError(
            f"{option.name}={shown_value(text)} is not {_WHAT[option.kind]} "
            f"(allowed: {range_text(option)})"
        ) from None
    _check_range(option, text, value)
    return value


def check_range(option: Option, value: Any) -> None:
    """Range-check a value that did not come from text (a data set's, a measured rate)."""
    text = number_text(value) if isinstance(value, int | float) else str(value)
    _check_range(option, text, value)


def _check_range(option: Option, text: str, value: Any) -> None:
    if isinstance(value, bool) or not isinstance(value, int | float):
        return
    too_low = option.minimum is not None and value < option.minimum
    too_high = option.maximum is not None and value > option.maximum
    if too_low or too_high:
        # Show what a size converted to, so "SCALE=512K" explains itself.
        converted = ""
        if option.kind in ("blocks", "mb") and not text.isdigit():
            converted = f" (= {value} {option.unit})"
        raise ConfigError(
            f"{option.name}={shown_value(text)}{converted} is out of range "
            f"(allowed: {range_text(option)})"
        )
