"""The scale-to-zero recipe (docs/manifests/keda-scale-to-zero.yaml) can wake what it idles.

At zero replicas no engine exports a vllm:* series, so a recipe scaling to zero on the queue
alone would never come back: it needs a trigger on something that exists with no replica, the
requests the control-plane gateway receives on the ModelService's route.
"""

from __future__ import annotations

from pathlib import Path

import yaml
from modelplane.xrd import catalog

ROOT = Path(__file__).resolve().parents[2]
RECIPE = ROOT / "docs" / "manifests" / "keda-scale-to-zero.yaml"
SCALING = ROOT / "docs" / "manifests" / "keda-autoscaling.yaml"
QUICKSTART = ROOT / "examples" / "quickstart"
OPERATIONS = ROOT / "docs" / "operations.md"


def _recipe() -> dict:
    return yaml.safe_load(RECIPE.read_text())


def _quickstart(kind: str) -> list[dict]:
    return [
        doc
        for path in sorted(QUICKSTART.glob("*.yaml"))
        for doc in yaml.safe_load_all(path.read_text())
        if doc and doc.get("kind") == kind
    ]


def test_recipe_goes_to_zero_which_the_deployment_accepts():
    spec = _recipe()["spec"]
    assert spec["minReplicaCount"] == 0
    definition = catalog().definition_for("modelplane.ai/v1alpha1", "ModelDeployment")
    (version,) = definition.body["spec"]["versions"]
    replicas = version["schema"]["openAPIV3Schema"]["properties"]["spec"]["properties"]["replicas"]
    assert replicas["minimum"] == 0
    assert spec["maxReplicaCount"] <= replicas["maximum"]
    (deployment,) = [
        d for d in _quickstart("ModelDeployment") if d["metadata"]["name"] == "qwen3-8b"
    ]
    assert spec["scaleTargetRef"]["name"] == deployment["metadata"]["name"]


def test_a_trigger_reads_the_gateway_so_zero_can_wake():
    triggers = _recipe()["spec"]["triggers"]
    gateway = [t for t in triggers if "traefik_router_requests_total" in t["metadata"]["query"]]
    assert len(gateway) == 1, "a trigger on requests reaching the gateway"
    (wake,) = gateway
    # The route of the quickstart's ModelService (ml-team/chat), any request activating.
    (service,) = _quickstart("ModelService")
    route = f"httproute-{service['metadata']['namespace']}-{service['metadata']['name']}-"
    assert route in wake["metadata"]["query"]
    assert float(wake["metadata"]["activationThreshold"]) == 0
    assert wake["metadata"]["query"] in OPERATIONS.read_text()


def test_the_sizing_trigger_is_the_autoscaling_recipes():
    (queue,) = yaml.safe_load(SCALING.read_text())["spec"]["triggers"]
    sizing = [t for t in _recipe()["spec"]["triggers"] if "vllm:" in t["metadata"]["query"]]
    assert [t["metadata"]["query"] for t in sizing] == [queue["metadata"]["query"]]
    assert sizing[0]["metadata"]["threshold"] == queue["metadata"]["threshold"]
