"""The quickstart scaled to zero and back to one, in `simulate` (issue 24 item 4).

What a user sees at zero: no ModelReplica, no ModelEndpoint, nothing left on the workload
cluster, the deployment Ready with ``ScaledToZero`` and ``status.replicas.total`` 0 (what the
scale subresource reports), and the ModelService still owning its path with a route that has
no backend (the gateway answers 500). Back at one, a replica is placed, serves and is routed.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from modelplane.controlplane import ControlPlane, session
from modelplane.kube import condition_status
from scenario_world import (
    NAMESPACE,
    conditions,
    converge,
    endpoints,
    find,
    remote_objects,
    replica_name,
    replicas,
    routed,
)

QUICKSTART = Path(__file__).resolve().parents[2] / "examples" / "quickstart"
QWEN = "qwen3-8b"


@pytest.fixture(scope="module")
def quickstart() -> Iterator[ControlPlane]:
    with session(QUICKSTART) as plane:
        converge(plane)
        yield plane


def scale(plane: ControlPlane, count: int) -> None:
    plane.patch(plane.key("ModelDeployment", QWEN, NAMESPACE), {"spec": {"replicas": count}})


def route_rules(plane: ControlPlane) -> list[dict]:
    (route,) = plane.composed_by(find(plane, "ModelService", "chat"), recursive=False)
    assert route["kind"] == "HTTPRoute"
    return route["spec"]["rules"]


def test_quickstart_scales_to_zero_and_back_to_one(quickstart: ControlPlane):
    plane = quickstart
    before = set(replicas(plane, QWEN))
    assert len(before) == 2
    assert all(remote_objects(plane, find(plane, "ModelReplica", name)) for name in before)
    objects = {
        (obj["metadata"].get("namespace"), obj["metadata"]["name"])
        for name in before
        for obj in plane.composed_by(find(plane, "ModelReplica", name))
        if obj["kind"] == "Object"
    }
    assert objects

    scale(plane, 0)
    converge(plane)
    assert replicas(plane, QWEN) == {}
    assert endpoints(plane, QWEN) == {}
    # Nothing the replicas put on the workload cluster is left.
    left = {
        (o["metadata"].get("namespace"), o["metadata"]["name"]) for o in plane.list(kind="Object")
    }
    assert not objects & left
    qwen = find(plane, "ModelDeployment", QWEN)
    assert qwen["status"]["replicas"] == {"total": 0, "ready": 0}
    assert conditions(qwen)["ReplicasScheduled"][:2] == ("True", "ScaledToZero")
    assert conditions(qwen)["ReplicasReady"][:2] == ("True", "ScaledToZero")
    assert condition_status(qwen, "Ready") == "True"
    # The service keeps its route, with no backend: the gateway answers 500 on its path.
    chat = find(plane, "ModelService", "chat")
    assert conditions(chat)["RoutingReady"][:2] == ("False", "NoEndpoints")
    (rule,) = route_rules(plane)
    assert "backendRefs" not in rule
    assert rule["matches"][0]["path"]["value"] == f"/{NAMESPACE}/chat/"

    scale(plane, 1)
    converge(plane)
    first = replica_name(QWEN, "lab", 0)
    assert replicas(plane, QWEN) == {first: "lab"}
    assert set(endpoints(plane, QWEN)) == {first}
    assert routed(plane, "chat") == {first: 1}
    qwen = find(plane, "ModelDeployment", QWEN)
    assert qwen["status"]["replicas"] == {"total": 1, "ready": 1}
    assert conditions(qwen)["ReplicasReady"] == ("True", "AllReplicasReady", "1 of 1 ready")
    assert condition_status(qwen, "Ready") == "True"
    assert condition_status(find(plane, "ModelService", "chat"), "Ready") == "True"


def _route_backends(plane: ControlPlane) -> set[str]:
    return {ref["name"] for rule in route_rules(plane) for ref in rule.get("backendRefs") or []}


def test_scaling_down_takes_a_replica_out_of_the_route_before_deleting_it():
    """Round by round, the ModelService's route never sends traffic to a backend that is gone:
    the going replica's endpoint is labelled retiring, the service drops it from its route,
    and only then are the replica and its endpoint deleted (issue 24 item 4)."""
    with session(QUICKSTART) as plane:
        converge(plane)
        assert len(replicas(plane, QWEN)) == 2
        scale(plane, 1)
        saw_retiring = False
        for _ in range(60):
            report = plane.round()
            services = {
                s["metadata"]["name"] for s in plane.list(kind="Service", namespace=NAMESPACE)
            }
            assert _route_backends(plane) <= services, "the route sends to a deleted backend"
            saw_retiring = saw_retiring or any(
                (e["metadata"].get("labels") or {}).get("modelplane.ai/retiring") == "true"
                for e in plane.list(kind="ModelEndpoint", namespace=NAMESPACE)
            )
            if not report.changed and len(replicas(plane, QWEN)) == 1:
                break
        converge(plane)
        assert saw_retiring
        (kept,) = replicas(plane, QWEN)
        assert routed(plane, "chat") == {kept: 1}
        assert find(plane, "ModelDeployment", QWEN)["status"]["replicas"] == {
            "total": 1,
            "ready": 1,
        }
