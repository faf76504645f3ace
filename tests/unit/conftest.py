"""The fast tier: no server, no database connection, no browser. A test here that tries to
start a server or connect fails at once, so the tier stays fast and server-free (the real-server
tests live in tests/integration/)."""

from __future__ import annotations

import subprocess

import psycopg
import pymysql
import pytest

from openslob.engines.common import server

_SERVER_PROGRAMS = ("openslob", "postgres", "pg_ctl", "initdb", "mariadbd", "chrom", "fio")


class ServerInUnitTier(AssertionError):
    pass


def _refuse(*_args, **_kwargs):
    raise ServerInUnitTier(
        "a unit test tried to start or reach a server: move it to tests/integration/"
    )


@pytest.fixture(autouse=True)
def no_servers(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(server.ServerBase, "start", _refuse)
    monkeypatch.setattr(psycopg, "connect", _refuse)
    monkeypatch.setattr(pymysql, "connect", _refuse)
    real_init = subprocess.Popen.__init__

    def popen(self, args, *rest, **kwargs):
        words = args if isinstance(args, list | tuple) else [args]
        if any(p in str(word) for word in words for p in _SERVER_PROGRAMS):
            _refuse()
        real_init(self, args, *rest, **kwargs)

    monkeypatch.setattr(subprocess.Popen, "__init__", popen)
