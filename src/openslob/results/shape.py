"""What a run.json's fields must be for a renderer to read them: checked once, when it is
loaded (rundir.load_run), so that an edited or damaged file is one error naming the file and
the field, never an internal error deep in a report, a plot or a comparison.

Only fields that are present are checked (older files lack some); a field of the wrong type
(a list where an object belongs, text where a number does) makes the file damaged.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from openslob.config.options import OPTIONS_BY_NAME
from openslob.model.errors import OpenslobError

_NUMBER = (int, float)
_NONE = type(None)
# null is allowed wherever a run may have measured nothing (io, statements, intervals, ...)
TOP_LEVEL: dict[str, tuple[type, ...]] = {
    "schema_version": (int,),
    "label": (str, _NONE),
    "status": (str, _NONE),
    "error": (str, _NONE),
    "config": (dict, _NONE),
    "engine": (dict, _NONE),
    "host": (dict, _NONE),
    "window": (dict, _NONE),
    "sessions": (list, _NONE),
    "metrics": (dict, _NONE),
    "latency": (dict, _NONE),
    "waits": (list, _NONE),
    "io": (list, _NONE),
    "statements": (list, _NONE),
    "warnings": (list, _NONE),
    "notes": (list, _NONE),
    "intervals": (dict, _NONE),
}
# Config values by option kind (None: not set).
_CONFIG_KINDS: dict[str, tuple[type, ...]] = {
    "int": (int,),
    "blocks": (int,),
    "mb": (int,),
    "float": _NUMBER,
    "seconds": _NUMBER,
    "bool": (bool,),
    "choice": (str,),
    "str": (str,),
    "path": (str,),
}
WINDOW_NUMBERS = ("seconds", "requested_seconds", "warmup_seconds")


def _name(value: Any) -> str:
    return {dict: "an object", list: "a list", str: "text", bool: "true/false"}.get(
        type(value), "null" if value is None else "a number"
    )


def _is(value: Any, types: tuple[type, ...]) -> bool:
    """isinstance, but true/false is no number (bool is an int to Python)."""
    if isinstance(value, bool) and bool not in types:
        return False
    return isinstance(value, types)


def check_shape(run: dict[str, Any], file: Path) -> None:
    """OpenslobError naming the file and the first field of the wrong type."""
    problem = _first_problem(run)
    if problem:
        raise OpenslobError(f"{file}: a damaged run.json ({problem})")


def _first_problem(run: dict[str, Any]) -> str | None:
    for key, types in TOP_LEVEL.items():
        if key in run and not _is(run[key], types):
            return f"{key} is {_name(run[key])}"
    for key, value in (run.get("config") or {}).items():
        option = OPTIONS_BY_NAME.get(key)
        if option is not None and value is not None and not _is(value, _CONFIG_KINDS[option.kind]):
            return f"config.{key} is {_name(value)}"
    for key, value in (run.get("metrics") or {}).items():  # numbers, flags (saturated)
        if value is not None and not _is(value, (*_NUMBER, bool)):
            return f"metrics.{key} is {_name(value)}"
    for key in WINDOW_NUMBERS:
        value = (run.get("window") or {}).get(key)
        if value is not None and not _is(value, _NUMBER):
            return f"window.{key} is {_name(value)}"
    for key, value in (run.get("latency") or {}).items():
        if value is not None and not isinstance(value, dict):
            return f"latency.{key} is {_name(value)}"
    for key in ("sessions", "waits", "io", "statements"):
        if any(not isinstance(item, dict) for item in run.get(key) or []):
            return f"an entry of {key} is not an object"
    return None
