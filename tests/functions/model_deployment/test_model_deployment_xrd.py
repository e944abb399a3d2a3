"""The ModelDeployment XRD through `modelplane validate`: each rule rejects with its message."""

from __future__ import annotations

import copy
from typing import Any

import pytest
import yaml
from click.testing import CliRunner
from modelplane.main import cli
from modelplane.xrd import catalog

GPU = {"name": "gpu", "selectors": [{"cel": 'device.driver == "gpu.nvidia.com"'}]}


def container(name: str = "engine") -> dict[str, Any]:
    return {"name": name, "image": "vllm/vllm-openai:v0.11.0"}


def standalone(name: str = "main", **engine: Any) -> dict[str, Any]:
    member = {"role": "Standalone", "nodeSelector": {"devices": [copy.deepcopy(GPU)]}}
    member["template"] = {"spec": {"containers": [container()]}}
    return {"name": name, "members": [member], **engine}


def gang(name: str = "main", nodes: int = 2, **engine: Any) -> dict[str, Any]:
    leader = {"role": "Leader", "template": {"spec": {"containers": [container()]}}}
    worker = {
        "role": "Worker",
        "worker": {"nodes": nodes},
        "nodeSelector": {"devices": [copy.deepcopy(GPU)]},
        "template": {"spec": {"containers": [container()]}},
    }
    return {"name": name, "members": [leader, worker], **engine}


def deployment(**spec: Any) -> dict[str, Any]:
    body = {"replicas": 1, "engines": [standalone()]} | spec
    return {
        "apiVersion": "modelplane.ai/v1alpha1",
        "kind": "ModelDeployment",
        "metadata": {"name": "qwen3-8b", "namespace": "ml-team"},
        "spec": body,
    }


def validate(tmp_path, obj: dict[str, Any]) -> tuple[int, str]:
    path = tmp_path / "md.yaml"
    path.write_text(yaml.safe_dump(obj))
    result = CliRunner().invoke(cli, ["validate", str(path)])
    return result.exit_code, result.output


def pd(prefill: dict, decode: dict) -> dict[str, Any]:
    return deployment(
        serving={"mode": "PrefillDecode"},
        engines=[prefill, decode],
        modelCacheRef={"name": "weights"},
    )


def _gang_without_worker_block() -> dict[str, Any]:
    """A Worker may omit ``worker`` (it then spans one node)."""
    engine = gang()
    del engine["members"][1]["worker"]
    return engine


VALID = {
    "standalone": deployment(),
    "gang with cache": deployment(engines=[gang()], modelCacheRef={"name": "weights"}),
    "prefill-decode": pd(standalone("prefill", phase="Prefill"), gang("decode", phase="Decode")),
    "worker without worker block": deployment(
        engines=[_gang_without_worker_block()],
        modelCacheRef={"name": "weights"},
    ),
}


@pytest.mark.parametrize("name", list(VALID))
def test_valid_deployments_pass(tmp_path, name):
    code, output = validate(tmp_path, VALID[name])
    assert code == 0, output


def _two_leaders() -> dict[str, Any]:
    engine = gang()
    engine["members"] = [engine["members"][0], copy.deepcopy(engine["members"][0])]
    engine["members"][1]["nodeSelector"] = {"devices": [copy.deepcopy(GPU)]}
    return deployment(engines=[engine], modelCacheRef={"name": "weights"})


def _worker_without_leader() -> dict[str, Any]:
    engine = gang()
    engine["members"][0] = standalone()["members"][0]
    return deployment(engines=[engine], modelCacheRef={"name": "weights"})


def _worker_on_standalone() -> dict[str, Any]:
    engine = standalone()
    engine["members"][0]["worker"] = {"nodes": 2}
    return deployment(engines=[engine])


def _container_named(name: str) -> dict[str, Any]:
    engine = standalone()
    engine["members"][0]["template"]["spec"]["containers"] = [container(name)]
    return deployment(engines=[engine])


def _empty_selector() -> dict[str, Any]:
    engine = standalone()
    engine["members"][0]["nodeSelector"]["devices"][0]["selectors"] = [{}]
    return deployment(engines=[engine])


def _no_node_selector() -> dict[str, Any]:
    engine = standalone()
    del engine["members"][0]["nodeSelector"]
    return deployment(engines=[engine])


REJECTED = {
    "PrefillDecode with one engine": (
        deployment(
            serving={"mode": "PrefillDecode"}, engines=[standalone("prefill", phase="Prefill")]
        ),
        "PrefillDecode serving requires exactly two engines (one Prefill, one Decode)",
    ),
    "two Prefill engines": (
        pd(standalone("a", phase="Prefill"), standalone("b", phase="Prefill")),
        "PrefillDecode serving requires exactly one engine with phase Prefill",
    ),
    "two Decode engines": (
        pd(standalone("a", phase="Decode"), standalone("b", phase="Decode")),
        "PrefillDecode serving requires exactly one engine with phase Decode",
    ),
    "phase under Unified": (
        deployment(engines=[standalone(phase="Prefill")]),
        "engine phase may only be set when serving.mode is PrefillDecode",
    ),
    "phase without serving": (
        deployment(serving={"mode": "Unified"}, engines=[standalone(phase="Decode")]),
        "engine phase may only be set when serving.mode is PrefillDecode",
    ),
    "engine with two Leaders": (
        _two_leaders(),
        "an engine must be either a single Standalone member or one Leader and one or more Workers",
    ),
    "Worker without a Leader": (
        _worker_without_leader(),
        "an engine must be either a single Standalone member or one Leader and one or more Workers",
    ),
    "worker on a Standalone member": (
        _worker_on_standalone(),
        "worker may only be set on a Worker member",
    ),
    "container not named engine": (
        _container_named("vllm"),
        "the single container must be named 'engine'",
    ),
    "empty selector": (
        _empty_selector(),
        "selectors[0]: Invalid value: 0: must have at least 1 properties",
    ),
    "engine without any nodeSelector": (
        _no_node_selector(),
        "at least one member of an engine must carry a nodeSelector requesting devices",
    ),
    "gang without modelCacheRef": (
        deployment(engines=[standalone("small"), gang("big")]),
        'spec.modelCacheRef is required: engine "big" has a Worker member',
    ),
    "replicas -1": (
        deployment(replicas=-1),
        "spec.replicas: Invalid value: -1: should be greater than or equal to 0",
    ),
    "replicas 101": (deployment(replicas=101), "spec.replicas: Invalid value: 101"),
    "engine name not a DNS label": (
        deployment(engines=[standalone("Main_1")]),
        'spec.engines[0].name: Invalid value: "Main_1": should match',
    ),
    "copies 0": (
        deployment(engines=[standalone(copies=0)]),
        "spec.engines[0].copies: Invalid value: 0",
    ),
    "nine engines": (
        deployment(engines=[standalone(f"e{i}") for i in range(9)]),
        "spec.engines: Too many: 9: must have at most 8 items",
    ),
}


@pytest.mark.parametrize("name", list(REJECTED))
def test_invalid_deployments_are_rejected_with_the_rule_message(tmp_path, name):
    obj, message = REJECTED[name]
    code, output = validate(tmp_path, obj)
    assert code == 1, output
    assert message in output


def test_definition_shape():
    definition = catalog().definition_for("modelplane.ai/v1alpha1", "ModelDeployment")
    spec = definition.body["spec"]
    assert spec["scope"] == "Namespaced"
    assert spec["names"]["shortNames"] == ["md"]
    assert spec["names"]["categories"] == ["crossplane", "modelplane"]
    (version,) = spec["versions"]
    assert version["subresources"]["scale"] == {
        "specReplicasPath": ".spec.replicas",
        "statusReplicasPath": ".status.replicas.total",
        "labelSelectorPath": ".status.selector",
    }
    assert version["additionalPrinterColumns"] == [
        {"name": "REPLICAS", "type": "string", "jsonPath": ".status.replicas.ready"}
    ]
    composition = catalog().composition_for("modelplane.ai/v1alpha1", "ModelDeployment")
    steps = composition[1]["spec"]["pipeline"]
    assert [(s["step"], s["functionRef"]["name"]) for s in steps] == [
        # The step runs the function under the name a control plane installs it as.
        ("compose-model-deployment", "modelplane-modelplanecompose-model-deployment")
    ]
