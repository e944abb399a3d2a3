"""The shipped argocd-cm customization: generated from docs/argocd/health/*.lua, one check per
Modelplane kind, and nothing in the scripts that Argo CD's sandboxed Lua would not run."""

from __future__ import annotations

import importlib.util
import re
import shutil
from pathlib import Path
from types import ModuleType

import pytest
import yaml

REPO = Path(__file__).resolve().parents[2]
ARGOCD = REPO / "docs" / "argocd"
HEALTH = ARGOCD / "health"
SHARED = HEALTH / "_shared.lua"
INCLUDE = "-- @include _shared.lua\n"
KIND_SCRIPTS = sorted(p for p in HEALTH.glob("*.lua") if p != SHARED)
KINDS = {
    "modelplane.ai": {
        "InferenceGateway",
        "InferenceClass",
        "InferenceCluster",
        "ModelDeployment",
        "ModelReplica",
        "ModelEndpoint",
        "ModelService",
        "ModelCache",
    },
    "infrastructure.modelplane.ai": {
        "GKECluster",
        "EKSCluster",
        "AKSCluster",
        "VultrCluster",
        "NebiusCluster",
        "ServingStack",
    },
}


@pytest.fixture(scope="module")
def generator() -> ModuleType:
    spec = importlib.util.spec_from_file_location(
        "argocd_generate_configmap", ARGOCD / "generate_configmap.py"
    )
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def configmap_data() -> dict[str, str]:
    configmap = yaml.safe_load((ARGOCD / "argocd-cm.yaml").read_text())
    assert configmap["apiVersion"] == "v1"
    assert configmap["kind"] == "ConfigMap"
    assert configmap["metadata"]["name"] == "argocd-cm"
    assert configmap["metadata"]["namespace"] == "argocd"
    return configmap["data"]


def test_configmap_is_up_to_date_with_the_lua_files(generator, capsys):
    assert generator.main(["--check"]) == 0, capsys.readouterr().err


def test_configmap_has_one_health_check_per_modelplane_kind_embedding_its_file():
    data = configmap_data()
    expected = {
        f"resource.customizations.health.{group}_{kind}": HEALTH / f"{kind.lower()}.lua"
        for group, kinds in KINDS.items()
        for kind in kinds
    }
    assert set(data) == set(expected)
    for key, path in expected.items():
        source = path.read_text().replace(INCLUDE, SHARED.read_text())
        assert data[key] == source, f"{key} does not embed {path.name} with the shared helpers"


def test_every_check_carries_the_shared_helpers_exactly_once():
    """Argo CD gives each script its own VM, so the generator inlines the shared helpers."""
    for path in KIND_SCRIPTS:
        assert path.read_text().count(INCLUDE) == 1, path.name
    for key, source in configmap_data().items():
        assert source.count(SHARED.read_text()) == 1, key
        assert INCLUDE not in source, key


def test_generator_refuses_a_check_without_the_shared_helpers(generator, tmp_path):
    health = tmp_path / "health"
    shutil.copytree(HEALTH, health)
    script = health / "modelcache.lua"
    script.write_text(script.read_text().replace(INCLUDE, ""))
    with pytest.raises(generator.HealthCheckError, match=r"modelcache\.lua must include"):
        generator.health_checks(health)


def test_scripts_use_only_what_argo_cds_sandbox_provides():
    """Argo CD opens only the base and table libraries (string, math, io, os are off unless an
    admin sets useOpenLibs); a call on a rarely taken branch would only fail in production."""
    forbidden = re.compile(r"\b(string|math|io|os|debug|require|load|loadstring|dofile)\b|:\w+\(")
    for path in sorted(HEALTH.glob("*.lua")):  # the shared helpers included
        for number, line in enumerate(path.read_text().splitlines(), 1):
            code = line.split("--", 1)[0]
            # Quoted text is data, not a call.
            code = re.sub(r'"[^"]*"', '""', code)
            assert not forbidden.search(code), f"{path.name}:{number}: {line.strip()}"


def test_every_script_returns_a_health_table():
    assert len(KIND_SCRIPTS) == sum(len(kinds) for kinds in KINDS.values())
    for path in KIND_SCRIPTS:
        last = path.read_text().rstrip().splitlines()[-1]
        # Its own health(), or the shared check of a composed cloud cluster.
        assert re.fullmatch(r"return (health\(\)|cloudClusterHealth\(\{.*\}\))", last), path


def test_generator_names_a_kind_without_a_check_and_a_stray_check(generator, tmp_path):
    health = tmp_path / "health"
    shutil.copytree(HEALTH, health)
    (health / "modelcache.lua").unlink()
    (health / "modelwidget.lua").write_text("return {status = 'Healthy', message = 'ok'}\n")
    with pytest.raises(generator.HealthCheckError) as raised:
        generator.health_checks(health)
    message = str(raised.value)
    assert "modelwidget.lua has no XRD in apis/" in message
    assert "modelcache.lua for kind ModelCache" in message


def test_check_mode_fails_on_a_stale_configmap(generator, tmp_path, monkeypatch, capsys):
    stale = tmp_path / "argocd-cm.yaml"
    stale.write_text((ARGOCD / "argocd-cm.yaml").read_text().replace("Healthy", "Fine", 1))
    monkeypatch.setattr(generator, "CONFIGMAP", stale)
    monkeypatch.setattr(generator, "REPO", tmp_path)
    assert generator.main(["--check"]) == 1
    assert "argocd-cm.yaml is out of date" in capsys.readouterr().err
    assert generator.main([]) == 0
    assert stale.read_text() == (ARGOCD / "argocd-cm.yaml").read_text()
