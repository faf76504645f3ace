"""The `slob` group and what its commands share: consoles, one-line errors, common options.

Commands parse, call the library and print; no SQL and no engine knowledge here (the
engines' names and target forms come from engines.registry).
"""

from __future__ import annotations

import json
import os
import signal
import sys
from collections.abc import Callable, Sequence
from functools import wraps
from pathlib import Path
from typing import Any

import click
from rich.console import Console

from openslob import __version__
from openslob.config.resolve import Config
from openslob.engines import registry
from openslob.model.errors import Terminated, one_line, raise_terminated
from openslob.model.secrets import hide_passwords_from_ps, scrub
from openslob.model.states import RunStatus

# Redirected output (files, pipes, CI logs) keeps whole table rows instead of wrapping at 80.
_PIPE_WIDTH = 160
out = Console(width=None if sys.stdout.isatty() else _PIPE_WIDTH)
err = Console(stderr=True, width=None if sys.stderr.isatty() else _PIPE_WIDTH)

CONTEXT = {"help_option_names": ["-h", "--help"], "max_content_width": 100}


def friendly_errors(func: Callable[..., Any]) -> Callable[..., Any]:
    """Any error becomes one line on stderr (errors.one_line) and its exit code (2 = bad
    input), with the passwords of the command's targets removed. SLOB_DEBUG=1: traceback."""

    @wraps(func)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        targets = tuple(kwargs.get("targets") or ())
        try:
            return func(*args, **kwargs)
        except Terminated:
            click.echo("slob: terminated (SIGTERM)", err=True)
            sys.exit(Terminated.exit_code)
        except KeyboardInterrupt:
            click.echo("slob: interrupted", err=True)
            sys.exit(130)
        except (click.ClickException, click.exceptions.Abort, click.exceptions.Exit):
            raise
        except Exception as exc:
            if os.environ.get("SLOB_DEBUG"):
                raise
            message, code = one_line(exc, registry.describe_error)
            click.echo(f"slob: error: {scrub(message, targets)}", err=True)
            sys.exit(code)

    return wrapper


# click >= 8.2 raises this for a group run without a command (8.1 prints the help itself)
_HELP_ONLY: Any = getattr(click.exceptions, "NoArgsIsHelpError", ())


class OneLineGroup(click.Group):
    """click's usage errors (a missing path, a bad choice) as one line, like ours."""

    def main(
        self,
        args: Sequence[str] | None = None,
        prog_name: str | None = None,
        complete_var: str | None = None,
        standalone_mode: bool = True,
        **extra: Any,
    ) -> Any:
        # click.Command.main's own parameters, so that its overloads match
        if not standalone_mode:
            return super().main(args, prog_name, complete_var, standalone_mode=False, **extra)
        try:
            code = super().main(args, prog_name, complete_var, standalone_mode=False, **extra)
        except _HELP_ONLY as exc:  # `slob`, `slob server`: click shows the help
            exc.show()
            sys.exit(exc.exit_code)
        except click.ClickException as exc:
            ctx = getattr(exc, "ctx", None)
            more = f" (see {ctx.command_path} --help)" if ctx is not None else ""
            click.echo(f"slob: error: {exc.format_message()}{more}", err=True)
            sys.exit(exc.exit_code)
        except click.exceptions.Abort:
            click.echo("Aborted!", err=True)
            sys.exit(1)
        sys.exit(code if isinstance(code, int) else 0)


data_dir_option = click.option(
    "--data-dir",
    type=click.Path(file_okay=False, path_type=Path),
    envvar="SLOB_DATA_DIR",
    help="Directory of the private servers (env SLOB_DATA_DIR; default "
    "$XDG_DATA_HOME/openslob, or /var/lib/openslob as root).",
)
target_option = click.option(
    "--target",
    "targets",
    multiple=True,
    metavar="TARGET",
    help="Where the database is (default: "
    f"{registry.DEFAULT.private_target}): "
    + "; ".join(p.target_help for p in registry.PLUGINS)
    + ". Repeat for a multi-instance run (or SQLNET_SERVICE_BASE/MAX).",
)


def print_config_messages(config: Config) -> None:
    for note in config.notes:
        err.print(f"[dim]note:[/] {note}", highlight=False)
    for warning in config.warnings:
        err.print(f"[yellow]warning:[/] {warning}", highlight=False)


def notice(msg: str) -> None:
    err.print(f"[dim]note:[/] {msg}", highlight=False)


def echo_json(per_instance: list[Any]) -> None:
    """One instance's document as it is, several as a list (one entry per --target)."""
    click.echo(
        json.dumps(
            per_instance[0] if len(per_instance) == 1 else per_instance, indent=2, default=str
        )
    )


def titled(title: str, label: str, count: int) -> str:
    return f"{title}: {label}" if count > 1 else title


def exit_code(result: dict[str, Any]) -> int:
    """130 after Ctrl-C, 143 after SIGTERM (as a shell reports them), else 1."""
    if result["status"] != RunStatus.INTERRUPTED:
        return 1
    return Terminated.exit_code if result.get("stopped_by") == "SIGTERM" else 130


@click.group(cls=OneLineGroup, context_settings=CONTEXT)
@click.version_option(__version__, prog_name="openslob")
def cli() -> None:
    """openslob: SLOB-style storage testing driven by a real database.

    Every command has --help with examples that run as they are.

    \b
    Quick start:
      slob run                 # private PostgreSQL 18, a data set (4 x 64 MiB) if none, 300 s
      slob run --run-time 60   # a quicker look, on the data set that is there
      slob verify              # prove one row per 8 KiB page, shuffled keys, valid indexes
      slob sweep --sessions 4,8,16 --update-pct 0,20 --run-time 30 --label first
      slob analyze slob-results/sweep-first
    """


def main() -> None:
    hide_passwords_from_ps()  # before anything connects: `ps` shows no --target password
    signal.signal(signal.SIGTERM, raise_terminated)  # like Ctrl-C: clean up, then exit 143
    cli(prog_name="slob")
