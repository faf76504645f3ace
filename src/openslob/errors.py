"""Domain exceptions. The CLI turns each into a one-line message and an exit code."""


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
