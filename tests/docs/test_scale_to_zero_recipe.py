"""The scale-to-zero recipe (docs/manifests/keda-scale-to-zero.yaml) can wake what it idles.

At zero replicas no engine exports a vllm:* series, so a recipe scaling to zero on the queue
alone would never come back: it needs a trigger on something that exists with no replica, the
requests the control-plane gateway receives on the ModelService's route.
"""

from __future__ import annotations

import hashlib
import re
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


def _traefik_router(route: dict, rule_index: int, rule: str) -> str:
    """The router name Traefik v3.7's Gateway API provider gives an HTTPRoute rule
    (pkg/provider/kubernetes/gateway/httproute.go: routeKey, makeRouterName), as the metric's
    router label carries it. Traefik normalises every non-alphanumeric run to '-'."""
    (parent,) = route["spec"]["parentRefs"]
    key = "-".join(
        ["httproute", route["metadata"]["namespace"], route["metadata"]["name"], "gw",
         parent["namespace"], parent["name"], "ep", "web", str(rule_index)]
    )  # fmt: skip
    key = "-".join(part for part in re.split(r"[^0-9A-Za-z]+", key) if part)
    digest = hashlib.sha256(rule.encode()).hexdigest()[:10]
    return f"{key}-{digest}@kubernetesgateway"


def test_the_wake_up_pattern_matches_the_route_traefik_counts(converged_example):
    """The quickstart's ModelService route, as `simulate` composes it, named as Traefik names
    its router; the gateway's Traefik exports per-router series (addRoutersLabels)."""
    objects = converged_example("quickstart").objects
    (route,) = [o for o in objects if o["kind"] == "HTTPRoute" and
                o["metadata"]["namespace"] == "ml-team"]  # fmt: skip
    (wake,) = [t for t in _recipe()["spec"]["triggers"]
               if "traefik_router_requests_total" in t["metadata"]["query"]]  # fmt: skip
    pattern = re.search(r'router=~"([^"]+)"', wake["metadata"]["query"]).group(1)
    prefix = route["spec"]["rules"][0]["matches"][0]["path"]["value"]
    router = _traefik_router(route, 0, f"PathPrefix(`{prefix}`)")
    # Prometheus anchors label regexes at both ends, as fullmatch does.
    assert re.fullmatch(pattern, router), (pattern, router)
    # A neighbour whose name starts with the same words is not counted.
    neighbour = {**route, "metadata": {**route["metadata"], "name": "chat-v2-x7k2p"}}
    assert not re.fullmatch(pattern, _traefik_router(neighbour, 0, "PathPrefix(`/x`)"))
    # The gateway the listener belongs to: entry point web (port 8000) of Gateway modelplane.
    (gateway,) = [o for o in objects if o["kind"] == "Gateway" and
                  o["metadata"]["name"] == "modelplane"]  # fmt: skip
    assert [(li["name"], li["port"]) for li in gateway["spec"]["listeners"]] == [("web", 8000)]
    (traefik,) = [o for o in objects if o["kind"] == "Release" and
                  o["spec"]["forProvider"]["chart"]["name"] == "traefik"]  # fmt: skip
    values = traefik["spec"]["forProvider"]["values"]
    assert values["metrics"]["prometheus"]["addRoutersLabels"] is True
