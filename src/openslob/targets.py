"""Where the database is: the private embedded server, or an existing PostgreSQL."""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

from openslob.servers.embedded import EmbeddedServer

EMBEDDED = "embedded"


def redact(conninfo: str) -> str:
    """A connection string safe to print or store: passwords removed in both libpq forms."""
    without_uri_password = re.sub(r"(://[^:/@]*):[^@/]*@", r"\1@", conninfo)
    without_kw_password = re.sub(
        r"(?i)(password\s*=\s*)('(?:[^'\\]|\\.)*'|\S+)", r"\1********", without_uri_password
    )
    return re.sub(r"(?i)([?&]password=)[^&]*", r"\1********", without_kw_password)


@dataclass
class Target:
    """A resolved target: a conninfo, and the private server when it is ours."""

    conninfo: str
    server: EmbeddedServer | None = None

    @property
    def label(self) -> str:
        if self.server is not None:
            return f"embedded PostgreSQL in {self.server.data_dir}"
        return redact(self.conninfo)


def resolve_target(target: str | None, data_dir: Path | None, *, start: bool = True) -> Target:
    """`embedded` (the default) starts the private server if needed; anything else is libpq."""
    if target in (None, "", EMBEDDED):
        server = EmbeddedServer(data_dir)
        if start:
            server.start()
        return Target(server.conninfo(), server)
    return Target(target)
