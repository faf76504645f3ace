"""What a monitor read with an interval snapshot, kept until the sampler's row asks for it.

A monitor reads who holds the cleanup horizon right with each interval snapshot (the same
moment as the row's counters, and no statement of its own at the row). The row comes later:
up to RESULTS_PER_S's k intervals after its snapshot (runner/batches.py), and after a window
all its late rows close at once, so several snapshots' samples may wait. Each is kept by the
snapshot's identity, with the snapshot itself (so no id is reused while it waits), and
handed over once, stamped with when it was read (`read_epoch`, this host's clock): a hold's
first and last seen times are the snapshots', not the late rows'.
"""

from __future__ import annotations

import time
from typing import Any

# more than the most intervals an answer holds (runner/batches.py MAX_BATCH) and the rows
# closed at once after a window
KEPT = 64


class BySnapshot:
    """Samples by the snapshot they were read with; the oldest go past KEPT."""

    def __init__(self) -> None:
        self._kept: dict[int, tuple[Any, dict[str, Any]]] = {}

    def put(self, snapshot: Any, sample: dict[str, Any]) -> None:
        self._kept[id(snapshot)] = (snapshot, {**sample, "read_epoch": time.time()})
        while len(self._kept) > KEPT:
            del self._kept[next(iter(self._kept))]

    def pop(self, snapshot: Any | None) -> dict[str, Any] | None:
        """The sample read with `snapshot` (None: none kept, or already handed over)."""
        kept = self._kept.pop(id(snapshot), None) if snapshot is not None else None
        return kept[1] if kept is not None and kept[0] is snapshot else None
