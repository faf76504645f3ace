"""What a RAC user reads in `gc` waits, for a Galera node: conflicts, flow control, replication
latency, from the wsrep_% counters of SHOW GLOBAL STATUS (taken with the window's snapshots).

RAC moves blocks between caches (cache fusion) and a session waits for them (gc cr/current
block waits). Galera moves no blocks: every node holds all the data and reads locally; at
COMMIT a transaction's write set is sent to every node in one total order and certified there.
What costs time or work instead:

- certification failures (wsrep_local_cert_failures): a local transaction whose write set
  conflicts with one ordered before it is aborted at COMMIT (the client sees a deadlock);
- brute-force aborts (wsrep_local_bf_aborts): a local transaction holding rows a replicated
  write set needs is aborted by it;
- flow control (wsrep_flow_control_paused_ns): a node whose apply queue is too long makes
  every node stop replicating for a while: the share of the window spent paused;
- replication latency (wsrep_evs_repl_latency): group communication round trip of a write set,
  the average over the window from its (sum, samples) counters.

All null on a server that is no Galera node (no wsrep_local_commits counter, or wsrep off).
"""

from __future__ import annotations

from typing import Any

from openslob.model.metrics import Metric
from openslob.model.rates import per_s, ratio

LATENCY = "wsrep_evs_repl_latency"
# The two numbers kept from LATENCY's "min/avg/max/stddev/samples" (seconds): the window's
# average is their difference over two snapshots.
LATENCY_SUM_S, LATENCY_SAMPLES = f"{LATENCY}_sum_s", f"{LATENCY}_samples"

METRICS = tuple(
    Metric(key, unit, label, live=True, source="engine", **kw)
    for key, unit, label, kw in (
        ("cluster_size", "nodes", "Cluster nodes (at the end)", {"combine": "same", "digits": 0}),
        (
            "cluster_cert_failures_per_s",
            "aborts/s",
            "Certification failures (local commits aborted by a conflict)",
            {"digits": 2},
        ),
        (
            "cluster_bf_aborts_per_s",
            "aborts/s",
            "Brute-force aborts (local transactions aborted by replicated ones)",
            {"digits": 2},
        ),
        (
            "cluster_conflict_pct",
            "%",
            "Transactions aborted by cluster conflicts",
            {"combine": "mean", "digits": 2},
        ),
        (
            "cluster_flow_control_paused_pct",
            "%",
            "Replication paused by flow control",
            {"combine": "mean", "digits": 2},
        ),
        ("cluster_flow_control_sent_per_s", "msgs/s", "Flow control pauses this node asked", {}),
        ("cluster_replicated_mb_per_s", "MB/s", "Write sets replicated", {"digits": 2}),
        ("cluster_received_mb_per_s", "MB/s", "Write sets received", {"digits": 2}),
        (
            "cluster_repl_latency_us",
            "µs",
            "Replication latency (group communication, mean)",
            {"combine": "mean"},
        ),
    )
)

NOTES = (
    "cluster_* figures are the Galera node's wsrep counters: certification failures and "
    "brute-force aborts are transactions aborted by a conflict with another node's write "
    "set (the client sees a deadlock error); flow control paused % is the share of the "
    "window replication stood still; replication latency is wsrep_evs_repl_latency's mean "
    "over the window",
)


def latency_fields(raw: dict[str, str]) -> dict[str, float]:
    """LATENCY's text ("min/avg/max/stddev/samples", seconds) as (sum, samples) numbers."""
    parts = str(raw.get(LATENCY, "")).split("/")
    if len(parts) != 5:
        return {}
    try:
        avg_s, samples = float(parts[1]), float(parts[4])
    except ValueError:
        return {}
    return {LATENCY_SUM_S: avg_s * samples, LATENCY_SAMPLES: samples}


def is_node(status: dict[str, Any]) -> bool:
    return "wsrep_local_commits" in status and bool(status.get("wsrep_cluster_size"))


def cluster_delta(
    before: dict[str, Any], after: dict[str, Any], seconds: float
) -> dict[str, float | None]:
    """The window's cluster figures from two SHOW GLOBAL STATUS dicts (null: no cluster)."""
    if not (is_node(before) and is_node(after)):
        return dict.fromkeys((m.key for m in METRICS), None)

    def d(name: str) -> float | None:
        a, b = after.get(name), before.get(name)
        return None if a is None or b is None else a - b

    cert, bf = d("wsrep_local_cert_failures"), d("wsrep_local_bf_aborts")
    commits = d("wsrep_local_commits")
    aborted = None if cert is None or bf is None else cert + bf
    tried = None if aborted is None or commits is None else aborted + commits
    paused_ns = d("wsrep_flow_control_paused_ns")
    return {
        "cluster_size": after.get("wsrep_cluster_size"),
        "cluster_cert_failures_per_s": per_s(cert, seconds),
        "cluster_bf_aborts_per_s": per_s(bf, seconds),
        "cluster_conflict_pct": ratio(aborted, tried, 100) if tried else None,
        "cluster_flow_control_paused_pct": ratio(paused_ns, seconds * 1e9, 100),
        "cluster_flow_control_sent_per_s": per_s(d("wsrep_flow_control_sent"), seconds),
        "cluster_replicated_mb_per_s": per_s(_mb(d("wsrep_replicated_bytes")), seconds),
        "cluster_received_mb_per_s": per_s(_mb(d("wsrep_received_bytes")), seconds),
        "cluster_repl_latency_us": _latency_us(before, after),
    }


def _mb(value: float | None) -> float | None:
    return None if value is None else value / (1 << 20)


def _latency_us(before: dict[str, Any], after: dict[str, Any]) -> float | None:
    """Mean over the window: Δsum / Δsamples; null without new samples, or when the
    statistics were reset inside the window (samples went down)."""
    n_a, n_b = after.get(LATENCY_SAMPLES), before.get(LATENCY_SAMPLES)
    s_a, s_b = after.get(LATENCY_SUM_S), before.get(LATENCY_SUM_S)
    if n_a is None or n_b is None or s_a is None or s_b is None or n_a <= n_b:
        return None
    return (s_a - s_b) / (n_a - n_b) * 1e6
