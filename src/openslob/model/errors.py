"""Domain exceptions, and how any error becomes one line for the CLI (message, exit code)."""

from __future__ import annotations

from collections.abc import Callable


class OpenslobError(Exception):
    """Base for errors the user can act on; str(err) is the whole message."""

    exit_code = 1


class ConfigError(OpenslobError):
    """Invalid parameter value or combination; raised before anything is touched."""

    exit_code = 2


class ServerError(OpenslobError):
    """The private server could not be started, stopped or reached."""


class SetupError(OpenslobError):
    """Loading or verifying the SLOB data set failed."""


class BusyError(OpenslobError):
    """Another openslob run, setup or destroy holds the data set (or its loops still run)."""


class Terminated(KeyboardInterrupt):
    """SIGTERM (timeout, systemd, CI runners): handled like Ctrl-C, exit code 143. A
    KeyboardInterrupt, so that every cleanup written for Ctrl-C runs for it too."""

    exit_code = 143


def raise_terminated(_signum: int, _frame: object) -> None:
    """SIGTERM handler for the whole command (the run's own window installs its own)."""
    raise Terminated()


# Hints for database errors a user can act on; each engine maps its own error codes to these
# names (EnginePlugin.error_hint).
HINTS = {
    "privilege": "the role lacks a privilege: `slob doctor --target …` lists what it needs",
    "read_only": "the target is read-only (a standby, or read-only set for the role or server)",
    "concurrent": "another slob command may be changing the same data set at the same time",
    "ended": (
        "the server ended the session: a `slob setup` that took over the same tables, a "
        "shutdown, or an administrator"
    ),
}

# A driver's error, as an engine reads it: (its text, a HINTS name or None); None when the
# error is not that engine's.
DatabaseError = Callable[[BaseException], tuple[str, str | None] | None]


def _flat(text: str) -> str:
    """One line: drivers' messages span several (DETAIL, HINT, libpq's second line)."""
    return " ".join(part.strip() for part in text.splitlines() if part.strip())


def one_line(exc: Exception, database: DatabaseError | None = None) -> tuple[str, int]:
    """(message, exit code) of any error, for one line on stderr: domain errors as they are,
    file-system and database errors (`database`: the engines' reading of a driver's error)
    with what failed, anything else named as a bug."""
    if isinstance(exc, OpenslobError):
        return _flat(str(exc)), exc.exit_code
    if isinstance(exc, OSError) and exc.strerror:
        names = [str(n) for n in (exc.filename, exc.filename2) if n is not None]
        prefix = f"{' -> '.join(names)}: " if names else ""
        return prefix + exc.strerror, 1
    known = database(exc) if database is not None else None
    if known is not None:
        text, hint = known
        return f"database error: {_flat(text)}" + (f" ({HINTS[hint]})" if hint else ""), 1
    return (
        f"internal error ({type(exc).__name__}: {_flat(str(exc))}); please report it: "
        "SLOB_DEBUG=1 shows where",
        1,
    )
