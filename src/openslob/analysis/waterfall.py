"""The latency waterfall: one figure per layer and percentile, op → DB read call → device →
layers measured outside this host, and the orders that cannot be true.

A read op contains at least one read call, a read call waits for the device, and the device
waits for what is beneath it (hypervisor, array): at the same percentile, a layer cannot be
faster than the layer beneath it. When one is (by more than ORDER_TOLERANCE, above the
histograms' 0.8 % bucket error), one of the two figures is wrong — measured at a different
place, over a different time, or of other I/O — and `order_warnings` says which layers, at
which percentile, and both values. (op ≥ read call holds when ops do physical reads: the
pio profile on a data set larger than the cache; a cached op can be faster.)

Pure logic on declared data (Layer); `waterfall(run)` builds the layers from run.json only:
latency (the op layer when latency_layers has none), latency_layers (the kernel-traced
layers: present or null with the reason) and external_series.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from openslob.analysis.figures import interval_rows

PERCENTILES = ("p50", "p90", "p99", "p99.9")
ORDER_TOLERANCE = 0.02
ORDER_WARNING = "impossible latency order"
# Traced layers of the host, top to bottom, by side (run.json latency_layers keys).
READ_CHAIN = ("op", "db_read_call", "device_read")
WRITE_CHAIN = ("device_write",)
LAYER_NAMES = {
    "op": "op (SLOBop select)",
    "db_read_call": "DB read call",
    "device_read": "device read",
    "device_write": "device write",
    "log_sync": "log sync",
}
_KEYS = {"p50": "p50_us", "p90": "p90_us", "p99": "p99_us", "p99.9": "p999_us"}
_COLUMN = {"p50": "p50", "p90": "p90", "p99": "p99", "p99.9": "p999"}


@dataclass(frozen=True)
class Layer:
    """One layer's latency: window figure per percentile (None: not measured) and, per
    interval number, the interval's figure per percentile."""

    key: str
    name: str
    measured_at: str
    side: str  # "read", "write" or "" (log sync: in no chain)
    window_us: Mapping[str, float | None]
    intervals_us: Mapping[str, Mapping[int, float | None]] = field(default_factory=dict)
    reason: str | None = None  # why it was not measured
    external: bool = False
    window_note: str = ""  # how the window figure was made, when not from a histogram

    @property
    def measured(self) -> bool:
        """Any figure at all, of the window or of an interval."""
        return any(v is not None for v in self.window_us.values()) or any(
            v is not None for per in self.intervals_us.values() for v in per.values()
        )


def _per_interval(rows: list[dict[str, Any]], prefix: str) -> dict[str, dict[int, float | None]]:
    out: dict[str, dict[int, float | None]] = {}
    for pct in PERCENTILES:
        column = f"{prefix}_{_COLUMN[pct]}_us"
        if rows and column in rows[0]:
            out[pct] = {int(r["interval"]): r.get(column) for r in rows}
    return out


def _host_layer(key: str, block: Mapping[str, Any] | None, rows: list[dict[str, Any]]) -> Layer:
    window = (block or {}).get("window") or {}
    side = "read" if key in READ_CHAIN else "write" if key in WRITE_CHAIN else ""
    return Layer(
        key=key,
        name=LAYER_NAMES.get(key, key),
        measured_at=str((block or {}).get("measured_at") or "not measured"),
        side=side,
        window_us={pct: window.get(_KEYS[pct]) for pct in PERCENTILES},
        intervals_us=_per_interval(rows, key),
        reason=(block or {}).get("reason") if block else "not traced in this run",
    )


def _op_from_latency(run: Mapping[str, Any], rows: list[dict[str, Any]]) -> Layer | None:
    select = (run.get("latency") or {}).get("select")
    if not select:
        return None
    return Layer(
        key="op",
        name=LAYER_NAMES["op"],
        measured_at="inside the database's work loop: one SLOBop select (loop histograms)",
        side="read",
        window_us={pct: select.get(_KEYS[pct]) for pct in PERCENTILES},
        intervals_us=_per_interval(rows, "select"),
    )


def _external_layer(entry: Mapping[str, Any]) -> Layer | None:
    """An imported latency series as a layer: a percentile series on its percentile's row
    (window: the mean of its intervals' values), any other on a row "mean" of its own,
    compared with nothing (a mean is no percentile)."""
    if entry.get("unit") != "us":
        return None
    stat = str(entry.get("stat"))
    values = dict(zip(entry.get("intervals") or [], entry.get("values") or [], strict=False))
    how = "mean of the intervals' values"
    return Layer(
        key=f"external:{entry['name']}",
        name=str(entry["name"]),
        measured_at=str(entry.get("layer")),
        side=str(entry.get("side") or "read"),
        window_us={stat: (entry.get("window") or {}).get("mean")},
        intervals_us={stat: values},
        external=True,
        window_note=how if stat in PERCENTILES else how + " (the series is a mean)",
    )


def waterfall(run: Mapping[str, Any]) -> list[Layer]:
    """The run's layers, top to bottom: op, DB read call, device read, device write, log
    sync (each traced layer present or with its reason), then the external series."""
    rows = interval_rows(run)
    traced = run.get("latency_layers") or {}
    layers = []
    for key in ("op", "db_read_call", "device_read", "device_write", "log_sync"):
        layer = _host_layer(key, traced[key], rows) if key in traced else None
        if key == "op":
            # The read chain's top is the SLOBop select, from the loop's own histograms
            # (per interval too); latency_layers' op holds every kind of op (updates too).
            layer = _op_from_latency(run, rows) or layer
        elif layer is None and traced:
            layer = _host_layer(key, None, rows)
        if layer is not None:
            layers.append(layer)
    layers += [x for e in run.get("external_series") or [] if (x := _external_layer(e))]
    return layers


def _faster(upper: float | None, lower: float | None) -> bool:
    return upper is not None and lower is not None and upper < lower * (1 - ORDER_TOLERANCE)


def _chain(layers: Sequence[Layer], side: str) -> list[Layer]:
    """The side's measured layers top to bottom (one not measured is skipped): the host's in
    chain order, the external ones last (beneath the device; their order among themselves
    is unknown, so none is compared with another)."""
    order = READ_CHAIN if side == "read" else WRITE_CHAIN
    measured = [x for x in layers if x.measured]
    host = sorted(
        (x for x in measured if not x.external and x.key in order), key=lambda x: order.index(x.key)
    )
    return host + [x for x in measured if x.external and x.side == side]


def _pairs(chain: list[Layer]) -> list[tuple[Layer, Layer]]:
    """Each layer with the nearest one above it."""
    pairs = []
    host = [x for x in chain if not x.external]
    for k, lower in enumerate(chain):
        above = host[:k] if not lower.external else host
        if above:
            pairs.append((above[-1], lower))
    return pairs


def _finding(upper: Layer, lower: Layer, pct: str) -> str | None:
    """Where, at `pct`, the upper layer is faster: the window's figures (the host's layers),
    else the intervals' (how many, the worst); None when nowhere."""
    a, b = upper.window_us.get(pct), lower.window_us.get(pct)
    if _faster(a, b) and not lower.external:
        return f"{pct} in the window ({a:,.0f} us against {b:,.0f} us)"
    bad = [
        (n, up, low)
        for n, up in (upper.intervals_us.get(pct) or {}).items()
        if _faster(up, low := (lower.intervals_us.get(pct) or {}).get(n))
    ]
    if not bad:
        return None
    n, up, low = max(bad, key=lambda t: (t[2] or 0) - (t[1] or 0))
    return f"{pct} in {len(bad)} interval(s), e.g. #{n} ({up:,.0f} us against {low:,.0f} us)"


def order_warnings(layers: Sequence[Layer]) -> list[str]:
    """A warning per pair of layers where the upper one is faster than the one beneath at
    the same percentile, naming both layers, each percentile and both values."""
    warnings = []
    for side in ("read", "write"):
        for upper, lower in _pairs(_chain(layers, side)):
            found = [f for pct in PERCENTILES if (f := _finding(upper, lower, pct))]
            if found:
                warnings.append(
                    f"{ORDER_WARNING}: {upper.name} ({upper.measured_at}) is faster than "
                    f"{lower.name} beneath it ({lower.measured_at}) at {'; '.join(found)}: "
                    "that cannot be true; one of the two is measured elsewhere or wrong"
                )
    return warnings
