"""Bad input, hostile targets and faults: every command answers with one line, never a
traceback, never a password (issue 20).

Every address here is loopback (127.0.0.1, ::1) or a Unix socket path; nothing is sent
anywhere else. The databases are real: the session's private PostgreSQL, and a private
MariaDB started by this module.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import psycopg
import pytest
from click.testing import Result
from psycopg.conninfo import conninfo_to_dict, make_conninfo

from openslob.engines.mariadb.server import MARIADBD, EmbeddedMariaDB
from openslob.engines.postgres.server import EmbeddedServer
from openslob.model.secrets import redact, scrub
from tests.conftest import invoke, make_base_dir, private_mariadb, slob_subprocess

SECRET = "MyS3cretPW"
RUNS = Path(__file__).parents[1] / "data" / "runs"
GOOD_RUN = RUNS / "20261122T052706Z"
# What a command says about itself before it reaches a target: not an error line.
ANNOUNCEMENTS = ("setup on ", "run: ", "sweep ", "data set as set up on ")

BAD_TARGETS = [
    "bogus",
    "embeded",
    f"postgresql://openslob:{SECRET}@[::1:bad/slob",
    f"postgresql://openslob:{SECRET}@127.0.0.1:1/slob",  # nothing listens on port 1
    f"postgresql://openslob:{SECRET}@[::1]:1/slob",
    f"postgresql://openslob:{SECRET}@127.0.0.1:1/slob?sslmode=sometimes",
    f"host=/nonexistent-openslob user=x password={SECRET}",
    f"host=/nonexistent-openslob password='{SECRET} x' port=notanumber",
    f"mysql://u:{SECRET}@[::1:bad/",
    f"mysql://u:{SECRET}@127.0.0.1:notaport/",
    f"mysql://u:{SECRET}@127.0.0.1:1/",
    f"mariadb://u:{SECRET}@localhost/?unix_socket=/nonexistent-openslob.sock",
]
TARGET_COMMANDS = [
    ("setup",),
    ("verify",),
    ("doctor",),
    ("destroy", "--yes"),
    ("run", "--run-time", "1"),
    ("sweep", "--sessions", "1,2", "--run-time", "1"),
]


def assert_one_line(result: Result, codes: tuple[int, ...] = (1, 2)) -> str:
    """Exit 1 or 2, no traceback, no password, and one error line, the last on stderr, with
    nothing before it but the command's own announcement; returns the error line."""
    assert result.exit_code in codes, result.output
    assert "Traceback" not in result.output and SECRET not in result.output, result.output
    lines = [line for line in result.stderr.splitlines() if line.strip()]
    errors = [line for line in lines if line.startswith("slob: error: ")]
    assert errors and errors == lines[-1:], result.stderr
    before = lines[:-1]  # an announcement, wrapped at the console's width
    assert not before or before[0].startswith(ANNOUNCEMENTS), result.stderr
    assert not any(line.startswith(("slob", "note", "warning")) for line in before)
    return errors[0]


@pytest.fixture()
def cwd(tmp_path: Path) -> Path:
    (tmp_path / "work").mkdir()
    return tmp_path / "work"


def slob(cwd: Path, *args: str, data_dir: Path | None = None) -> Result:
    return invoke(*args, cwd=cwd, env={"SLOB_DATA_DIR": str(data_dir or cwd / "data")})


# ------------------------------------------------------------------------ targets, secrets


def test_redact_and_scrub_remove_every_form_of_a_password() -> None:
    assert redact(f"postgresql://u:{SECRET}@h/db") == "postgresql://u@h/db"
    assert redact(f"postgresql://u:pa/{SECRET}@h/db") == "postgresql://u@h/db"
    assert redact(f"host=h password='{SECRET} x' user=u") == "host=h password=******** user=u"
    assert redact(f"postgresql://h/db?password={SECRET}&x=1") == (
        "postgresql://h/db?password=********&x=1"
    )
    # a driver that quotes only a piece of the target (port "pa") gets the piece removed too
    message = f'invalid port "pa/{SECRET}" and "{SECRET}"'
    assert SECRET not in scrub(message, [f"mysql://u:pa/{SECRET}@h/"])


@pytest.mark.parametrize("command", TARGET_COMMANDS, ids=lambda c: c[0])
def test_bad_targets_are_one_line_without_the_password(command, cwd: Path) -> None:
    for target in BAD_TARGETS:
        result = slob(cwd, *command, "--target", target)
        line = assert_one_line(result)
        assert "--target" in line or "connect" in line or "database error" in line, line
    assert "did you mean embedded?" in slob(cwd, *command, "--target", "embeded").stderr
    # libpq would only say so when connecting (exit 1): bad input, before anything
    mode = assert_one_line(slob(cwd, *command, "--target", BAD_TARGETS[5]), codes=(2,))
    assert "sslmode=sometimes is not one of disable, allow" in mode, mode


def test_hostile_numbers_and_places_are_exit_2(cwd: Path) -> None:
    from openslob.config.option import parse_value
    from openslob.config.options import OPTIONS_BY_NAME

    assert parse_value(OPTIONS_BY_NAME["RATE"], "1e7") == 10_000_000  # an exponent is a number
    cases = [
        (["run", "--rate", "1e8"], "RATE=1e8 is out of range (allowed: 0–10000000)"),
        (["run", "--rate", "1e999"], "RATE=1e999 is not a number"),
        (["compare", str(GOOD_RUN), str(GOOD_RUN), "--confidence", "nan"], "'nan' is not a"),
        (["analyze", str(GOOD_RUN), "--max-cv", "inf"], "'inf' is not a finite number"),
        (["run", "--results-dir", "/proc", "--run-time", "1"], "--results-dir /proc: cannot"),
        (["sweep", "--sessions", "1,2", "--results-dir", "/proc"], "--results-dir /proc"),
    ]
    for args, expected in cases:
        line = assert_one_line(slob(cwd, *args), codes=(2,))
        assert expected in line, (args, line)
    assert not (cwd / "data").exists()  # refused before a server was made


# ---------------------------------------------------------------------------- bad paths


@pytest.fixture()
def damaged(tmp_path: Path) -> dict[str, Path]:
    """Results directories as a full disk, an editor or a copy leaves them."""
    root = tmp_path / "damaged"
    good = (GOOD_RUN / "run.json").read_text()
    contents: dict[str, str | bytes] = {
        "truncated": good[: len(good) // 3],
        "empty": "",
        "a-list": "[1, 2]",
        "no-keys": json.dumps({"schema_version": 2}),
        "binary": b"\x7fELF\x02\x01\x01\x00" + bytes(range(256)),
    }
    paths = {}
    for name, content in contents.items():
        path = root / name
        path.mkdir(parents=True)
        file = path / "run.json"
        file.write_bytes(content) if isinstance(content, bytes) else file.write_text(content)
        paths[name] = path
    odd_series = root / "binary-timeseries"
    shutil.copytree(GOOD_RUN, odd_series)
    (odd_series / "timeseries.csv").write_bytes(b"elapsed_s,phase\n1.0,\xff\xfe\x80\n")
    paths["binary-timeseries"] = odd_series
    return paths


def test_damaged_results_are_named_not_a_traceback(damaged: dict[str, Path], cwd: Path) -> None:
    report = [["report"], ["report", "--html"]]
    every = [*report, ["analyze"], ["analyze", "--timeseries"], ["plot", "-o", str(cwd / "p")]]
    refused = {name: every for name in ("truncated", "empty", "a-list", "binary")}
    # parses, but lacks what the text report reads (analyses take any key missing)
    refused["no-keys"] = report
    refused["binary-timeseries"] = [["analyze", "--timeseries"]]  # run.json is intact
    for name, commands in refused.items():
        for command in commands:
            line = assert_one_line(slob(cwd, *command, str(damaged[name])))
            assert str(damaged[name]) in line, (command, line)
    # in a tree, the damaged runs are named and the others still analyzed
    root = damaged["truncated"].parent
    shutil.copytree(GOOD_RUN, root / "good")
    tree = slob(cwd, "analyze", str(root))
    assert tree.exit_code == 0 and "good" in tree.stdout and "no-keys" in tree.stdout
    named = [line for line in tree.stderr.splitlines() if line.startswith("slob: ")]
    for name in ("truncated", "empty", "a-list", "binary"):
        assert sum(f"slob: {damaged[name] / 'run.json'}: " in line for line in named) == 1
    assert len(named) == 4 and "Traceback" not in tree.output


def test_bad_paths_and_labels_are_one_line(tmp_path: Path, cwd: Path) -> None:
    a_file = tmp_path / "a-file"
    a_file.write_text("not a directory\n")
    under_file = str(a_file / "sub")
    conf = tmp_path / "slob.conf"
    conf.write_text("SCALE=200\nUPDATE_PCT = 50\n")
    long_label = "L" * 300
    cases = [
        (["run", "--results-dir", under_file], "--results-dir"),
        (["run", "--label", long_label], "--label is 300 bytes"),
        (["sweep", "--sessions", "1,2", "--label", long_label], "--label is 300 bytes"),
        # bytes that are no UTF-8 reach Python as surrogates (surrogateescape)
        (["run", "--label", "caf\udce9"], "is not UTF-8 text"),
        (["run", "--repeat", "2", "--label", "caf\udce9"], "is not UTF-8 text"),
        (["sweep", "--sessions", "1,2", "--label", "caf\udce9"], "is not UTF-8 text"),
        (["sweep", "--sessions", "1,2", "--results-dir", under_file], "--results-dir"),
        (["sweep", "--sessions", "1,2", "--sweep-dir", under_file], "--sweep-dir"),
        (["run", "--conf", "/bin/sh"], "not a text file"),
        (["run", "--conf", str(conf)], "UPDATE_PCT not read"),
        (["run", "--conf", str(tmp_path / "missing.conf")], "missing.conf"),
        (["run", "--external-script", str(tmp_path / "hook.sh")], "EXTERNAL_SCRIPT"),
        (["analyze", str(tmp_path / "nowhere")], "does not exist"),
        (["plot", str(tmp_path / "nowhere")], "does not exist"),
        (["report", str(tmp_path / "nowhere")], "does not exist"),
        (["plot", str(GOOD_RUN), "-o", under_file], under_file),
        (["report", "--html", str(GOOD_RUN), "-o", under_file], under_file),
        (["plot", str(GOOD_RUN), "--format", "gif"], "--format"),
        (["server", "start", "--data-dir", under_file], str(a_file)),
        (["server", "start", "--engine", "mariadb", "--data-dir", under_file], str(a_file)),
        (["server", "start", "--page-size", "7k"], "--page-size"),
        (["setup", "--data-dir", under_file], str(a_file)),
        (["run", "--data-dir", under_file, "--run-time", "1"], str(a_file)),
        (["calibrate", "--calibrate-dir", under_file, "--run-time", "1"], ""),
    ]
    for args, expected in cases:
        result = slob(cwd, *args)
        line = assert_one_line(result)
        assert expected in line, (args, line)
    assert not (cwd / "slob-results").exists()  # refused before anything was made


# ------------------------------------------------------------------ database privileges


@pytest.fixture()
def roles(db: psycopg.Connection) -> Iterator[dict[str, str]]:
    """A role with no privileges and one whose transactions are read-only (it may create)."""
    names = {"none": "slob_nopriv", "readonly": "slob_readonly"}
    for name in names.values():
        db.execute(f"DROP ROLE IF EXISTS {name}")
        db.execute(f"CREATE ROLE {name} LOGIN PASSWORD '{SECRET}'")
    db.execute(f"GRANT CREATE ON DATABASE slob TO {names['readonly']}")
    db.execute(f"ALTER ROLE {names['readonly']} SET default_transaction_read_only = on")
    yield names
    for name in names.values():
        db.execute(f"REVOKE ALL ON DATABASE slob FROM {name}")
        db.execute(f"DROP ROLE {name}")


def test_postgres_roles_without_privileges_or_read_only_are_one_line(
    server: EmbeddedServer, roles: dict[str, str], cwd: Path
) -> None:
    where = conninfo_to_dict(server.socket_conninfo())
    data = ["--schemas", "1", "--scale", "200", "--scan-table-sz", "0", "--seed", "5"]
    assert slob(cwd, "setup", *data, data_dir=server.data_dir).exit_code == 0  # as the owner
    for kind, role in roles.items():
        target = make_conninfo(
            host=where["host"], port=where["port"], dbname="slob", user=role, password=SECRET
        )
        for command in (["setup"], ["verify"], ["run", "--run-time", "1"]):
            result = slob(cwd, *command, "--target", target, *data)
            line = assert_one_line(result)
            if command[0] != "verify":  # verify reports what it finds (nothing): exit 1
                hint = "slob doctor" if kind == "none" else "read-only"
                assert hint in line, (kind, command, line)


@pytest.fixture(scope="module")
def mariadb() -> Iterator[EmbeddedMariaDB]:
    if not MARIADBD.exists():
        pytest.skip("mariadb-server not installed")
    yield from private_mariadb("openslob-errors-")


def test_mariadb_users_without_privileges_or_read_only_are_one_line(
    mariadb: EmbeddedMariaDB, cwd: Path
) -> None:
    with mariadb.admin_connection() as conn, conn.cursor() as cur:
        for user in ("slob_nopriv", "slob_ro"):
            cur.execute(f"CREATE OR REPLACE USER '{user}'@'localhost' IDENTIFIED BY '{SECRET}'")
        cur.execute(
            "GRANT SELECT, INSERT, UPDATE, DELETE, CREATE, DROP, INDEX, ALTER, CREATE ROUTINE,"
            " ALTER ROUTINE, EXECUTE, PROCESS ON *.* TO 'slob_ro'@'localhost'"
        )
    data = ["--schemas", "1", "--scale", "200", "--scan-table-sz", "0"]
    try:
        for user, hint in (("slob_nopriv", "slob doctor"), ("slob_ro", "read-only")):
            if user == "slob_ro":
                with mariadb.admin_connection() as conn, conn.cursor() as cur:
                    cur.execute("SET GLOBAL read_only = ON")
            target = f"mysql://{user}:{SECRET}@localhost/?unix_socket={mariadb.socket_path}"
            for command in (["setup"], ["run", "--run-time", "1"]):
                line = assert_one_line(slob(cwd, *command, "--target", target, *data))
                assert hint in line, (user, command, line)
            verified = slob(cwd, "verify", "--target", target, *data)
            # a user who may not even see the tables measures them as missing: exit 1
            assert verified.exit_code == 1 and "check(s) failed" in verified.stdout
            assert "Traceback" not in verified.output and SECRET not in verified.output
    finally:
        with mariadb.admin_connection() as conn, conn.cursor() as cur:
            cur.execute("SET GLOBAL read_only = OFF")
            cur.execute("DROP USER 'slob_nopriv'@'localhost', 'slob_ro'@'localhost'")


# ------------------------------------------------------------------- concurrency and kills


def _wait_for_loading(server: EmbeddedServer, timeout: float = 60) -> None:
    deadline = time.monotonic() + timeout
    with psycopg.connect(server.socket_conninfo(), autocommit=True) as conn:
        while time.monotonic() < deadline:
            row = conn.execute(
                "SELECT count(*) FROM pg_stat_activity WHERE state = 'active'"
                " AND application_name LIKE 'openslob-load user%%' AND query LIKE 'INSERT%%'"
            ).fetchone()
            if row[0]:
                return
            time.sleep(0.05)
    raise AssertionError("setup never started loading")


def test_kill_9_during_setup_then_run_and_setup(server: EmbeddedServer, cwd: Path) -> None:
    """A setup killed outright mid-load: the run refuses in one line naming `slob setup`,
    and the next setup rebuilds what was left half loaded."""
    data = ["--schemas", "2", "--scale", "6000", "--scan-table-sz", "16", "--seed", "23"]
    setup = slob_subprocess("setup", *data, data_dir=server.data_dir, cwd=cwd)
    try:
        _wait_for_loading(server)
    finally:
        setup.send_signal(signal.SIGKILL)
        setup.communicate(timeout=30)
    refused = slob(cwd, "run", *data, "--run-time", "1", data_dir=server.data_dir)
    line = assert_one_line(refused)
    assert "half loaded" in line and "slob setup" in line
    again = slob(cwd, "setup", *data, data_dir=server.data_dir)
    assert again.exit_code == 0, again.output
    assert "reloaded: half loaded (an interrupted setup)" in again.output


def test_a_server_killed_mid_setup_is_one_line_about_the_server(
    fresh_server: EmbeddedServer, cwd: Path
) -> None:
    """The postmaster SIGKILLed while setup loads: the cancel that follows cannot reach it,
    and the error says what happened (the server ended the session), not "PQcancel() …"."""
    pid = fresh_server.start().pid
    assert pid
    data = ["--schemas", "2", "--scale", "6000", "--scan-table-sz", "16", "--seed", "37"]
    setup = slob_subprocess("setup", *data, data_dir=fresh_server.data_dir, cwd=cwd)
    try:
        _wait_for_loading(fresh_server)
    finally:
        os.kill(pid, signal.SIGKILL)
        _, stderr = setup.communicate(timeout=60)
    assert setup.returncode == 1 and "Traceback" not in stderr, stderr
    lines = [line for line in stderr.splitlines() if line.startswith("slob: error: ")]
    assert len(lines) == 1 and "PQcancel" not in lines[0], stderr


def test_two_setups_at_once_end_in_one_line_and_a_valid_data_set(
    server: EmbeddedServer, cwd: Path
) -> None:
    data = ["--schemas", "2", "--scale", "4000", "--scan-table-sz", "16", "--seed", "29"]
    both = [slob_subprocess("setup", *data, data_dir=server.data_dir, cwd=cwd) for _ in "ab"]
    outcomes = [(proc.wait(timeout=300), *proc.communicate()) for proc in both]
    assert any(code == 0 for code, _, _ in outcomes), outcomes
    for code, _, stderr in outcomes:
        assert "Traceback" not in stderr
        if code != 0:
            errors = [line for line in stderr.splitlines() if line.startswith("slob: error")]
            assert code == 1 and len(errors) == 1, stderr
    verified = slob(cwd, "verify", *data, data_dir=server.data_dir)
    assert verified.exit_code == 0, verified.output


@pytest.mark.parametrize("engine", ["postgresql", "mariadb"])
def test_two_first_server_starts_at_once(engine: str) -> None:
    """Both find or make the same server: no FileExistsError from two binary copies, no
    second initdb over the first."""
    if engine == "mariadb" and not MARIADBD.exists():
        pytest.skip("mariadb-server not installed")
    base = make_base_dir("openslob-race-")
    data_dir = base / "data"
    args = ["server", "start", "--engine", engine, "--data-dir", str(data_dir)]
    try:
        starts = [slob_subprocess(*args, data_dir=data_dir, cwd=base) for _ in "ab"]
        for proc in starts:
            stdout, stderr = proc.communicate(timeout=300)
            assert proc.returncode == 0, stderr
            assert "running" in stdout and "Traceback" not in stderr
    finally:
        invoke("server", "destroy", "--yes", *args[2:], cwd=base)
        shutil.rmtree(base, ignore_errors=True)


def test_usage_errors_are_one_line_and_help_stays_help(cwd: Path) -> None:
    for args in (["nosuch"], ["run", "--nosuch"], ["server", "start", "--page-size", "7k"]):
        assert "--help)" in assert_one_line(slob(cwd, *args), codes=(2,))
    alone = slob(cwd)  # a group without a command shows its help, as before
    assert "Quick start" in alone.output and "slob: error" not in alone.output
    assert slob(cwd, "run", "--help").exit_code == 0


def test_sweep_prints_slob_conf_warnings_like_run(tmp_path: Path, cwd: Path) -> None:
    """A mistyped key in slob.conf is named by `slob sweep` as by `slob run` (here both then
    stop at a data directory under a file, before anything runs)."""
    conf = tmp_path / "slob.conf"
    conf.write_text("SCALEE=100\n")
    a_file = tmp_path / "a-file"
    a_file.write_text("")
    for command in (["run", "--run-time", "1"], ["sweep", "--sessions", "1,2"]):
        result = slob(cwd, *command, "--conf", str(conf), data_dir=a_file / "data")
        assert result.exit_code == 1 and "Traceback" not in result.output, result.output
        assert "warning: " in result.stderr and "unknown parameter SCALEE" in result.stderr


def _edited_run(root: Path, name: str, **changes: Any) -> Path:
    """A copy of a complete recorded run with top-level or config fields replaced."""
    run = json.loads((RUNS / "20261122T053536Z-ro1" / "run.json").read_text())
    for key, value in changes.items():
        if key.startswith("config_"):
            run["config"][key.removeprefix("config_")] = value
        else:
            run[key] = value
    path = root / name
    path.mkdir(parents=True)
    (path / "run.json").write_text(json.dumps(run))
    return path


def test_runs_of_the_wrong_shape_are_named_not_compared(tmp_path: Path, cwd: Path) -> None:
    """Wrong-typed fields are one line naming the file and the field in every reader; a
    file that is no run, or a target-rate run beside a closed-loop one, is not compared."""
    good = RUNS / "20261122T053536Z-ro1"
    for name, changes in {
        "window-list": {"window": [1]},
        "metrics-text": {"metrics": {"pio_reads_per_s": "oops"}},
        "sessions-int": {"sessions": 5},
        "config-text": {"config_SESSIONS": "x"},
    }.items():
        run = _edited_run(tmp_path, name, **changes)
        field = name.split("-")[0]
        for command in (
            ["report", str(run)],
            ["report", "--html", str(run), "-o", str(tmp_path / "r.html")],
            ["plot", str(run), "-o", str(tmp_path / "plots")],
            ["analyze", str(run)],
            ["compare", str(run), str(good), "--no-plots"],
        ):
            line = assert_one_line(slob(cwd, *command))
            assert "a damaged run.json (" in line and field in line, (command, line)
            assert str(run) in line, (command, line)
    not_a_run = tmp_path / "not-a-run"
    not_a_run.mkdir()
    (not_a_run / "run.json").write_text(json.dumps({"schema_version": 2}))
    line = assert_one_line(slob(cwd, "compare", str(not_a_run), str(good), "--no-plots"))
    assert "no complete run to compare" in line
    rate = _edited_run(tmp_path, "rate", config_RATE=100.0)
    line = assert_one_line(slob(cwd, "compare", str(good), str(rate), "--no-plots"), codes=(2,))
    assert "different workloads (RATE 0 vs 100" in line


def test_a_password_on_the_command_line_leaves_ps_at_once(cwd: Path) -> None:
    """`ps` (/proc/PID/cmdline, readable by every user) shows no --target password while the
    command runs (here: waiting on a server that never answers); the command itself still
    sees the arguments as given (a label the redaction would shorten is still too long)."""
    import socket
    import subprocess
    import sys

    with socket.socket() as silent:
        silent.bind(("127.0.0.1", 0))
        silent.listen()
        target = f"postgresql://openslob:{SECRET}@127.0.0.1:{silent.getsockname()[1]}/slob"
        proc = slob_subprocess("verify", "--target", target, data_dir=cwd / "data", cwd=cwd)
        try:
            deadline = time.monotonic() + 10
            cmdline = b""
            while time.monotonic() < deadline and proc.poll() is None:
                cmdline = Path(f"/proc/{proc.pid}/cmdline").read_bytes()
                if cmdline and SECRET.encode() not in cmdline:  # empty inside execve
                    break
                time.sleep(0.02)
            assert proc.poll() is None and SECRET.encode() not in cmdline, cmdline
            assert b"postgresql://openslob@127.0.0.1" in cmdline  # the rest as given
            time.sleep(0.5)
            assert SECRET.encode() not in Path(f"/proc/{proc.pid}/cmdline").read_bytes()
        finally:
            proc.kill()
            proc.communicate()
    label = "password=" + "x" * 300
    done = subprocess.run(
        [sys.executable, "-m", "openslob", "run", "--label", label],
        capture_output=True, text=True, cwd=cwd, check=False,
    )  # fmt: skip
    assert done.returncode == 2 and "--label is 309 bytes" in done.stderr, done.stderr
