"""The MariaDB engine against a real private mariadbd (16k pages, pio profile); no mocks."""

from __future__ import annotations

import asyncio
import itertools
import time
from collections.abc import Iterator
from typing import Any

import pymysql
import pytest

from openslob.config.resolve import Config, resolve
from openslob.engines.api import KeptIntervals
from openslob.engines.mariadb import stats
from openslob.engines.mariadb.engine import MariaDBEngine
from openslob.engines.mariadb.ioshape import engine_io_shape
from openslob.engines.mariadb.layout import layout_for
from openslob.engines.mariadb.runner import QUERY_INTERRUPTED, MariaDBRunBackend
from openslob.engines.mariadb.server import MARIADBD, EmbeddedMariaDB
from openslob.model.histogram import SLOTS, Histogram, bucket_index
from openslob.runner.loopconf import loop_conf
from tests.conftest import invoke, private_mariadb

pytestmark = pytest.mark.skipif(not MARIADBD.exists(), reason="mariadb-server not installed")

# 2 schemas x 4096 rows = 2 x 2048 leaf pages of 16 KiB = 64 MiB against a 29 MiB buffer pool.
SETTINGS = {"SCHEMAS": "2", "SCALE": "4096", "SCAN_TABLE_SZ": "16", "LOAD_PARALLEL_DEGREE": "2"}


def config(**flags: str) -> Config:
    return resolve({**SETTINGS, **flags}, None)


@pytest.fixture(scope="module")
def server() -> Iterator[EmbeddedMariaDB]:
    yield from private_mariadb("openslob-mariadb-")


@pytest.fixture(scope="module")
def engine(server: EmbeddedMariaDB) -> MariaDBEngine:
    eng = MariaDBEngine(server.connect_kwargs())
    eng.setup(config())
    return eng


@pytest.fixture()
def conn(server: EmbeddedMariaDB) -> Iterator[pymysql.connections.Connection]:
    connection = pymysql.connect(**server.connect_kwargs())
    yield connection
    connection.close()


def _measured(engine: MariaDBEngine, name: str) -> list:
    return [c for c in engine.verify(config()).checks if c.name == name]


def test_setup_lays_out_two_rows_per_16k_leaf_page(engine: MariaDBEngine) -> None:
    layout = layout_for(16384)
    assert (layout.pad, layout.record_bytes, layout.rows_per_page) == (421, 8071, 2)
    result = engine.verify(config())
    assert result.ok, [c for c in result.checks if not c.ok]
    per_page = [c for c in result.checks if c.name == "cf1 rows per leaf page"]
    assert len(per_page) == 2
    for check in per_page:
        # "2.000 mean over 2049 leaf pages, max 2": measured by the server, not assumed.
        mean = float(check.measured.split()[0])
        assert check.measured.endswith("max 2")
        assert 1.99 <= mean <= 2.0
    record = [c for c in result.checks if c.name == "cf1 record bytes on page"]
    assert all(c.measured == pytest.approx(layout.record_bytes, abs=16) for c in record)


def test_setup_is_idempotent(engine: MariaDBEngine) -> None:
    assert engine.bytes_to_load(config()) == 0
    again = engine.setup(config())
    assert {t.action for t in again.tables} == {"valid"}
    # A changed parameter reloads only what it affects.
    assert engine.bytes_to_load(config(SCAN_TABLE_SZ="32")) == 2 * 16 * 16384


def test_plain_verify_uses_the_data_set_as_set_up(
    engine: MariaDBEngine, server: EmbeddedMariaDB, tmp_path
) -> None:
    """The bookkeeping gives back what setup was given; `slob verify` without data-set flags
    checks that data set (not the defaults, 4 x 8192 rows) and says where it came from."""
    assert engine.recorded_dataset() == {
        "SCHEMAS": 2,
        "SCALE": 4096,
        "SCAN_TABLE_SZ": 16,
        "SEED": 1,
        "COMPRESS_RATIO": 1.0,
    }
    target = ["--target", "embedded-mariadb", "--data-dir", str(server.base_dir)]
    verify = invoke("verify", *target, cwd=tmp_path)
    assert verify.exit_code == 0, verify.output
    assert "SCHEMAS=2, SCALE=4096 rows" in verify.stderr and "SEED=1" in verify.stderr


def test_describe_names_no_password(engine: MariaDBEngine) -> None:
    described = engine.describe()
    assert described["name"] == "mariadb"
    assert described["settings"]["innodb_page_size"] == "16384"
    assert described["settings"]["innodb_flush_method"] == "O_DIRECT"
    assert "password" not in str(described).lower()


def test_bucket_sql_formula_equals_python(engine: MariaDBEngine, conn) -> None:
    values = [0, 1, 5, 127, 128, 129, 191, 192, 255, 256, 1000, 4095, 4096, 65_535]
    values += [10**6, 123_456_789, 2**31 - 1, 2**37, 2**40]
    values += [(1 << e) + d for e in range(7, 36) for d in (-1, 0, 1)]
    with conn.cursor() as cur:
        for value in values:
            cur.execute("SELECT openslob.slob_bucket(%s)", [value])
            assert cur.fetchone()[0] == bucket_index(value), value


def _run(coro):
    return asyncio.run(coro)


def test_an_interval_snapshot_reads_what_show_global_status_says(conn, monkeypatch) -> None:
    """The interval snapshot's status comes as one GROUP_CONCAT text of
    information_schema (capitals) in the statement that reads the time: the same names,
    spelled as SHOW GLOBAL STATUS spells them (learned once), with the same values for
    counters that do not move, and the data files' I/O summaries in the same statement;
    also where the session reads backslashes literally, and through SHOW itself where it
    could not hold the text. Statements counted per snapshot."""
    statements: list[str] = []
    execute = pymysql.cursors.Cursor.execute

    def counted(cur: Any, query: str, args: Any = None) -> Any:
        statements.append(query.split()[0] + " " + query.split()[1])
        return execute(cur, query, args)

    def shown() -> dict[str, float]:
        with conn.cursor() as cur:
            cur.execute("SHOW GLOBAL STATUS" + stats.INTERVAL_STATUS)
            rows = cur.fetchall()
        return {k: n for k, v in rows if (n := stats._number(v)) is not None}

    expected = shown()
    assert "Innodb_page_size" in expected and "Com_commit" in expected  # not in capitals
    monkeypatch.setattr(stats, "_SPELLING", {})
    monkeypatch.setattr(pymysql.cursors.Cursor, "execute", counted)

    def summaries() -> dict[str, dict[str, float]]:
        with conn.cursor() as cur:
            return stats._file_summaries(cur)

    cases = [  # session setting, statements of a snapshot (SHOW: learns the spelling, or
        # reads; the file summaries' own SELECT where the texts could be cut)
        (None, ["SELECT UTC_TIMESTAMP(6),", "SHOW GLOBAL"]),
        (None, ["SELECT UTC_TIMESTAMP(6),"]),
        ("sql_mode = CONCAT(@@sql_mode, ',NO_BACKSLASH_ESCAPES')", ["SELECT UTC_TIMESTAMP(6),"]),
        (
            "group_concat_max_len = 1024",
            ["SELECT UTC_TIMESTAMP(6),", "SHOW GLOBAL", "SELECT EVENT_NAME,"],
        ),
    ]
    for setting, expected_statements in cases:
        if setting:
            with conn.cursor() as cur:
                execute(cur, f"SET SESSION {setting}")
        earlier = summaries()
        statements.clear()
        snap = stats.take_snapshot(conn, interval=True)
        assert statements == expected_statements, setting
        status, files = snap["status"], snap["files"]
        assert set(status) == set(expected), setting
        for name in ("Innodb_page_size", "Innodb_buffer_pool_pages_total", "Com_rollback"):
            assert status[name] == expected[name], (setting, name)
        # the data files' summary, between two read by their own SELECT (they may move)
        later = summaries()
        assert stats.DATA_FILE in files and stats.DATA_FILE in later, setting
        assert set(files) <= set(later), setting
        for event, columns in files.items():
            assert set(columns) == set(stats._FILE_COLUMNS), (setting, event)
            for column, value in columns.items():
                low, high = earlier[event][column], later[event][column]
                assert low <= value <= high, (setting, event, column)


def test_one_call_for_two_seconds_with_20_pct_updates(
    server: EmbeddedMariaDB, engine: MariaDBEngine
) -> None:
    backend = MariaDBRunBackend(server.connect_kwargs(), "openslob-test-run")
    cfg = config(UPDATE_PCT="20")
    monitor = backend.monitor("snapshots")

    async def scenario() -> tuple[dict, float]:
        session = await backend.open_session(1, "user2")
        try:
            start = time.time() + 0.2
            conf = loop_conf(
                cfg, record=True, start_epoch=start, until_epoch=start + 2, loops=0, seed=0.5
            )
            begun = time.monotonic()
            result = await backend.call(session, conf)
            return result, time.monotonic() - begun
        finally:
            await backend.close(session)

    before, before_interval = monitor.snapshot(), monitor.interval_snapshot()
    result, elapsed = _run(scenario())
    after, after_interval = monitor.snapshot(), monitor.interval_snapshot()
    monitor.close()
    backend.shutdown()

    assert 2.0 <= elapsed < 4
    assert result["ops"] == result["ops_select"] + result["ops_update"] + result["ops_scan"]
    assert result["ops"] > 20
    assert result["ops_scan"] == 0
    assert 0.05 < result["ops_update"] / result["ops"] < 0.4  # 20 % of a few hundred ops
    assert result["rows_selected"] == 64 * result["ops_select"]  # WORK_UNIT rows each
    assert result["rows_updated"] == 64 * result["ops_update"]
    assert result["ended_epoch"] - result["began_epoch"] == pytest.approx(2, abs=0.5)
    assert isinstance(result["pid"], int)
    for kind in ("select", "update"):
        hist = Histogram.from_json(result[f"hist_{kind}"])
        assert hist.count == result[f"ops_{kind}"]
        assert all(0 <= idx < SLOTS for idx in hist.counts)
        # A SLOBop of 64 single-block reads, or an update and its commit, takes > 50 us.
        assert hist.percentile_us(50) > 50
    assert result["hist_scan"] == {}

    window = result["ended_epoch"] - result["began_epoch"]
    metrics = stats.snapshot_delta(before, after, window)
    assert metrics["pio_reads_per_s"] > 10
    assert metrics["pio_read_mb_per_s"] > 0
    assert 1 < metrics["db_read_latency_us"] < 1_000_000  # performance_schema, picoseconds
    assert metrics["lio_per_s"] > metrics["pio_reads_per_s"]
    assert metrics["wal_mb_per_s"] > 0
    assert metrics["commits_per_s"] == pytest.approx(result["ops_update"] / window, rel=0.2)
    assert metrics["db_time_s"] is None and metrics["wal_records_per_s"] is None
    assert any("redo" in note for note in stats.notes(after))
    # an interval's snapshot reads only the status variables its row uses: the same figures
    known = {k for k, v in metrics.items() if v is not None}
    interval = stats.snapshot_delta(before_interval, after_interval, window)
    assert {k for k, v in interval.items() if v is not None} == known
    assert len(after_interval["status"]) < len(after["status"]) / 2
    shape, shape_interval = (
        engine_io_shape(before, after, {}),
        engine_io_shape(before_interval, after_interval, {}),
    )
    assert {k for k, v in shape_interval.items() if v is not None} == {
        k for k, v in shape.items() if v is not None
    }
    assert stats.notes(after_interval) == stats.notes(after)


async def _kill_until_answered(
    backend: MariaDBRunBackend, session: Any
) -> tuple[list[Any], BaseException | None]:
    """KILL QUERY the session's streamed CALL every 0.25 s for up to 5 s until it answers
    with the kill (a kill can miss: the runner's drain repeats it too, runner/pipeline.py):
    the answers that came before it, and the error (None: it never ended)."""
    answered: list[Any] = []
    answer = asyncio.ensure_future(backend.receive(session))
    started = time.monotonic()
    try:
        while time.monotonic() - started < 5:
            await backend.cancel(session)
            done, _ = await asyncio.wait({answer}, timeout=0.25)
            if done:  # an answer that came before the kill: the CALL goes on
                answered.append(answer.result())
                answer = asyncio.ensure_future(backend.receive(session))
    except pymysql.err.OperationalError as exc:
        return answered, exc
    answer.cancel()
    return answered, None


async def _streamed(
    backend: MariaDBRunBackend, session: Any, cfg: Any, seconds: float, **batch: int
) -> tuple[dict[str, Any], list[tuple[Any, float]]]:
    """A streamed CALL of `seconds` of 0.5 s intervals from 0.3 s on, read to its end: its
    conf, and each answer with when it came."""
    start = time.time() + 0.3
    conf = loop_conf(
        cfg, record=True, start_epoch=start, until_epoch=start + seconds, loops=0,
        seed=0.5, interval_s=0.5, stream=True, **batch,
    )  # fmt: skip
    await backend.send(session, conf)
    arrived = []
    while session.in_flight:
        arrived.append((await backend.receive(session), time.time()))
    return conf, arrived


def test_a_streaming_call_returns_each_interval_as_it_ends(
    server: EmbeddedMariaDB, engine: MariaDBEngine
) -> None:
    """With `stream`, one CALL runs the phase and each interval's result reaches the client
    at that interval's end (not when the CALL ends): counts of its own, the op counter and
    the random stream carried on inside the CALL, the last result ending the CALL; then the
    session takes its next CALL as usual, and a kill in the middle ends the stream."""
    backend = MariaDBRunBackend(server.connect_kwargs(), "openslob-test-stream")
    cfg = config(UPDATE_PCT="20")

    async def scenario() -> tuple[list[tuple[dict, float]], dict, BaseException | None]:
        session = await backend.open_session(1, "user2")
        try:
            conf, arrived = await _streamed(backend, session, cfg, 2.0)
            after = await backend.call(session, {**conf, "stream": False, "carry": True})
            start = time.time()
            updates = loop_conf(
                config(UPDATE_PCT="100"), record=True, start_epoch=start,
                until_epoch=start + 60, loops=0, seed=0.3, interval_s=0.5, stream=True,
            )  # fmt: skip
            await backend.send(session, updates)
            first = await backend.receive(session)  # the stream has begun
            assert first["call_ended"] is False and session.in_flight == 1
            # A KILL QUERY can miss a running loop CALL (the server goes on: 2-5 of 25 single
            # kills on this VM, more with UPDATEs): repeated until the CALL answers
            _, killed = await _kill_until_answered(backend, session)
            with session.conn.cursor() as cur:  # the kill's transaction is not left open
                cur.execute(
                    "SELECT COUNT(*) FROM information_schema.INNODB_TRX"
                    " WHERE trx_mysql_thread_id = %s",
                    [session.pid],
                )
                assert cur.fetchone()[0] == 0
            return arrived, after, killed
        finally:
            await backend.close(session)

    arrived, after, killed = _run(scenario())
    backend.shutdown()
    results = [r for r, _ in arrived]
    assert [r["interval"] for r in results] == [1, 2, 3, 4]
    assert [r["call_ended"] for r in results] == [False, False, False, True]
    for result, at in arrived:
        # at its own interval's end, not at the CALL's (2 s after the start)
        assert at - result["ended_epoch"] < 0.25
        assert result["ended_epoch"] - result["began_epoch"] < 0.75
        assert result["ops"] == result["ops_select"] + result["ops_update"] > 0
        selects = Histogram.from_json(result["hist_select"])
        assert sum(selects.counts.values()) == result["ops_select"]
    assert results[-1]["ended_epoch"] - results[0]["began_epoch"] == pytest.approx(2, abs=0.3)
    for earlier, later in itertools.pairwise(results):
        # the op counter and the random stream go on inside the CALL
        assert later["next"]["op_base"] == earlier["next"]["op_base"] + later["ops"]
        assert later["next"]["rng_state"] != earlier["next"]["rng_state"]
        assert 0 <= later["began_epoch"] - earlier["ended_epoch"] < 0.1
    assert after["call_ended"] is True  # a CALL without `stream`: one result
    assert killed is not None and killed.args[0] == QUERY_INTERRUPTED


def test_a_batched_stream_answers_every_other_interval_with_an_array(
    server: EmbeddedMariaDB, engine: MariaDBEngine
) -> None:
    """With `batch` 2 a streaming CALL answers at the boundaries b with (b + batch_offset)
    % 2 == 0 and at the phase's end, each time with a JSON array of the intervals since its
    last answer, in order, each its own result; nothing is left kept once it has ended."""
    backend = MariaDBRunBackend(server.connect_kwargs(), "openslob-test-batch")
    offset = 0  # answers at the even boundaries
    cfg = config(UPDATE_PCT="20")

    async def scenario() -> tuple[list[tuple[list, float]], KeptIntervals]:
        session = await backend.open_session(1, "user2")
        try:
            _, arrived = await _streamed(backend, session, cfg, 2.5, batch=2, batch_offset=offset)
            return arrived, await backend.pending(session)
        finally:
            await backend.close(session)

    arrived, left = _run(scenario())
    backend.shutdown()
    answers = [answer for answer, _ in arrived]
    assert all(isinstance(answer, list) and answer for answer in answers)
    results = [r for answer in answers for r in answer]
    # 2.5 s of 0.5 s intervals, each once and in order: [1, 2], [3, 4], then the phase's end
    assert [r["interval"] for r in results] == [1, 2, 3, 4, 5]
    assert all((answer[-1]["interval"] + offset) % 2 == 0 for answer in answers[:-1])
    assert [r["call_ended"] for r in results] == [False, False, False, False, True]
    assert results[-1]["next"]["op_base"] == sum(r["ops"] for r in results)
    for answer, at in arrived:
        assert at - answer[-1]["ended_epoch"] < 0.3  # at its boundary, not the CALL's end
    for result in results:
        assert result["ended_epoch"] - result["began_epoch"] < 0.75
        assert result["ops"] == result["ops_select"] + result["ops_update"] > 0
        selects = Histogram.from_json(result["hist_select"])
        assert sum(selects.counts.values()) == result["ops_select"]
    for earlier, later in itertools.pairwise(results):
        assert later["next"]["op_base"] == earlier["next"]["op_base"] + later["ops"]
        assert 0 <= later["began_epoch"] - earlier["ended_epoch"] < 0.1
    assert left == KeptIntervals([], 0)


def test_a_stop_inside_a_batch_leaves_its_intervals_to_pending(
    server: EmbeddedMariaDB, engine: MariaDBEngine
) -> None:
    """A kill inside a batch (batch 4: the first answer is due at interval 4's end) ends the
    streaming CALL; the intervals it had completed stay in the session, and pending() gives
    them once, in order. A CALL's start clears what an earlier one left."""
    backend = MariaDBRunBackend(server.connect_kwargs(), "openslob-test-pending")
    cfg = config(UPDATE_PCT="20")

    async def scenario() -> tuple[list, BaseException | None, list[KeptIntervals]]:
        session = await backend.open_session(1, "user2")
        try:
            start = time.time() + 0.3
            conf = loop_conf(
                cfg, record=True, start_epoch=start, until_epoch=start + 60, loops=0,
                seed=0.7, interval_s=0.5, stream=True, batch=4, batch_offset=0,
            )  # fmt: skip
            await backend.send(session, conf)
            await asyncio.sleep(start + 1.2 - time.time())  # inside interval 3
            # repeated until the CALL answers: a kill can miss (test_a_streaming_call_...)
            answered, killed = await _kill_until_answered(backend, session)
            assert session.in_flight == 0
            kept = [await backend.pending(session), await backend.pending(session)]
            # a stale one is cleared by the next CALL's start (here one without `stream`)
            with session.conn.cursor() as cur:
                cur.execute("SET @openslob_pending = '[{\"interval\": 99}]'")
            now = time.time()
            await backend.call(
                session,
                loop_conf(cfg, record=True, start_epoch=now, until_epoch=now + 0.2, loops=0,
                          seed=0.1),
            )  # fmt: skip
            kept.append(await backend.pending(session))
            return answered, killed, kept
        finally:
            await backend.close(session)

    answered, killed, (first, second, after_call) = _run(scenario())
    backend.shutdown()
    assert killed is not None and killed.args[0] == QUERY_INTERRUPTED
    results = [r for answer in answered for r in answer] + first.results
    assert [r["interval"] for r in results] == list(range(1, len(results) + 1))
    if not answered:  # the kill landed in interval 3 (or soon after): 1 and 2 were kept
        assert len(first.results) >= 2
    assert first.own_commits == 0
    for result in first.results:
        assert result["call_ended"] is False
        assert result["ops"] == result["ops_select"] + result["ops_update"] > 0
    assert second == KeptIntervals([], 0)
    assert after_call == KeptIntervals([], 0)


def _wait_until_running(server: EmbeddedMariaDB, thread: int) -> None:
    """Until the server shows the session's CALL running (its worker thread sent it: on a
    loaded machine that can take longer than the test's first second)."""
    deadline = time.monotonic() + 10
    with pymysql.connect(**server.connect_kwargs()) as admin, admin.cursor() as cur:
        while time.monotonic() < deadline:
            # INFO_BINARY, not INFO: inside the loop INFO shows the running statement, whose
            # text can be cut in the middle of a multi-byte character (CI saw a
            # UnicodeDecodeError). The session runs nothing but the CALL, so any statement
            # in progress on it is the CALL.
            cur.execute(
                "SELECT COMMAND, INFO_BINARY FROM information_schema.PROCESSLIST WHERE ID = %s",
                [thread],
            )
            row = cur.fetchone()
            if row and row[0] == "Query" and row[1]:
                return
            time.sleep(0.05)
    raise AssertionError("the CALL never started")


@pytest.mark.parametrize("where", ["in the loop", "in the start barrier", "in think time"])
def test_kill_query_ends_a_running_call_within_seconds(
    server: EmbeddedMariaDB, engine: MariaDBEngine, where: str
) -> None:
    """Wherever the CALL is, a kill ends it: SLEEP() alone would just return 1 and go on."""
    backend = MariaDBRunBackend(server.connect_kwargs(), "openslob-test-cancel")
    think = {"THINK_TM_FREQUENCY": "1", "THINK_TM_MIN": "30", "THINK_TM_MAX": "30"}
    cfg = config(UPDATE_PCT="20", **(think if where == "in think time" else {}))

    async def scenario() -> tuple[BaseException | None, float, int]:
        session = await backend.open_session(1, "user1")
        try:
            now = time.time()
            start = now + 60 if where == "in the start barrier" else now
            conf = loop_conf(
                cfg, record=True, start_epoch=start, until_epoch=now + 120, loops=0, seed=0.1
            )
            call = asyncio.create_task(backend.call(session, conf))
            await asyncio.sleep(1)
            assert not call.done()
            await asyncio.to_thread(_wait_until_running, server, session.pid)
            cancelled_at = time.monotonic()
            await backend.cancel(session)
            error = None
            try:
                await asyncio.wait_for(call, timeout=10)
            except pymysql.err.OperationalError as exc:
                error = exc
            took = time.monotonic() - cancelled_at
            # The session stays usable after KILL QUERY.
            with session.conn.cursor() as cur:
                cur.execute("SELECT 1")
                alive = cur.fetchone()[0]
            return error, took, alive
        finally:
            await backend.close(session)

    error, took, alive = _run(scenario())
    assert error is not None and error.args[0] == QUERY_INTERRUPTED
    assert took < 5
    assert alive == 1
    assert backend.terminate_leftovers() == 0
    # A session the run forgot to close is found by its program name and killed.
    forgotten = _run(backend.open_session(2, "user1"))
    assert backend.terminate_leftovers() == 1
    with pytest.raises(pymysql.err.MySQLError), forgotten.conn.cursor() as cur:
        cur.execute("SELECT 1")
    backend.shutdown()


def test_verify_detects_a_damaged_table_and_setup_repairs_it(engine: MariaDBEngine, conn) -> None:
    with conn.cursor() as cur:
        cur.execute("DELETE FROM user2.cf1 WHERE custid = 77")
        cur.execute("ALTER TABLE user2.cf1 DROP INDEX custid")
    result = engine.verify(config())
    assert not result.ok
    failed = {(c.schema, c.name) for c in result.checks if not c.ok}
    assert ("user2", "cf1 rows") in failed
    assert ("user2", "cf1 custid index") in failed
    assert ("user2", "cf1 key/pk correlation") not in failed
    assert not any(schema == "user1" for schema, _ in failed)
    assert engine.bytes_to_load(config()) == 2048 * 16384  # only user2.cf1 again
    repaired = engine.setup(config())
    actions = {(t.schema, t.table): t.action for t in repaired.tables}
    assert actions[("user2", "cf1")] == "loaded"
    assert actions[("user1", "cf1")] == "valid"
    assert engine.verify(config()).ok


def test_tables_changed_by_hand_are_caught_by_setup_and_run(
    server: EmbeddedMariaDB, engine: MariaDBEngine, conn, tmp_path
) -> None:
    """Setup and run trust the tables, not the bookkeeping: rows deleted by hand or page
    compression switched on are named by the run's pre-check (which refuses and names
    `slob setup`), reloaded by setup with the reason, and compression fails verify."""
    with conn.cursor() as cur:
        cur.execute("DELETE FROM user1.cf1 WHERE custid <= 10")
        cur.execute("ALTER TABLE user2.cf1 PAGE_COMPRESSED=1")
        # Switched off again: the table is rebuilt uncompressed and stays valid.
        cur.execute("ALTER TABLE user1.cf2 PAGE_COMPRESSED=1")
        cur.execute("ALTER TABLE user1.cf2 PAGE_COMPRESSED=0")
    storage = {c.schema: c for c in _measured(engine, "cf1 padding uncompressed")}
    assert not storage["user2"].ok and storage["user2"].measured == "PAGE_COMPRESSED is on"
    assert storage["user1"].ok
    data = ["--schemas", SETTINGS["SCHEMAS"], "--scale", SETTINGS["SCALE"]]
    data += ["--scan-table-sz", SETTINGS["SCAN_TABLE_SZ"]]
    common = ["--target", "embedded-mariadb", "--data-dir", str(server.base_dir), *data]
    run = invoke("run", *common, "--run-time", "1", "--warmup", "0", cwd=tmp_path)
    assert run.exit_code == 1, run.output
    assert "user1.cf1: 4,086 rows, not 4,096" in run.output
    assert "user2.cf1: PAGE_COMPRESSED is on" in run.output
    assert "run `slob setup`" in run.output
    assert not (tmp_path / "slob-results").exists()  # refused before anything ran
    setup = invoke("setup", *common, cwd=tmp_path)
    assert setup.exit_code == 0, setup.output
    assert "user1.cf1 reloaded: 4,086 rows, not 4,096" in setup.output
    assert "user2.cf1 reloaded: PAGE_COMPRESSED is on" in setup.output
    assert "user1.cf2 reloaded" not in setup.output
    assert engine.verify(config()).ok
