"""What Argo CD shows for the repository's examples once `modelplane simulate` has run them.

Every Modelplane resource a converged example holds is judged by the shipped Lua: Healthy
exactly when Crossplane calls it Ready and Synced, with the summary its kind gives, and
otherwise never Healthy. Examples that do not exist yet are skipped.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from modelplane.controlplane import session

REPO = Path(__file__).resolve().parents[2]
EXAMPLES = REPO / "examples"
# The examples that run to convergence in the simulator (issue 7); the others are for render.
# (routing/ holds observed BackendTLSPolicies for render: without the gateway's CRDs a strict
# API server refuses them, so it is not applied; canary/ has the same endpoints and services.)
SIMULATED = ["quickstart", "platform", "multi-cluster", "canary", "multi-node", "cloud-clusters"]

JSON = dict[str, Any]


def _status(obj: JSON) -> JSON:
    return obj.get("status") or {}


def _condition(obj: JSON, type_: str) -> JSON:
    for found in _status(obj).get("conditions") or []:
        if found.get("type") == type_:
            return found
    return {}


def _gateway(obj: JSON) -> str:
    address = (_status(obj).get("gateway") or {}).get("address")
    return f"Serving gateway at {address}" if address else ""


def _cloud_cluster(obj: JSON) -> str:
    endpoint = _status(obj).get("endpoint")
    ready = "Cluster and node pools are ready"
    return f"{ready}; API server {endpoint}" if endpoint else ready


def _service(obj: JSON) -> str:
    message = f"Serving at {_status(obj)['address']}"
    resolved = _condition(obj, "EndpointsResolved").get("message")
    return f"{message} ({resolved})" if resolved else message


# Kind -> the message Argo CD shows for a Healthy resource of that kind.
HEALTHY_MESSAGE: dict[str, Callable[[JSON], str]] = {
    "InferenceGateway": lambda o: f"Gateway address {_status(o)['address']}",
    "InferenceClass": lambda o: "Accepted",
    "InferenceCluster": lambda o: _gateway(o) or "Cluster and serving stack are ready",
    "GKECluster": _cloud_cluster,
    "EKSCluster": _cloud_cluster,
    "AKSCluster": _cloud_cluster,
    "VultrCluster": _cloud_cluster,
    "NebiusCluster": _cloud_cluster,
    "ServingStack": lambda o: _gateway(o) or "Serving stack installed",
    "ModelDeployment": lambda o: f"Serving: {_condition(o, 'ReplicasReady')['message']}",
    "ModelReplica": lambda o: f"Serving on InferenceCluster {o['spec']['clusterName']}",
    "ModelEndpoint": lambda o: _condition(o, "RoutingReady")["message"],
    "ModelService": _service,
    "ModelCache": lambda o: f"Artifact {_condition(o, 'ArtifactReady')['message']}",
}


@pytest.fixture(scope="module")
def simulated(converged_example) -> Callable[[str], list[JSON]]:
    """``simulated(example)``: its Modelplane resources after a simulate run (run once)."""

    def run(name: str) -> list[JSON]:
        if not (EXAMPLES / name).is_dir():
            pytest.skip(f"examples/{name} does not exist yet")
        return [
            obj
            for obj in converged_example(name).objects
            if str(obj.get("apiVersion", "")).split("/")[0].endswith("modelplane.ai")
        ]

    return run


@pytest.fixture(scope="module")
def kinds_seen_healthy() -> set[str]:
    return set()


@pytest.mark.parametrize("example", SIMULATED)
def test_example_health_follows_crossplane_readiness(
    example, simulated, health, kinds_seen_healthy
):
    objects = simulated(example)
    assert objects, f"examples/{example} holds no Modelplane resource"
    for obj in objects:
        name = f"{obj['kind']}/{obj['metadata']['name']}"
        shown = health(obj)
        ready = _condition(obj, "Ready").get("status") == "True"
        synced = _condition(obj, "Synced").get("status") == "True"
        if ready and synced:
            assert shown.status == "Healthy", f"{name}: {shown}"
            assert shown.message == HEALTHY_MESSAGE[obj["kind"]](obj), name
            kinds_seen_healthy.add(obj["kind"])
        else:
            assert shown.status != "Healthy", f"{name} is not Ready but shows {shown}"


def test_routing_example_invalid_endpoint_is_degraded(health):
    """examples/routing keeps an https endpoint with an IP host to show the InvalidURL error."""
    with session(EXAMPLES / "routing" / "endpoint-invalid.yaml") as plane:
        plane.run(max_rounds=10)
        raw_ip = plane.find("ModelEndpoint", "raw-ip", "ml-team")
    assert raw_ip is not None
    shown = health(raw_ip)
    assert shown.status == "Degraded"
    assert shown.message.startswith("InvalidURL: spec.url 'https://203.0.113.10/v1' is https")


def test_examples_show_cloud_clusters_healthy(kinds_seen_healthy):
    """Runs after the parametrized examples: the kinds only provisioned clusters compose."""
    if not kinds_seen_healthy:
        pytest.skip("no example ran")
    assert {
        "GKECluster",
        "EKSCluster",
        "AKSCluster",
        "VultrCluster",
        "NebiusCluster",
        "ServingStack",
        "InferenceCluster",
    } <= (kinds_seen_healthy)


def test_examples_show_every_modelplane_kind_healthy(kinds_seen_healthy):
    """Every kind's health check has run on a real converged sample, not only on made-up ones."""
    if not kinds_seen_healthy:
        pytest.skip("no example ran")
    assert set(HEALTHY_MESSAGE) - kinds_seen_healthy == set()
