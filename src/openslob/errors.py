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
