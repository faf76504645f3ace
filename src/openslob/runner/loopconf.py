"""The work loop's conf for one phase (a LoopParams record, model/loop.py, and the JSON every
engine's loop reads), and SLOB's EXTERNAL_SCRIPT hook."""

from __future__ import annotations

import os
import subprocess
from typing import Any

from openslob.config.resolve import Config
from openslob.model.loop import LoopParams
from openslob.model.rate import session_rate, uniform_offset

EXTERNAL_SCRIPT_TIMEOUT_S = 300
# A loop's read-only transaction ends once it is this old (seconds), so that no session
# holds back the cleanup horizon for longer (an engine's loop may use it: PostgreSQL's
# procedure keeps its first statement's snapshot until it commits).
SNAPSHOT_RELEASE_S = 0.010
# A session waiting for its next intended start (RATE) sleeps at most this long at a time, and
# then ends its transaction if it is older than SNAPSHOT_RELEASE_S: a sleep inside a
# statement holds a snapshot (PostgreSQL), so a long wait must not be one statement.
SCHEDULE_NAP_S = 0.050


def loop_params(
    config: Config,
    *,
    record: bool,
    start_epoch: float,
    until_epoch: float | None,
    loops: int,
    seed: float | None,
    session_id: int = 0,
    rows_per_mb: int = (1 << 20) // 8192,
    interval_s: float | None = None,
    carry: bool = False,
    stream: bool = False,
    batch: int = 1,
    batch_offset: int = 0,
) -> LoopParams:
    """The loop's parameters for one phase (the config's reads of the loop, all here).
    `rows_per_mb`: the instance's EnginePlugin.rows_per_mb (the hotspot's keys)."""
    p = config.p
    scale, work_unit = p.scale, p.work_unit
    sessions = p.session_count  # (not len(session_schemas): that is O(sessions) per CALL)
    first = p.hotspot_offset_mb * rows_per_mb + work_unit
    last = min(first + p.hotspot_mb * rows_per_mb - 1, scale)
    return LoopParams(
        update_pct=p.update_pct,
        scan_pct=p.scan_pct,
        work_unit=work_unit,
        scale=scale,
        heavy=p.redo_stress == "HEAVY",
        loops=loops,
        until_epoch=until_epoch,
        interval_s=interval_s,
        start_epoch=start_epoch,
        record=record,
        hot_schema_frequency=p.hot_schema_frequency,
        hotspot_frequency=p.hotspot_frequency if p.do_hotspot else 0,
        hotspot_first_key=first,
        hotspot_last_key=max(first, last),
        think_frequency=p.think_tm_frequency,
        think_min=p.think_tm_min,
        think_max=p.think_tm_max,
        release_s=SNAPSHOT_RELEASE_S,
        # RATE: this session's share, its arrivals, where a UNIFORM schedule starts
        rate=session_rate(p.rate, sessions),
        rate_dist=p.rate_dist,
        rate_offset=uniform_offset(p.rate, sessions, session_id),
        nap_s=SCHEDULE_NAP_S,
        seed=seed,
        carry=carry,
        stream=stream,
        batch=batch,
        batch_offset=batch_offset,
    )


def loop_conf(
    config: Config,
    *,
    record: bool,
    start_epoch: float,
    until_epoch: float | None,
    loops: int,
    seed: float | None,
    session_id: int = 0,
    rows_per_mb: int = (1 << 20) // 8192,  # EnginePlugin.rows_per_mb of the instance
    interval_s: float | None = None,
    carry: bool = False,
    stream: bool = False,
    batch: int = 1,
    batch_offset: int = 0,
) -> dict[str, Any]:
    """The conf JSON of loop_params (model/loop.py declares its keys)."""
    return loop_params(
        config,
        record=record,
        start_epoch=start_epoch,
        until_epoch=until_epoch,
        loops=loops,
        seed=seed,
        session_id=session_id,
        rows_per_mb=rows_per_mb,
        interval_s=interval_s,
        carry=carry,
        stream=stream,
        batch=batch,
        batch_offset=batch_offset,
    ).to_json()


def external_script(script: str, phase: str, env: dict[str, str]) -> str | None:
    """SLOB's EXTERNAL_SCRIPT hook: `script pre|post|end`. Returns an error text or None."""
    if not script:
        return None
    try:
        proc = subprocess.run(
            [script, phase],
            env={**os.environ, **env},
            check=False,
            timeout=EXTERNAL_SCRIPT_TIMEOUT_S,
            capture_output=True,
            text=True,
        )
    except (OSError, subprocess.TimeoutExpired) as exc:
        return f"EXTERNAL_SCRIPT {phase}: {exc}"
    if proc.returncode != 0:
        return f"EXTERNAL_SCRIPT {phase} exited {proc.returncode}: {proc.stderr.strip()[-200:]}"
    return None
