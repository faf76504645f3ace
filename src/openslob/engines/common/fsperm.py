"""File-system permissions for the server user, without loosening anything we did not create."""

from __future__ import annotations

import grp
import os
import pwd
import shutil
import stat
import subprocess
from pathlib import Path

from openslob.model.errors import ServerError


def ensure_service_user(name: str) -> None:
    """Create the unprivileged system account the server runs as (root only)."""
    try:
        pwd.getpwnam(name)
        return
    except KeyError:
        pass
    useradd = shutil.which("useradd") or "/usr/sbin/useradd"
    proc = subprocess.run(
        [
            useradd,
            "--system",
            "--user-group",
            "--no-create-home",
            "--home-dir",
            "/nonexistent",
            "--shell",
            "/usr/sbin/nologin",
            "--comment",
            "openslob private database servers",
            name,
        ],
        capture_output=True,
        text=True,
        check=False,
    )
    if proc.returncode != 0 and proc.returncode != 9:  # 9: created meanwhile by someone else
        raise ServerError(f"could not create the server user '{name}': {proc.stderr.strip()}")


def make_dirs(path: Path, mode: int) -> list[Path]:
    """mkdir -p that returns what it created; new parents get 0755 so the server can pass."""
    missing: list[Path] = []
    probe = path
    while not probe.exists():
        missing.append(probe)
        probe = probe.parent
    created = []
    for directory in reversed(missing):
        try:
            directory.mkdir(mode=mode if directory == path else 0o755)
        except FileExistsError:  # made meanwhile by another start: not ours to change
            continue
        directory.chmod(mode if directory == path else 0o755)  # umask would narrow it
        created.append(directory)
    return created[::-1]


def _may_traverse(path: Path, uid: int, gids: set[int]) -> bool:
    st = path.stat()
    if st.st_uid == uid:
        return bool(st.st_mode & stat.S_IXUSR)
    if st.st_gid in gids:
        return bool(st.st_mode & stat.S_IXGRP)
    return bool(st.st_mode & stat.S_IXOTH)


def require_traversable(path: Path, user: str) -> None:
    """Fail with the blocking directory named when `user` cannot reach `path`."""
    entry = pwd.getpwnam(user)
    gids = {entry.pw_gid} | {g.gr_gid for g in grp.getgrall() if user in g.gr_mem}
    for directory in [path, *path.parents]:
        if not _may_traverse(directory, entry.pw_uid, gids):
            mode = stat.S_IMODE(directory.stat().st_mode)
            raise ServerError(
                f"the server user '{user}' cannot reach {path}: {directory} is mode {mode:04o}; "
                "choose --data-dir (or SLOB_DATA_DIR) on a path it can traverse, "
                "e.g. /var/lib/openslob"
            )


def make_world_readable(tree: Path) -> None:
    """Directories 0755, files 0644 (executables 0755), inside a tree this tool just copied."""
    for root, dirs, files in os.walk(tree):
        os.chmod(root, 0o755)
        for name in dirs:
            os.chmod(os.path.join(root, name), 0o755)
        for name in files:
            full = os.path.join(root, name)
            if os.path.islink(full):
                continue
            executable = os.stat(full).st_mode & stat.S_IXUSR
            os.chmod(full, 0o755 if executable else 0o644)
