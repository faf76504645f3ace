"""SLOB's slob.conf, read the way bash ``source`` would read it, without running it."""

from __future__ import annotations

import re
import shlex
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

from openslob.config.options import NOT_IMPLEMENTED, OPTIONS_BY_NAME
from openslob.model.errors import ConfigError


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
    elif name == "OBFUSCATE_COLUMNS":
        if name not in noted:
            noted.add(name)
            conf.notes.append(
                f"{where}: OBFUSCATE_COLUMNS: openslob's data is random (incompressible, "
                "COMPRESS_RATIO=1) whatever its value; COMPRESS_RATIO sets another ratio"
            )
    elif name in NOT_IMPLEMENTED:
        if name not in noted:  # one note per key, however often it is assigned
            noted.add(name)
            reason = NOT_IMPLEMENTED[name]
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
