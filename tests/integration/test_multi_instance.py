"""Multi-instance runs against two real private PostgreSQL 18 servers, and the libpq ways of
naming a target: repeated --target, SLOB's SQLNET_SERVICE_BASE/MAX as pg_service.conf
services, PG* variables, .pgpass and the password prompt."""

from __future__ import annotations

import json
import os
import pty
import select
import shutil
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from urllib.parse import parse_qs, unquote, urlparse

import psycopg
import pytest
from selenium import webdriver

from openslob.analysis.figures import value as figure
from openslob.engines.postgres.server import EmbeddedServer
from openslob.model import combine
from openslob.results.schema import validate_run
from tests.conftest import invoke, make_base_dir
from tests.integration.test_html_report import chart_box, open_page

SCALE = 3000  # rows per schema: small, the point is placement and accounting


@pytest.fixture(scope="module")
def pair() -> Iterator[tuple[EmbeddedServer, EmbeddedServer]]:
    """Two private servers; the second also listens on TCP (password in its passfile)."""
    base = make_base_dir("openslob-multi-")
    first, second = EmbeddedServer(base / "a"), EmbeddedServer(base / "b")
    first.start("pio")
    second.start("pio", tcp=True)
    yield first, second
    for srv in (first, second):
        srv.destroy()
    shutil.rmtree(base, ignore_errors=True)


def socket_keywords(srv: EmbeddedServer) -> dict[str, str]:
    """host/port/user/dbname of the server's private socket, as separate libpq keywords."""
    uri = urlparse(srv.socket_conninfo())
    query = parse_qs(uri.query)
    return {
        "host": unquote(query["host"][0]),
        "port": query["port"][0],
        "user": uri.username or "",
        "dbname": uri.path.lstrip("/"),
    }


def blks_read(srv: EmbeddedServer) -> int:
    with psycopg.connect(srv.socket_conninfo()) as conn:
        conn.execute("SELECT pg_stat_force_next_flush()")
        return int(
            conn.execute(
                "SELECT blks_read FROM pg_stat_database WHERE datname = current_database()"
            ).fetchone()[0]
        )


@pytest.fixture(scope="module")
def loaded(pair, tmp_path_factory) -> tuple[EmbeddedServer, EmbeddedServer]:
    """Both instances set up at once by one `slob setup` with two targets."""
    cwd = tmp_path_factory.mktemp("setup")
    first, second = pair
    result = invoke(
        "setup",
        "--target",
        first.conninfo(),
        "--target",
        second.conninfo(),
        "--schemas",
        "2",
        "--scale",
        str(SCALE),
        cwd=cwd,
    )
    assert result.exit_code == 0, result.output
    assert result.output.count("Load summary:") == 2  # one summary per instance
    return pair


def test_verify_and_doctor_each_instance(loaded, tmp_path: Path) -> None:
    """Before any run has updated the data: each instance verified and diagnosed."""
    first, second = loaded
    targets = ["--target", first.conninfo(), "--target", second.conninfo()]
    verified = invoke(
        "verify", *targets, "--schemas", "2", "--scale", str(SCALE), "--json", cwd=tmp_path
    )
    assert verified.exit_code == 0, verified.output
    docs = json.loads(verified.stdout)  # stderr: the data set line
    assert [d["ok"] for d in docs] == [True, True]
    assert docs[1]["target"].startswith("postgresql://openslob@127.0.0.1")
    doctor = invoke("doctor", *targets, "--sessions", "8", "--json", cwd=tmp_path)
    findings = json.loads(doctor.stdout)  # stderr: the data-set line
    assert len(findings) == 2
    capacity = next(f for f in findings[0] if f["check"] == "connections")
    assert capacity["value"].startswith("7 needed")  # its share: 4 of 8 sessions + 3


def test_run_over_two_instances_via_services(loaded, tmp_path: Path) -> None:
    """SLOB's SQLNET_SERVICE_BASE/MAX: sessions round robin over services slob1, slob2;
    per-instance figures match each server's own counters, totals add them up."""
    first, second = loaded
    service_file = tmp_path / "pg_service.conf"
    service_file.write_text(
        "".join(
            f"[slob{n}]\n" + "".join(f"{k}={v}\n" for k, v in socket_keywords(srv).items())
            for n, srv in ((1, first), (2, second))
        )
    )
    before = [blks_read(first), blks_read(second)]
    result = invoke(
        "run",
        "--sqlnet-service-base",
        "slob",
        "--sqlnet-service-max",
        "2",
        "--schemas",
        "2",
        "--scale",
        str(SCALE),
        "--sessions",
        "4",
        "--update-pct",
        "20",
        "--warmup",
        "0",
        "--run-time",
        "3",
        "--results-dir",
        str(tmp_path / "results"),
        cwd=tmp_path,
        env={"PGSERVICEFILE": str(service_file)},
    )
    assert result.exit_code == 0, result.output
    after = [blks_read(first), blks_read(second)]
    (run_dir,) = (tmp_path / "results").iterdir()
    run = json.loads((run_dir / "run.json").read_text())
    assert run["status"] == "complete"
    validate_run(run)  # the instances' blocks follow the shipped schema
    report = (run_dir / "report.txt").read_text()  # their section, with each one's figures
    assert "Instances" in report and all(i["target"] in report for i in run["instances"])
    instances = run["instances"]
    assert [i["target"] for i in instances] == ["service=slob1", "service=slob2"]

    # placement: session i on instance i % 2, and so on its schema's instance
    assert [s["instance"] for s in run["sessions"]] == [0, 1, 0, 1]
    assert instances[0]["sessions"] == [0, 2] and instances[1]["sessions"] == [1, 3]
    assert instances[0]["schemas"] == ["user1"] and instances[1]["schemas"] == ["user2"]

    seconds = run["window"]["seconds"]
    for k, inst in enumerate(instances):
        m = inst["metrics"]
        # ops of the instance = the loops' counts of its sessions
        ops = sum(
            s["ops_select"] + s["ops_update"] + s["ops_scan"]
            for s in run["sessions"]
            if s["instance"] == k
        )
        assert m["slobops_per_s"] * seconds == pytest.approx(ops, rel=0.01)
        # reads of the instance = its own pg_stat_database, read here independently
        reads = m["pio_reads_per_s"] * seconds
        assert reads > 1000
        own = after[k] - before[k]
        # own also counts reads outside the window by anyone (autovacuum after the last
        # test's updates: +9 % once in a full suite, never alone), hence the slack above
        assert reads <= own + 5 and own <= reads * 1.1 + 300, (k, reads, own)

    total, parts = run["metrics"], [i["metrics"] for i in instances]
    for key in ("slobops_per_s", "pio_reads_per_s", "pio_writes_per_s", "commits_per_s"):
        assert total[key] == pytest.approx(sum(p[key] for p in parts), abs=0.01)
    weighted = sum(p["db_read_latency_us"] * p["pio_reads_per_s"] for p in parts) / sum(
        p["pio_reads_per_s"] for p in parts
    )
    assert total["db_read_latency_us"] == pytest.approx(weighted, rel=1e-3)
    # both data directories sit on this host's one device: it counts once, not twice
    assert total["device_reads_per_s"] == pytest.approx(parts[0]["device_reads_per_s"], abs=0.01)
    assert total["device_reads_per_s"] == pytest.approx(parts[1]["device_reads_per_s"], rel=0.05)
    assert total["db_time_s"] == pytest.approx(4 * seconds, rel=0.1)

    report = (run_dir / "report.txt").read_text()
    assert "Instances" in report and "service=slob2" in report
    head = next(line for line in report.splitlines() if line.startswith("instance "))
    assert head.split()[-3:] == ["op", "p99", "us"] and "dev read us" in head
    second_row = next(line for line in report.splitlines() if line.startswith("2 service=slob2"))
    assert second_row.split()[-1] == f"{figure(instances[1], 'op_p99_us'):,.0f}"
    assert "4 over 2 schemas on 2 instances" in report
    summary = invoke("analyze", "--json", str(run_dir), cwd=tmp_path)
    assert json.loads(summary.output)[0]["preads_per_s"] == pytest.approx(
        total["pio_reads_per_s"], rel=0.01
    )


def test_sweep_and_plot_over_two_instances(loaded, tmp_path: Path) -> None:
    first, second = loaded
    results = tmp_path / "results"
    result = invoke(
        "sweep",
        "--target",
        first.conninfo(),
        "--target",
        second.conninfo(),
        "--schemas",
        "2",
        "--scale",
        str(SCALE),
        "--sessions",
        "2,4",
        "--update-pct",
        "0",
        "--warmup",
        "0",
        "--run-time",
        "2",
        "--label",
        "two",
        "--results-dir",
        str(results),
        cwd=tmp_path,
    )
    assert result.exit_code == 0, result.output
    sweep_dir = results / "sweep-two"
    runs = [json.loads(p.read_text()) for p in sorted(sweep_dir.glob("*/run.json"))]
    assert len(runs) == 2 and all(len(r["instances"]) == 2 for r in runs)
    assert all(r["metrics"]["pio_reads_per_s"] > 0 for r in runs)
    petal = sweep_dir / "plots" / "petal_iops.png"
    assert petal.stat().st_size > 10_000


def test_instance_sweep_efficiency_per_instance_and_resume(
    loaded,
    tmp_path: Path,
    browser: webdriver.Chrome,
) -> None:
    """`--instances 1,2 --sessions-per-instance 2`: the first 1, then 2 targets at the same
    load per instance; scaling.json's efficiency and per-instance figures are the run.json
    files'; a point marked interrupted is run again, the complete one is kept."""
    first, second = loaded
    results = tmp_path / "results"
    args = [
        "sweep", "--target", first.conninfo(), "--target", second.conninfo(),
        "--instances", "1,2", "--sessions-per-instance", "2", "--schemas", "2",
        "--scale", str(SCALE), "--update-pct", "0", "--warmup", "0", "--run-time", "2",
        "--label", "scale", "--results-dir", str(results),
    ]  # fmt: skip
    result = invoke(*args, cwd=tmp_path)
    assert result.exit_code == 0, result.output
    sweep_dir = results / "sweep-scale"
    assert f"scale-out: {sweep_dir / 'scaling.csv'}" in result.output
    one, two = (json.loads((sweep_dir / n / "run.json").read_text()) for n in SCALE_POINTS)
    assert [len(one["instances"]), len(two["instances"])] == [1, 2]
    assert [len(one["sessions"]), len(two["sessions"])] == [2, 4]  # 2 on every instance
    assert two["config"]["SESSIONS"] == 4 and two["config"]["INSTANCES"] == 2
    (curve,) = json.loads((sweep_dir / "scaling.json").read_text())
    x1, x2 = one["metrics"]["slobops_per_s"], two["metrics"]["slobops_per_s"]
    p1, p2 = curve["points"]
    assert [p1["instances"], p2["instances"]] == [1, 2]
    assert p1["efficiency"] == pytest.approx(1.0)
    assert p2["efficiency"] == pytest.approx(x2 / (2 * x1), rel=1e-9)
    iops = sorted(
        i["metrics"]["pio_reads_per_s"] + i["metrics"]["pio_writes_per_s"] for i in two["instances"]
    )
    spread = p2["per_instance"]["iops"]
    assert [spread["min"], spread["max"]] == pytest.approx(iops)
    assert spread["median"] == pytest.approx(sum(iops) / 2)
    assert p2["totals"]["iops"] == pytest.approx(sum(iops), rel=1e-6)
    reads_us = [i["metrics"]["db_read_latency_us"] for i in two["instances"]]
    assert p2["per_instance"]["db_read_us"]["max"] == pytest.approx(max(reads_us))
    p99s = []
    for k, inst in enumerate(two["instances"]):  # an instance's p99 lies between its sessions'
        own = [s["p99_us"] for s in two["sessions"] if s["instance"] == k]
        p99s.append(figure(inst, "op_p99_us"))
        assert min(own) <= p99s[-1] <= max(own), (k, own, p99s[-1])
    p99 = p2["per_instance"]["op_p99_us"]
    assert [p99["min"], p99["max"]] == sorted(p99s)
    assert curve["usl"] is None and "at least 3 different instance counts" in curve["usl_note"]
    # every run warned that the small data set fits shared_buffers: the table says so
    assert any(w.startswith("the data set (") for w in two["warnings"])
    assert p2["warnings"]["the data set"] == 1
    assert (sweep_dir / "plots" / "scaling.png").stat().st_size > 10_000
    text = invoke("scaling", str(sweep_dir), cwd=tmp_path)
    assert text.exit_code == 0, text.output
    assert "EFFICIENCY" in text.output and f"{p2['efficiency'] * 100:.1f} %" in text.output
    warned = next(line for line in text.output.splitlines() if line.startswith("warnings in"))
    assert "N=1: " in warned and "the data set (1/1)" in warned  # other kinds may come first
    # the HTML report draws the same medians and efficiencies, in a real browser
    page = tmp_path / "scale.html"
    html = invoke("report", str(sweep_dir), "--html", "-o", str(page), cwd=tmp_path)
    assert html.exit_code == 0, html.output
    open_page(browser, page)
    drawn = []
    for title in ("Scale-out: throughput", "Scale-out: efficiency"):
        index, _ = chart_box(browser, title)
        drawn.append(
            browser.execute_script(
                "return window.openslobCharts[arguments[0]].data.datasets[0].data"
                ".map(d => [d.x, d.y])",
                index,
            )
        )
    assert drawn[0] == [[1, pytest.approx(x1)], [2, pytest.approx(x2)]]
    assert drawn[1] == [[1, pytest.approx(100)], [2, pytest.approx(p2["efficiency"] * 100)]]

    # resume: the 2-instance point interrupted, the 1-instance one complete and kept
    sweep_file = sweep_dir / "sweep.json"
    sweep = json.loads(sweep_file.read_text())
    sweep["points"][1]["status"] = "interrupted"
    sweep_file.write_text(json.dumps(sweep))
    kept = (sweep_dir / SCALE_POINTS[0] / "run.json").read_text()
    again = invoke(*args, cwd=tmp_path)
    assert again.exit_code == 0, again.output
    assert "1 point(s) already complete, skipped" in again.output
    assert (sweep_dir / SCALE_POINTS[0] / "run.json").read_text() == kept
    rerun = json.loads((sweep_dir / SCALE_POINTS[1] / "run.json").read_text())
    assert rerun["window"]["start"] != two["window"]["start"] and len(rerun["instances"]) == 2
    statuses = [p["status"] for p in json.loads(sweep_file.read_text())["points"]]
    assert statuses == ["complete", "complete"]


SCALE_POINTS = ("instances-1", "instances-2")


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--target", "X", "--target", "X"], "given twice"),
        (["--target", "embedded", "--target", "X"], "cannot be combined"),
        (["--sqlnet-service-max", "2"], "SQLNET_SERVICE_MAX needs SQLNET_SERVICE_BASE"),
        (["--sqlnet-service-max", "65"], "SQLNET_SERVICE_MAX"),
        (["--instances", "2"], "INSTANCES=2: only 1 instance(s) given"),
        (["--instances", "65"], "INSTANCES"),
        (["--sessions-per-instance", "2"], "SESSIONS_PER_INSTANCE needs INSTANCES"),
        (["--instances", "1", "--sessions-per-instance", "2", "--sessions", "4"], "give one"),
    ],
)
def test_bad_target_combinations_are_one_line(args, message, tmp_path: Path) -> None:
    result = invoke("run", *args, "--run-time", "1", cwd=tmp_path)
    assert result.exit_code == 2
    assert message in result.output
    assert len(result.output.strip().splitlines()) == 1


def test_refusals_before_anything_runs(loaded, tmp_path: Path) -> None:
    first, second = loaded
    two = ["--target", first.conninfo(), "--target", second.conninfo()]
    fewer = invoke(
        "run", *two, "--sessions", "1", "--schemas", "2", "--scale", str(SCALE), cwd=tmp_path
    )
    assert fewer.exit_code == 2 and "at least as many sessions as instances" in fewer.output
    fio = invoke("run", *two, "--calibrate", "--run-time", "1", cwd=tmp_path)
    assert fio.exit_code == 2 and "--calibrate" in fio.output
    # the same database reached two ways (URI and keywords) is one instance, not two
    words = " ".join(f"{k}={v}" for k, v in socket_keywords(first).items())
    same = invoke(
        "run", "--target", first.socket_conninfo(), "--target", words,
        "--schemas", "2", "--scale", str(SCALE), "--sessions", "2", "--run-time", "1",
        cwd=tmp_path,
    )  # fmt: skip
    assert same.exit_code == 2 and "are the same database" in same.output
    assert not (tmp_path / "slob-results").exists()


def test_pg_environment_and_pgpass(loaded, tmp_path: Path) -> None:
    """`--target postgresql://` takes everything from PG* variables; a password from the
    file PGPASSFILE names, as libpq does."""
    _, second = loaded
    port = urlparse(second.conninfo()).port
    env = {
        "PGHOST": "127.0.0.1",
        "PGPORT": str(port),
        "PGUSER": "openslob",
        "PGDATABASE": "slob",
        "PGPASSFILE": str(second.passfile),
    }
    result = invoke("doctor", "--target", "postgresql://", "--json", cwd=tmp_path, env=env)
    findings = json.loads(result.stdout)
    assert findings[0]["check"] == "server version" and findings[0]["verdict"] == "ok"
    no_password = invoke(
        "doctor", "--target", "postgresql://", cwd=tmp_path, env={**env, "PGPASSFILE": "/dev/null"}
    )
    assert no_password.exit_code == 1
    assert "no password supplied" in no_password.output


def test_password_prompt_at_a_terminal(loaded, tmp_path: Path) -> None:
    """At a terminal a missing password is asked for (not echoed) and never written."""
    _, second = loaded
    password = second.passfile.read_text().strip().rsplit(":", 1)[-1]
    port = urlparse(second.conninfo()).port
    target = f"host=127.0.0.1 port={port} user=openslob dbname=slob"
    pid, fd = pty.fork()
    if pid == 0:  # the child: slob doctor with the pty as its terminal
        os.chdir(tmp_path)
        env = {k: v for k, v in os.environ.items() if not k.startswith("PG")}
        env["PGPASSFILE"] = "/dev/null"
        os.execve(
            sys.executable, [sys.executable, "-m", "openslob", "doctor", "--target", target], env
        )
    output = b""
    deadline = time.monotonic() + 60
    answered = False
    while time.monotonic() < deadline:
        ready, _, _ = select.select([fd], [], [], 1)
        if not ready:
            continue
        try:
            chunk = os.read(fd, 4096)
        except OSError:
            break
        if not chunk:
            break
        output += chunk
        if not answered and b"password for" in output:
            os.write(fd, password.encode() + b"\n")
            answered = True
    _, status = os.waitpid(pid, 0)
    text = output.decode(errors="replace")
    assert answered, text
    assert "password for host=127.0.0.1" in text
    assert password not in text  # not echoed, not printed
    assert os.waitstatus_to_exitcode(status) in (0, 1), text  # doctor's verdict, connected
    assert "openslob doctor" in text


def test_combine_rules() -> None:
    """Totals: rates add, latencies weighted by their operations, shared host counted once."""
    a = {
        "slobops_per_s": 100.0,
        "pio_reads_per_s": 1000.0,
        "db_read_latency_us": 100.0,
        "lio_per_s": 5000.0,
        "lio_per_op": 50.0,
        "device_reads_per_s": 3000.0,
        "device_read_latency_us": 80.0,
        "cpu_user_pct": 40.0,
        "db_cpu_s": 2.0,
        "server_cpu_pct": 10.0,
        "db_write_latency_us": None,
        "pio_writes_per_s": 0.0,
    }
    b = {**a, "pio_reads_per_s": 3000.0, "db_read_latency_us": 300.0, "slobops_per_s": 300.0}
    shared = combine.run_totals([a, b], ["h1", "h1"])
    assert shared["pio_reads_per_s"] == 4000
    assert shared["db_read_latency_us"] == 250  # (1000*100 + 3000*300) / 4000, not 200
    assert shared["lio_per_op"] == 25  # 10,000 lio / 400 ops
    assert shared["device_reads_per_s"] == 3000  # one device, once
    assert shared["server_cpu_pct"] == 20  # two instances' shares of one host
    assert shared["db_cpu_s"] == 4
    assert shared["db_write_latency_us"] is None  # missing in a part: missing in the total
    apart = combine.run_totals([a, b], ["h1", "h2"])
    assert apart["device_reads_per_s"] == 6000
    assert apart["cpu_user_pct"] == 40  # the mean over hosts
    assert apart["server_cpu_pct"] == 10
