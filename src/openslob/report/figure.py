"""What every figure shares: size, colours, number formats, saving to files.

Figures are built without pyplot (no global state, no GUI backend), so they can be drawn from
threads or tests. `save` writes each format whole or not at all. No timestamps go into the
files: the same results give byte-identical figures. (The HTML report draws its own
interactive charts from the same points: report/webcharts.py.)
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, BinaryIO

from matplotlib import patheffects
from matplotlib.figure import Figure
from matplotlib.ticker import FuncFormatter, LogLocator, NullFormatter

from openslob.results.rundir import write_atomic

if TYPE_CHECKING:
    from matplotlib.axes import Axes

DPI = 120
PCT_COLORS = (
    "#1f77b4",
    "#d62728",
    "#2ca02c",
    "#ff7f0e",
    "#9467bd",
    "#8c564b",
    "#e377c2",
    "#17becf",
    "#bcbd22",
    "#7f7f7f",
)
# One line style + marker family per sweep, so overlaid sweeps stay apart even in greyscale.
SWEEP_STYLES = (("-", "o"), ("--", "s"), (":", "^"), ("-.", "D"), ((0, (5, 1, 1, 1)), "v"))
MARK_COLOR = "#d62728"
# a white outline keeps small labels legible where they cross a line or grid
HALO = [patheffects.withStroke(linewidth=2.5, foreground="white")]


def thousands(value: float, _pos: object = None) -> str:
    if value == 0:
        return "0"
    if abs(value) >= 100:
        return f"{value:,.0f}"
    return f"{value:,.3g}"


def number_axis(axis: Any) -> None:
    """Plain numbers with separators: 1,000 rather than 10^3 or 1e3 offsets."""
    axis.set_major_formatter(FuncFormatter(thousands))


def log_axis(axis: Any) -> None:
    """Log scale labelled at 1-2-5 steps: a range inside one decade still gets numbers."""
    axis.set_major_locator(LogLocator(base=10, subs=(1.0, 2.0, 5.0)))
    axis.set_minor_formatter(NullFormatter())
    number_axis(axis)


def new_figure(width: float, height: float) -> Figure:
    return Figure(figsize=(width, height), dpi=DPI, layout="constrained")


def footnote(fig: Figure, text: str) -> None:
    fig.text(0.01, 0.0, text, ha="left", va="top", fontsize=8, color="#555555")


def empty(ax: Axes, text: str) -> None:
    ax.text(0.5, 0.5, text, ha="center", va="center", transform=ax.transAxes, color="#555555")
    ax.set_xticks([])
    ax.set_yticks([])


def save(
    fig: Figure, path_without_suffix: Path | str, formats: Sequence[str] = ("png", "svg")
) -> list[Path]:
    """Write the figure once per format as <path>.<format>; returns the files written."""
    base = Path(path_without_suffix)
    base.parent.mkdir(parents=True, exist_ok=True)
    written = []
    for fmt in formats:
        # append, never with_suffix: "petal.db_read" must not lose its ".db_read"
        target = base.with_name(f"{base.name}.{fmt}")
        # whole or not at all: a full disk must not leave a truncated image behind
        write_atomic(target, _saver(fig, fmt))
        written.append(target)
    return written


def _saver(fig: Figure, fmt: str) -> Callable[[BinaryIO], None]:
    """Writes `fig` as `fmt` into an open binary file (write_atomic's content)."""

    def save(fh: BinaryIO) -> None:
        fig.savefig(fh, format=fmt, dpi=DPI, bbox_inches="tight", metadata=_metadata(fmt))

    return save


def _metadata(fmt: str) -> dict[str, Any] | None:
    # no timestamps in the files: the same results give byte-identical reports
    if fmt == "svg":
        return {"Date": None}
    if fmt == "pdf":
        return {"CreationDate": None}
    return None
