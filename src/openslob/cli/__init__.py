"""The `slob` command: a package of small command modules (app: the group and what they
share); each parses, calls the library and prints."""

from openslob.cli import analysis, compare, data, run, scaling, server  # noqa: F401  (they add the commands)
from openslob.cli.app import cli, main

__all__ = ["cli", "main"]
