"""The generated Pydantic models: builtin-shadowing field names and `modelplane generate`.

Device attributes carry `int` and `bool` fields (DRA attribute values). In Python they are
`int_`/`bool_` with aliases; a manifest dumped by alias must say `int`/`bool` and parse back to
the same model, or a composed object would reach the API server with `int_` (an unknown field).
"""

from __future__ import annotations

import json
import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from click.testing import CliRunner
from modelplane import generate, repo, xrd
from modelplane.main import cli
from modelplane_common.function import as_manifest
from modelplane_schemas.generated.modelplane_ai.v1alpha1.inferenceclass import InferenceClass
from modelplane_schemas.generated.modelplane_ai.v1alpha1.inferencecluster import (
    InferenceCluster,
)
from pydantic import ValidationError

ROOT = Path(__file__).resolve().parents[2]
EXAMPLE = ROOT / "examples" / "platform" / "inferenceclass-l4.yaml"

ATTRIBUTES = {
    "architecture": {"string": "Ada Lovelace"},
    "cores": {"int": 7424},
    "mig": {"bool": False},
    "nvlink": {"bool": True},
}


def _class_manifest() -> dict[str, Any]:
    manifest = yaml.safe_load(EXAMPLE.read_text())
    manifest["spec"]["devices"][0]["attributes"] = ATTRIBUTES
    return manifest


def test_int_and_bool_attributes_round_trip_through_their_aliases():
    manifest = _class_manifest()
    model = InferenceClass.model_validate(manifest)
    attributes = model.spec.devices[0].attributes
    assert attributes is not None
    assert attributes["cores"].int_ == 7424
    assert attributes["nvlink"].bool_ is True
    assert attributes["mig"].bool_ is False  # a false value is kept, not dropped as unset

    dumped = as_manifest(model)  # how functions serialise the models they build
    assert dumped["spec"]["devices"][0]["attributes"] == ATTRIBUTES
    assert InferenceClass.model_validate(dumped) == model


def test_models_can_be_built_by_python_name_and_still_dump_the_wire_name():
    manifest = _class_manifest()
    manifest["spec"]["devices"][0]["attributes"] = {}
    device_type = type(InferenceClass.model_validate(manifest).spec.devices[0])
    device = device_type.model_validate(
        {"name": "gpu", "driver": "gpu.nvidia.com", "attributes": {"cores": {"int_": 16}}}
    )
    assert device.model_dump(by_alias=True, exclude_unset=True)["attributes"] == {
        "cores": {"int": 16}
    }


def test_inference_cluster_pool_attributes_use_the_same_aliases():
    cluster = {
        "apiVersion": "modelplane.ai/v1alpha1",
        "kind": "InferenceCluster",
        "metadata": {"name": "lab"},
        "spec": {"cluster": {"source": "Existing"}},
        "status": {
            "gpuPools": [
                {
                    "name": "l4",
                    "nodes": 2,
                    "devices": [
                        {"name": "gpu", "driver": "gpu.nvidia.com", "attributes": ATTRIBUTES}
                    ],
                }
            ]
        },
    }
    model = InferenceCluster.model_validate(cluster)
    dumped = model.model_dump(by_alias=True, exclude_unset=True, mode="json")
    device = dumped["status"]["gpuPools"][0]["devices"][0]
    assert device["attributes"] == ATTRIBUTES
    assert InferenceCluster.model_validate(dumped) == model


def test_the_generator_aliases_class_int_and_bool():
    """`class` does not occur in today's XRDs; the generator must still alias it."""
    schema = {
        "type": "object",
        "properties": {
            "spec": {
                "type": "object",
                "properties": {
                    "class": {"type": "string"},
                    "int": {"type": "integer"},
                    "bool": {"type": "boolean"},
                },
            }
        },
    }
    code = generate._generate_module("Thing", schema, "a test schema")
    namespace: dict[str, Any] = {}
    exec(compile(code, "thing.py", "exec"), namespace)  # our own generator output
    thing_type = namespace["Thing"]
    thing_type.model_rebuild(_types_namespace=namespace)
    wire = {"spec": {"class": "gold", "int": 3, "bool": False}}
    thing = thing_type.model_validate(wire)
    assert thing.spec.class_ == "gold"
    assert thing.model_dump(by_alias=True, exclude_unset=True) == wire
    with pytest.raises(ValidationError):
        thing_type.model_validate({"spec": {"klass": "gold"}})  # unknown fields are refused


# --------------------------------------------------------------------------------------------
# `modelplane generate` and `--check`, on a scratch repository holding one XRD (no ../shared)


@pytest.fixture
def scratch_repo(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    root = tmp_path / "repo"
    (root / "apis" / "inferenceclasses").mkdir(parents=True)
    shutil.copy(
        ROOT / "apis" / "inferenceclasses" / "definition.yaml",
        root / "apis" / "inferenceclasses" / "definition.yaml",
    )
    (root / "schemas").mkdir()
    (root / "schemas" / "crds.txt").write_text("# no CRDs in this scratch repository\n")
    (tmp_path / "crds").mkdir()
    monkeypatch.setenv("MODELPLANE_ROOT", str(root))
    monkeypatch.setattr(generate, "BUNDLES", ())
    repo.root.cache_clear()
    xrd.catalog.cache_clear()
    yield root
    monkeypatch.delenv("MODELPLANE_ROOT")
    repo.root.cache_clear()
    xrd.catalog.cache_clear()


def _generate(*args: str):
    crds = str(repo.root().parent / "crds")
    return CliRunner().invoke(cli, ["generate", "--crds", crds, *args])


def test_check_fails_until_generate_runs_and_again_after_a_hand_edit(scratch_repo: Path):
    module = Path("modelplane_ai") / "v1alpha1" / "inferenceclass.py"
    generated = generate.generated_dir() / module

    missing = _generate("--check")
    assert missing.exit_code == 1
    assert "generated models are stale" in missing.stderr
    assert str(module) in missing.stderr
    assert not generated.exists()  # --check never writes

    written = _generate()
    assert written.exit_code == 0, written.output
    assert generated.is_file()
    # The committed model is what the generator produces from the same XRD.
    committed = ROOT / "schemas/python/src/modelplane_schemas/generated" / module
    assert generated.read_text() == committed.read_text()

    fresh = _generate("--check")
    assert fresh.exit_code == 0, fresh.output
    assert "models are up to date" in fresh.stdout

    generated.write_text(generated.read_text() + "# edited by hand\n")
    edited = _generate("--check")
    assert edited.exit_code == 1
    assert str(module) in edited.stderr


def test_a_missing_crd_directory_is_a_clear_error(scratch_repo: Path):
    result = CliRunner().invoke(
        cli, ["generate", "--check", "--crds", str(scratch_repo / "nowhere")]
    )
    assert result.exit_code == 1
    assert "CRD directory" in result.stderr and "not found" in result.stderr
    assert "Traceback" not in result.output


def test_a_bundle_crd_at_another_version_than_its_pin_is_refused(
    scratch_repo: Path, monkeypatch: pytest.MonkeyPatch
):
    crds = scratch_repo.parent / "crds"
    (crds / "gw").mkdir()
    (crds / "gw" / "a.yaml").write_text(
        "apiVersion: apiextensions.k8s.io/v1\nkind: CustomResourceDefinition\n"
        "metadata:\n  name: as.example.com\n  annotations: {example.com/bundle-version: v1.5.1}\n"
    )
    bundle = generate.Bundle("functions/x/data/bundle.json", "example.com/bundle-version",
                             (("gw", "v1.6.1"),))  # fmt: skip
    monkeypatch.setattr(generate, "BUNDLES", (bundle,))
    refused = _generate()
    assert refused.exit_code == 1
    assert "example.com/bundle-version is 'v1.5.1', the pin is 'v1.6.1'" in refused.stderr
    (crds / "gw" / "a.yaml").write_text(
        (crds / "gw" / "a.yaml").read_text().replace("v1.5.1", "v1.6.1")
    )
    assert _generate().exit_code == 0
    (shipped,) = json.loads((scratch_repo / bundle.target).read_text())
    assert shipped["metadata"]["labels"] == {generate.BUNDLE_VERSION_LABEL: "v1.6.1"}
    assert _generate("--check").exit_code == 0
