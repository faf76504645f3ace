"""Every openslob parameter, in one declarative table.

slob.conf parsing, CLI flags, ``--help`` text, validation and the ``config`` block of run.json
all come from :data:`OPTIONS`, so a parameter is added or changed in exactly one place.
Precedence is SLOB's own: built-in defaults < slob.conf < command-line flags.
"""

from __future__ import annotations

import re
import shlex
import shutil
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from fractions import Fraction
from pathlib import Path
from types import MappingProxyType
from typing import Any, Literal

from openslob.model.errors import ConfigError

BLOCK_SIZE = 8192
"""Database block size in bytes: SLOB's default, and SCALE's unit when given in bytes."""

MAX_SESSIONS = 4096
"""SLOB caps a run at 4096 sessions; so do we."""

Kind = Literal["int", "float", "bool", "blocks", "mb", "seconds", "choice", "str", "path"]
Source = Literal["default", "file", "flag"]

# Commands that take options. "sweep" repeats runs, so it takes everything "run" takes.
_DATA_SCOPES = frozenset({"setup", "verify", "destroy", "run", "sweep"})
_SETUP = frozenset({"setup"})
_RUN = frozenset({"run", "sweep"})
SCOPES = _DATA_SCOPES

_MIB = 1024 * 1024
_DAY = 86400


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

OPTIONS: tuple[Option, ...] = (
    # --- data set (setup, verify, destroy, run) ---
    Option(
        "SCHEMAS", "int", 4,
        "Number of SLOB schemas (user1..userN); SLOB takes this as the setup.sh/runit.sh "
        "argument.",
        _DATA_SCOPES, slob=False, minimum=1, maximum=MAX_SESSIONS, metavar="N",
    ),
    Option(
        "SCALE", "blocks", 8192,
        "Rows per schema in table CF1; one row fills one 8 KiB block, so this is also blocks "
        "per schema (a size such as 1G is divided by the block size).",
        _DATA_SCOPES, minimum=100, maximum=2**40,
    ),
    Option(
        "SCAN_TABLE_SZ", "blocks", 128,
        "Size of each schema's unindexed scan table CF2, read by full scans when SCAN_PCT > 0; "
        "0 creates no scan table.",
        _DATA_SCOPES, minimum=0, maximum=2**40,
    ),
    Option(
        "LOAD_PARALLEL_DEGREE", "int", 2,
        "Concurrent load streams used by setup.",
        _SETUP, minimum=1, maximum=64,
    ),
    Option(
        "SEED", "int", 1,
        "Seed of the random streams (load order and work-loop keys) so that runs are "
        "reproducible.",
        _DATA_SCOPES, slob=False, minimum=0, maximum=2**31 - 1,
    ),
    # --- the work loop (run) ---
    Option(
        "UPDATE_PCT", "int", 20,
        "Percent of SLOBops that UPDATE WORK_UNIT rows and COMMIT, the rest being SELECTs "
        "(any whole percent, where SLOB allows only 0-50 or 100).",
        _RUN, minimum=0, maximum=100, unit="%", metavar="PCT",
    ),
    Option(
        "SCAN_PCT", "int", 0,
        "Percent of SELECTs that are full scans of the scan table CF2 instead of index range "
        "scans.",
        _RUN, minimum=0, maximum=100, unit="%", metavar="PCT",
    ),
    Option(
        "RUN_TIME", "seconds", 300.0,
        "Length of the run; when WORK_LOOP > 0 the run ends after WORK_LOOP SLOBops instead.",
        _RUN, minimum=1, maximum=30 * _DAY,
    ),
    Option(
        "WORK_LOOP", "int", 0,
        "SLOBops per session; 0 runs for RUN_TIME instead.",
        _RUN, minimum=0, maximum=10**12,
    ),
    Option(
        "WORK_UNIT", "int", 64,
        "Rows (one block each) that every SELECT or UPDATE visits through one index range scan.",
        _RUN, minimum=1, maximum=1024, unit="rows", metavar="ROWS",
    ),
    Option(
        "REDO_STRESS", "choice", "LITE",
        "LITE updates two columns per row; HEAVY updates every pad column and writes far more "
        "WAL (redo).",
        _RUN, choices=("LITE", "HEAVY"),
    ),
    Option(
        "THREADS_PER_SCHEMA", "int", 1,
        "Sessions connected to each schema.",
        _RUN, minimum=1, maximum=MAX_SESSIONS,
    ),
    Option(
        "SESSIONS", "int", 0,
        "Total sessions of the run, spread over the schemas; 0 means SCHEMAS x "
        "THREADS_PER_SCHEMA.",
        _RUN, slob=False, minimum=0, maximum=MAX_SESSIONS,
    ),
    Option(
        "HOT_SCHEMA_FREQUENCY", "int", 0,
        "Every Nth SLOBop goes to schema user1 instead of the session's own schema; 0 disables "
        "the hot schema.",
        _RUN, minimum=0, maximum=10**6,
    ),
    Option(
        "DO_HOTSPOT", "bool", False,
        "Send every HOTSPOT_FREQUENCY-th SLOBop into a small hot region of each table.",
        _RUN,
    ),
    Option(
        "HOTSPOT_MB", "mb", 8,
        "Size of the hot region used when DO_HOTSPOT is TRUE.",
        _RUN, minimum=1,
    ),
    Option(
        "HOTSPOT_OFFSET_MB", "mb", 16,
        "Where the hot region starts, measured from the start of the table.",
        _RUN, minimum=0,
    ),
    Option(
        "HOTSPOT_FREQUENCY", "int", 3,
        "With DO_HOTSPOT, every Nth SLOBop picks its keys inside the hot region.",
        _RUN, minimum=1, maximum=10**6,
    ),
    Option(
        "THINK_TM_FREQUENCY", "int", 0,
        "Every Nth SLOBop is followed by think time; 0 disables think time.",
        _RUN, minimum=0, maximum=10**6,
    ),
    Option(
        "THINK_TM_MIN", "float", 0.1,
        "Shortest think time in seconds.",
        _RUN, minimum=0, maximum=3600, unit="seconds", metavar="SECONDS",
    ),
    Option(
        "THINK_TM_MAX", "float", 0.5,
        "Longest think time in seconds; each pause is drawn uniformly between THINK_TM_MIN and "
        "THINK_TM_MAX.",
        _RUN, minimum=0, maximum=3600, unit="seconds", metavar="SECONDS",
    ),
    Option(
        "PAGE_SIZE", "choice", "16K",
        "Database page size of a private server that chooses it per data directory (each "
        "size has its own server); a sweep over several sizes is the block-size study.",
        _DATA_SCOPES, slob=False, choices=("4K", "8K", "16K", "32K", "64K"),
    ),
    Option(
        "SQLNET_SERVICE_BASE", "str", "",
        "Multi-instance runs as in SLOB: with SQLNET_SERVICE_MAX=N the instances are the libpq "
        "services BASE1..BASEN (pg_service.conf) when no --target is given.",
        _DATA_SCOPES,
    ),
    Option(
        "SQLNET_SERVICE_MAX", "int", 0,
        "Number of instances BASE1..BASEN of SQLNET_SERVICE_BASE; sessions go round robin over "
        "them. 0: one instance (--target).",
        _DATA_SCOPES, minimum=0, maximum=64,
    ),
    Option(
        "EXTERNAL_SCRIPT", "path", "",
        "Executable called with pre, post and end around the run; empty for none.",
        _RUN,
    ),
    Option(
        "WARMUP", "seconds", 5.0,
        "Load applied before the measured window opens; nothing is recorded during warm-up.",
        _RUN, slob=False, minimum=0, maximum=_DAY,
    ),
    Option(
        "SAMPLE_INTERVAL", "seconds", 1.0,
        "Time between samples of database and OS counters (rows of timeseries.csv).",
        _RUN, slob=False, minimum=0.1, maximum=60,
    ),
)  # fmt: skip

OPTIONS_BY_NAME: Mapping[str, Option] = MappingProxyType({o.name: o for o in OPTIONS})

SLOB_KEYS_NOT_IMPLEMENTED: tuple[tuple[str, str], ...] = (
    ("DATABASE_STATISTICS_TYPE", "openslob always snapshots the database's own statistics"),
    ("ADMIN_SQLNET_SERVICE", "Oracle SQL*Net setting; openslob has its own connection options"),
    ("DBA_PRIV_USER", "Oracle admin account; openslob has its own connection options"),
    ("SYSDBA_PASSWD", "Oracle admin password; ignored and never recorded"),
    ("ADMIN_CONNECT_STRING", "Oracle connect string; openslob has its own connection options"),
    ("NON_ADMIN_CONNECT_STRING", "Oracle connect string; openslob has its own connection options"),
    ("BLOCK_SZ", f"sizes such as SCALE=1G are always converted with {BLOCK_SIZE}-byte blocks"),
    ("UNIQUE_INDEX", "openslob decides the index type of CF1 itself"),
    ("OBFUSCATE_COLUMNS", "Oracle column-name obfuscation does not apply"),
    ("SHARED_DATA_MODULUS", "option of older SLOB 2.x releases, not in current SLOB"),
    ("DO_UPDATE_HOTSPOT", "option of older SLOB 2.x releases; use DO_HOTSPOT"),
    ("HOTSPOT_PCT", "option of older SLOB 2.x releases; use HOTSPOT_FREQUENCY"),
    ("THINK_TM_MODULUS", "option of older SLOB 2.x releases; use THINK_TM_FREQUENCY"),
)
_NOT_IMPLEMENTED = dict(SLOB_KEYS_NOT_IMPLEMENTED)


def options_for(scope: str) -> tuple[Option, ...]:
    """The options a command uses, in table order; a typo in ``scope`` fails loudly."""
    if scope not in SCOPES:
        raise ValueError(f"unknown scope {scope!r}; known: {', '.join(sorted(SCOPES))}")
    return tuple(o for o in OPTIONS if scope in o.scopes)


# --------------------------------------------------------------------------- values

_INT = re.compile(r"[+-]?\d+")
_DECIMAL = re.compile(r"[+-]?(?:\d+(?:\.\d*)?|\.\d+)")
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
    return float(text)


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
    return parse_size_bytes(text) // _MIB


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


def _shown(text: str) -> str:
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
            f"{option.name}={_shown(text)} is not {_WHAT[option.kind]} "
            f"(allowed: {range_text(option)})"
        ) from None
    _check_range(option, text, value)
    return value


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
            f"{option.name}={_shown(text)}{converted} is out of range "
            f"(allowed: {range_text(option)})"
        )


# --------------------------------------------------------------------------- slob.conf


@dataclass
class ConfFile:
    """What a slob.conf assigns, as raw strings, plus what we noticed while reading it."""

    path: Path
    values: dict[str, str] = field(default_factory=dict)
    lines: dict[str, int] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)


_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
_ASSIGNMENT = re.compile(r"([A-Za-z_][A-Za-z0-9_]*)=(.*)", re.DOTALL)

# shlex removes quotes, but bash expands $ outside single quotes only. We hand each "$" to
# shlex as <ESC><ESC><END>, with ESC declared an escape character: shlex then collapses the
# pair to one ESC outside single quotes and in double quotes (where ESC escapes ESC) and keeps
# it verbatim inside single quotes. Limitation: a backslash-escaped "\$" is not recognised.
_ESC, _END = "\x02", "\x03"
_DOLLAR_LITERAL = _ESC + _ESC + _END
_DOLLAR_EXPAND = _ESC + _END
_REFERENCE = re.compile(
    re.escape(_DOLLAR_LITERAL)
    + "|"
    + re.escape(_DOLLAR_EXPAND)
    + r"(?:\{([A-Za-z_]\w*)(?:(:?[-=])([^}]*))?\}|([A-Za-z_]\w*))?"
)


def _split_words(line: str) -> list[str]:
    """Split one line like bash would (quotes, escapes, # comments), marking each $."""
    lexer = shlex.shlex(line.replace("$", _DOLLAR_LITERAL), posix=True)
    lexer.whitespace_split = True
    lexer.commenters = "#"
    lexer.escape += _ESC
    return list(lexer)


def _assignments(words: list[str]) -> list[tuple[str, str]] | None:
    """The NAME=VALUE pairs of a line, or None when the line is something else.

    ``export A B C`` only marks variables for export, so bare names there are skipped.
    """
    if words and words[0] == "export":
        words = [w for w in words[1:] if not _NAME.fullmatch(w)]
    matches = [_ASSIGNMENT.fullmatch(w) for w in words]
    if not all(matches):
        return None
    return [(m[1], m[2]) for m in matches if m is not None]


def _expand(marked: str, shell: Mapping[str, str], where: str, warnings: list[str]) -> str:
    """Expand $NAME, ${NAME} and ${NAME:-default} from variables set earlier in the file."""

    def replace(match: re.Match[str]) -> str:
        if match[0] == _DOLLAR_LITERAL:
            return "$"
        name = match[1] or match[4]
        if name is None:
            return "$"  # a lone $ stays a $, as in bash
        value = shell.get(name)
        operator = match[2]
        if operator and (value is None or (operator.startswith(":") and value == "")):
            return match[3]
        if value is None:
            warnings.append(f"{where}: ${name} is not set earlier in this file; left as is")
            return "$" + match[0][len(_DOLLAR_EXPAND) :]
        return value

    expanded = _REFERENCE.sub(replace, marked)
    return expanded.replace(_DOLLAR_LITERAL, "$").replace(_DOLLAR_EXPAND, "$")


def _record(conf: ConfFile, name: str, value: str, lineno: int, noted: set[str]) -> None:
    """File one assignment as a value, a note or a warning. Never echo values: some are
    passwords (SYSDBA_PASSWD), and unknown keys may be too."""
    where = f"{conf.path}:{lineno}"
    if name in OPTIONS_BY_NAME:
        conf.values[name] = value
        conf.lines[name] = lineno
    elif name in _NOT_IMPLEMENTED:
        if name not in noted:  # one note per key, however often it is assigned
            noted.add(name)
            reason = _NOT_IMPLEMENTED[name]
            conf.notes.append(f"{where}: {name} is accepted but not used ({reason})")
    elif name.upper() in OPTIONS_BY_NAME:
        conf.warnings.append(
            f"{where}: unknown parameter {name} ignored (slob.conf keys are upper case: "
            f"{name.upper()})"
        )
    else:
        conf.warnings.append(f"{where}: unknown parameter {name} ignored")


def _read_text(path: Path) -> str:
    try:
        data = path.read_bytes()
    except FileNotFoundError:
        raise ConfigError(f"{path}: no such slob.conf file") from None
    except OSError as err:
        raise ConfigError(f"{path}: cannot read slob.conf ({err.strerror})") from None
    if b"\0" in data:  # no text file holds NUL bytes (UTF-16 ones do: not a shell file)
        raise ConfigError(
            f"{path}: not a text file (NUL bytes at offset {data.index(0)}); slob.conf is "
            "KEY=VALUE lines in plain text (UTF-8)"
        )
    # utf-8-sig: a byte-order mark from a Windows editor must not hide the first key.
    return data.decode("utf-8-sig", errors="replace")


_FIRST_NAME = re.compile(r"\s*(?:export\s+)?([A-Za-z_][A-Za-z0-9_]*)")


def _known_key(line: str) -> str | None:
    """The openslob parameter a line is about (its first name), if any."""
    first = _FIRST_NAME.match(line)
    return first[1] if first and first[1] in OPTIONS_BY_NAME else None


def _malformed(where: str, line: str, problem: str, warnings: list[str]) -> None:
    """A line that is not plain assignments: an error when it is about one of our keys (a
    run with that key's default is not the run asked for), else a warning."""
    name = _known_key(line)
    if name is not None:
        raise ConfigError(
            f"{where}: {name} not read ({problem}); write it as {name}=VALUE, no spaces around ="
        )
    warnings.append(f"{where}: {problem}; line ignored")


def read_slob_conf(path: Path | str) -> ConfFile:
    """Read a SLOB slob.conf the way bash ``source`` would, without running it.

    Assignments (optionally ``export``-ed) are kept; later ones win; ``$VAR`` refers to earlier
    assignments. Unbalanced quotes (bash would read the next lines into the value), a line
    about one of our keys that is not a plain assignment (``UPDATE_PCT = 50``) and a binary
    file stop the command; other lines are warned about and ignored.
    """
    conf = ConfFile(path=Path(path))
    shell: dict[str, str] = {}
    noted: set[str] = set()
    for lineno, line in enumerate(_read_text(conf.path).splitlines(), start=1):
        where = f"{conf.path}:{lineno}"
        if _ESC in line or _END in line:
            _malformed(where, line, "control characters in the line", conf.warnings)
            continue
        try:
            words = _split_words(line)
        except ValueError:  # shlex: no closing quotation / no escaped character
            name = _known_key(line)
            raise ConfigError(
                f"{where}: unbalanced quotes{f' in the line for {name}' if name else ''}: "
                "bash would read the lines after it into the value; close the quote"
            ) from None
        pairs = _assignments(words)
        if pairs is None:
            _malformed(where, line, "not a KEY=VALUE assignment", conf.warnings)
            continue
        for name, marked in pairs:
            # Warn about unset variables only in our own parameters: in other values (say a
            # password "pa$$word") the "variable name" would echo part of a secret.
            sink = conf.warnings if name in OPTIONS_BY_NAME else []
            shell[name] = _expand(marked, shell, where, sink)
            _record(conf, name, shell[name], lineno, noted)
    return conf


# --------------------------------------------------------------------------- resolved config


@dataclass(frozen=True, eq=False)
class Config(Mapping[str, Any]):
    """Every parameter's effective value by slob.conf name, and where each came from."""

    params: Mapping[str, Any]
    sources: Mapping[str, Source]
    conf_path: Path | None = None
    notes: tuple[str, ...] = ()
    warnings: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        # Read-only views: a Config is shared by the runner, the engine and the report.
        object.__setattr__(self, "params", MappingProxyType(dict(self.params)))
        object.__setattr__(self, "sources", MappingProxyType(dict(self.sources)))
        object.__setattr__(self, "notes", tuple(self.notes))
        object.__setattr__(self, "warnings", tuple(self.warnings))

    def __getitem__(self, name: str) -> Any:
        return self.params[name]

    def __iter__(self) -> Iterator[str]:
        return iter(self.params)

    def __len__(self) -> int:
        return len(self.params)

    @property
    def session_count(self) -> int:
        """Sessions the run connects: SESSIONS, or SCHEMAS x THREADS_PER_SCHEMA when 0."""
        return self["SESSIONS"] or self["SCHEMAS"] * self["THREADS_PER_SCHEMA"]

    def as_dict(self) -> dict[str, Any]:
        """Plain JSON-ready dict in table order (run.json's ``config`` block)."""
        return {o.name: self.params[o.name] for o in OPTIONS if o.name in self.params}


def _find_conf(conf: Path | str | None, cwd: Path) -> Path | None:
    """The slob.conf to read: the one asked for (must exist) or ./slob.conf if present."""
    if conf is not None:
        path = cwd / Path(conf).expanduser()
        if not path.is_file():
            raise ConfigError(f"--conf {conf}: no such file")
        return path
    default = cwd / "slob.conf"
    return default if default.is_file() else None


def _parse_at(option: Option, raw: str, origin: str) -> Any:
    """parse_value, with the error prefixed by where the value came from."""
    try:
        return parse_value(option, raw)
    except ConfigError as err:
        raise ConfigError(f"{origin}: {err}") from None


def _anchor(value: str, directory: Path) -> str:
    """A relative EXTERNAL_SCRIPT in slob.conf is relative to slob.conf (SLOB runs from
    the directory holding it), not to wherever openslob was started."""
    if not value:
        return value
    path = Path(value).expanduser()
    return str(path if path.is_absolute() else directory / path)


def resolve(
    flags: Mapping[str, str | None],
    conf: Path | str | None,
    *,
    cwd: Path | None = None,
    scope: str | None = None,
) -> Config:
    """Effective configuration: defaults < slob.conf < flags, validated as a whole.

    ``flags`` maps option names to raw strings (None = not given). ``conf`` is an explicit
    slob.conf (must exist); without it ``./slob.conf`` in ``cwd`` is used when present.
    ``scope`` limits cross-parameter checks to the ones the command depends on.
    """
    unknown = sorted(set(flags) - set(OPTIONS_BY_NAME))
    if unknown:
        raise ValueError(f"unknown option names: {', '.join(unknown)}")
    base = cwd if cwd is not None else Path.cwd()
    conf_path = _find_conf(conf, base)
    conf_file = read_slob_conf(conf_path) if conf_path is not None else None

    params = {o.name: o.default for o in OPTIONS}
    sources: dict[str, Source] = dict.fromkeys(params, "default")
    if conf_file is not None:
        for name, raw in conf_file.values.items():
            option = OPTIONS_BY_NAME[name]
            if not raw.strip() and option.kind not in ("str", "path"):
                continue  # SLOB's scripts use ${KEY:=default}: an empty value means default
            if flags.get(name) is not None:
                continue  # overridden: a bad value in the file must not block the flag
            value = _parse_at(option, raw, f"{conf_file.path}:{conf_file.lines[name]}")
            params[name] = _anchor(value, conf_file.path.parent) if option.kind == "path" else value
            sources[name] = "file"
    for name, raw in flags.items():
        if raw is not None:
            params[name] = _parse_at(OPTIONS_BY_NAME[name], raw, OPTIONS_BY_NAME[name].flag)
            sources[name] = "flag"

    config = Config(
        params=params,
        sources=sources,
        conf_path=conf_path,
        notes=tuple(conf_file.notes) if conf_file else (),
        warnings=tuple(conf_file.warnings) if conf_file else (),
    )
    check_combination(config, scope=scope)
    return config


# --------------------------------------------------------------------------- cross checks


def _check_work_unit(c: Config) -> str | None:
    # Keys are drawn from [WORK_UNIT+1, SCALE-WORK_UNIT]; that range must not be empty.
    if c["SCALE"] > 2 * c["WORK_UNIT"]:
        return None
    return (
        f"SCALE={c['SCALE']} must be greater than 2 x WORK_UNIT={c['WORK_UNIT']} "
        f"(keys are drawn from WORK_UNIT+1 to SCALE-WORK_UNIT)"
    )


def _check_think_time(c: Config) -> str | None:
    if c["THINK_TM_MIN"] <= c["THINK_TM_MAX"]:
        return None
    return (
        f"THINK_TM_MIN={number_text(c['THINK_TM_MIN'])} must not exceed "
        f"THINK_TM_MAX={number_text(c['THINK_TM_MAX'])}"
    )


def _check_scan_table(c: Config) -> str | None:
    if c["SCAN_PCT"] == 0 or c["SCAN_TABLE_SZ"] > 0:
        return None
    return f"SCAN_PCT={c['SCAN_PCT']} needs a scan table, but SCAN_TABLE_SZ=0"


def _check_hotspot(c: Config) -> str | None:
    if not c["DO_HOTSPOT"]:
        return None
    end_mb = c["HOTSPOT_OFFSET_MB"] + c["HOTSPOT_MB"]
    table_bytes = c["SCALE"] * BLOCK_SIZE
    if end_mb * _MIB <= table_bytes:
        return None
    return (
        f"HOTSPOT_OFFSET_MB={c['HOTSPOT_OFFSET_MB']} + HOTSPOT_MB={c['HOTSPOT_MB']} ends at "
        f"{end_mb} MB, beyond the table (SCALE={c['SCALE']} rows = "
        f"{number_text(round(table_bytes / _MIB, 1))} MB)"
    )


def _check_sessions(c: Config) -> str | None:
    if c["SESSIONS"] or c.session_count <= MAX_SESSIONS:
        return None
    return (
        f"SCHEMAS={c['SCHEMAS']} x THREADS_PER_SCHEMA={c['THREADS_PER_SCHEMA']} = "
        f"{c.session_count} sessions, more than {MAX_SESSIONS}"
    )


def _check_external_script(c: Config) -> str | None:
    """The hook must be there and executable before the run, not found missing at its end."""
    script = c["EXTERNAL_SCRIPT"]
    if not script or shutil.which(script):  # a bare name is looked up on PATH, as bash does
        return None
    path = Path(script)
    if "/" not in script:
        problem = "no such command on PATH"
    elif not path.exists():
        problem = "no such file"
    elif path.is_dir():
        problem = "a directory, not a program"
    else:
        problem = f"not executable (chmod +x {_shown(script)})"
    return f"EXTERNAL_SCRIPT={_shown(script)}: {problem}"


# Each check with the parameters it reads: a command runs only the checks whose parameters it
# uses, so `setup` is not refused over, say, think times it never applies.
_CHECKS: tuple[tuple[tuple[str, ...], Callable[[Config], str | None]], ...] = (
    (("SCALE", "WORK_UNIT"), _check_work_unit),
    (("THINK_TM_MIN", "THINK_TM_MAX"), _check_think_time),
    (("SCAN_PCT", "SCAN_TABLE_SZ"), _check_scan_table),
    (("DO_HOTSPOT", "HOTSPOT_MB", "HOTSPOT_OFFSET_MB", "SCALE"), _check_hotspot),
    (("SESSIONS", "SCHEMAS", "THREADS_PER_SCHEMA"), _check_sessions),
    (("EXTERNAL_SCRIPT",), _check_external_script),
)


def check_combination(config: Config, *, scope: str | None = None) -> None:
    """Reject parameter combinations that cannot run; one line naming the parameters."""
    for names, check in _CHECKS:
        if scope is not None and not all(scope in OPTIONS_BY_NAME[n].scopes for n in names):
            continue
        problem = check(config)
        if problem:
            raise ConfigError(problem)
