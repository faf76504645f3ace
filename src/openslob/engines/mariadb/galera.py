"""A private MariaDB Galera cluster on loopback: N mariadbd nodes, one data set on all of them.

Galera is a certification-based multi-primary cluster: every node holds all the data, a
transaction runs on its own node and, at COMMIT, its write set is replicated to every node
synchronously and certified there; a conflict with a write set already ordered aborts it
(certification failure, or a brute-force abort of a local transaction). Reads are local.

Layout (every directory created by the tool), C = DATA_DIR/galera-<page size>:

    C/cluster.json    node count and the loopback ports of each node (gcomm, IST, SST)
    C/node<k>/        a private mariadbd (engines/mariadb/server.py) with wsrep options added
                      to its command line: its my.cnf stays the single-server one, so
                      mariadb-install-db never starts a provider

Node 1 starts the cluster (--wsrep-new-cluster); the others join it one at a time (state
transfer by rsync, Debian's wsrep_sst_rsync), and start() returns once every node reports
wsrep_cluster_size = N and wsrep_local_state_comment = Synced. Stop goes from the last node
to node 1, so node 1 is the last to leave and may start the cluster again. Clients reach each
node over its own Unix socket: the nodes' URIs are the run's targets (one instance each).
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import socket
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pymysql

from openslob.engines.common import fsperm
from openslob.engines.common.server import SERVICE_USER, START_TIMEOUT_S, start_lock
from openslob.engines.mariadb.server import EmbeddedMariaDB, parse_page_size
from openslob.model.errors import ConfigError, ServerError

PROVIDER = Path(os.environ.get("SLOB_GALERA_PROVIDER", "/usr/lib/galera/libgalera_smm.so"))
DEBIAN_PACKAGE = "galera-4"
MAX_NODES = 9
CLUSTER_NAME = "openslob"
SYNC_TIMEOUT_S = START_TIMEOUT_S


def parse_cluster(text: str | int) -> int:
    """--cluster N: 2..MAX_NODES nodes (one node is no cluster: use the private server)."""
    try:
        count = int(text)
    except (TypeError, ValueError):
        count = 0
    if not 2 <= count <= MAX_NODES:
        raise ConfigError(f"--cluster={text} is not a node count (allowed: 2 to {MAX_NODES})")
    return count


def _free_ports(count: int) -> list[int]:
    """`count` distinct free loopback ports (held open together, so never the same twice)."""
    socks = [socket.socket() for _ in range(count)]
    try:
        for sock in socks:
            sock.bind(("127.0.0.1", 0))
        return [int(sock.getsockname()[1]) for sock in socks]
    finally:
        for sock in socks:
            sock.close()


@dataclass
class NodePorts:
    gcomm: int
    ist: int
    sst: int


class GaleraNode(EmbeddedMariaDB):
    """Node k of the cluster: a private mariadbd in C/node<k> with the wsrep options."""

    def __init__(self, cluster: GaleraCluster, index: int) -> None:
        super().__init__(cluster.base_dir, cluster.page_size)
        self.cluster, self.index = cluster, index
        self.dir = cluster.dir / f"node{index}"
        self._dir = self.dir
        self.instance_file = self.dir / "instance.json"
        self.datadir = self.dir / "data"
        self.run_dir = self.dir / "run"
        self.log_dir = self.dir / "log"
        self.tmp_dir = self.dir / "tmp"
        self.log_file = self.log_dir / "mariadbd.err"
        self.pid_file = self.run_dir / "mariadbd.pid"
        self.cnf = self.dir / "my.cnf"
        self.password_file = self.dir / "password"
        self.bootstrap = False  # set for node 1 when it starts a new cluster

    @property
    def label(self) -> str:
        return f"Galera node {self.index} ({self.page_size} pages) in {self.dir}"

    def _prepare_directories(self) -> None:
        self.cluster.prepare_directory()
        super()._prepare_directories()

    def _launch_args(self) -> list[str]:
        ports = self.cluster.ports()
        mine = ports[self.index - 1]
        peers = ",".join(f"127.0.0.1:{p.gcomm}" for p in ports)
        provider_options = ";".join(
            [
                f"gmcast.listen_addr=tcp://127.0.0.1:{mine.gcomm}",
                f"ist.recv_addr=127.0.0.1:{mine.ist}",
                # A loopback cluster on one host: a node that stops answering is gone, not
                # slow; the defaults (5 s / 15 s) would stall the others that long.
                "evs.suspect_timeout=PT5S",
                "evs.inactive_timeout=PT10S",
                # Group communication statistics on: wsrep_evs_repl_latency is measured
                # (min/avg/max/stddev/samples), else it reads 0/0/0/0/0 ...
                "evs.info_log_mask=0x4",
                # ... and never reset while the node lives: a window's mean is the
                # difference of two snapshots of (sum, samples).
                "evs.stats_report_period=PT24H",
            ]
        )
        args = [
            *super()._launch_args(),
            "--wsrep-on=ON",
            f"--wsrep-provider={PROVIDER}",
            f"--wsrep-cluster-name={CLUSTER_NAME}",
            f"--wsrep-cluster-address=gcomm://{'' if self.bootstrap else peers}",
            f"--wsrep-node-name=node{self.index}",
            "--wsrep-node-address=127.0.0.1",
            f"--wsrep-sst-receive-address=127.0.0.1:{mine.sst}",
            "--wsrep-sst-method=rsync",
            f"--wsrep-provider-options={provider_options}",
            # What Galera requires: row-based write sets, interleaved auto-increment locks.
            "--binlog-format=ROW",
            "--innodb-autoinc-lock-mode=2",
            "--wsrep-slave-threads=2",
            # The loader's parallel streams: a DDL ordered cluster-wide (TOI: index build,
            # ANALYZE) may abort another stream's autocommit statement; retried, not failed.
            "--wsrep-retry-autocommit=10",
        ]
        if self.bootstrap:
            args.append("--wsrep-new-cluster")
        return args

    def wsrep_status(self) -> dict[str, str]:
        """SHOW GLOBAL STATUS LIKE 'wsrep%' (empty when the node does not answer)."""
        try:
            with self.admin_connection() as conn, conn.cursor() as cur:
                cur.execute("SHOW GLOBAL STATUS LIKE 'wsrep%%'")
                return {str(k).lower(): str(v) for k, v in cur.fetchall()}
        except pymysql.err.MySQLError:
            return {}

    def allow_bootstrap(self) -> None:
        """Mark node 1's state safe to start a new cluster from: every node is down (the
        caller checked), and node 1 holds the data set all nodes had."""
        state = self.datadir / "grastate.dat"
        with contextlib.suppress(OSError):
            text = state.read_text()
            state.write_text(text.replace("safe_to_bootstrap: 0", "safe_to_bootstrap: 1"))


@dataclass
class ClusterState:
    """`slob server status --cluster N`: the cluster's and every node's state."""

    state: str  # "running" (all nodes synced) | "degraded" | "stopped" | "absent"
    data_dir: str
    nodes: list[dict[str, Any]] = field(default_factory=list)
    cluster_size: int | None = None
    targets: list[str] = field(default_factory=list)

    def as_dict(self) -> dict[str, Any]:
        return dict(self.__dict__)


class GaleraCluster:
    """N private mariadbd nodes in DATA_DIR/galera-<page size> forming one Galera cluster."""

    def __init__(self, data_dir: Path | str | None, page_size: str | int, nodes: int) -> None:
        self.page_size = parse_page_size(page_size)
        self.size = nodes
        first = EmbeddedMariaDB(data_dir, self.page_size)
        self.base_dir = first.base_dir
        self.dir = self.base_dir / f"galera-{self.page_size}"
        self.file = self.dir / "cluster.json"
        self.nodes = [GaleraNode(self, k) for k in range(1, nodes + 1)]

    @property
    def instance_dir(self) -> Path:
        return self.dir

    # ------------------------------------------------------------------ the plan

    def ports(self) -> list[NodePorts]:
        info = self._info()
        return [NodePorts(**p) for p in info["ports"]]

    def _info(self) -> dict[str, Any]:
        try:
            return json.loads(self.file.read_text())
        except FileNotFoundError:
            return {}

    def prepare_directory(self) -> None:
        """C itself, like a private server's instance directory (root-owned, the server
        user's group may traverse it)."""
        first = self.nodes[0]
        ids = first._service_ids()
        created = fsperm.make_dirs(self.base_dir, mode=0o700 if not ids else 0o750)
        if ids and created:
            os.chown(self.base_dir, 0, ids[1])
            self.base_dir.chmod(0o750)
        if not self.dir.exists():
            self.dir.mkdir(mode=0o750)
            if ids:
                os.chown(self.dir, 0, ids[1])
            self.dir.chmod(0o750 if ids else 0o700)

    def _plan(self) -> None:
        """The node count and ports, chosen once (the ports stay the cluster's)."""
        info = self._info()
        if info.get("nodes") == self.size:
            return
        if info and info.get("nodes") != self.size:
            raise ConfigError(
                f"--cluster={self.size}: {self.dir} holds a {info.get('nodes')}-node cluster; "
                f"start it with --cluster {info.get('nodes')}, or destroy it first"
            )
        ports = _free_ports(3 * self.size)
        plan = [
            {"gcomm": ports[3 * k], "ist": ports[3 * k + 1], "sst": ports[3 * k + 2]}
            for k in range(self.size)
        ]
        tmp = self.file.with_suffix(".tmp")
        tmp.write_text(json.dumps({"nodes": self.size, "ports": plan}, indent=2) + "\n")
        tmp.chmod(0o644)
        tmp.replace(self.file)

    # ------------------------------------------------------------ start and stop

    def start(
        self, profile: str | None = None, *, max_connections: int | None = None
    ) -> ClusterState:
        """Start every node that is not running (node 1 first, as a new cluster when no
        node runs), then wait until all N are in the cluster and synced."""
        if not PROVIDER.exists():
            raise ServerError(
                f"{PROVIDER} not found: install the Debian package {DEBIAN_PACKAGE} "
                f"(apt-get install {DEBIAN_PACKAGE})"
            )
        with start_lock(self.base_dir):
            self.nodes[0]._ensure_service_user()
            self.prepare_directory()
            self._plan()
        running = [n for n in self.nodes if n._running_pid()]
        for node in self.nodes:
            if node in running:
                continue
            node.bootstrap = node.index == 1 and not running
            if node.bootstrap:
                node.allow_bootstrap()
            node.start(profile, tcp=False, max_connections=max_connections)
            running.append(node)
            self._wait_synced(running)
        return self.status()

    def _wait_synced(self, nodes: list[GaleraNode]) -> None:
        deadline = time.monotonic() + SYNC_TIMEOUT_S
        while time.monotonic() < deadline:
            states = [n.wsrep_status() for n in nodes]
            if all(_synced(s, len(nodes)) for s in states):
                return
            time.sleep(0.2)
        raise ServerError(
            f"the Galera cluster did not reach {len(nodes)} synced nodes within "
            f"{SYNC_TIMEOUT_S} s (logs: {', '.join(str(n.log_file) for n in nodes)})"
        )

    def stop(self) -> bool:
        """Stop the nodes, the last first (node 1 leaves last and may bootstrap next time).
        False when none was running."""
        stopped = [node.stop() for node in reversed(self.nodes)]
        return any(stopped)

    def destroy(self) -> None:
        self.stop()
        for node in self.nodes:
            node.destroy()
        shutil.rmtree(self.dir, ignore_errors=True)
        with contextlib.suppress(OSError):
            self.base_dir.rmdir()  # only if empty

    def status(self) -> ClusterState:
        if not self.file.exists():
            return ClusterState(state="absent", data_dir=str(self.dir))
        nodes, sizes, synced = [], [], 0
        for node in self.nodes:
            wsrep = node.wsrep_status() if node._running_pid() else {}
            entry = node.status().as_dict()
            entry.pop("settings", None)
            entry["node"] = node.index
            entry["wsrep_local_state_comment"] = wsrep.get("wsrep_local_state_comment")
            entry["wsrep_cluster_size"] = _int(wsrep.get("wsrep_cluster_size"))
            nodes.append(entry)
            if wsrep:
                sizes.append(_int(wsrep.get("wsrep_cluster_size")))
                synced += _synced(wsrep, self.size)
        if synced == self.size:
            state = "running"
        elif sizes:
            state = "degraded"
        else:
            state = "stopped"
        return ClusterState(
            state=state,
            data_dir=str(self.dir),
            nodes=nodes,
            cluster_size=max((s for s in sizes if s is not None), default=None),
            targets=[node.conninfo() for node in self.nodes] if state != "stopped" else [],
        )

    def __repr__(self) -> str:
        return f"GaleraCluster({self.dir}, {self.size} nodes, user {SERVICE_USER})"


def _synced(wsrep: dict[str, str], size: int) -> bool:
    return (
        _int(wsrep.get("wsrep_cluster_size")) == size
        and wsrep.get("wsrep_local_state_comment") == "Synced"
        and wsrep.get("wsrep_ready") == "ON"
    )


def _int(value: str | None) -> int | None:
    try:
        return int(value) if value is not None else None
    except ValueError:
        return None
