"""The engine plug-in contract, checked for every engine registry.py lists.

What a new engine must hold to before the runner, the reports and the CLI can use it without
asking which engine it is: a complete EnginePlugin, the terms the reports print, metrics and
options that fit the shared tables, a private server that answers status() without starting
anything, and no module outside engines/<name>/ that imports an engine's own code.
"""

from __future__ import annotations

import ast
import inspect
from pathlib import Path

import pytest

from openslob.config.options import OPTIONS_BY_NAME
from openslob.config.resolve import resolve
from openslob.engines import api, registry
from openslob.model.metrics import CORE, METRICS

PLUGINS = registry.PLUGINS
SRC = Path(__file__).resolve().parents[2] / "src" / "openslob"
ENGINE_DIRS = {p.parent.name for p in (SRC / "engines").glob("*/plugin.py")}


def ids(plugin: api.EnginePlugin) -> str:
    return plugin.name


@pytest.mark.parametrize("plugin", PLUGINS, ids=ids)
def test_plugin_implements_the_interface(plugin: api.EnginePlugin) -> None:
    assert isinstance(plugin, api.EnginePlugin)
    assert not inspect.isabstract(type(plugin)), "an abstract method is left unimplemented"
    assert plugin.name and plugin.title and plugin.private_target and plugin.target_help
    assert plugin.claims(plugin.private_target)
    plugin.check_target(plugin.private_target)  # its own private target is well formed


def test_names_and_private_targets_are_unique() -> None:
    assert len({p.name for p in PLUGINS}) == len(PLUGINS)
    assert len({p.private_target for p in PLUGINS}) == len(PLUGINS)
    for plugin in PLUGINS:  # a private target belongs to exactly one engine
        assert [p.name for p in PLUGINS if p.claims(plugin.private_target)] == [plugin.name]
        assert registry.plugin_for_target(plugin.private_target) is plugin
    assert registry.plugin(None) is PLUGINS[0]


@pytest.mark.parametrize("plugin", PLUGINS, ids=ids)
def test_terms_cover_what_the_reports_name(plugin: api.EnginePlugin) -> None:
    terms = plugin.capabilities.terms
    missing = [t for t in api.REQUIRED_TERMS if not terms.get(t)]
    assert not missing, f"{plugin.name} does not name {missing}"
    for capability, needed in api.CAPABILITY_TERMS.items():
        if getattr(plugin.capabilities, capability):
            assert all(terms.get(t) for t in needed), f"{capability} without its terms"
    for metric in METRICS.values():  # every label renders in the engine's words
        metric.label_for(terms)


@pytest.mark.parametrize("plugin", PLUGINS, ids=ids)
def test_engine_metrics_fit_the_metrics_table(plugin: api.EnginePlugin) -> None:
    core = {m.key for m in CORE}
    for metric in plugin.metrics:
        assert metric.key not in core, f"{metric.key} would redefine a core figure"
        assert METRICS[metric.key] == metric  # registered (registry.py)
        assert metric.unit and metric.label
        assert metric.combine in ("sum", "weighted", "mean", "per_host_sum", "ratio", "same")
        if metric.combine == "weighted":
            assert metric.weight in METRICS, f"{metric.key} weighted by an unknown figure"
        assert not (metric.brief and not metric.live)


@pytest.mark.parametrize("plugin", PLUGINS, ids=ids)
def test_engine_options_fit_the_option_table(plugin: api.EnginePlugin) -> None:
    for option in plugin.options:
        assert OPTIONS_BY_NAME.get(option.name) in (None, option), option.name
        assert option.help and option.scopes


@pytest.mark.parametrize("plugin", PLUGINS, ids=ids)
def test_private_server_answers_without_starting(plugin: api.EnginePlugin, tmp_path: Path) -> None:
    """status() of a server that was never created: absent, nothing created, nothing run."""
    config = resolve({}, None, cwd=tmp_path)
    server = plugin.private_server(tmp_path / "data", config)
    assert isinstance(server, api.PrivateServer)  # every method and attribute it declares
    assert server.page_bytes in (4096, 8192, 16384, 32768, 65536)
    assert str(server.instance_dir).startswith(str(tmp_path / "data"))
    state = server.status()
    assert isinstance(state, api.ServerState)
    assert state.state == "absent" and state.pid is None
    assert {"state", "data_dir", "profile", "version", "pid", "uri"} <= set(state.as_dict())
    assert not (tmp_path / "data").exists() or not any((tmp_path / "data").iterdir())
    target = plugin.resolve(plugin.private_target, tmp_path / "data", config, start=False)
    assert target.engine == plugin.name and target.server is not None
    assert not inspect.isabstract(type(plugin.engine(target)))
    assert isinstance(plugin.window(), api.WindowStats)


def _imports(path: Path) -> list[str]:
    tree = ast.parse(path.read_text(), str(path))
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.module:
            found.append(node.module)
        elif isinstance(node, ast.Import):
            found += [alias.name for alias in node.names]
    return found


def test_no_module_outside_an_engine_imports_its_code() -> None:
    """engines/<name>/ is reached through its plug-in only: registry.py lists the plug-ins;
    nothing else (runner, results, reports, CLI, another engine, common) imports them."""
    offenders = []
    for path in sorted(SRC.rglob("*.py")):
        relative = path.relative_to(SRC)
        in_engine = relative.parts[0] == "engines" and len(relative.parts) > 2
        own = relative.parts[1] if in_engine else ""
        for module in _imports(path):
            parts = module.split(".")
            if parts[:2] != ["openslob", "engines"] or len(parts) < 3:
                continue
            engine = parts[2]
            if engine not in ENGINE_DIRS or engine == own:
                continue
            if relative == Path("engines/registry.py") and parts[3:] == ["plugin"]:
                continue
            offenders.append(f"{relative} imports {module}")
    assert not offenders, "\n".join(offenders)


def test_results_and_reports_reach_no_engine_module() -> None:
    """results/, report/ and analysis/ get the engine from the run (results/build.py's
    InstanceInfo.engine_view, run.json engine.terms) and constants from model/: they import
    nothing of engines/, not even the registry (no lookup by name)."""
    offenders = []
    for layer in ("results", "report", "analysis"):
        for path in sorted((SRC / layer).rglob("*.py")):
            offenders += [
                f"{path.relative_to(SRC)} imports {module}"
                for module in _imports(path)
                if module == "openslob.engines" or module.startswith("openslob.engines.")
            ]
    assert not offenders, "\n".join(offenders)
