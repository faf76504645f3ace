"""Who held back the database's cleanup during a window: the sampler's view over time.

Every interval the engine's monitor names the oldest holder of its cleanup horizon
(PostgreSQL: the oldest xmin of the database; InnoDB: the oldest transaction, whose read
view stops purge) with an id of what it holds (an xmin, a trx id). The same holder seen with
the same id in consecutive samples has held it from the first of them to the last: that span
is what a warning names. A run's own sessions move theirs at every statement, so they never
repeat for long; keeping only repeated sightings keeps the record small in runs of hours.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from openslob.model.clock import iso

# A hold this long (seconds) while updates ran is reported.
HELD_WARN_S = 2.0
MAX_HOLDS = 20


@dataclass
class Hold:
    """One holder keeping the same horizon over a span of the run."""

    kind: str
    holder: str
    xmin: int | None
    first_epoch: float  # the first and the last sighting
    last_epoch: float
    samples: int = 1
    max_age_xids: int | None = None
    info: dict[str, Any] = field(default_factory=dict)  # role, application, state, since, query

    @property
    def seconds(self) -> float:
        return self.last_epoch - self.first_epoch

    def as_dict(self) -> dict[str, Any]:
        return {
            "kind": self.kind,
            "holder": self.holder,
            "xmin": self.xmin,
            "first_seen": iso(self.first_epoch),
            "last_seen": iso(self.last_epoch),
            "held_s": round(self.seconds, 3),
            "samples": self.samples,
            "max_age_xids": self.max_age_xids,
            **self.info,
        }


# A hold is the same holder (kind, holder, xmin) in consecutive samples.
HoldKey = tuple[str, str, int | None]


@dataclass
class HorizonWatch:
    """The samples of one instance, reduced to the holds that lasted and the worst age."""

    holds: dict[HoldKey, Hold] = field(default_factory=dict)
    max_age_xids: int | None = None
    samples: int = 0
    _last: HoldKey | None = None
    _last_epoch: float = 0.0

    def add(self, epoch: float, sample: dict[str, Any]) -> None:
        self.samples += 1
        age = sample.get("age_xids")
        if age is not None:
            self.max_age_xids = max(self.max_age_xids or 0, int(age))
        if sample.get("kind") is None:
            self._last = None
            return
        key: HoldKey = (sample["kind"], sample["holder"], sample.get("xmin"))
        if key == self._last:
            hold = self.holds.get(key)
            if hold is None and len(self.holds) < MAX_HOLDS:
                first, last = sorted((self._last_epoch, epoch))
                hold = self.holds[key] = Hold(
                    key[0], key[1], key[2], first_epoch=first, last_epoch=last
                )
            if hold is not None:  # a row read now may come before earlier-stamped ones
                hold.first_epoch = min(hold.first_epoch, epoch)
                hold.last_epoch = max(hold.last_epoch, epoch)
                hold.samples += 1
                hold.max_age_xids = age if age is not None else hold.max_age_xids
                hold.info = {
                    k: sample.get(k) for k in ("role", "application", "state", "since", "query")
                }
        else:
            self._last, self._last_epoch = key, epoch

    def long_holds(self) -> list[Hold]:
        """Holds of at least HELD_WARN_S, longest first; the run's own connections are
        included (they must never appear: a regression of ours)."""
        holds = [h for h in self.holds.values() if h.seconds >= HELD_WARN_S]
        return sorted(holds, key=lambda h: h.seconds, reverse=True)

    def as_dict(self) -> dict[str, Any]:
        return {
            "samples": self.samples,
            "max_age_xids": self.max_age_xids,
            "holds": [h.as_dict() for h in sorted(self.holds.values(), key=lambda h: -h.seconds)],
        }
