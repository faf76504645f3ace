"""The engine plug-in's roles, its interface version, the skeleton engine, rows per MB.

No server: plug-ins, the skeleton and their objects are built and inspected, nothing is
started (the skeleton's private server is asked for its status only).
"""

from __future__ import annotations

import inspect
from pathlib import Path

import pytest

from openslob.config.resolve import resolve
from openslob.engines import api, registry
from openslob.engines.api import EnginePlugin
from openslob.engines.skeleton import plugin as skeleton
from openslob.model import engine as engines
from openslob.results import rundir
from openslob.runner.loopconf import loop_conf

PLUGINS = (*registry.PLUGINS, skeleton.PLUGIN)


@pytest.mark.parametrize("plugin", PLUGINS, ids=lambda p: p.name)
def test_every_plugin_plays_every_role(plugin: EnginePlugin) -> None:
    assert not inspect.isabstract(type(plugin)), "an abstract member is left unwritten"
    missing = [role.__name__ for role in api.ROLES if not isinstance(plugin, role)]
    assert not missing, f"{plugin.name} does not play {missing}"
    assert isinstance(plugin, engines.EngineView)  # what results/ reads of it
    api.check_api(plugin)  # written for this interface


def test_roles_cover_the_plugin_and_nothing_else() -> None:
    """Each member of EnginePlugin belongs to one role; each role's members are the plug-in's."""
    owners: dict[str, list[str]] = {}
    for role in api.ROLES:
        for member in _members(role):
            owners.setdefault(member, []).append(role.__name__)
    assert {m: r for m, r in owners.items() if len(r) > 1} == {}
    assert set(owners) == _members(EnginePlugin) - {"api_version"}


def _members(cls: type) -> set[str]:
    """The public attributes and methods a class declares itself (not inherited)."""
    names = set(vars(cls).get("__annotations__", {}))
    names |= {n for n, v in vars(cls).items() if callable(v) or isinstance(v, property)}
    return {n for n in names if not n.startswith("_")}


def test_skeleton_is_complete_and_not_registered(tmp_path: Path) -> None:
    plugin = skeleton.PLUGIN
    assert plugin.name not in registry.names()
    assert plugin.private_target not in registry.private_targets()
    config = resolve({}, None, cwd=tmp_path)
    target = plugin.resolve(plugin.private_target, tmp_path / "data", config, start=False)
    assert isinstance(target.server, api.PrivateServer)
    assert target.server.status().state == "absent" and not (tmp_path / "data").exists()
    assert not inspect.isabstract(type(plugin.engine(target)))
    backend = plugin.run_backend(target, "openslob-run x", 1)
    assert isinstance(backend, api.RunBackend)
    assert isinstance(backend.monitor("sampler"), api.Monitor)
    assert isinstance(plugin.window(), api.WindowStats)
    assert all(plugin.capabilities.terms.get(t) for t in api.REQUIRED_TERMS)


def test_a_plugin_of_another_interface_version_is_refused_in_one_line() -> None:
    class Old(skeleton.SkeletonPlugin):
        api_version = api.ENGINE_API_VERSION - 1

    with pytest.raises(api.EngineAPIError) as caught:
        api.check_api(Old())
    message = str(caught.value)
    assert "\n" not in message and "'skeleton'" in message
    assert f"engine API {api.ENGINE_API_VERSION - 1}" in message
    assert f"speaks {api.ENGINE_API_VERSION}" in message

    class Unversioned(skeleton.SkeletonPlugin):
        api_version = None  # type: ignore[assignment]  # a plug-in that states no version

    with pytest.raises(api.EngineAPIError, match="engine API None"):
        api.check_api(Unversioned())


@pytest.mark.parametrize(
    ("page_size", "rows_per_mb"),
    [("4096", 512), ("8192", 256), ("16384", 128), ("32768", 64), ("65536", 48)],
)
def test_mariadb_rows_per_mb_follow_its_page_size(page_size: str, rows_per_mb: int) -> None:
    """Two rows per InnoDB page at 4k..32k, three at 64k (engines/mariadb/layout.py)."""
    mariadb = registry.plugin("mariadb")
    assert mariadb.rows_per_mb({"innodb_page_size": page_size}) == rows_per_mb
    assert mariadb.table_bytes({"innodb_page_size": page_size}, rows_per_mb * 64) == 64 << 20


def test_postgres_holds_one_row_per_8k_page() -> None:
    assert registry.plugin("postgresql").rows_per_mb({"block_size": "8192"}) == 128


def test_the_hotspot_keys_use_the_engines_rows_per_mb(tmp_path: Path) -> None:
    config = resolve(
        {"SCALE": "100000", "DO_HOTSPOT": "TRUE", "HOTSPOT_OFFSET_MB": "16", "HOTSPOT_MB": "8"},
        None,
        cwd=tmp_path,
    )

    def keys(rows_per_mb: int | None) -> tuple[int, int]:
        extra = {} if rows_per_mb is None else {"rows_per_mb": rows_per_mb}
        conf = loop_conf(
            config, record=True, start_epoch=0.0, until_epoch=None, loops=1, seed=1.0, **extra
        )
        return conf["hotspot_first_key"], conf["hotspot_last_key"]

    work_unit = config["WORK_UNIT"]
    assert keys(None) == keys(128) == (16 * 128 + work_unit, 16 * 128 + work_unit + 8 * 128 - 1)
    assert keys(512) == (16 * 512 + work_unit, 16 * 512 + work_unit + 8 * 512 - 1)


def test_an_older_run_json_gets_its_engines_words_from_the_known_engines() -> None:
    """Written before engine.terms existed, read after its run (no plug-in at hand): the
    words come from the engines the registry announced (model/engine.py), by name."""
    mariadb = registry.plugin("mariadb")
    run = rundir.with_engine_words(
        {"engine": {"name": "mariadb", "settings": {"innodb_page_size": "16384"}}}
    )
    assert run["engine"]["terms"] == dict(mariadb.capabilities.terms)
    assert run["engine"]["title"] == "MariaDB" and run["engine"]["page_size_bytes"] == 16384
    unnamed = rundir.with_engine_words({"engine": {}})  # the default engine's
    assert unnamed["engine"]["terms"] == dict(registry.DEFAULT.capabilities.terms)
    unknown = rundir.with_engine_words({"engine": {"name": "informix"}})
    assert "terms" not in unknown["engine"]
    assert engines.known(skeleton.PLUGIN.name) is None  # not registered, not known


@pytest.mark.parametrize(
    ("handshake", "need"),
    [
        ("5.5.5-10.6.5-MariaDB-1:10.6.5+maria~focal", "10.6.6"),  # MDEV-27018: JSON quoted
        ("10.6.6-MariaDB", None),
        ("10.11.19-MariaDB-deb12", None),
        ("10.5.23-MariaDB", "10.6.6"),
        ("11.4.2-MariaDB-log", None),
        ("10.7.1-MariaDB", "10.7.2"),  # a preview before the fix
        ("10.7.2-MariaDB", None),
        ("10.8.0-MariaDB", "10.8.1"),
        ("8.0.36", None),
        ("5.7.44-log", "8.0.0"),
    ],
)
def test_mariadb_versions_are_checked_to_the_patch_level(handshake: str, need: str | None) -> None:
    """MariaDB 10.6.0-10.6.5 (and the 10.7/10.8 previews) quote JSON that passed through
    IF() (MDEV-27018), which the loop's interval result builds: refused with the version
    needed, in one line."""
    from openslob.engines.mariadb.connection import too_old

    reason = too_old(handshake)
    if need is None:
        assert reason is None, reason
    else:
        assert reason is not None and f"too old (need {need} or later)" in reason
        assert "\n" not in reason
