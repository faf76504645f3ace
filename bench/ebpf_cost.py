#!/usr/bin/env python3
"""ebpf_cost: what tracing the latency layers (host/ebpf.py) costs: SLOBops/s and server CPU.

Runs on a private PostgreSQL (pio profile: direct I/O, a cache far smaller than the data
set), as root (libbpf, BTF). Three measurements, each printed with its spread:

1. The read call itself: a child process, "the server", reads one cached 8 KiB block with
   pread in a loop, untraced and traced alternately (`--repeats` each, best of 5 x `--calls`
   per run): what the syscall tracepoints and their programs add to one call.
2. Alternated runs (default): per session count, tracing off (--trace-layers off) and on,
   off on off on ... `--repeats` times; the median (min, max) of SLOBops/s, server CPU (% of
   all CPUs), DB CPU per SLOBop and host CPU busy, the ratio of the medians and the ratios
   of each pair (a traced run against the untraced one just before it). This VM's runs
   differ by +-10 % between identical runs: the ratios cannot show 2 %.
3. `--toggle S`: one run of `--seconds` per session count, untraced by itself, while this
   script attaches the probes for S seconds and detaches them for S seconds, alternately
   (loaded once; an attach is a syscall); each 1 s interval wholly in one state is a sample
   of it. Drift cannot enter (the states alternate every few seconds of the same run), and
   the ratios come with two standard errors. The method to quote.

With `--bpf_stats 1` the kernel also times the probe programs themselves
(kernel.bpf_stats_enabled, set back after): their CPU in % of the server's, with and
without what the timing and the calls cost by themselves (empty programs at the same
tracepoints, attached beside them), and per traced read. It adds two clock reads and the
empty programs to every run, so quote the throughput ratios from a run without it.
Numbers for people to read (README "ebpf_cost"); the machine may be shared (say so).

    python bench/ebpf_cost.py --sessions 32,4 --seconds 600 --toggle 3
    python bench/ebpf_cost.py --sessions 4,32 --seconds 10 --repeats 10 [--bpf_stats 1]
"""

from __future__ import annotations

import csv
import re
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from datetime import datetime
from pathlib import Path
from typing import Any

from _common import Bench, ints, parse_args, print_ab, spread

from openslob.host import ebpf
from openslob.host.devices import devices_for_path
from openslob.runner.execute import run_benchmark

COLUMNS = (
    ("SLOBops/s", lambda r: r["metrics"]["slobops_per_s"], 1),
    ("server CPU %", lambda r: r["metrics"].get("server_cpu_pct"), 1),
    ("DB CPU us/op", lambda r: _per_op(r, "db_cpu_s"), 1),
    ("host CPU busy %", lambda r: r["metrics"].get("cpu_busy_pct"), 1),
    ("traced reads/s", lambda r: r["latency_layers"]["db_read_call"]["per_s"], 0),
    ("probes % of server CPU", lambda r: _probes_of_server(r, corrected=False), 2),
    ("  less kernel timing", lambda r: _probes_of_server(r, corrected=True), 2),
    ("probe ns per read", lambda r: _probe_ns_per_read(r), 0),
)  # fmt: skip
_PROBES = re.compile(r"its probes ([0-9.]+) s of CPU in ([0-9.]+) s, of which ([0-9.]+) s")


def _probes(run: dict[str, Any]) -> tuple[float, float, float] | None:
    """(probe CPU s, s traced, s of it the kernel's own timing) from the run's note
    (--bpf_stats 1 runs only)."""
    for note in run.get("notes", []):
        match = _PROBES.search(str(note))
        if match and float(match.group(2)) > 0:
            return float(match.group(1)), float(match.group(2)), float(match.group(3))
    return None


def _probes_of_server(run: dict[str, Any], corrected: bool) -> float | None:
    """The probes' CPU in % of the server processes' CPU (server_cpu_pct is of all CPUs).
    `corrected`: less what the kernel's timing of them and their calls cost (the empty
    control programs at the same tracepoints), i.e. the probes' own work."""
    probes, server = _probes(run), run["metrics"].get("server_cpu_pct")
    cpus = (run.get("host") or {}).get("cpus")
    if probes is None or not server or not cpus:
        return None
    cpu_s = probes[0] - probes[2] if corrected else probes[0]
    return 100 * (cpu_s / probes[1]) / (server / 100 * cpus)


def _probe_ns_per_read(run: dict[str, Any]) -> float | None:
    """The probes' own CPU per traced read call (kernel timing taken off): all their
    programs' time (the read's enter and exit, every device completion, other syscalls
    passing the filters) over the read calls traced in the same span (the window's rate
    times the traced span)."""
    probes, reads_per_s = _probes(run), run["latency_layers"]["db_read_call"]["per_s"]
    if probes is None or not reads_per_s:
        return None
    return (probes[0] - probes[2]) / (reads_per_s * probes[1]) * 1e9


def _per_op(run: dict[str, Any], key: str) -> float | None:
    value, ops = run["metrics"].get(key), run["metrics"].get("slobops_per_s")
    seconds = run["window"]["seconds"]
    return value / (ops * seconds) * 1e6 if value is not None and ops and seconds else None


# A child that is "the server": it reads one cached 8 KiB block with pread, `calls` times in
# a row, five times, and prints its best ns per call (the probes' cost without the device's
# noise: each call passes the traced enter and exit, as a database's read call does)
_PREADS = """
import os, sys, tempfile, time
calls = int(sys.argv[1])
with tempfile.TemporaryFile() as fh:
    fh.write(os.urandom(8192)); fh.flush()
    fd, best = fh.fileno(), float("inf")
    for _ in range(5):
        start = time.perf_counter_ns()
        for _ in range(calls):
            os.pread(fd, 8192, 0)
        best = min(best, (time.perf_counter_ns() - start) / calls)
print(best)
"""


def read_call_cost(repeats: int, calls: int) -> None:
    """ns per cached pread of a traced server process, untraced and traced, alternated."""
    got: dict[str, list[float]] = {"off": [], "on": []}
    for _ in range(repeats):
        for mode in ("off", "on"):
            child = subprocess.Popen(
                [sys.executable, "-c", "import time; time.sleep(0.3)\n" + _PREADS, str(calls)],
                stdout=subprocess.PIPE,
                text=True,
            )
            tracer = ebpf.Tracer(child.pid, []) if mode == "on" else None
            reason = tracer.start() if tracer is not None else None
            assert reason is None, reason
            out, _ = child.communicate()
            if tracer is not None:
                traced = tracer.read().hists["db_read_call"].count
                assert traced >= 5 * calls, traced  # every call was the server's and timed
                tracer.stop()
            got[mode].append(float(out))
    off, on = statistics.median(got["off"]), statistics.median(got["on"])
    print(
        f"\nread call (cached pread, best of 5 x {calls:,} per run, {repeats} runs each): "
        f"untraced {off:.0f} ns ({min(got['off']):.0f}-{max(got['off']):.0f}), traced "
        f"{on:.0f} ns ({min(got['on']):.0f}-{max(got['on']):.0f}): +{on - off:.0f} ns a call"
    )


def toggled(bench: Bench, config: Any, period_s: float, results: Path) -> None:
    """One run, untraced by itself, while this script attaches the tracer's probes for
    `period_s`, detaches them for as long, and so on (loaded once: an attach is a syscall);
    each 1 s interval wholly inside one state is a sample of it. Drift between runs cannot
    enter: on and off alternate every few seconds of the same run."""
    pgdata = bench.server.data_dir / "pgdata"
    pid = int((pgdata / "postmaster.pid").read_text().split()[0])
    tracer = ebpf.Tracer(pid, devices_for_path(pgdata))
    reason = tracer.start()
    assert reason is None, reason
    tracer.pause(True)
    spans: list[tuple[float, bool]] = [(0.0, False)]
    done = threading.Event()

    def toggle() -> None:
        traced = False
        while not done.wait(period_s):
            traced = not traced
            tracer.pause(not traced)
            spans.append((time.time(), traced))

    thread = threading.Thread(target=toggle, daemon=True)
    thread.start()
    try:
        run_dir, _ = run_benchmark(
            config, target=None, data_dir=bench.server.data_dir, results_parent=results
        )
    finally:
        done.set()
        thread.join()
        tracer.stop()
    samples: dict[bool, list[tuple[float, float]]] = {False: [], True: []}
    with (run_dir / "timeseries.csv").open() as fh:
        for row in csv.DictReader(fh):
            end = datetime.fromisoformat(row["time"].replace("Z", "+00:00")).timestamp()
            start = end - float(row["seconds"])
            if row["phase"] != "window" or any(start < t < end for t, _ in spans):
                continue  # the warm-up, or an interval with a toggle inside
            state = [traced for t, traced in spans if t <= start][-1]
            busy = float(row["cpu_user_pct"]) + float(row["cpu_sys_pct"])
            samples[state].append((float(row["slobops_per_s"]), busy))
    for name, index in (("SLOBops/s", 0), ("host CPU busy %", 1)):
        off, on = ([v[index] for v in samples[k]] for k in (False, True))
        ratio = statistics.mean(on) / statistics.mean(off)
        error = (
            2
            * (statistics.variance(on) / len(on) + statistics.variance(off) / len(off)) ** 0.5
            / statistics.mean(off)
        )
        print(
            f"  {name:<18}  off {statistics.mean(off):,.1f} (n={len(off)}), on "
            f"{statistics.mean(on):,.1f} (n={len(on)}): on/off {ratio:.3f} ± {error:.3f} "
            "(2 standard errors)"
        )
    per_op = [
        statistics.mean(v[1] for v in samples[k]) / statistics.mean(v[0] for v in samples[k])
        for k in (False, True)
    ]
    print(f"  {'host CPU per op':<18}  on/off {per_op[1] / per_op[0]:.3f}")


def main() -> None:
    args = parse_args(
        __doc__,
        {
            "sessions": "4,32",
            "seconds": 10.0,
            "repeats": 3,
            "update_pct": 20,
            "bpf_stats": 0,
            "calls": 200000,
            "toggle": 0.0,
            "warmup": 1.0,
        },
        {"sessions": "4", "seconds": 1.0, "repeats": 1, "calls": 2000, "warmup": 0.0},
    )
    bench = Bench(args.data_dir, "pio")
    data = {"SCHEMAS": 4, "SCALE": 8192, "SCAN_TABLE_SZ": 128, "WARMUP": args.warmup}
    data["UPDATE_PCT"] = args.update_pct
    results = Path(tempfile.mkdtemp(prefix="ebpf-cost-"))
    stats_before = ebpf.BPF_STATS.read_text() if args.bpf_stats else None
    if args.bpf_stats:  # the kernel times each program run (two clock reads a run)
        ebpf.BPF_STATS.write_text("1\n")
    print(
        f"ebpf_cost: pio, UPDATE_PCT {args.update_pct}, {args.seconds:g} s per run, "
        f"{args.repeats} repeats (off/on alternated); median (min, max) of each"
    )
    try:
        read_call_cost(max(args.repeats, 3), args.calls)
        bench.ensure_data(bench.config(**data, SESSIONS=max(ints(args.sessions))), 64)
        for sessions in ints(args.sessions):
            if args.toggle:
                print(
                    f"\n{sessions} sessions, one {args.seconds:g} s run, probes toggled "
                    f"every {args.toggle:g} s"
                )
                config = bench.config(**data, SESSIONS=sessions, RUN_TIME=args.seconds)
                toggled(bench, config, args.toggle, results)
                continue
            runs: dict[str, list[dict[str, Any]]] = {"off": [], "on": []}
            for _ in range(args.repeats):
                for mode in ("off", "on"):
                    config = bench.config(
                        **data,
                        SESSIONS=sessions,
                        RUN_TIME=args.seconds,
                        TRACE_LAYERS=mode == "on",
                    )
                    _, run = run_benchmark(
                        config, target=None, data_dir=bench.server.data_dir, results_parent=results
                    )
                    traced = run["latency_layers"]["db_read_call"]["reason"] is None
                    assert traced == (mode == "on"), run["latency_layers"]["db_read_call"]
                    runs[mode].append(run)
            _print(sessions, runs)
    finally:
        if stats_before is not None:
            ebpf.BPF_STATS.write_text(stats_before)
        bench.close()
    print("ratio = median on / median off; goal: SLOBops/s and server CPU within 2 %")


def _print(sessions: int, runs: dict[str, list[dict[str, Any]]]) -> None:
    print(f"\n{sessions} sessions")
    print_ab(runs, COLUMNS, ratio_digits=3)
    # each traced run against the untraced one run just before it: drift over the series
    # does not enter a pair's ratio
    for name, get, _ in COLUMNS[:3]:
        ratios = [
            b / a
            for off, on in zip(runs["off"], runs["on"], strict=True)
            if (a := get(off)) and (b := get(on)) is not None
        ]
        print(f"  {name:<18}  paired on/off: {spread(ratios, 3)}")


if __name__ == "__main__":
    main()
