"""Passwords never leave the process: every printed or stored form of a target, and every
error message that may quote one, goes through here.

Nor do they stay in `ps`: every user of the host can read a process's command line
(/proc/PID/cmdline) for as long as it runs (hours, for a sweep), its environment only its
owner and root. A command line holding a password (`--target postgresql://u:PW@host/db`) is
handed to a fresh copy of the command through the environment (SLOB_ARGV, removed again at
once: no child inherits it), which runs with the passwords replaced in its visible
arguments. Same pid, terminal and exit code; `ps` shows the password until the exec only.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import sys
from urllib.parse import unquote

# A URI's user:password@ (the password up to the last @ of the URI: an unencoded / or @ in
# it must not leave its tail behind), and a keyword string's password=value.
_URI_PASSWORD = re.compile(r"(://[^:/@\s]*):(\S*)@")
_KW_PASSWORD = re.compile(r"(?i)((?<![?&\w])password\s*=\s*)('(?:[^'\\]|\\.)*'|\S+)")
_QUERY_PASSWORD = re.compile(r"(?i)([?&]password=)([^&\s]*)")
HIDDEN = "********"


def redact(conninfo: str) -> str:
    """A connection string safe to print or store: passwords removed in both libpq forms."""
    without_uri_password = _URI_PASSWORD.sub(r"\1@", conninfo)
    without_query_password = _QUERY_PASSWORD.sub(rf"\1{HIDDEN}", without_uri_password)
    return _KW_PASSWORD.sub(rf"\1{HIDDEN}", without_query_password)


def secrets_of(target: str) -> set[str]:
    """The passwords a target string holds, as written and percent-decoded, with the parts
    of one that a parser may quote on its own (a piece before an unencoded / or @)."""
    found: set[str] = set()
    for pattern in (_URI_PASSWORD, _KW_PASSWORD, _QUERY_PASSWORD):
        for match in pattern.finditer(target):
            value = match[2].strip("'")
            found |= {value, unquote(value), *re.split(r"[/?#@]", value)}
    return {secret for secret in found if len(secret) >= 3}


def scrub(text: str, targets: tuple[str, ...] | list[str] = ()) -> str:
    """`text` (an error message) with every password of the given targets, and any a
    connection string in it carries, replaced: drivers quote a target they cannot parse."""
    for target in targets:
        text = text.replace(target, redact(target))
        for secret in sorted(secrets_of(target), key=len, reverse=True):
            text = text.replace(secret, HIDDEN)
    return redact(text)


ARGV_ENV = "SLOB_ARGV"
_argv_checked = False


def hide_passwords_from_ps() -> None:
    """Re-execute without the passwords in argv (module doc), or restore the arguments in
    the re-executed copy. Once per process."""
    global _argv_checked
    if _argv_checked:
        return
    _argv_checked = True
    given = os.environ.pop(ARGV_ENV, None)
    if given is not None:
        saved = json.loads(given)
        sys.argv[1:] = saved["argv"]
        os.environ.pop("PYTHONPATH", None)  # children get the caller's, not ours
        if saved["pythonpath"] is not None:
            os.environ["PYTHONPATH"] = saved["pythonpath"]
        return
    args = sys.argv[1:]
    shown = [redact(arg) for arg in args]
    if shown == args:
        return
    saved = {"argv": args, "pythonpath": os.environ.get("PYTHONPATH")}
    # The same imports as now (-P: not the working directory's, unless they came from it)
    env = {**os.environ, ARGV_ENV: json.dumps(saved), "PYTHONPATH": os.pathsep.join(sys.path)}
    sys.stdout.flush()
    sys.stderr.flush()
    with contextlib.suppress(OSError):  # cannot exec: run on as we are
        os.execve(sys.executable, [sys.executable, "-P", "-m", "openslob", *shown], env)
