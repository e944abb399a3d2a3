"""The repository hangs together: every function is packaged, listed and used."""

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
