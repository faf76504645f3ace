"""The `slob` command: a package of small command modules (app: the group and what they
share); each parses, calls the library and prints."""

from openslob.cli import (  # noqa: F401  (they add the commands)
    analysis,
    compare,
    data,
    precondition,
    run,
    scaling,
    server,
)
from openslob.cli.app import cli, main

__all__ = ["cli", "main"]
