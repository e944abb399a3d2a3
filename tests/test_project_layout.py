"""The repository hangs together: every function is packaged, listed and used."""

import re
from importlib.metadata import entry_points
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parents[1]
FUNCTIONS = sorted(
    p.name for p in (ROOT / "functions").iterdir() if (p / "pyproject.toml").exists()
)


def _compositions() -> list[dict]:
    docs = []
    for path in sorted((ROOT / "apis").rglob("*.yaml")):
        docs += [
            d for d in yaml.safe_load_all(path.read_text()) if d and d["kind"] == "Composition"
        ]
    return docs


def test_project_lists_every_function():
    project = yaml.safe_load((ROOT / "crossplane-project.yaml").read_text())
    listed = sorted(f["name"] for f in project["spec"]["functions"])
    assert listed == FUNCTIONS


def test_every_composition_step_names_a_function_in_the_repo():
    for composition in _compositions():
        assert composition["spec"]["mode"] == "Pipeline"
        for step in composition["spec"]["pipeline"]:
            assert step["functionRef"]["name"] in FUNCTIONS, (
                f"{composition['metadata']['name']}: step {step['step']} names an unknown function"
            )


def test_every_function_is_used_by_a_composition():
    used = {s["functionRef"]["name"] for c in _compositions() for s in c["spec"]["pipeline"]}
    assert sorted(set(FUNCTIONS) - used) == []


def test_every_function_module_name_is_unique_and_importable_by_entry_point():
    names = {ep.name for ep in entry_points(group="modelplane.functions")}
    assert names == set(FUNCTIONS)


# A managed-resource API group as the functions spell it, dotted in apiVersions
# ("eks.aws.m.upbound.io") or underscored in generated-model imports ("eks_aws_m_upbound_io").
_MANAGED_GROUP = re.compile(
    r"(?<![\w.])([a-z0-9]+)(?:\.([a-z0-9]+))?\.m\.(upbound|crossplane)\.io\b"
    r"|(?<!\w)([a-z0-9]+)(?:_([a-z0-9]+))?_m_(upbound|crossplane)_io\b"
)


def _provider_package(match: re.Match[str]) -> str:
    """The package serving a managed group: provider-<cloud>-<service> for the Upbound
    families (eks.aws -> provider-aws-eks), provider-<service> otherwise (helm -> provider-helm)."""
    service, cloud = (match[1], match[2]) if match[1] else (match[4], match[5])
    name = f"provider-{cloud}-{service}" if cloud else f"provider-{service}"
    return f"xpkg.upbound.io/upbound/{name}"


def test_project_depends_on_every_provider_the_functions_compose_for():
    sources = [*ROOT.glob("functions/*/src/**/*.py"), *ROOT.glob("common/src/**/*.py")]
    needed = {
        _provider_package(match)
        for path in sources
        for match in _MANAGED_GROUP.finditer(path.read_text())
    }
    assert "xpkg.upbound.io/upbound/provider-aws-eks" in needed  # the scan finds them
    project = yaml.safe_load((ROOT / "crossplane-project.yaml").read_text())
    depends = {d["package"]: d for d in project["spec"]["dependsOn"]}
    assert sorted(needed - set(depends)) == []
    assert sorted(set(depends) - needed) == [], "a dependency nothing composes for"
    assert all(d.get("version") for d in depends.values()), "every dependency pins a version"
