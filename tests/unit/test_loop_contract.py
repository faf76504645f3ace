"""The loop contract (model/loop.py) against both engines' procedures, without a server.

Every declared parameter is read by each engine's prologue (with the declared SQL type and,
where the engine coalesces it, the declared default) or listed in its PARAMS_NOT_READ with
a reason; every declared result field is built by its epilogue, or left out by an explicit
None in its RESULT_SQL; `next` carries exactly what the prologue reads back.
"""

from __future__ import annotations

import re

import pytest

from openslob.config.resolve import resolve
from openslob.engines.common.loopsql import NEXT_KEYS, result_pairs
from openslob.engines.mariadb import workload as mariadb_loop
from openslob.engines.postgres import workload as postgres_loop
from openslob.model.loop import (
    LOOP_PARAMS,
    LOOP_RESULT,
    MERGE_BY_KEY,
    PARAM_KEYS,
    RESULT_KEYS,
    LoopParams,
    Merge,
    Param,
    Source,
    SqlType,
)
from openslob.runner.intervals import merge_results
from openslob.runner.loopconf import loop_conf

# How each engine spells the declared SQL types in its prologue.
PG_TYPES = {"float8": SqlType.FLOAT, "bigint": SqlType.BIGINT, "boolean": SqlType.BOOLEAN}
MARIADB_TYPES = {
    "DOUBLE": SqlType.FLOAT,
    "BIGINT": SqlType.BIGINT,
    "BOOLEAN": SqlType.BOOLEAN,
    "VARCHAR": SqlType.TEXT,
}


def _postgres_ddl() -> str:
    return postgres_loop.procedure_ddl("user2", 180000).as_string(None)


def _mariadb_ddl() -> str:
    return mariadb_loop.procedure_ddl("user2")


def _read_keys(ddl: str, pattern: str) -> set[str]:
    return set(re.findall(pattern, ddl))


# A key is read from the conf, or (a `next` key of a CALL sent with `carry`) from what the
# previous CALL kept in the server: PostgreSQL's `kept` setting, MariaDB's user variable.
ENGINES = {
    "postgres": (postgres_loop, _postgres_ddl, r"(?:p_conf|kept)\s*(?:->>|\?)\s*'(\w+)'"),
    "mariadb": (
        mariadb_loop,
        _mariadb_ddl,
        r"JSON_(?:VALUE|EXTRACT)\((?:p_conf|@openslob_next), '\$\.(\w+)'\)",
    ),
}


@pytest.mark.parametrize("engine", ENGINES)
def test_the_prologue_reads_every_declared_parameter(engine: str) -> None:
    module, ddl, pattern = ENGINES[engine]
    read = _read_keys(ddl(), pattern)
    not_read = set(module.PARAMS_NOT_READ)
    assert all(module.PARAMS_NOT_READ.values()), "say why a parameter is not read"
    assert not read & not_read, "read, yet listed as not read"
    assert read | not_read == set(PARAM_KEYS), "undeclared or unread conf keys"


def _param(key: str) -> Param:
    found = getattr(LOOP_PARAMS, key)
    assert isinstance(found, Param)
    return found


def test_postgres_reads_parameters_as_their_declared_types_and_defaults() -> None:
    ddl = _postgres_ddl()
    casts = re.findall(r"\(p_conf->>'(\w+)'\)::(\w+)", ddl)
    assert casts
    for key, cast in casts:
        assert PG_TYPES[cast] is _param(key).sql_type, key
    for key, default in re.findall(r"coalesce\(\(p_conf->>'(\w+)'\)::\w+, ([\d.]+)\)", ddl):
        assert float(default) == _param(key).default, key


def test_mariadb_reads_parameters_as_their_declared_types_and_defaults() -> None:
    ddl = _mariadb_ddl()
    declares = re.findall(
        r"DECLARE v_\w+ (\w+)(?:\(\d+\))? DEFAULT (COALESCE\()?JSON_VALUE\(p_conf, '\$\.(\w+)'\)"
        r"(?:, ([\d.]+)\))?(?=;| IN \()",  # the value itself (not a test of it)
        ddl,
    )
    assert len(declares) > 10
    for sql_type, coalesced, key, default in declares:
        assert MARIADB_TYPES[sql_type] is _param(key).sql_type, key
        if coalesced:
            assert float(default) == _param(key).default, key


@pytest.mark.parametrize("engine", ENGINES)
def test_the_epilogue_builds_every_declared_result_field(engine: str) -> None:
    module, ddl, _ = ENGINES[engine]
    assert list(module.RESULT_SQL) == list(RESULT_KEYS), "one expression (or None) a field"
    built = [k for k, _ in result_pairs(module.RESULT_SQL)]
    text = ddl()
    for key in built:
        assert f"'{key}', " in text, key
    left_out = set(RESULT_KEYS) - set(built)
    assert left_out <= {LOOP_RESULT.released.key}, "only a loop without snapshots skips one"


@pytest.mark.parametrize("engine", ENGINES)
def test_next_carries_what_the_prologue_reads_back(engine: str) -> None:
    module, ddl, pattern = ENGINES[engine]
    # the result's `next` is what the loop also keeps in the server (NEXT_SQL, one object)
    carried = set(module.NEXT_SQL)
    assert all(f"'{key}', {expr}" in ddl() for key, expr in module.NEXT_SQL.items())
    assert carried <= set(NEXT_KEYS)
    assert carried == set(NEXT_KEYS) - set(module.PARAMS_NOT_READ)
    assert carried <= _read_keys(ddl(), pattern)


def test_a_missing_or_undeclared_field_fails_the_build() -> None:
    exprs = dict.fromkeys(RESULT_KEYS, "0")
    del exprs[LOOP_RESULT.ops_select.key]
    with pytest.raises(ValueError, match="ops_select"):
        result_pairs(exprs)
    with pytest.raises(ValueError, match="undeclared"):
        result_pairs({**dict.fromkeys(RESULT_KEYS, "0"), "ops_new": "0"})


def test_loop_params_json_is_the_declared_conf() -> None:
    values = {p.key: 1 for p in LOOP_PARAMS if p.source is Source.CONF}
    conf = LoopParams(**{**values, "seed": None}).to_json()  # type: ignore[arg-type]
    assert LOOP_PARAMS.seed.key not in conf
    assert list(conf) == [k for k in values if k != LOOP_PARAMS.seed.key]
    assert LoopParams(**values).to_json()[LOOP_PARAMS.seed.key] == 1  # type: ignore[arg-type]


def test_merge_follows_the_declared_kinds() -> None:
    """One value per field in each of two CALLs: each merges as its kind says."""
    by_kind: dict[Merge, list[str]] = {}
    for key, how in MERGE_BY_KEY.items():
        by_kind.setdefault(how, []).append(key)
    first = {k: ({"3": 1} if MERGE_BY_KEY[k] is Merge.HISTOGRAM else 2) for k in RESULT_KEYS}
    second = {
        k: ({"3": 2, "5": 1} if MERGE_BY_KEY[k] is Merge.HISTOGRAM else 5) for k in RESULT_KEYS
    }
    merged = merge_results(merge_results(None, first), second)
    expected = {
        Merge.SUM: 7,
        Merge.MAX: 5,
        Merge.FIRST: 2,
        Merge.LAST: 5,
        Merge.HISTOGRAM: {"3": 3, "5": 1},
    }
    for how, keys in by_kind.items():
        for key in keys:
            if how is Merge.PER_CALL:
                assert key not in merged
            else:
                assert merged[key] == expected[how], key


def test_loop_conf_of_a_config_is_the_declared_conf(tmp_path) -> None:
    """runner/loopconf.py: the JSON of the defaults holds every declared conf key, in order,
    with the config's values; a seed only when there is one."""
    config = resolve({"RATE": "100"}, None, cwd=tmp_path)
    kwargs = {"record": True, "start_epoch": 10.0, "until_epoch": 11.0, "loops": 0}
    conf = loop_conf(config, **kwargs, seed=None)
    declared = [p.key for p in LOOP_PARAMS if p.source is Source.CONF]
    assert list(conf) == [k for k in declared if k != LOOP_PARAMS.seed.key]
    assert conf[LOOP_PARAMS.update_pct.key] == config["UPDATE_PCT"]
    assert conf[LOOP_PARAMS.rate.key] == 100 / config["SCHEMAS"]
    assert conf[LOOP_PARAMS.until_epoch.key] == 11.0
    assert list(loop_conf(config, **kwargs, seed=0.5)) == declared
