"""The starting point every scenario forks: the fleet converged, and where each replica went."""

from __future__ import annotations

from modelplane.controlplane import ControlPlane
from modelplane.kube import condition_status
from scenario_world import (
    NAMESPACE,
    conditions,
    endpoints,
    find,
    gateway_address,
    guards_replicas,
    remote_objects,
    replica_name,
    replicas,
    routed,
)

QWEN_GKE = replica_name("qwen3-8b", "gke-us", 0)
QWEN_EAST = replica_name("qwen3-8b", "lab-east", 0)
EMBED_GKE = replica_name("embed", "gke-us", 0)


def test_converged_fleet_spreads_replicas_and_routes_to_every_ready_one(
    converged_fleet: ControlPlane,
):
    plane = converged_fleet
    not_ready = [
        obj["kind"] + "/" + obj["metadata"]["name"]
        for obj in plane.objects()
        if obj["apiVersion"].split("/")[0].endswith("modelplane.ai")
        and (condition_status(obj, "Ready"), condition_status(obj, "Synced")) != ("True", "True")
    ]
    assert not not_ready

    # Spread first, ties to the alphabetically first cluster (§4.6): Qwen's two replicas on
    # gke-us and lab-east; embed's one on gke-us. lab-west (one node) is left free.
    assert replicas(plane, "qwen3-8b") == {QWEN_GKE: "gke-us", QWEN_EAST: "lab-east"}
    assert replicas(plane, "embed") == {EMBED_GKE: "gke-us"}
    assert endpoints(plane, "qwen3-8b") == {
        QWEN_GKE: f"http://{gateway_address(plane, 'gke-us')}/{NAMESPACE}/{QWEN_GKE}/v1",
        QWEN_EAST: f"http://{gateway_address(plane, 'lab-east')}/{NAMESPACE}/{QWEN_EAST}/v1",
    }
    # 90 split over two replicas and 10 to the hosted provider, in lowest terms.
    assert routed(plane, "chat") == {QWEN_GKE: 9, QWEN_EAST: 9, "hosted-llama": 2}

    qwen = find(plane, "ModelDeployment", "qwen3-8b")
    assert qwen["status"]["replicas"] == {"total": 2, "ready": 2}
    assert conditions(qwen)["ReplicasScheduled"] == (
        "True",
        "ReplicasCreated",
        "Scheduled 2 of 2 replicas",
    )
    assert conditions(qwen)["ReplicasReady"] == ("True", "AllReplicasReady", "2 of 2 ready")

    # Each replica's engine, claim template, Service and route live on its own cluster.
    replica = find(plane, "ModelReplica", QWEN_EAST)
    assert {(cluster, kind) for cluster, kind, _ in remote_objects(plane, replica)} == {
        ("lab-east", "Deployment"),
        ("lab-east", "ResourceClaimTemplate"),
        ("lab-east", "Service"),
        ("lab-east", "HTTPRoute"),
    }

    cache = find(plane, "ModelCache", "qwen3-8b")
    assert cache["status"]["clusters"] == [
        {"name": "gke-us", "phase": "Ready"},
        {"name": "lab-east", "phase": "Ready"},
        {"name": "lab-west", "phase": "Ready"},
    ]
    # Staged everywhere, so no hydration Job is composed any more (model-cache.md §9.2).
    assert {kind for _, kind, _ in remote_objects(plane, cache)} == {"PersistentVolumeClaim"}

    # Every cluster is guarded; the guards of those running replicas say so, the idle one's not.
    assert guards_replicas(plane, "gke-us")
    assert guards_replicas(plane, "lab-east")
    assert not guards_replicas(plane, "lab-west")
