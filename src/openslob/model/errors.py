"""Domain exceptions, and how any error becomes one line for the CLI (message, exit code)."""


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


# Hints for database errors a user can act on, by SQLSTATE (PostgreSQL) or error number
# (MariaDB/MySQL).
_PRIVILEGE_HINT = "the role lacks a privilege: `slob doctor --target …` lists what it needs"
_READ_ONLY_HINT = "the target is read-only (a standby, or read-only set for the role or server)"
_CONCURRENT_HINT = "another slob command may be changing the same data set at the same time"
_ENDED_HINT = (
    "the server ended the session: a `slob setup` that took over the same tables, a "
    "shutdown, or an administrator"
)
_PG_HINTS = {
    "42501": _PRIVILEGE_HINT,
    "25006": _READ_ONLY_HINT,
    "40P01": _CONCURRENT_HINT,
    "55P03": _CONCURRENT_HINT,
    "23505": _CONCURRENT_HINT,
    "XX000": _CONCURRENT_HINT,  # "tuple concurrently updated" from concurrent DDL
    "57P01": _ENDED_HINT,
}
_MYSQL_HINTS = {
    1044: _PRIVILEGE_HINT,
    1045: _PRIVILEGE_HINT,
    1142: _PRIVILEGE_HINT,
    1143: _PRIVILEGE_HINT,
    1227: _PRIVILEGE_HINT,
    1290: _READ_ONLY_HINT,
    1792: _READ_ONLY_HINT,
    1205: _CONCURRENT_HINT,
    1213: _CONCURRENT_HINT,
    1927: _ENDED_HINT,  # connection was killed
}


def _flat(text: str) -> str:
    """One line: drivers' messages span several (DETAIL, HINT, libpq's second line)."""
    return " ".join(part.strip() for part in text.splitlines() if part.strip())


def _database_error(exc: Exception) -> str | None:
    """A driver's error as `database error: …` with a hint, or None when it is not one."""
    module = type(exc).__module__
    if module.startswith("psycopg"):
        sqlstate = getattr(exc, "sqlstate", None) or ""
        hinted = sqlstate != "XX000" or "concurrently" in str(exc)  # XX000: internal errors
        hint = _PG_HINTS.get(sqlstate) if hinted else None
        text = str(exc)
    elif module.startswith("pymysql"):
        code = exc.args[0] if exc.args and isinstance(exc.args[0], int) else 0
        hint = _MYSQL_HINTS.get(code)
        text = str(exc.args[1]) if len(exc.args) > 1 else str(exc)
    else:
        return None
    return f"database error: {_flat(text)}" + (f" ({hint})" if hint else "")


def one_line(exc: Exception) -> tuple[str, int]:
    """(message, exit code) of any error, for one line on stderr: domain errors as they are,
    file-system and database errors with what failed, anything else named as a bug."""
    if isinstance(exc, OpenslobError):
        return _flat(str(exc)), exc.exit_code
    if isinstance(exc, OSError) and exc.strerror:
        names = [str(n) for n in (exc.filename, exc.filename2) if n is not None]
        prefix = f"{' -> '.join(names)}: " if names else ""
        return prefix + exc.strerror, 1
    database = _database_error(exc)
    if database is not None:
        return database, 1
    return (
        f"internal error ({type(exc).__name__}: {_flat(str(exc))}); please report it: "
        "SLOB_DEBUG=1 shows where",
        1,
    )
