"""A real 3-node MariaDB Galera cluster on loopback (Debian's galera-4): started, reached,
loaded once through one node, run across its nodes, stopped and started again.

One cluster for the module (~20 s to start on this VM), a tiny data set, 2 s windows.
"""

from __future__ import annotations

import csv
import json
import shutil
from collections.abc import Iterator
from pathlib import Path

import pymysql
import pytest

from openslob.engines.mariadb.galera import GaleraCluster
from openslob.results.schema import validate_run
from tests.conftest import invoke, make_base_dir

DATA = ["--schemas", "3", "--scale", "1024", "--scan-table-sz", "16"]


@pytest.fixture(scope="module")
def cluster() -> Iterator[GaleraCluster]:
    base = make_base_dir("openslob-galera-")
    nodes = GaleraCluster(base / "data", "16k", 3)
    try:
        nodes.start("pio")
        yield nodes
    finally:
        nodes.destroy()
        shutil.rmtree(base, ignore_errors=True)


def _cmdline(pid: int) -> list[str]:
    return Path(f"/proc/{pid}/cmdline").read_bytes().decode().split("\0")


def _option(args: list[str], name: str) -> str:
    return next(a.split("=", 1)[1] for a in args if a.startswith(f"--{name}="))


def test_three_nodes_on_distinct_loopback_ports_form_one_synced_cluster(
    cluster: GaleraCluster, tmp_path: Path
) -> None:
    state = cluster.status()
    assert state.state == "running" and state.cluster_size == 3
    assert [n["wsrep_local_state_comment"] for n in state.nodes] == ["Synced"] * 3
    listen, used = [], set()
    for node in cluster.nodes:
        args = _cmdline(node._running_pid() or 0)
        assert _option(args, "wsrep-provider") == "/usr/lib/galera/libgalera_smm.so"
        assert _option(args, "wsrep-sst-method") == "rsync"
        provider = _option(args, "wsrep-provider-options")
        ports = [int(part.rsplit(":", 1)[1]) for part in provider.split(";")[:2]]
        ports.append(int(_option(args, "wsrep-sst-receive-address").rsplit(":", 1)[1]))
        assert not used & set(ports)
        used |= set(ports)
        listen.append(f"127.0.0.1:{ports[0]}")
        assert ("--wsrep-new-cluster" in args) == (node.index == 1)
    assert _option(_cmdline(cluster.nodes[2]._running_pid() or 0), "wsrep-cluster-address") == (
        "gcomm://" + ",".join(listen)
    )
    # A row written on node 1 is read on node 3, and the CLI lists every node as a target.
    with cluster.nodes[0].admin_connection() as conn, conn.cursor() as cur:
        cur.execute("CREATE DATABASE IF NOT EXISTS galera_probe")
        cur.execute("CREATE TABLE galera_probe.t (id INT PRIMARY KEY) ENGINE=InnoDB")
        cur.execute("INSERT INTO galera_probe.t VALUES (42)")
    with cluster.nodes[2].admin_connection() as conn, conn.cursor() as cur:
        # a node applies others' writes on its own after they are certified: a read waits
        # for them only with causality checks on (it found nothing once, just after)
        cur.execute("SET SESSION wsrep_sync_wait = 1")
        cur.execute("SELECT id FROM galera_probe.t")
        assert cur.fetchall() == ((42,),)
        cur.execute("DROP DATABASE galera_probe")
    common = ["--engine", "mariadb", "--cluster", "3", "--data-dir", str(cluster.base_dir)]
    status = invoke("server", "status", "--json", *common, cwd=tmp_path)
    assert status.exit_code == 0, status.output
    listed = json.loads(status.output)
    assert listed["targets"] == [n.conninfo() for n in cluster.nodes]
    wrong = invoke("server", "status", "--engine", "mariadb", "--cluster", "1", cwd=tmp_path)
    assert wrong.exit_code == 2 and "--cluster" in wrong.output


def _targets(cluster: GaleraCluster, nodes: int = 3) -> list[str]:
    return [a for n in cluster.nodes[:nodes] for a in ("--target", n.conninfo())]


def _last_run(where: Path) -> dict:
    runs = sorted((where / "slob-results").glob("*/run.json"))
    run = json.loads(runs[-1].read_text())
    validate_run(run)  # the shipped schema holds a cluster's run.json too
    return run


def test_a_run_over_the_nodes_loads_the_data_set_once_and_commits_on_every_node(
    cluster: GaleraCluster, tmp_path: Path
) -> None:
    """No data set yet: the run loads it through node 1 only (the others see it replicated),
    then its sessions update and COMMIT on all three nodes."""
    targets = _targets(cluster)
    args = [*targets, *DATA, "--run-time", "2", "--warmup", "0", "--update-pct", "50"]
    run = invoke("run", *args, cwd=tmp_path)
    assert run.exit_code == 0, run.output
    loads = [ln for ln in run.output.splitlines() if "no SLOB data set yet" in ln]
    assert len(loads) == 1 and cluster.nodes[0].conninfo() in loads[0]
    doc = _last_run(tmp_path)
    assert doc["status"] == "complete"
    assert [i["target"] for i in doc["instances"]] == [n.conninfo() for n in cluster.nodes]
    sessions = doc["sessions"]
    assert sorted(s["instance"] for s in sessions) == [0, 1, 2]
    assert all(s["ops_update"] > 0 and s["error"] is None for s in sessions)
    # What a RAC user reads in gc waits: conflicts, flow control, replication latency.
    for part in (doc, *doc["instances"]):
        metrics = part["metrics"]
        assert metrics["cluster_size"] == 3
        assert metrics["cluster_replicated_mb_per_s"] > 0  # its updates' write sets
        assert metrics["cluster_repl_latency_us"] > 0
        for key in ("cluster_cert_failures_per_s", "cluster_flow_control_paused_pct"):
            assert metrics[key] is not None and metrics[key] >= 0
    assert "Cluster replication (3 nodes)" in run.output
    for node in cluster.nodes:  # every node holds every schema, as loaded on node 1
        with node.admin_connection() as conn, conn.cursor() as cur:
            cur.execute("SELECT COUNT(*) FROM user3.cf1")
            assert cur.fetchone() == (1024,)
    # setup over the three nodes loads (here: checks) through one of them only
    setup = invoke("setup", *targets, *DATA, cwd=tmp_path)
    assert setup.exit_code == 0, setup.output
    assert f"setup on {cluster.nodes[0].conninfo()}" in " ".join(setup.output.split())


def test_conflicting_updates_are_counted_and_the_sessions_go_on(
    cluster: GaleraCluster, tmp_path: Path
) -> None:
    """Every op updates a quarter of user1 from all three nodes: certification conflicts
    abort some COMMITs; the loop rolls back and goes on, the window's cluster figures count
    them."""
    args = [*_targets(cluster), *DATA, "--hot-schema-frequency", "1", "--work-unit", "256"]
    args += ["--update-pct", "100", "--run-time", "2", "--warmup", "0"]
    run = invoke("run", *args, cwd=tmp_path)
    assert run.exit_code == 0, run.output
    doc = _last_run(tmp_path)
    assert doc["status"] == "complete"
    assert all(s["error"] is None and s["ops_update"] > 0 for s in doc["sessions"])
    metrics = doc["metrics"]
    aborted = metrics["cluster_cert_failures_per_s"] + metrics["cluster_bf_aborts_per_s"]
    assert aborted > 0 and metrics["cluster_conflict_pct"] > 0


def test_a_sweep_over_1_2_3_nodes_gives_its_scaling_efficiency(
    cluster: GaleraCluster, tmp_path: Path
) -> None:
    """The first 1, 2, 3 nodes, one session each, reads only (the data set is there from
    the run above, or loaded now through node 1): efficiency per N, and no write sets."""
    args = [*_targets(cluster), *DATA, "--instances", "1,2,3", "--sessions-per-instance", "1"]
    args += ["--update-pct", "0", "--run-time", "2", "--warmup", "0"]
    sweep = invoke("sweep", *args, cwd=tmp_path)
    assert sweep.exit_code == 0, sweep.output
    where = tmp_path / "slob-results" / "sweep-default"
    with (where / "scaling.csv").open() as fh:
        rows = list(csv.DictReader(fh))
    assert [int(r["instances"]) for r in rows] == [1, 2, 3]
    assert float(rows[0]["efficiency"]) == 1.0
    for row in rows:  # efficiency = X(N) / (N x X(1)), from the measured throughputs
        expected = float(row["throughput"]) / (int(row["instances"]) * float(rows[0]["throughput"]))
        assert abs(float(row["efficiency"]) - expected) < 1e-3
    for n in (1, 2, 3):
        point = next((where / f"instances-{n}").glob("**/run.json")).parent
        doc = json.loads((point / "run.json").read_text())
        report = (point / "report.txt").read_text()
        assert "repl latency n/a: no write set was replicated in the window" in report
        assert len(doc["instances"] or [None]) == n
        assert doc["metrics"]["cluster_size"] == 3  # one node of three is still a cluster
        assert doc["metrics"]["cluster_replicated_mb_per_s"] == 0  # reads stay local


def test_stop_then_start_brings_the_whole_cluster_back(cluster: GaleraCluster) -> None:
    """Last: the cluster stops node 3 first and node 1 last, and node 1 starts it again."""
    pids = [n._running_pid() for n in cluster.nodes]
    assert cluster.stop()
    assert cluster.status().state == "stopped"
    assert all(not Path(f"/proc/{pid}").exists() for pid in pids)
    with pytest.raises(pymysql.err.OperationalError):
        pymysql.connect(**cluster.nodes[0].admin_kwargs(), connect_timeout=2)
    assert cluster.start().state == "running"
    assert cluster.status().cluster_size == 3
