"""The report's cluster block: what a RAC user reads in `gc` waits, for a multi-primary
cluster (a Galera node's cluster_* figures, model/metrics.py via the engine), per node and in
total. Nothing when no instance is a cluster node (the figures are null there)."""

from __future__ import annotations

from typing import Any

from openslob.report.blocks import fmt, fmt_us, section, table

COLUMNS = (
    ("cert fail/s", "cluster_cert_failures_per_s", 2),
    ("BF aborts/s", "cluster_bf_aborts_per_s", 2),
    ("aborted %", "cluster_conflict_pct", 2),
    ("FC paused %", "cluster_flow_control_paused_pct", 2),
    ("FC sent/s", "cluster_flow_control_sent_per_s", 1),
    ("repl MB/s", "cluster_replicated_mb_per_s", 2),
    ("recv MB/s", "cluster_received_mb_per_s", 2),
)


def cluster_section(run: dict[str, Any]) -> list[str]:
    total = run.get("metrics") or {}
    if total.get("cluster_size") is None:
        return []
    parts = run.get("instances") or []
    rows = [_row(str(k + 1), p.get("metrics") or {}) for k, p in enumerate(parts)]
    rows.append(_row("total" if parts else "this node", total))
    lines = section(f"Cluster replication ({fmt(total['cluster_size'], 0)} nodes)")
    lines += table(["node", *(c for c, _, _ in COLUMNS), "repl latency"], rows)
    lines += [
        "(a certification cluster: every node holds all the data and reads locally; at COMMIT",
        " the write set goes to every node and is certified: a conflict aborts the transaction",
        " (cert fail: at its own COMMIT; BF: by another node's write set). FC paused: share of",
        " the window replication stood still for a node whose apply queue was full. Where RAC",
        " shows gc waits, the replication cost is in the update + commit latency above.)",
    ]
    if total.get("cluster_conflict_pct") is None:
        lines.append("aborted % n/a: no local transaction was tried in the window (no update)")
    if total.get("cluster_repl_latency_us") is None:
        lines.append("repl latency n/a: no write set was replicated in the window")
    return lines


def _row(name: str, metrics: dict[str, Any]) -> list[str]:
    cells = [fmt(metrics.get(key), digits) for _, key, digits in COLUMNS]
    return [name, *cells, fmt_us(metrics.get("cluster_repl_latency_us"))]
