"""A private MariaDB server (Debian's mariadbd) for openslob, one per InnoDB page size.

InnoDB fixes its page size when the data directory is created, so every page size gets its
own instance directory I = DATA_DIR/mariadb-<size> (e.g. mariadb-16k). Every directory below
is created by the tool:

    I/instance.json   profile, page size, port, TCP flag, socket dir, service user (no secrets)
    I/my.cnf          the server's only option file, rewritten at every start (0644)
    I/password        generated TCP password, mode 0600 (only with TCP)
    I/data/           datadir, owned by the server user, 0700
    I/run/            Unix socket and pid file, owned by the server user, 0700
    I/log/            error log (mariadbd.err), owned by the server user, 0700
    I/tmp/            the server's temporary files (tmpdir), owned by the server user, 0700:
                      its own, not the machine's shared /tmp

As root, mariadbd runs as the unprivileged user `openslob`. Over the socket the client logs
in as its own OS user through unix_socket authentication (the kernel vouches for the peer;
mariadb-install-db creates root@localhost and the socket user that way): no password exists.
With TCP (127.0.0.1 only, skip-name-resolve so loopback never matches 'localhost'), the
account openslob@127.0.0.1 gets a generated password; only its hash is sent to the server.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import shutil
import subprocess
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pymysql

from openslob.engines.api import ServerState
from openslob.engines.common import fsperm
from openslob.engines.common.server import (
    SERVER_ENV,
    SERVICE_USER,
    START_TIMEOUT_S,
    ServerBase,
    default_data_dir,
    find_processes,
    kill_processes,
    large_cache_mb,
    log_tail,
    process_running,
    socket_answers,
    stop_process,
)
from openslob.engines.mariadb.connection import SHAPING_SETTINGS, global_variables
from openslob.model.errors import ConfigError, ServerError

MARIADBD = Path(os.environ.get("SLOB_MARIADBD", "/usr/sbin/mariadbd"))
INSTALL_DB = Path(os.environ.get("SLOB_MARIADB_INSTALL_DB", "/usr/bin/mariadb-install-db"))
DEBIAN_PACKAGE = "mariadb-server"
TCP_USER = "openslob"
DEFAULT_PORT = 3306
STOP_TIMEOUT_S = 120
_PATH = "/usr/sbin:/usr/bin:/sbin:/bin"

PAGE_SIZES = {"4k": 4096, "8k": 8192, "16k": 16384, "32k": 32768, "64k": 65536}

# The pio buffer pool: 1024 pages plus 8 per connection (the pages one session may pin at once:
# secondary-index descent, clustered-index descent, undo, slack), rounded up to whole MiB.
# At 16k and 100 connections: 16 MiB + 12.5 MiB = 29 MiB; at 4k: 8 MiB. In pages it does not
# depend on the page size, so the data set is the same multiple of the cache at every size
# (the default 4 x 8192 rows is ~9x larger).
PIO_BASE_PAGES = 1024
PIO_PAGES_PER_CONNECTION = 8


def parse_page_size(text: str | int) -> str:
    """'16k', '16K', 16384 or '16384' -> '16k'; anything else is a one-line ConfigError."""
    raw = str(text).strip().lower()
    if raw in PAGE_SIZES:
        return raw
    for name, size in PAGE_SIZES.items():
        if raw == str(size):
            return name
    allowed = ", ".join(PAGE_SIZES)
    raise ConfigError(f"page_size={text} is not an InnoDB page size (allowed: {allowed})")


def pio_buffer_pool_mb(page_size: str, max_connections: int) -> int:
    pages = PIO_BASE_PAGES + PIO_PAGES_PER_CONNECTION * max_connections
    return -(-pages * PAGE_SIZES[page_size] // (1 << 20))


# glibc's malloc arenas for the server's threads. By default a process gets at most 8 per
# CPU (16 on a 2-vCPU host) and its threads share them: at 256 sessions, 16 to an arena. All
# sessions reach an interval's end at the same instant and allocate there (the result's
# JSON, the kept intervals' text): a thread preempted while it holds an arena's lock among
# 250 runnable ones leaves the others asleep on it for up to seconds. gdb on such a stall
# (MariaDB lio 256, 1 s intervals) found 27 sessions waiting in realloc for the user
# variable that keeps the intervals; with an arena a thread, 0 of 10 runs stalled (time
# outside the loop 0.005-0.025 %, longest gap 0.3-320 ms) against 2 of 8 before (1.3 and
# 3.9 %, gaps up to 1.9 s; a bench series: 1 of 3, 5.3 %). An arena is made only when a
# thread needs one (its memory is what that thread allocates), so the cap is one per
# connection and as many for the server's own threads.
# the server's own threads: 16 in an idle private mariadbd 10.11 here (InnoDB's page
# cleaner, purge, timer, signals); InnoDB's thread pool adds I/O workers under load. A
# cap, not an allocation: room to spare costs nothing.
SERVER_THREADS = 64


def malloc_arenas(max_connections: int) -> int:
    """MALLOC_ARENA_MAX for a server of `max_connections`: one arena a thread."""
    return max_connections + SERVER_THREADS


# What each profile sets, and why. Every profile keeps full durability.
_COMMON: dict[str, str] = {
    # No OS page cache between InnoDB and the device: a buffer pool miss is a device read.
    "innodb_flush_method": "O_DIRECT",
    # Durable commits: one redo write + fsync per COMMIT, like synchronous_commit=on.
    "innodb_flush_log_at_trx_commit": "1",
    # On (the default) and left visible: every page InnoDB flushes is written twice (once to
    # the doublewrite buffer), so physical writes are ~2x pages flushed. Reports say so.
    "innodb_doublewrite": "ON",
    # SLOB reads one block at a time: no linear or random read-ahead.
    "innodb_read_ahead_threshold": "0",
    "innodb_random_read_ahead": "OFF",
    # Secondary-index changes go to their pages now, not to a change buffer merged later.
    "innodb_change_buffering": "none",
    # Index lookups must descend the B-tree (LIO), not shortcut through a hash.
    "innodb_adaptive_hash_index": "OFF",
    # Each flushed page is its own write: no neighbour pages written along.
    "innodb_flush_neighbors": "0",
    "innodb_file_per_table": "ON",
    "innodb_log_file_size": "512M",
    # File I/O per event (count, bytes, picoseconds) for read/write latency from the database.
    "performance_schema": "ON",
    "performance_schema_instrument": "'wait/io/file/innodb/%=ON'",
    "performance_schema_consumer_global_instrumentation": "ON",
    "performance_schema_consumer_thread_instrumentation": "ON",
    "skip_name_resolve": "ON",
    "skip_log_bin": "",
    "character_set_server": "utf8mb4",
    "default_time_zone": "'+00:00'",
    "lc_messages": "en_US",
}

_PER_PROFILE: dict[str, dict[str, str]] = {
    # pio: a small buffer pool (pio_buffer_pool_mb): almost every SLOBop page is a read.
    "pio": {},
    # lio: the data set fits in the buffer pool (40 % of RAM): measures logical reads.
    "lio": {},
    # redo: the pio durability settings with reads kept in memory (40 % of RAM, as the
    # PostgreSQL redo profile) and room for redo, so commits and log flushes dominate.
    "redo": {"innodb_log_file_size": "2G", "innodb_log_buffer_size": "64M"},
}


def render_my_cnf(
    profile: str,
    *,
    page_size: str,
    datadir: Path,
    socket_path: Path,
    pid_file: Path,
    tmp_dir: Path,
    error_log: Path,
    port: int,
    tcp: bool,
    max_connections: int,
) -> str:
    """The [mariadbd] option file for one profile (the server reads no other)."""
    if profile == "pio":
        pool = f"{pio_buffer_pool_mb(page_size, max_connections)}M"
    else:
        pool = f"{large_cache_mb()}M"
    settings = {
        "datadir": str(datadir),
        "socket": str(socket_path),
        "pid_file": str(pid_file),
        "tmpdir": str(tmp_dir),
        "log_error": str(error_log),
        "port": str(port),
        **({"bind_address": "127.0.0.1"} if tcp else {"skip_networking": ""}),
        "innodb_page_size": page_size,
        "max_connections": str(max_connections),
        **_COMMON,
        **_PER_PROFILE[profile],
        "innodb_buffer_pool_size": pool,
    }
    lines = [
        f"# openslob profile '{profile}' ({page_size} pages) - written at every start; do not edit",
        "[mariadbd]",
    ]
    lines += [
        f"{k.replace('_', '-')}={v}" if v else k.replace("_", "-") for k, v in settings.items()
    ]
    # The client section lets `mariadb --defaults-file=I/my.cnf` reach this server.
    lines += ["", "[client]", f"socket={socket_path}"]
    return "\n".join(lines) + "\n"


class Secret(str):
    """A password that never shows in a repr (dicts, tracebacks, logs of kwargs)."""

    __slots__ = ()

    def __repr__(self) -> str:
        return "'********'"


REPORTED_SETTINGS = (
    "version",
    *SHAPING_SETTINGS,
    "datadir",
    "socket",
    "port",
    "skip_networking",
)


class EmbeddedMariaDB(ServerBase):
    """One private mariadbd in DATA_DIR/mariadb-<page size>."""

    default_port = DEFAULT_PORT

    def __init__(self, data_dir: Path | str | None = None, page_size: str | int = "16k") -> None:
        self.page_size = parse_page_size(page_size)
        self.base_dir = Path(data_dir).expanduser().absolute() if data_dir else default_data_dir()
        self.dir = self.base_dir / f"mariadb-{self.page_size}"
        super().__init__(self.dir, self.base_dir)
        self.datadir = self.dir / "data"
        self.run_dir = self.dir / "run"
        self.log_dir = self.dir / "log"
        self.tmp_dir = self.dir / "tmp"
        self.log_file = self.log_dir / "mariadbd.err"
        self.pid_file = self.run_dir / "mariadbd.pid"
        self.cnf = self.dir / "my.cnf"
        self.password_file = self.dir / "password"

    @property
    def label(self) -> str:
        return f"embedded MariaDB ({self.page_size} pages) in {self.dir}"

    @contextlib.contextmanager
    def bulk_load(self, notice: Callable[[str], None] = lambda _m: None) -> Iterator[bool]:
        """InnoDB loads as fast in its test profile (O_DIRECT with a doublewrite-sized
        buffer pool): nothing to change."""
        yield False

    @property
    def page_bytes(self) -> int:
        return PAGE_SIZES[self.page_size]

    @property
    def files_dir(self) -> Path:
        """The database's own files: its device is the one the run's counters read."""
        return self.datadir

    # ----------------------------------------------------------------- identity
    # client_user() (ServerBase) is also the account unix_socket authentication maps us to.

    @property
    def socket_path(self) -> Path:
        return Path(self._instance().get("socket") or self.run_dir / "mariadb.sock")

    def _preflight(self) -> None:
        for binary in (MARIADBD, INSTALL_DB):
            if not binary.exists():
                raise ServerError(
                    f"{binary} not found: install the Debian package {DEBIAN_PACKAGE} "
                    f"(apt-get install {DEBIAN_PACKAGE}); the service it enables is not needed"
                )

    def server_version(self) -> str:
        out = subprocess.run([str(MARIADBD), "--version"], capture_output=True, text=True)
        # "/usr/sbin/mariadbd  Ver 10.11.19-MariaDB-0+deb12u1 for debian-linux-gnu ..."
        words = out.stdout.split()
        return words[words.index("Ver") + 1] if "Ver" in words else out.stdout.strip()

    # ---------------------------------------------------------------- preparing

    def _prepare_directories(self) -> None:
        ids = self._service_ids()
        created = fsperm.make_dirs(self.base_dir, mode=0o700 if not ids else 0o750)
        if ids and created:
            # Root owns the data dir; the server user's group may traverse it, nobody else.
            os.chown(self.base_dir, 0, ids[1])
            self.base_dir.chmod(0o750)
        if not self.dir.exists():
            self.dir.mkdir(mode=0o750)
            if ids:
                os.chown(self.dir, 0, ids[1])
            self.dir.chmod(0o750 if ids else 0o700)
        if ids:
            fsperm.require_traversable(self.dir, SERVICE_USER)
        for sub in (self.datadir, self.run_dir, self.log_dir, self.tmp_dir):
            if not sub.exists():
                sub.mkdir(mode=0o700)
            if ids:
                os.chown(sub, *ids)
            sub.chmod(0o700)

    def _choose_socket(self) -> Path:
        """I/run/mariadb.sock, unless that path exceeds the kernel's sun_path limit."""
        return self._short_socket_dir(self.run_dir, "mariadb.sock", "openslob-my-") / (
            "mariadb.sock"
        )

    def _install_db(self) -> None:
        """mariadb-install-db once, with the page size (fixed for the datadir's lifetime)."""
        if (self.datadir / "mysql").is_dir():
            return
        proc = self._run_as_server_user(
            [
                str(INSTALL_DB),
                f"--defaults-file={self.cnf}",
                "--skip-test-db",
                "--auth-root-authentication-method=socket",
                f"--auth-root-socket-user={self.client_user()}",
            ],
            path=_PATH,
        )
        if proc.returncode != 0:
            shutil.rmtree(self.datadir, ignore_errors=True)
            detail = [ln for ln in (proc.stderr + proc.stdout).splitlines() if ln.strip()]
            errors = [ln for ln in detail if "ERROR" in ln] or detail or ["no output"]
            raise ServerError(f"mariadb-install-db failed: {errors[-1].strip()}")

    # ------------------------------------------------------------ start and stop

    def _start_locked(
        self, profile: str | None, tcp: bool | None, port: int | None, max_connections: int | None
    ) -> ServerState:
        info = self._instance()
        wanted = self._wanted_settings(info, profile, tcp, port, max_connections)
        running = self._running_pid()
        if running and {k: info.get(k) for k in wanted} == wanted:
            return self.status()
        if running:
            self.stop()
        self.kill_orphans()
        socket_path = self._choose_socket()
        info.update(wanted, socket=str(socket_path), service_user=self._user_name())
        self._write_cnf(wanted, socket_path)
        self._save_instance(info)
        self._install_db()
        # (from max_connections, which a restart follows: a server an older openslob
        # started runs without the arenas until it is restarted, never restarted for them)
        self._launch(malloc_arenas(wanted["max_connections"]))
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
        wanted = self._wanted(info, profile, tcp, port, max_connections)
        return {**wanted, "page_size": self.page_size}

    def _write_cnf(self, wanted: dict[str, Any], socket_path: Path) -> None:
        text = render_my_cnf(
            wanted["profile"],
            page_size=self.page_size,
            datadir=self.datadir,
            socket_path=socket_path,
            pid_file=self.pid_file,
            tmp_dir=self.tmp_dir,
            error_log=self.log_file,
            port=wanted["port"],
            tcp=wanted["tcp"],
            max_connections=wanted["max_connections"],
        )
        tmp = self.cnf.with_suffix(".tmp")
        tmp.write_text(text)
        tmp.chmod(0o644)  # mariadbd ignores a world-writable option file
        tmp.replace(self.cnf)

    def _launch(self, arenas: int) -> None:
        """mariadbd in a session of its own, detached (it outlives this process), with
        `arenas` malloc arenas at most (malloc_arenas)."""
        self.pid_file.unlink(missing_ok=True)
        started = time.monotonic()
        proc = subprocess.Popen(
            self._launch_args(),
            cwd=self.dir,
            env={"PATH": _PATH, **SERVER_ENV, "MALLOC_ARENA_MAX": str(arenas)},
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            start_new_session=True,
            **self._as_server_user(),
        )
        while time.monotonic() - started < START_TIMEOUT_S:
            if proc.poll() is not None:
                raise ServerError(
                    f"mariadbd did not start: {self._log_tail()} (log: {self.log_file})"
                )
            if self._ping():
                return
            time.sleep(0.1)
        with contextlib.suppress(OSError):
            proc.kill()
        raise ServerError(
            f"mariadbd did not accept connections within {START_TIMEOUT_S} s: "
            f"{self._log_tail()} (log: {self.log_file})"
        )

    def _launch_args(self) -> list[str]:
        """mariadbd's command line (a cluster node adds its wsrep options)."""
        return [str(MARIADBD), f"--defaults-file={self.cnf}"]

    def _ping(self) -> bool:
        try:
            pymysql.connect(**self.admin_kwargs(), connect_timeout=2).close()
        except pymysql.err.OperationalError:
            return False
        return True

    def _after_start(self, tcp: bool) -> None:
        """The TCP account, from the 0600 password file; only its hash reaches the server."""
        if not tcp:
            return
        password = self._password()
        digest = hashlib.sha1(hashlib.sha1(password.encode()).digest()).hexdigest().upper()
        with self.admin_connection() as conn, conn.cursor() as cur:
            cur.execute(
                f"CREATE USER IF NOT EXISTS '{TCP_USER}'@'127.0.0.1'"
                f" IDENTIFIED BY PASSWORD '*{digest}'"
            )
            cur.execute(f"ALTER USER '{TCP_USER}'@'127.0.0.1' IDENTIFIED BY PASSWORD '*{digest}'")
            cur.execute(f"GRANT ALL PRIVILEGES ON *.* TO '{TCP_USER}'@'127.0.0.1'")

    def _password(self) -> Secret:
        if self.password_file.exists():
            return Secret(self.password_file.read_text().strip())
        return Secret(self._new_secret(self.password_file, lambda pw: pw))

    def stop(self, *, timeout: float = STOP_TIMEOUT_S) -> bool:
        """Clean shutdown (SIGTERM; SIGKILL if it hangs). False when it was not running."""
        pid = self._running_pid()
        if pid is None:
            self.kill_orphans()
            return False
        stop_process(pid, timeout)
        self.kill_orphans()
        return True

    def destroy(self) -> None:
        """Stop the server and delete everything the tool created for this page size."""
        self.stop()
        sock = self._instance().get("socket")
        if sock and Path(sock).parent.parent == Path("/tmp"):
            shutil.rmtree(Path(sock).parent, ignore_errors=True)
        shutil.rmtree(self.dir, ignore_errors=True)
        with contextlib.suppress(OSError):
            self.base_dir.rmdir()  # only if empty: never remove what others put there

    # -------------------------------------------------------- liveness and recovery

    def _running_pid(self) -> int | None:
        """mariadbd's pid when it is alive and really serves our datadir: the pid file's,
        else the one mariadbd started with our option file (a pid file removed by hand never
        makes a live server look stopped)."""
        try:
            pid = int(self.pid_file.read_text().split()[0])
        except (OSError, ValueError, IndexError):
            pid = None
        if pid is not None and process_running(pid) and self._serves_us(pid):
            return pid
        found = find_processes(lambda entry: self._serves_us(int(entry.name)))
        return found[0] if len(found) == 1 else None

    def _serves_us(self, pid: int) -> bool:
        try:
            cmdline = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
        except OSError:
            return False
        return f"--defaults-file={self.cnf}".encode() in cmdline

    def kill_orphans(self) -> None:
        """Nothing to do: mariadbd is one process, and a live one started with our option file
        is the server itself (_running_pid finds it, with or without its pid file), never an
        orphan to kill. Two at once (one hung at start) are killed only once neither answers
        on the socket."""
        if self._running_pid() or socket_answers(self.socket_path):
            return
        marker = f"--defaults-file={self.cnf}".encode()
        kill_processes(lambda entry: marker in (entry / "cmdline").read_bytes().split(b"\0"))

    def _log_tail(self) -> str:
        return log_tail(self.log_file, ("[ERROR]",))

    # ---------------------------------------------------------------- reaching it

    def admin_kwargs(self, database: str | None = None) -> dict[str, Any]:
        """pymysql.connect kwargs over the private socket (unix_socket auth, no password)."""
        where = {"unix_socket": str(self.socket_path), "user": self.client_user()}
        return _session(where, database)

    def connect_kwargs(self, database: str | None = None) -> dict[str, Any]:
        """pymysql.connect kwargs for work sessions: the socket, or loopback TCP with the
        generated password (a Secret: its repr is masked, so printing the dict is safe)."""
        info = self._instance()
        if not info.get("tcp"):
            return self.admin_kwargs(database)
        where = {"host": "127.0.0.1", "port": int(info["port"]), "user": TCP_USER}
        return _session({**where, "password": self._password()}, database)

    def conninfo(self) -> str:
        """A URI naming the target, without any password (for results and status)."""
        info = self._instance()
        if info.get("tcp"):
            return f"mysql://{TCP_USER}@127.0.0.1:{info['port']}/"
        return f"mysql://{self.client_user()}@localhost/?unix_socket={self.socket_path}"

    @contextlib.contextmanager
    def admin_connection(self, database: str | None = None):
        conn = pymysql.connect(**self.admin_kwargs(database), connect_timeout=10)
        try:
            yield conn
        finally:
            conn.close()

    def _created(self) -> bool:
        return (self.datadir / "mysql").is_dir()

    def _where(self, info: dict[str, Any]) -> dict[str, Any]:
        return {"page_size": self.page_size, **({"socket": str(self.socket_path)} if info else {})}

    def _served_settings(self) -> tuple[str, dict[str, str]]:
        with self.admin_connection() as conn:
            settings = global_variables(conn, REPORTED_SETTINGS)
        # The page size as the server reports it (bytes), next to the name we asked for.
        served = int(settings.get("innodb_page_size", 0))
        if served != PAGE_SIZES[self.page_size]:
            raise ServerError(
                f"{self.dir} serves innodb_page_size={served}, not {self.page_size}: "
                "the data directory was created with another page size"
            )
        return settings.get("version", ""), settings


def _session(where: dict[str, Any], database: str | None) -> dict[str, Any]:
    """pymysql.connect kwargs: where and who, autocommit, utf8mb4, the database if any."""
    kwargs = {**where, "autocommit": True, "charset": "utf8mb4"}
    if database:
        kwargs["database"] = database
    return kwargs
