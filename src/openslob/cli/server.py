"""`slob server start|stop|status|destroy`: the private servers, one per engine (and per value
of an engine's own server option, such as a page size)."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import click
from rich.table import Table

from openslob.cli.app import CONTEXT, cli, data_dir_option, friendly_errors, out
from openslob.cli.params import add_server_options, server_config
from openslob.engines import registry
from openslob.engines.api import PROFILES, PrivateServer, Target
from openslob.runner.prepare import refuse_while_in_use
from openslob.runner.targets import private_target


@cli.group(context_settings=CONTEXT)
def server() -> None:
    """Manage the private servers: one per engine, created and run by openslob.

    \b
    Examples:
      slob server start --profile pio && slob server status
      slob server start --engine mariadb --page-size 8k
    """


engine_option = click.option(
    "--engine",
    type=click.Choice(registry.names()),
    default=registry.DEFAULT.name,
    show_default=True,
    help="Which engine's private server ("
    + "; ".join(f"{p.name}: --target {p.private_target}" for p in registry.PLUGINS)
    + ").",
)
cluster_option = click.option(
    "--cluster",
    type=click.IntRange(2, 9),
    default=None,
    help="A private cluster of N nodes instead of the single server (MariaDB: Galera on "
    "loopback; each node's URI is a --target).",
)
force_option = click.option(
    "--force", is_flag=True, help="Even while an openslob run, sweep or setup is using it."
)


def _target(engine: str, data_dir: Path | None, params: dict[str, Any]) -> Target:
    """The engine's private server as a target (not started)."""
    return private_target(engine, data_dir, server_config(params))


def _cluster(engine: str, data_dir: Path | None, params: dict[str, Any], nodes: int) -> Any:
    return registry.plugin(engine).private_cluster(data_dir, server_config(params), nodes)


def _refuse_cluster_in_use(engine: str, cluster: Any, action: str) -> None:
    for node in cluster.nodes:
        refuse_while_in_use(Target(engine, node.conninfo(), node.connect_kwargs(), node), action)


def _server(engine: str, data_dir: Path | None, params: dict[str, Any]) -> PrivateServer:
    server_ = _target(engine, data_dir, params).server
    assert server_ is not None  # a private target always has its server
    return server_


@server.command("start", context_settings=CONTEXT)
@click.option(
    "--profile",
    type=click.Choice(PROFILES),
    default=None,
    help="pio: direct I/O, small cache (default); lio: data cached; redo: WAL/commit stress. "
    "Default: the instance's current profile.",
)
@click.option(
    "--tcp/--no-tcp",
    default=None,
    help="Also listen on 127.0.0.1 (password in a "
    "0600 passfile). Default: the instance's setting, initially socket only.",
)
@click.option(
    "--port",
    type=click.IntRange(1024, 65535),
    default=None,
    help="Port (TCP) / socket number. Default 5432, or a free port for TCP.",
)
@click.option(
    "--max-connections",
    type=click.IntRange(10, 10000),
    default=None,
    help="max_connections (default 100; raise for large session counts).",
)
@force_option
@cluster_option
@engine_option
@add_server_options
@data_dir_option
@friendly_errors
def server_start(
    profile: str | None,
    tcp: bool | None,
    port: int | None,
    max_connections: int | None,
    force: bool,
    cluster: int | None,
    engine: str,
    data_dir: Path | None,
    **params: Any,
) -> None:
    """Start the private server, creating it if needed. Idempotent.

    Restarts only when a setting changes (refused while a run uses it: --force); recovers
    from a stale pid file or a crash.

    \b
    Example:
      slob server start --profile lio --max-connections 600
      slob server start --engine mariadb --cluster 3
    """
    if cluster:
        if tcp or port:
            raise click.UsageError("--cluster: the nodes listen on their sockets (no --tcp/--port)")
        _print_cluster(
            _cluster(engine, data_dir, params, cluster)
            .start(profile, max_connections=max_connections)
            .as_dict()
        )
        return
    target = _target(engine, data_dir, params)
    server_ = target.server
    assert server_ is not None
    if not force and server_.would_restart(
        profile, tcp=tcp, port=port, max_connections=max_connections
    ):
        refuse_while_in_use(target, "restarting it with new settings")
    state = server_.start(profile, tcp=tcp, port=port, max_connections=max_connections)
    _print_state(state.as_dict())


@server.command("stop", context_settings=CONTEXT)
@force_option
@cluster_option
@engine_option
@add_server_options
@data_dir_option
@friendly_errors
def server_stop(
    force: bool, cluster: int | None, engine: str, data_dir: Path | None, **params: Any
) -> None:
    """Stop the private server (fast shutdown). Refused while a run uses it (--force).

    \b
    Example:
      slob server stop
    """
    if cluster:
        nodes = _cluster(engine, data_dir, params, cluster)
        if not force:
            _refuse_cluster_in_use(engine, nodes, "stopping it")
        out.print("stopped" if nodes.stop() else "not running")
        return
    target = _target(engine, data_dir, params)
    if not force:
        refuse_while_in_use(target, "stopping it")
    out.print("stopped" if target.server and target.server.stop() else "not running")


@server.command("status", context_settings=CONTEXT)
@click.option("--json", "as_json", is_flag=True, help="Print JSON for scripts.")
@cluster_option
@engine_option
@add_server_options
@data_dir_option
@friendly_errors
def server_status(
    as_json: bool, cluster: int | None, engine: str, data_dir: Path | None, **params: Any
) -> None:
    """Show state, version, profile, data directory and connection URI.

    Exit code 0 when running, 3 when stopped or absent (like pg_ctl status).

    \b
    Example:
      slob server status --json | jq -r .uri
    """
    if cluster:
        state = _cluster(engine, data_dir, params, cluster).status().as_dict()
    else:
        state = _server(engine, data_dir, params).status().as_dict()
    if as_json:
        click.echo(json.dumps(state, indent=2))
    elif cluster:
        _print_cluster(state)
    else:
        _print_state(state)
    sys.exit(0 if state["state"] == "running" else 3)


@server.command("destroy", context_settings=CONTEXT)
@click.option("--yes", is_flag=True, help="Do not ask for confirmation.")
@force_option
@cluster_option
@engine_option
@add_server_options
@data_dir_option
@friendly_errors
def server_destroy(
    yes: bool,
    force: bool,
    cluster: int | None,
    engine: str,
    data_dir: Path | None,
    **params: Any,
) -> None:
    """Stop the private server and delete its data directory contents.

    \b
    Example:
      slob server destroy --yes
    """
    if cluster:
        nodes = _cluster(engine, data_dir, params, cluster)
        if not force:
            _refuse_cluster_in_use(engine, nodes, "destroying it")
        if not yes:
            click.confirm(f"Delete the cluster and all data in {nodes.instance_dir}?", abort=True)
        nodes.destroy()
        out.print(f"destroyed {nodes.instance_dir}")
        return
    target = _target(engine, data_dir, params)
    server_ = target.server
    assert server_ is not None
    if not force:
        refuse_while_in_use(target, "destroying it")
    where = server_.instance_dir
    if not yes:
        click.confirm(f"Delete the private server and all data in {where}?", abort=True)
    server_.destroy()
    out.print(f"destroyed {where}")


def _print_state(state: dict[str, Any]) -> None:
    table = Table(show_header=False, box=None)
    for key in (
        "state",
        "version",
        "profile",
        "page_size",
        "data_dir",
        "uri",
        "pid",
        "service_user",
        "tcp_port",
    ):
        if state.get(key) is not None:
            table.add_row(key, str(state[key]))
    for key, value in sorted((state.get("settings") or {}).items()):
        table.add_row(f"  {key}", value)
    out.print(table)


def _print_cluster(state: dict[str, Any]) -> None:
    """The cluster's state, one row per node, then the nodes' URIs (the run's --target)."""
    size = state.get("cluster_size")
    out.print(f"cluster {state['state']}: {size if size is not None else 0} node(s) in it")
    if state["state"] == "absent":
        return
    table = Table(box=None)
    for column in ("node", "state", "wsrep", "size", "pid", "data_dir"):
        table.add_column(column)
    for node in state.get("nodes", []):
        table.add_row(
            str(node["node"]),
            node["state"],
            str(node.get("wsrep_local_state_comment") or "-"),
            str(node.get("wsrep_cluster_size") or "-"),
            str(node.get("pid") or "-"),
            node["data_dir"],
        )
    out.print(table)
    for uri in state.get("targets", []):
        out.print(f"--target {uri}", soft_wrap=True)
