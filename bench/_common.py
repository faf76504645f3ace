"""Shared plumbing of the bench/ scripts: a private server, a data set, spread, output."""

from __future__ import annotations

import argparse
import statistics
import tempfile
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from openslob.config.resolve import Config, resolve
from openslob.engines.postgres.server import EmbeddedServer
from openslob.runner.execute import prepare


def parser(description: str) -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(description=description)
    p.add_argument(
        "--data-dir",
        type=Path,
        default=None,
        help="private server to use (default: a new one in a temp dir, removed after)",
    )
    p.add_argument(
        "--quick", action="store_true", help="tiny settings that only prove the script works (CI)"
    )
    return p


def parse_args(
    doc: str, defaults: dict[str, object], quick: dict[str, object]
) -> argparse.Namespace:
    """--data-dir, --quick and one flag per default (typed by it); --quick swaps in `quick`."""
    p = parser(doc.splitlines()[0])
    for name, default in defaults.items():
        p.add_argument(f"--{name}", type=type(default), default=default)
    args = p.parse_args()
    if args.quick:
        for name, value in quick.items():
            setattr(args, name, value)
    return args


def read_only_data(warmup: float) -> dict[str, object]:
    """The read-only pio scripts' data set and warm-up: 4 x 8,192 rows, a small scan table."""
    return {"SCHEMAS": 4, "SCALE": 8192, "SCAN_TABLE_SZ": 128, "UPDATE_PCT": 0, "WARMUP": warmup}


def ints(text: str) -> list[int]:
    return [int(v) for v in text.split(",") if v.strip()]


class Bench:
    """A private server for one benchmark invocation (destroyed after when it made one)."""

    def __init__(self, data_dir: Path | None, profile: str = "pio") -> None:
        self.own = data_dir is None
        if data_dir is None:
            base = Path(tempfile.mkdtemp(prefix="openslob-bench-", dir="/tmp"))
            base.chmod(0o755)  # created here; the server user must traverse it
            data_dir = base / "srv"
        self.server = EmbeddedServer(data_dir)
        self.server.start(profile)

    def config(self, **params: object) -> Config:
        flags = {k: str(v) for k, v in params.items()}
        return resolve(flags, None, cwd=Path("/"))

    def ensure_data(self, config: Config, max_sessions: int) -> None:
        """Server, capacity, data and procedures, then the data set's lock is let go."""
        prepare(
            config, target=None, data_dir=self.server.data_dir, max_sessions=max_sessions
        ).release()

    def close(self) -> None:
        if self.own:
            self.server.destroy()


def spread(values: Sequence[float], digits: int = 2) -> str:
    if not values:
        return "n/a"
    if len(values) == 1:
        return f"{values[0]:,.{digits}f}"
    return (
        f"{statistics.median(values):,.{digits}f} (min {min(values):,.{digits}f}, "
        f"max {max(values):,.{digits}f}, n={len(values)})"
    )


def print_ab(
    runs: dict[str, list[dict[str, Any]]],
    columns: Sequence[tuple[str, Callable[[dict[str, Any]], float | None], int]],
    ratio_digits: int = 2,
) -> None:
    """A table of two alternated sets of runs (`runs`: "off" and "on"): per column the
    median (min, max) of each and the on/off ratio of the medians."""
    print(f"  {'':<18}  {'off':>34}  {'on':>34}  {'ratio':>6}")
    for name, get, digits in columns:
        off = [v for r in runs["off"] if (v := get(r)) is not None]
        on = [v for r in runs["on"] if (v := get(r)) is not None]
        ratio = (
            f"{statistics.median(on) / statistics.median(off):.{ratio_digits}f}"
            if off and on and statistics.median(off)
            else "n/a"
        )
        print(f"  {name:<18}  {spread(off, digits):>34}  {spread(on, digits):>34}  {ratio:>6}")
