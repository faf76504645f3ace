"""The report figures, drawn from synthetic but realistic run.json dicts (no database)."""

from __future__ import annotations

import csv
import json
import math
import random
from pathlib import Path
from typing import Any

import pytest
from matplotlib.colors import to_hex
from matplotlib.figure import Figure

from openslob.model.histogram import Histogram
from openslob.report import plots
from openslob.results.collect import RunRef, find_runs

PCTS = (0, 10, 20, 30)
SESSIONS = (1, 2, 4, 8)


def op_values(mean_us: float, n: int, seed: int) -> list[int]:
    rng = random.Random(seed)
    return [max(1, int(rng.lognormvariate(math.log(mean_us), 0.35))) for _ in range(n)]


def make_run(
    pct: int, sessions: int, *, label: str = "nvme", speed: float = 1.0, seed: int = 0
) -> tuple[dict[str, Any], dict[str, list[int]]]:
    """A run.json shaped like a real one; IOPS saturates and latency climbs with sessions."""
    reads = speed * 9000 * sessions / (1 + sessions / 6) * (1 - pct / 200)
    writes = reads * pct / 100 * 0.8
    db_read_us = 90 * (1 + sessions / 4) * (1 + pct / 100) / speed
    values = {"select": op_values(db_read_us * 60, 400, seed)}
    if pct:
        values["update"] = op_values(db_read_us * 80, 100, seed + 1)
    latency: dict[str, Any] = {k: None for k in ("select", "update", "scan")}
    for kind, vals in values.items():
        latency[kind] = Histogram.from_values(vals).summary()
    run = {
        "schema_version": 1,
        "tool": "openslob",
        "label": label,
        "status": "complete",
        "config": {"UPDATE_PCT": pct, "SCHEMAS": sessions, "THREADS_PER_SCHEMA": 1},
        "sessions": [{"id": i, "schema": f"user{i + 1}"} for i in range(sessions)],
        "metrics": {
            "pio_reads_per_s": reads,
            "pio_writes_per_s": writes,
            "pio_read_mb_per_s": reads * 8 / 1024,
            "pio_write_mb_per_s": writes * 8 / 1024,
            "db_read_latency_us": db_read_us,
            "device_read_latency_us": db_read_us * 0.7,
        },
        "latency": latency,
    }
    return run, values


def sweep_refs(label: str, *, speed: float = 1.0, pcts=PCTS, sessions=SESSIONS) -> list[RunRef]:
    refs = []
    for i, (pct, n) in enumerate((p, s) for p in pcts for s in sessions):
        run, _ = make_run(pct, n, label=label, speed=speed, seed=i)
        name = f"update_pct-{pct}_sessions-{n}"
        point = {"UPDATE_PCT": pct, "SESSIONS": n}
        refs.append(RunRef(Path("/nonexistent") / label / name, run, label, point))
    return refs


def unmeasured(label: str = "nvme") -> list[RunRef]:
    """A failed run (no DB I/O figures) and one without track_io_timing (no read latency)."""
    failed, _ = make_run(10, 16, label=label)
    failed["metrics"]["pio_reads_per_s"] = None
    no_timing, _ = make_run(20, 16, label=label)
    no_timing["metrics"]["db_read_latency_us"] = None
    root = Path("/nonexistent") / label
    return [
        RunRef(root / "failed", failed, label, {"UPDATE_PCT": 10, "SESSIONS": 16}),
        RunRef(root / "no-timing", no_timing, label, {"UPDATE_PCT": 20, "SESSIONS": 16}),
    ]


def timeseries_rows(tmp_path: Path) -> list[dict[str, str]]:
    """A timeseries.csv written the way results.write_run does, read back with DictReader."""
    columns = [
        "time", "elapsed_s", "phase", "seconds", "device_reads_per_s", "device_writes_per_s",
        "device_read_mb_per_s", "device_write_mb_per_s", "device_read_latency_us",
        "db_reads_per_s", "db_read_latency_us", "select_p50_us", "select_p99_us",
    ]  # fmt: skip
    path = tmp_path / "timeseries.csv"
    with path.open("w", newline="") as fh:
        writer = csv.DictWriter(fh, fieldnames=columns)
        writer.writeheader()
        for i in range(40):
            phase = "warmup" if i < 5 else "window" if i < 38 else "tail"
            slow = 20 <= i < 25  # a garbage-collection stall
            reads = 30000 * (0.4 if slow else 1.0)
            writer.writerow(
                {
                    "time": f"2026-11-22T05:35:{i:02d}+00:00",
                    "elapsed_s": i + 1.0,
                    "phase": phase,
                    "seconds": 1.0,
                    "device_reads_per_s": reads,
                    "device_writes_per_s": 2500.0,
                    "device_read_mb_per_s": reads * 8 / 1024,
                    "device_write_mb_per_s": 2500 * 8 / 1024,
                    "device_read_latency_us": 180.0 if slow else 70.0,
                    "db_reads_per_s": reads * 1.02,
                    # track_io_timing off for two samples: empty cells, drawn as a gap
                    "db_read_latency_us": "" if i in (10, 11) else (250.0 if slow else 95.0),
                    "select_p50_us": 5000.0 if slow else 4000.0,
                    "select_p99_us": 30000.0 if slow else 9000.0,
                }
            )
    with path.open(newline="") as fh:
        return list(csv.DictReader(fh))


def curves(fig: Figure):
    return fig.axes[0].get_lines()


def annotations(ax, color: str) -> list[str]:
    return [t.get_text() for t in ax.texts if to_hex(t.get_color()) == to_hex(color)]


# --- petal --------------------------------------------------------------------------------


def test_petal_one_curve_per_update_pct_in_session_order():
    refs = sweep_refs("nvme")
    random.Random(3).shuffle(refs)  # input order must not matter
    fig = plots.petal(refs)
    ax = fig.axes[0]
    lines = curves(fig)
    assert [line.get_label() for line in lines] == [f"{p} % update" for p in PCTS]
    for pct, line in zip(PCTS, lines, strict=True):
        expected = [make_run(pct, n)[0]["metrics"] for n in SESSIONS]
        xs = [m["pio_reads_per_s"] + m["pio_writes_per_s"] for m in expected]
        assert list(line.get_xdata()) == pytest.approx(xs)
        assert list(line.get_ydata()) == pytest.approx([m["db_read_latency_us"] for m in expected])
        assert annotations(ax, line.get_color()) == [str(n) for n in SESSIONS]
    assert ax.get_xlabel() == "Physical I/O per second (DB)"
    assert ax.get_ylabel() == "DB read latency (µs)"
    assert ax.get_xlim()[0] == 0 and ax.get_ylim()[0] == 0
    assert not fig.texts  # nothing skipped, no footnote


def test_petal_overlay_of_two_sweeps():
    refs = sweep_refs("nvme") + sweep_refs("san", speed=0.5, pcts=(0, 20), sessions=(1, 4, 16))
    fig = plots.petal(refs)
    lines = curves(fig)
    assert len(lines) == 4 + 2
    labels = [line.get_label() for line in lines]
    assert labels[:4] == [f"nvme · {p} % update" for p in PCTS]
    assert labels[4:] == ["san · 0 % update", "san · 20 % update"]
    nvme, san = lines[0], lines[4]
    # the same update % keeps its colour, each sweep its own line style and marker
    assert nvme.get_color() == san.get_color()
    assert nvme.get_linestyle() != san.get_linestyle()
    assert nvme.get_marker() != san.get_marker()
    assert annotations(fig.axes[0], san.get_color())[-3:] == ["1", "4", "16"]
    legend = [t.get_text() for t in fig.axes[0].get_legend().get_texts()]
    assert "san · 20 % update" in legend


def test_petal_counts_runs_not_measured():
    refs = sweep_refs("nvme") + unmeasured()
    fig = plots.petal(refs)
    assert sum(len(line.get_xdata()) for line in curves(fig)) == 16
    footnotes = [t.get_text() for t in fig.texts]
    assert len(footnotes) == 1
    assert footnotes[0].startswith("2 skipped: not measured")
    assert "failed" in footnotes[0] and "no-timing" in footnotes[0]
    # device latency was measured for the run without track_io_timing: only the failed one goes
    fig = plots.petal(refs, latency="device_read")
    assert fig.texts[0].get_text().startswith("1 skipped: not measured")


def test_petal_op_percentiles_merge_every_op_type():
    run, values = make_run(30, 4)
    ref = RunRef(Path("/nonexistent/r"), run)
    merged = Histogram.from_values(values["select"] + values["update"])
    for latency, pct in (("op_p50", 50), ("op_p99", 99)):
        fig = plots.petal([ref], latency=latency)
        (line,) = curves(fig)
        assert line.get_ydata()[0] == pytest.approx(merged.percentile_us(pct))
        assert fig.axes[0].get_ylabel() == f"SLOBop latency p{pct}, all op types (µs)"
    # select alone would give another answer: the update histogram really was merged in
    assert merged.percentile_us(99) != Histogram.from_values(values["select"]).percentile_us(99)


def test_petal_mbps_and_log_axes():
    refs = sweep_refs("nvme", pcts=(20,))
    fig = plots.petal(refs, x="mbps", log_x=True, log_y=True, title="nvme, 8 KiB")
    ax = fig.axes[0]
    (line,) = curves(fig)
    metrics = refs[0].run["metrics"]
    assert line.get_xdata()[0] == pytest.approx(
        metrics["pio_read_mb_per_s"] + metrics["pio_write_mb_per_s"]
    )
    assert ax.get_xlabel() == "Physical I/O MB/s (DB)"
    assert ax.get_xscale() == "log" and ax.get_yscale() == "log"
    assert ax.get_title() == "nvme, 8 KiB"


def test_petal_rejects_unknown_choices_and_survives_nothing_to_plot():
    with pytest.raises(ValueError, match="x must be"):
        plots.petal(sweep_refs("nvme"), x="ops")
    with pytest.raises(ValueError, match="latency must be"):
        plots.petal(sweep_refs("nvme"), latency="p99")
    fig = plots.petal(unmeasured())
    assert not curves(fig)
    assert fig.texts[0].get_text().startswith("2 skipped")


def test_petal_from_sweep_directories(tmp_path: Path):
    """The whole path a report takes: sweep dirs on disk → find_runs → petal."""
    for label in ("nvme", "san"):
        sweep = tmp_path / label
        points = []
        for ref in sweep_refs(label, pcts=(0, 10), sessions=(1, 2)):
            (sweep / ref.name).mkdir(parents=True)
            (sweep / ref.name / "run.json").write_text(json.dumps(ref.run))
            points.append({"name": ref.name, "params": ref.point, "run_dir": ref.name})
        (sweep / "sweep.json").write_text(json.dumps({"label": label, "points": points}))
    fig = plots.petal(find_runs([tmp_path]))
    assert [line.get_label() for line in curves(fig)] == [
        "nvme · 0 % update",
        "nvme · 10 % update",
        "san · 0 % update",
        "san · 10 % update",
    ]


# --- files --------------------------------------------------------------------------------


def test_save_writes_png_and_svg(tmp_path: Path):
    fig = plots.petal(sweep_refs("nvme"))
    written = plots.save(fig, tmp_path / "out" / "petal.db_read")
    assert [p.name for p in written] == ["petal.db_read.png", "petal.db_read.svg"]
    png, svg = written
    assert png.read_bytes().startswith(b"\x89PNG\r\n\x1a\n")
    assert "<svg" in svg.read_text()
    assert plots.save(fig, tmp_path / "only", formats=("svg",)) == [tmp_path / "only.svg"]


# --- time series --------------------------------------------------------------------------


def test_timeseries_panels_phases_and_marks(tmp_path: Path):
    rows = timeseries_rows(tmp_path)
    fig = plots.timeseries(rows, title="nvme 20 %", marks=[(20.0, 25.0, "read latency ×2.5")])
    iops, mbps, lat, ops = fig.axes
    assert iops.get_shared_x_axes().joined(iops, lat)
    # legends are the metrics table's labels
    assert [line.get_label() for line in iops.get_lines()] == [
        "Device reads",
        "Device writes",
        "Physical reads (pg_stat_io)",
    ]
    assert iops.get_lines()[2].get_linestyle() == "--"
    assert len(mbps.get_lines()) == 2
    assert (iops.get_ylabel(), mbps.get_ylabel(), lat.get_ylabel()) == (
        "I/O per second",
        "MB/s",
        "I/O latency (µs)",
    )
    assert ops.get_xlabel() == "Elapsed (s)" and ops.get_ylabel() == "SLOBop latency (µs)"
    # the loop's own median and tail per op type; UPDATEs were not in this series
    assert [line.get_label() for line in ops.get_lines()] == [
        "select p50 latency",
        "select p99 latency",
        "update + commit p50 latency (not measured)",
        "update + commit p99 latency (not measured)",
    ]
    assert list(ops.get_lines()[1].get_ydata()[19:21]) == [9000.0, 30000.0]
    db_lat = lat.get_lines()[1].get_ydata()
    assert math.isnan(db_lat[10]) and math.isnan(db_lat[11]) and db_lat[12] == 95.0
    # warm-up (0..5 s), tail (38..40 s) and the marked episode, on every panel
    for ax in (iops, mbps, lat, ops):
        spans = sorted(p.get_x() for p in ax.patches)
        assert spans == [0.0, 20.0, 38.0]
    texts = [t.get_text() for t in iops.texts]
    assert "warm-up" in texts and " read latency ×2.5" in texts
    assert fig.get_suptitle() == "nvme 20 %"


def test_phase_spans_cover_each_rows_interval():
    rows = [
        {"elapsed_s": "0.8", "seconds": "1.0", "phase": "warmup"},
        {"elapsed_s": "1.8", "seconds": "1.0", "phase": "warmup"},
        {"elapsed_s": "2.8", "seconds": "1.0", "phase": "window"},
    ]
    assert plots.phase_spans(rows, "warmup") == [pytest.approx((-0.2, 1.8))]
    assert plots.phase_spans(rows, "tail") == []


def test_timeseries_without_rows_or_measurements():
    assert isinstance(plots.timeseries([]), Figure)
    rows = [{"elapsed_s": "1", "phase": "window", "device_reads_per_s": ""}]
    fig = plots.timeseries(rows)
    assert fig.axes[0].get_lines()[0].get_label() == "Device reads (not measured)"


# --- latency histogram --------------------------------------------------------------------


def test_latency_histogram_two_op_types():
    run, values = make_run(20, 4)
    fig = plots.latency_histogram(run)
    assert len(fig.axes) == 4  # select and update rows; scan recorded nothing
    hist_sel, curve_sel, hist_upd, _ = fig.axes
    assert hist_sel.get_title().startswith(f"select: {len(values['select']):,} ops")
    assert hist_upd.get_title().startswith(f"update: {len(values['update']):,} ops")
    assert hist_sel.get_xscale() == "log"
    # the step outline covers every op once
    (stairs,) = hist_sel.patches
    assert sum(stairs.get_data().values) == len(values["select"])
    ticks = [t.get_text() for t in curve_sel.get_xticklabels()]
    assert ticks == ["0", "50", "90", "99", "99.9", "99.99"]
    assert curve_sel.get_xticks()[3] == pytest.approx(2.0)  # 99 % is two nines
    (line,) = curve_sel.get_lines()
    assert max(line.get_ydata()) <= Histogram.from_values(values["select"]).max_us() + 1
    assert curve_sel.get_ylabel() == "Latency (µs)"


def test_latency_histogram_without_ops():
    run, _ = make_run(0, 1)
    run["latency"] = {"select": None, "update": None, "scan": None}
    fig = plots.latency_histogram(run, title="empty")
    assert fig.get_suptitle() == "empty"
    assert "no latency histogram" in fig.axes[0].texts[0].get_text()
