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
    "infrastructure.modelplane.ai": {"GKECluster", "EKSCluster", "ServingStack"},
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
        assert data[key] == path.read_text(), f"{key} does not embed {path.name} verbatim"


def test_every_lua_file_shares_the_same_helpers():
    """Argo CD gives each script its own VM, so the helpers are repeated; they must not drift."""
    blocks = {}
    for path in sorted(HEALTH.glob("*.lua")):
        found = re.search(r"^-- BEGIN shared.*?^-- END shared$", path.read_text(), re.S | re.M)
        assert found, f"{path.name} has no shared block"
        blocks[path.name] = found.group(0)
    assert len(blocks) == 11
    assert len(set(blocks.values())) == 1, "shared blocks differ"


def test_scripts_use_only_what_argo_cds_sandbox_provides():
    """Argo CD opens only the base and table libraries (string, math, io, os are off unless an
    admin sets useOpenLibs); a call on a rarely taken branch would only fail in production."""
    forbidden = re.compile(r"\b(string|math|io|os|debug|require|load|loadstring|dofile)\b|:\w+\(")
    for path in sorted(HEALTH.glob("*.lua")):
        for number, line in enumerate(path.read_text().splitlines(), 1):
            code = line.split("--", 1)[0]
            # Quoted text is data, not a call.
            code = re.sub(r'"[^"]*"', '""', code)
            assert not forbidden.search(code), f"{path.name}:{number}: {line.strip()}"


def test_every_script_returns_a_health_table():
    for path in sorted(HEALTH.glob("*.lua")):
        assert path.read_text().rstrip().endswith("return health()"), path.name


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
