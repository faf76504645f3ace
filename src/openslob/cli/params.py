"""click glue for the option table: one flag per option a command uses, and the Config.

Flags are plain strings defaulting to None, so "not given" is distinguishable from a value
equal to the default and slob.conf can fill the gap; parsing happens in config.resolve().
"""

from __future__ import annotations

import math
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

import click

from openslob.config.option import BLOCK_SIZE, Option, number_text, range_text
from openslob.config.options import OPTIONS_BY_NAME, options_for
from openslob.config.resolve import Config, resolve

F = TypeVar("F", bound=Callable[..., Any])


class FloatRange(click.FloatRange):
    """click.FloatRange that refuses nan and inf, which its bounds let through (a NaN
    compares false with every bound)."""

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> Any:
        number = super().convert(value, param, ctx)
        if not math.isfinite(number):
            self.fail(f"{value!r} is not a finite number ({self._describe_range()})", param, ctx)
        return number


def _human_bytes(size: int) -> str:
    for unit, power in (("TiB", 4), ("GiB", 3), ("MiB", 2), ("KiB", 1)):
        if size >= 1024**power:
            return f"{size / 1024**power:.4g} {unit}"
    return f"{size} bytes"


def _default_text(option: Option) -> str:
    default = option.default
    if option.kind == "blocks":
        return f"{default} rows = {_human_bytes(default * BLOCK_SIZE)}"
    if option.kind == "bool":
        return "TRUE" if default else "FALSE"
    if option.kind in ("choice", "str", "path"):
        return default or "none"
    unit = f" {option.unit}" if option.unit and option.unit != "%" else option.unit
    return f"{number_text(default)}{unit}"


def help_text(option: Option) -> str:
    """--help text: the sentence, default, allowed values and the slob.conf key."""
    key = f"slob.conf {option.name}" + ("" if option.slob else ", openslob only")
    return f"{option.help} [default: {_default_text(option)}; allowed: {range_text(option)}; {key}]"


def add_options(scope: str) -> Callable[[F], F]:
    """Decorator adding ``--conf`` and one flag per option the command ``scope`` uses.

    Flags are plain strings defaulting to None, so "not given" is distinguishable from a value
    equal to the default and slob.conf can fill the gap; parsing happens in resolve().
    """
    options = options_for(scope)

    def decorate(func: F) -> F:
        for option in reversed(options):  # click lists options in reverse order of decoration
            func = click.option(
                option.flag,
                option.param,
                type=str,
                default=None,
                metavar=option.metavar,
                help=help_text(option),
            )(func)
        return click.option(
            "--conf",
            "conf",
            type=click.Path(dir_okay=False, path_type=Path),
            default=None,
            metavar="FILE",
            help="slob.conf to read [default: ./slob.conf if present]",
        )(func)

    return decorate


def config_from_click(kwargs: dict[str, Any], scope: str) -> Config:
    """Pop the option keywords that add_options(scope) created and resolve them."""
    flags = {o.name: kwargs.pop(o.param, None) for o in options_for(scope)}
    conf = kwargs.pop("conf", None)
    return resolve(flags, conf, scope=scope)


# The options that choose a private server (`slob server …`, `slob calibrate`): an engine
# may keep one server per value (a page size).
SERVER_OPTIONS = ("PAGE_SIZE",)


def add_server_options(func: F) -> F:
    """One flag per SERVER_OPTIONS option (no --conf: a server command reads no slob.conf);
    a choice is click's, so a bad value is a usage error of the command."""
    for name in reversed(SERVER_OPTIONS):
        option = OPTIONS_BY_NAME[name]
        kind = click.Choice(option.choices, case_sensitive=False) if option.choices else str
        func = click.option(
            option.flag, option.param, type=kind, default=None, help=help_text(option)
        )(func)
    return func


def server_config(kwargs: dict[str, Any]) -> Config:
    """Pop the flags add_server_options created; the Config a private server is chosen by."""
    flags = {name: kwargs.pop(OPTIONS_BY_NAME[name].param, None) for name in SERVER_OPTIONS}
    return resolve(flags, None)
