"""Issue 21, D12, round by round: narrowing a ModelCache's clusterSelector moves the replicas
that use it off the clusters it leaves, make-before-break, and the weights there stay until
nothing mounts them."""

from __future__ import annotations

from modelplane.controlplane import ControlPlane
from modelplane.kube import condition_status
from scenario_world import NAMESPACE, find, remote_objects, replicas

QWEN = "qwen3-8b"
MAX_ROUNDS = 60


def serving(plane: ControlPlane) -> set[str]:
    found = set()
    for name in replicas(plane, QWEN):
        endpoint = plane.find("ModelEndpoint", name, NAMESPACE)
        if (
            condition_status(find(plane, "ModelReplica", name), "Ready") == "True"
            and endpoint is not None
            and condition_status(endpoint, "Ready") == "True"
        ):
            found.add(name)
    return found


def pvc_clusters(plane: ControlPlane) -> set[str]:
    cache = find(plane, "ModelCache", QWEN)
    return {c for c, kind, _ in remote_objects(plane, cache) if kind == "PersistentVolumeClaim"}


def test_narrowing_a_cache_selector_moves_its_replicas_before_the_weights_go(fleet: ControlPlane):
    before = replicas(fleet, QWEN)
    assert sorted(before.values()) == ["gke-us", "lab-east"]
    assert pvc_clusters(fleet) == {"gke-us", "lab-east", "lab-west"}
    for cluster in ("gke-us", "lab-west"):
        fleet.patch(
            fleet.key("InferenceCluster", cluster), {"metadata": {"labels": {"weights": "yes"}}}
        )
    fleet.patch(
        fleet.key("ModelCache", QWEN, NAMESPACE),
        {"spec": {"clusterSelector": {"matchLabels": {"tier": "demo", "weights": "yes"}}}},
    )
    history = []
    for _ in range(MAX_ROUNDS):
        report = fleet.round()
        history.append((dict(replicas(fleet, QWEN)), serving(fleet), pvc_clusters(fleet)))
        if not report.changed:
            break
    counts = [len(now) for _, now, _ in history]
    print("serving per round:", counts)
    assert min(counts) >= 2, history  # never below what it served
    # The weights on lab-east stayed while its replica ran there.
    for where, _, pvcs in history:
        if "lab-east" in where.values():
            assert "lab-east" in pvcs
    assert sorted(replicas(fleet, QWEN).values()) == ["gke-us", "lab-west"]
    assert pvc_clusters(fleet) == {"gke-us", "lab-west"}
