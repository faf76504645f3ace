"""The run directory on disk: its name, writing its files whole or not at all, reading run.json.

    run.json        everything measured (results/build.py; SCHEMA_VERSION)
    report.txt      the AWR-like text report, rendered from run.json only (by the caller)
    timeseries.csv  one row per sampling interval (written as the run goes: stream.py)

Files are written to a temporary file and renamed: a full disk leaves no truncated run.json.
Reading takes any schema_version this tool knows; run.json files written before engines
declared their words (engine.terms) get them from their engine's plug-in.
"""

from __future__ import annotations

import json
import os
import re
import secrets
import tempfile
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, BinaryIO

from openslob.model import engine as engines
from openslob.model.errors import ConfigError, OpenslobError
from openslob.results.shape import check_shape

SCHEMA_VERSION = 2
RUN_FILE = "run.json"


def path_name(label: str | None, default: str = "") -> str:
    """The one way a label becomes part of a file name (run, repeat and sweep directories):
    letters, digits, '.', '_' and '-' only, no leading dot, so no label names a directory
    outside --results-dir or a hidden one (`x/../../escaped` -> `x-..-..-escaped`)."""
    safe = re.sub(r"[^A-Za-z0-9._-]+", "-", label or "").strip("-.")
    return safe or default


def run_directory(parent: Path, label: str | None) -> Path:
    stamp = datetime.now(UTC).strftime("%Y%m%dT%H%M%SZ")
    safe = path_name(label)
    path = parent / (f"{stamp}-{safe}" if safe else stamp)
    suffix = 1
    while path.exists():
        suffix += 1
        path = parent / f"{stamp}-{safe or 'run'}-{suffix}"
    path.mkdir(parents=True)
    return path


# A directory name is at most 255 bytes (NAME_MAX); the time stamp and suffixes need room.
MAX_LABEL_BYTES = 200


def check_results_place(parent: Path, label: str | None, option: str = "--results-dir") -> None:
    """Refuse (exit 2), before anything runs, a label too long to name a directory and a
    results directory that cannot be created or written: not after the run."""
    try:
        (label or "").encode()
    except UnicodeEncodeError as exc:  # bytes that are no UTF-8 (a shell's, a file name's)
        raise ConfigError(
            f"--label {label!r} is not UTF-8 text (byte {exc.start + 1}); use UTF-8 text"
        ) from None
    if label and len(label.encode()) > MAX_LABEL_BYTES:
        raise ConfigError(
            f"--label is {len(label.encode())} bytes long; at most {MAX_LABEL_BYTES} "
            "(it names the results directory)"
        )
    existing = parent.absolute()
    while not existing.exists():
        existing = existing.parent
    if not existing.is_dir():
        raise ConfigError(f"{option} {parent}: {existing} is not a directory")
    if not os.access(existing, os.W_OK | os.X_OK):
        raise ConfigError(f"{option} {parent}: {existing} is not writable")
    try:  # root passes access() everywhere: /proc, /sys and read-only mounts say no here
        os.rmdir(tempfile.mkdtemp(prefix=".slob-probe-", dir=existing))
    except OSError as exc:
        raise ConfigError(
            f"{option} {parent}: cannot create a directory in {existing} ({exc.strerror})"
        ) from None


class NotSaved(OpenslobError):
    """A finished run whose files could not all be written (a full or read-only disk): the
    message names each file and why; `report` is the text report, for the terminal."""

    def __init__(self, message: str, report: str) -> None:
        super().__init__(message)
        self.report = report


def write_atomic(
    path: Path, content: str | bytes | Callable[[BinaryIO], None], *, sync: bool = True
) -> Path:
    """Write `path` whole or not at all: into a hidden file beside it, flushed to the disk,
    then renamed over it. A full disk leaves the old file (or none), never a truncated one.
    `content` is text, bytes, or a function writing to the open binary file. `sync=False`
    leaves the write-back to the page cache (a file rewritten during a measured window:
    a killed client keeps it, a crashed host may not)."""
    tmp = path.with_name(f".{path.name}.{secrets.token_hex(4)}.tmp")
    try:
        # O_EXCL: never follow or reuse someone's file; 0o666 less the umask, like open()
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o666)
        try:
            with os.fdopen(fd, "wb") as fh:
                if callable(content):
                    content(fh)
                else:
                    fh.write(content.encode() if isinstance(content, str) else content)
                fh.flush()
                if sync:
                    os.fsync(fh.fileno())
            os.replace(tmp, path)
        except BaseException:
            tmp.unlink(missing_ok=True)
            raise
    except OSError as exc:
        # name the file the user asked for, not our temporary one (a full disk names none)
        exc.filename, exc.filename2 = str(path), None
        raise
    return path


def run_text(run: dict[str, Any]) -> str:
    """run.json's text: indented, but the per-interval table one row per line (an 8 h run at
    1 s intervals has 28,800 rows; a number per line would make it ten times longer)."""
    table = run.get("intervals")
    if not isinstance(table, dict) or not table.get("rows"):
        return json.dumps(run, indent=2, default=str) + "\n"
    marker = "@@intervals@@"
    text = json.dumps({**run, "intervals": marker}, indent=2, default=str)
    head = {k: v for k, v in table.items() if k != "rows"}
    rows = ",\n    ".join(json.dumps(row, default=str) for row in table["rows"])
    compact = json.dumps(head, default=str)[:-1] + f', "rows": [\n    {rows}\n  ]}}'
    return text.replace(json.dumps(marker), compact, 1) + "\n"


def write_run(
    path: Path,
    run: dict[str, Any],
    report: str = "",
    *,
    sync: bool = True,
    cut_short: list[str] | tuple[str, ...] = (),
) -> int:
    """run.json and report.txt (when given), each written whole or not at all (the time
    series was written as the run went: results/stream.py); the bytes written. Every file
    is tried; then NotSaved names those that failed, and the streamed files that a full disk
    `cut_short` (StreamFile.lost)."""
    files = {RUN_FILE: run_text(run)}
    if report:
        files["report.txt"] = report
    failed = []
    for name, text in files.items():
        try:
            write_atomic(path / name, text, sync=sync)
        except OSError as exc:
            failed.append(f"{name} ({exc.strerror or exc})")
    if failed or cut_short:
        what = [f"{', '.join(failed)} not written"] if failed else []
        what += [f"{', '.join(cut_short)} cut short"] if cut_short else []
        raise NotSaved(
            f"the run finished, but not all of its results were saved in {path}: "
            f"{'; '.join(what)}; the report is printed above",
            report,
        )
    return sum(len(text.encode()) for text in files.values())


# What the text report reads without a fallback (analyses and plots take any key missing).
REPORT_KEYS = ("config", "engine", "host", "latency", "metrics", "sessions", "status", "window")


def load_run(path: Path, require: tuple[str, ...] = ()) -> dict[str, Any]:
    """run.json of a run directory (or the file itself), checked for a known schema; a
    damaged file (truncated, not an object, `require`d keys missing) is one error naming it."""
    file = path / "run.json" if path.is_dir() else path
    try:
        run = json.loads(file.read_text())
    except (OSError, UnicodeDecodeError, ValueError) as exc:
        raise OpenslobError(f"{file}: not a readable run.json ({exc})") from exc
    if not isinstance(run, dict):
        raise OpenslobError(f"{file}: not a run.json (a JSON {type(run).__name__}, not an object)")
    version = run.get("schema_version")
    if not isinstance(version, int) or version > SCHEMA_VERSION:
        raise OpenslobError(
            f"{file}: schema_version {version!r} is newer than this tool "
            f"understands ({SCHEMA_VERSION}); upgrade openslob"
        )
    check_shape(run, file)
    require_keys(run, require, file)
    return with_engine_words(run)


def with_engine_words(run: dict[str, Any]) -> dict[str, Any]:
    """An older run.json's engine gets the terms and page size its plug-in declares now."""
    engine = run.get("engine")
    if not isinstance(engine, dict) or "terms" in engine:
        return run
    plugin = engines.known(engine.get("name"))
    if plugin is None:  # an engine this version does not know: default words
        return run
    settings = engine.get("settings") or {}
    engine["terms"] = dict(plugin.capabilities.terms)
    engine.setdefault("title", plugin.title)
    for key, value in plugin.run_description(settings).items():
        engine.setdefault(key, value)
    return run


def require_keys(run: dict[str, Any], keys: tuple[str, ...], file: Path) -> None:
    """A run.json that parses but lacks what a renderer reads is named, not a KeyError."""
    missing = [key for key in keys if key not in run]
    if missing:
        raise OpenslobError(f"{file}: a damaged run.json (no {', '.join(missing)})")
