"""What every private server does the same way: where it lives, who it runs as, its instance
file, one start at a time, ports and sockets, passwords, stale processes, its log.

A private server is one directory the tool creates (its instance directory) under DATA_DIR.
As root the server runs as an unprivileged service user (databases refuse root, and root's
files stay root's); the tool never loosens permissions on a directory it did not create
(fsperm). Each engine's server (engines/<name>/server.py) subclasses ServerBase with what
differs: its binaries, its option file, how it starts and stops.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import pwd
import secrets
import signal
import socket
import subprocess
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from openslob.engines.api import PROFILES, ServerState
from openslob.engines.common import fsperm
from openslob.model.errors import ConfigError, ServerError

SERVICE_USER = os.environ.get("SLOB_SERVER_USER", "openslob")
MAX_SOCKET_PATH = 107  # sun_path is 108 bytes on Linux, including the terminating NUL
START_TIMEOUT_S = 120
DEFAULT_MAX_CONNECTIONS = 100
# The environment servers and their tools run with: no locale or time zone of the caller.
SERVER_ENV = {"LC_ALL": "C", "TZ": "UTC"}


def default_data_dir() -> Path:
    """$SLOB_DATA_DIR, else $XDG_DATA_HOME/openslob, else ~/.local/share/openslob.

    As root without XDG_DATA_HOME the default is /var/lib/openslob: root's home is 0700 and
    the unprivileged server user could not reach a data directory inside it.
    """
    if env := os.environ.get("SLOB_DATA_DIR"):
        return Path(env).expanduser()
    if xdg := os.environ.get("XDG_DATA_HOME"):
        return Path(xdg).expanduser() / "openslob"
    if os.geteuid() == 0:
        return Path("/var/lib/openslob")
    return Path.home() / ".local" / "share" / "openslob"


@contextlib.contextmanager
def start_lock(data_dir: Path) -> Iterator[None]:
    """One `start` at a time per data directory: two first starts at once would both
    create the directories, copy the binaries and initialise the database. The lock is a
    flock on the directory that holds the data directory (nothing is created in it), so it
    covers the data directory's own creation; the holder's exit releases it, however it
    exits."""
    parent = data_dir.parent
    fsperm.make_dirs(parent, mode=0o755)  # what preparing the data directory would do first
    fd = os.open(parent, os.O_RDONLY | os.O_DIRECTORY)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        os.close(fd)


def large_cache_mb() -> int:
    """40 % of RAM, at least 128 MB: a cache large enough to hold any data set that fits in
    memory (the lio and redo profiles)."""
    total = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    return max(128, int(total * 0.40) // (1 << 20))


def port_free(port: int) -> bool:
    with socket.socket() as sock:
        try:
            sock.bind(("127.0.0.1", port))
        except OSError:
            return False
    return True


def pick_port(tcp: bool, default: int) -> int:
    """The engine's default port, or any free loopback port when TCP is on and it is taken
    (without TCP the server listens on a private socket only: no clash possible)."""
    if not tcp or port_free(default):
        return default
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def process_running(pid: int) -> bool:
    """Running and not a zombie: a container's init may never reap an orphaned server, and
    a zombie's pid answers kill(pid, 0) as if it were alive."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except (OSError, IndexError):
        return False
    return fields[0] not in ("Z", "X")


def wait_until_stopped(pid: int, timeout: float = 10, zombie_grace_s: float = 2) -> bool:
    """True once the process is gone. A zombie counts as stopped after `zombie_grace_s`:
    its parent (init, usually) reaps it within milliseconds, except where it never will.
    A server this process launched is its child, and only it can reap it: so it does (a
    stopped server then leaves no zombie behind until the client exits)."""
    deadline = time.monotonic() + timeout
    zombie_since: float | None = None
    while (now := time.monotonic()) < deadline:
        with contextlib.suppress(ChildProcessError):  # not our child: its parent reaps it
            os.waitpid(pid, os.WNOHANG)
        if not Path(f"/proc/{pid}").exists():
            return True
        if not process_running(pid):
            zombie_since = zombie_since or now
            if now - zombie_since >= zombie_grace_s:
                return True
        time.sleep(0.05)
    return False


KILL_WAIT_S = 10  # a SIGKILLed process is gone within milliseconds; a stuck D state longer


def stop_process(pid: int, timeout: float) -> None:
    """SIGTERM, then SIGKILL when it has not exited within `timeout` seconds."""
    with contextlib.suppress(ProcessLookupError):
        os.kill(pid, signal.SIGTERM)
    if not wait_until_stopped(pid, timeout):
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)
        wait_until_stopped(pid, KILL_WAIT_S)  # gone (and reaped, when ours) before we return


def find_processes(matches: Callable[[Path], bool]) -> list[int]:
    """The pids of the live (not zombie) processes whose /proc entry `matches`."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            if matches(entry) and process_running(int(entry.name)):
                found.append(int(entry.name))
        except (OSError, ValueError):
            continue
    return found


def kill_processes(matches: Callable[[Path], bool]) -> None:
    """SIGKILL every process whose /proc entry `matches` (a server's orphans: call only once
    the server's own lock file and socket prove no server of ours lives)."""
    for pid in find_processes(matches):
        with contextlib.suppress(OSError):
            os.kill(pid, signal.SIGKILL)


def socket_answers(path: Path) -> bool:
    """Whether something listens on the Unix socket `path`: a server's own proof of life,
    whatever its pid file says (a backend left by a dead server does not listen)."""
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as sock:
        sock.settimeout(2)
        try:
            sock.connect(str(path))
        except OSError:
            return False
    return True


def log_tail(log_file: Path, markers: tuple[str, ...]) -> str:
    """The last line of a server log that holds one of `markers`, else its last line."""
    try:
        lines = [ln for ln in log_file.read_text().splitlines() if ln.strip()]
    except OSError:
        return "no server log"
    errors = [ln for ln in lines if any(marker in ln for marker in markers)]
    return (errors or lines or ["empty server log"])[-1].strip()


class ServerBase:
    """The instance directory, the instance file and the service user of one server.

    Subclasses return ServerState from start() and status() (engines.api)."""

    # Profiles the tool itself may start besides PROFILES (never a user's choice).
    internal_profiles: tuple[str, ...] = ()
    default_port: int = 0

    def __init__(self, instance_dir: Path, data_dir: Path) -> None:
        self._dir = instance_dir
        self._data_dir = data_dir  # DATA_DIR: the lock covers every instance below it
        self.instance_file = instance_dir / "instance.json"
        self.as_root = os.geteuid() == 0

    def start(
        self,
        profile: str | None = None,
        *,
        tcp: bool | None = None,
        port: int | None = None,
        max_connections: int | None = None,
    ) -> ServerState:
        """Start (or keep running) the server. Idempotent; restarts only to change settings.

        Arguments left as None keep what the instance had (or the defaults for a new one).
        """
        if profile is not None and profile not in (*PROFILES, *self.internal_profiles):
            allowed = ", ".join(PROFILES)
            raise ConfigError(f"profile={profile} is not a known profile (allowed: {allowed})")
        self._preflight()
        with start_lock(self._data_dir):
            self._ensure_service_user()
            self._prepare_directories()
            return self._start_locked(profile, tcp, port, max_connections)

    def would_restart(
        self,
        profile: str | None = None,
        *,
        tcp: bool | None = None,
        port: int | None = None,
        max_connections: int | None = None,
    ) -> bool:
        """Whether start() with these arguments would restart the running server (a
        settings change ends every session on it)."""
        if self._running_pid() is None:
            return False
        info = self._instance()
        wanted = self._wanted_settings(info, profile, tcp, port, max_connections)
        return {k: info.get(k) for k in wanted} != wanted

    def status(self) -> ServerState:
        """Absent (never created), stopped, or running with its version and settings as the
        server itself reports them."""
        info = self._instance()
        if not self._created():
            return ServerState(state="absent", data_dir=str(self.instance_dir), **self._where({}))
        pid = self._running_pid()
        state = ServerState(
            state="running" if pid else "stopped",
            data_dir=str(self.instance_dir),
            profile=info.get("profile"),
            pid=pid,
            tcp_port=info.get("port") if info.get("tcp") else None,
            service_user=info.get("service_user"),
            **self._where(info),
        )
        if not pid:
            state.version = self.server_version()
            return state
        state.uri = self.conninfo()
        state.version, state.settings = self._served_settings()
        return state

    # ------------------------------------------------------------- what an engine adds

    def _created(self) -> bool:
        """Whether its data directory was initialised."""
        raise NotImplementedError

    def _running_pid(self) -> int | None:
        """The server's pid when it is alive and really serves this instance."""
        raise NotImplementedError

    def server_version(self) -> str:
        """The version of its binaries (the server need not run)."""
        raise NotImplementedError

    def conninfo(self) -> str:
        raise NotImplementedError

    def _where(self, info: dict[str, Any]) -> dict[str, Any]:
        """Its own ServerState fields (page size, socket) from the instance file."""
        return {}

    def _served_settings(self) -> tuple[str, dict[str, str]]:
        """(version, reported settings) from the running server."""
        raise NotImplementedError

    def _preflight(self) -> None:
        """What must hold before anything is created (its binaries exist)."""

    def _prepare_directories(self) -> None:
        raise NotImplementedError

    def _start_locked(
        self, profile: str | None, tcp: bool | None, port: int | None, max_connections: int | None
    ) -> ServerState:
        raise NotImplementedError

    def _wanted_settings(
        self,
        info: dict[str, Any],
        profile: str | None,
        tcp: bool | None,
        port: int | None,
        max_connections: int | None,
    ) -> dict[str, Any]:
        """What _start_locked compares with the instance's settings (an engine adds its own)."""
        return self._wanted(info, profile, tcp, port, max_connections)

    def _wanted(
        self,
        info: dict[str, Any],
        profile: str | None,
        tcp: bool | None,
        port: int | None,
        max_connections: int | None,
    ) -> dict[str, Any]:
        """The settings to run with: the arguments, else the instance's, else the defaults."""
        wanted_tcp = bool(info.get("tcp", False)) if tcp is None else tcp
        return {
            "profile": profile or info.get("profile", "pio"),
            "tcp": wanted_tcp,
            "port": port or info.get("port") or pick_port(wanted_tcp, self.default_port),
            "max_connections": max_connections
            or info.get("max_connections", DEFAULT_MAX_CONNECTIONS),
        }

    @property
    def instance_dir(self) -> Path:
        """Everything of this instance lives here (what `slob server destroy` deletes)."""
        return self._dir

    def _instance(self) -> dict[str, Any]:
        try:
            return json.loads(self.instance_file.read_text())
        except FileNotFoundError:
            return {}

    def _save_instance(self, info: dict[str, Any]) -> None:
        tmp = self.instance_file.with_suffix(".tmp")
        tmp.write_text(json.dumps(info, indent=2) + "\n")
        tmp.chmod(0o644)
        tmp.replace(self.instance_file)

    def _service_ids(self) -> tuple[int, int] | None:
        """uid/gid the server runs as; None when that is us already (not root)."""
        if not self.as_root:
            return None
        entry = pwd.getpwnam(SERVICE_USER)
        return entry.pw_uid, entry.pw_gid

    @staticmethod
    def client_user() -> str:
        """Our own OS user name."""
        return pwd.getpwuid(os.geteuid()).pw_name

    def _user_name(self) -> str:
        return SERVICE_USER if self.as_root else self.client_user()

    def _as_server_user(self) -> dict[str, Any]:
        """subprocess keywords that run a child as the service user (nothing when we are)."""
        ids = self._service_ids()
        return {"user": ids[0], "group": ids[1], "extra_groups": []} if ids else {}

    def _run_as_server_user(
        self, args: list[str], *, path: str, timeout: float = 300
    ) -> subprocess.CompletedProcess[str]:
        """A tool of the server's, run as the service user from the instance directory."""
        try:
            return subprocess.run(
                args,
                cwd=self.instance_dir,
                env={"PATH": path, **SERVER_ENV},
                capture_output=True,
                text=True,
                timeout=timeout,
                check=False,
                **self._as_server_user(),
            )
        except subprocess.TimeoutExpired as exc:
            raise ServerError(
                f"{Path(args[0]).name} did not finish within {timeout:.0f} s"
            ) from exc

    def _short_socket_dir(self, preferred: Path, name: str, prefix: str) -> Path:
        """`preferred` (a private directory of the instance), unless the socket path in it
        would exceed the kernel's sun_path limit: then a new 0700 directory in /tmp."""
        if len(str(preferred / name)) <= MAX_SOCKET_PATH:
            return preferred
        short = Path("/tmp") / f"{prefix}{secrets.token_hex(4)}"
        short.mkdir(mode=0o700)
        if ids := self._service_ids():
            os.chown(short, *ids)
        return short

    @staticmethod
    def _new_secret(path: Path, line: Callable[[str], str]) -> str:
        """A generated password, written once to a 0600 file (as `line(password)`)."""
        password = secrets.token_urlsafe(24)
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        with os.fdopen(fd, "w") as fh:
            fh.write(line(password) + "\n")
        return password

    def _ensure_service_user(self) -> None:
        if self.as_root:
            fsperm.ensure_service_user(SERVICE_USER)
