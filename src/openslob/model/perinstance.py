"""Each instance's own time-series columns in a run over several (timeseries.csv, the HTML
time series, the live metrics' `instance` label): which figures, and how a column is named,
`key@n` with n the instance's number in the report's Instances table (run.json
instances[n-1])."""

from __future__ import annotations

# Its throughput, reads and their latency, commits, and its SLOBops' p99 (the loops'
# histograms): what tells one instance from another over time.
INSTANCE_KEYS: tuple[str, ...] = (
    "slobops_per_s",
    "pio_reads_per_s",
    "db_read_latency_us",
    "commits_per_s",
    "op_p99_us",
)


def instance_column(key: str, number: int) -> str:
    """The column of instance `number` (1, 2, ...) for figure `key`."""
    return f"{key}@{number}"


def split_instance_column(column: str) -> tuple[str, int] | None:
    """(figure key, instance number) of a per-instance column; None for any other."""
    key, at, number = column.rpartition("@")
    return (key, int(number)) if at and number.isdigit() else None


def instance_keys(count: int) -> list[str]:
    """The per-instance columns of a run over `count` instances (none over one: the
    totals are its own), figure by figure."""
    if count < 2:
        return []
    return [instance_column(k, n) for k in INSTANCE_KEYS for n in range(1, count + 1)]
