"""run.json "latency_layers": the latency of each layer beneath the op, as distributions.

    {"<layer>": {"measured_at": text, "window": {"count", "p50_us", "p90_us", "p99_us",
                 "p999_us", "max_us"}, "per_s": number|null, "reason": null | text,
                 "reconciliation": {...} (traced layers with a counter to agree with)}}

Layers: `op` (the loops' own histograms, all op types merged: run.json "latency"), and the
kernel's (host/ebpf.py): `db_read_call`, `log_sync`, `device_read`, `device_write`. A layer
not traced has nulls and the reason.

Reconciliation: the traced calls per second against the counter that counts the same thing
(the engine's physical reads: pg_stat_io / InnoDB data reads; /proc/diskstats reads and
writes completed: the device layers count every completion, and `timed_pct` says how many
of them were timed, i.e. their issue was seen under the same dev+sector). The two count
over slightly different spans (a reading is the kernel's print asked for at the boundary, a
few ms after it; an early end of the window: the print nearest it, up to PRINT_EVERY_MS / 2
away), so they agree within RECONCILE_BOUND_PCT, measured on this project's runs (README);
beyond it the run warns.
"""

from __future__ import annotations

from typing import Any

from openslob.host.ebpf import MEASURED_AT, TRACED_LAYERS, Cumulative
from openslob.model.histogram import Histogram
from openslob.model.metrics import OP_KINDS

# |traced - counted| / counted, in %, within which the counts agree (measured: README). The
# read call is exact but for the spans; the device layers lose the completions the kernel's
# recursion guard skips (a completion interrupt on a CPU running another of our probes:
# counted, `skipped_probe_runs`), a few % under load on 2 CPUs.
RECONCILE_BOUND_PCT = {"db_read_call": 5.0, "device_read": 10.0, "device_write": 10.0}
# a layer's rate below which a relative difference says nothing (a handful of calls)
RECONCILE_MIN_PER_S = 20.0
# what each traced layer is counted against: run.json metrics key, and its name
COUNTED_BY = {
    "db_read_call": ("pio_reads_per_s", "the database's physical reads ({db_io})"),
    "device_read": ("device_reads_per_s", "/proc/diskstats reads completed"),
    "device_write": ("device_writes_per_s", "/proc/diskstats writes completed"),
}


def _window(hist: Histogram | None) -> dict[str, Any]:
    def rounded(value: float | None) -> float | None:
        return None if value is None else round(float(value), 1)

    if hist is None:
        return {"count": None, **dict.fromkeys(("p50_us", "p90_us", "p99_us", "p999_us", "max_us"))}
    return {
        "count": hist.count,
        "p50_us": rounded(hist.percentile_us(50)),
        "p90_us": rounded(hist.percentile_us(90)),
        "p99_us": rounded(hist.percentile_us(99)),
        "p999_us": rounded(hist.percentile_us(99.9)),
        "max_us": rounded(hist.max_us()),
    }


def op_histogram(latency: dict[str, Any] | None) -> Histogram | None:
    """All op types' window histograms merged (run.json "latency" buckets)."""
    merged = Histogram()
    for kind in OP_KINDS:
        block = (latency or {}).get(kind) or {}
        hist = Histogram.from_buckets((block.get("histogram") or {}).get("buckets") or [])
        if hist is None:
            return None
        merged.merge(hist)
    return merged


def _per_s(count: int | None, seconds: float | None) -> float | None:
    return round(count / seconds, 1) if count is not None and seconds else None


def _reconcile(
    layer: str, traced_per_s: float | None, metrics: dict[str, Any], terms: dict[str, str]
) -> dict[str, Any] | None:
    if layer not in COUNTED_BY:
        return None
    key, name = COUNTED_BY[layer]
    counted = metrics.get(key)
    diff = None
    if traced_per_s is not None and counted:
        diff = round(100 * (traced_per_s - counted) / counted, 2)
    return {
        "counted_by": name.format_map({"db_io": terms.get("db_io", "the engine's counter")}),
        "counted_per_s": counted,
        "traced_per_s": traced_per_s,
        "difference_pct": diff,
        "bound_pct": RECONCILE_BOUND_PCT[layer],
    }


def latency_layers(
    run: dict[str, Any],
    traced: Cumulative | None,
    reason: str | None,
    skipped: int | None = None,
) -> tuple[dict[str, Any], list[str]]:
    """The run.json block and its warnings (counts that do not reconcile); `skipped`: the
    probe runs the kernel skipped over the whole trace (warm-up included)."""
    seconds = (run.get("window") or {}).get("seconds")
    metrics = run.get("metrics") or {}
    terms = (run.get("engine") or {}).get("terms") or {}
    op = op_histogram(run.get("latency"))
    layers: dict[str, Any] = {
        "op": {
            "measured_at": "the SLOBop, timed inside the database by the work loop",
            "window": _window(op),
            "per_s": _per_s(op.count if op else None, seconds),
            "reason": None if op is not None else "the loops' histograms are missing",
        }
    }
    warnings = []
    for layer in TRACED_LAYERS:
        hist = None if traced is None else traced.hists.get(layer, Histogram())
        per_s = _per_s(hist.count if hist is not None else None, seconds)
        entry: dict[str, Any] = {
            "measured_at": MEASURED_AT[layer],
            "window": _window(hist),
            "per_s": per_s,
            "reason": reason if traced is None else None,
        }
        counted_calls = per_s
        device = layer.startswith("device_")
        if traced is not None and device:  # every completion, timed or not
            counted_calls = _per_s(traced.completed.get(layer, 0), seconds)
        check = None if traced is None else _reconcile(layer, counted_calls, metrics, terms)
        if check is not None and traced is not None and hist is not None and device:
            done = traced.completed.get(layer)
            # requests whose issue was not seen under the same dev+sector are not timed
            check["timed_pct"] = round(100 * hist.count / done, 2) if done else None
            check["skipped_probe_runs"] = skipped
        if check is not None:
            entry["reconciliation"] = check
            diff, counted = check["difference_pct"], check["counted_per_s"]
            if (
                diff is not None
                and abs(diff) > RECONCILE_BOUND_PCT[layer]
                and max(counted, check["traced_per_s"] or 0) >= RECONCILE_MIN_PER_S
            ):
                warnings.append(
                    f"traced {layer} calls ({check['traced_per_s']:,.1f}/s) and "
                    f"{check['counted_by']} ({counted:,.1f}/s) differ by {diff:+.1f} %, beyond the "
                    f"{RECONCILE_BOUND_PCT[layer]:g} % they agree within"
                )
        done = None if traced is None else traced.completed.get(layer)
        if traced is not None and device and done:  # bytes: of every completion
            entry["mean_request_bytes"] = round(traced.bytes.get(layer, 0) / done)
        layers[layer] = entry
    return layers, warnings
