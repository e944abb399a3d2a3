"""Scale a deployment up past the fleet's capacity and back down (model-deployment.md §4.4,
§4.6, §5; decisions D6; routing.md §4).

Fleet: gke-us (2 L4 nodes: Qwen + embed), lab-east (2 nodes: Qwen), lab-west (1 node: free).
"""

from __future__ import annotations

from modelplane.controlplane import ControlPlane
from modelplane.kube import condition_status
from scenario_world import (
    NAMESPACE,
    conditions,
    converge,
    diff,
    endpoints,
    family,
    find,
    label,
    remote_objects,
    replica_name,
    replica_usage,
    replicas,
    routed,
    snapshot,
    uid,
)

QWEN = "qwen3-8b"
GKE_0 = replica_name(QWEN, "gke-us", 0)
EAST_0 = replica_name(QWEN, "lab-east", 0)
EAST_1 = replica_name(QWEN, "lab-east", 1)
WEST_0 = replica_name(QWEN, "lab-west", 0)


def scale(plane: ControlPlane, count: int) -> None:
    plane.patch(plane.key("ModelDeployment", QWEN, NAMESPACE), {"spec": {"replicas": count}})


def test_scale_up_past_capacity_then_down_moves_only_what_it_must(fleet: ControlPlane):
    before = snapshot(fleet)
    kept = {name: uid(find(fleet, "ModelReplica", name)) for name in (GKE_0, EAST_0)}
    remote_before = {
        name: remote_objects(fleet, find(fleet, "ModelReplica", name)) for name in kept
    }

    # --- up to 3: the new replica goes to the cluster with none yet (spread first) ----------
    scale(fleet, 3)
    for _ in range(10):
        fleet.round()
        if WEST_0 in replicas(fleet, QWEN):
            break
    # Created but not serving yet: no endpoint, so the service keeps routing to the two.
    assert replicas(fleet, QWEN) == {GKE_0: "gke-us", EAST_0: "lab-east", WEST_0: "lab-west"}
    assert WEST_0 not in endpoints(fleet, QWEN)
    assert routed(fleet, "chat") == {GKE_0: 9, EAST_0: 9, "hosted-llama": 2}

    converge(fleet)
    qwen = find(fleet, "ModelDeployment", QWEN)
    assert qwen["status"]["replicas"] == {"total": 3, "ready": 3}
    assert conditions(qwen)["ReplicasScheduled"] == (
        "True",
        "ReplicasCreated",
        "Scheduled 3 of 3 replicas",
    )
    assert conditions(qwen)["ReplicasReady"] == ("True", "AllReplicasReady", "3 of 3 ready")
    assert set(endpoints(fleet, QWEN)) == {GKE_0, EAST_0, WEST_0}
    assert routed(fleet, "chat") == {GKE_0: 3, EAST_0: 3, WEST_0: 3, "hosted-llama": 1}
    assert {c for c, _, _ in remote_objects(fleet, find(fleet, "ModelReplica", WEST_0))} == {
        "lab-west"
    }
    assert replica_usage(fleet, "lab-west") is not None

    # --- up to 5: one more fits (lab-east's second node), the fifth does not ---------------
    scale(fleet, 5)
    converge(fleet)
    assert replicas(fleet, QWEN) == {
        GKE_0: "gke-us",
        EAST_0: "lab-east",
        EAST_1: "lab-east",
        WEST_0: "lab-west",
    }
    qwen = find(fleet, "ModelDeployment", QWEN)
    assert qwen["status"]["replicas"] == {"total": 4, "ready": 4}
    status, reason, message = conditions(qwen)["ReplicasScheduled"]
    # D6: a partial shortfall is InsufficientCapacity, with the reason per cluster.
    assert (status, reason) == ("False", "InsufficientCapacity")
    assert message.startswith(
        "4 of 5 replicas scheduled; 0/3 clusters available for the rest: 3 insufficient free nodes"
    ), message
    assert conditions(qwen)["ReplicasReady"] == ("False", "ModelStarting", "4 of 5 ready")
    assert condition_status(qwen, "Ready") == "False"
    events = fleet.events[fleet.key("ModelDeployment", QWEN, NAMESPACE)]
    assert ("Warning", "InsufficientCapacity") in {(e["type"], e["reason"]) for e in events}
    # The four that fit serve; the service in front of them is healthy.
    assert set(routed(fleet, "chat")) == {GKE_0, EAST_0, EAST_1, WEST_0, "hosted-llama"}
    assert condition_status(find(fleet, "ModelService", "chat"), "Ready") == "True"

    # --- down to 1: most-loaded cluster first, then the greatest name (§4.4) ---------------
    scale(fleet, 1)
    converge(fleet)
    assert replicas(fleet, QWEN) == {GKE_0: "gke-us"}
    assert set(endpoints(fleet, QWEN)) == {GKE_0}
    assert routed(fleet, "chat") == {GKE_0: 9, "hosted-llama": 1}
    qwen = find(fleet, "ModelDeployment", QWEN)
    assert qwen["status"]["replicas"] == {"total": 1, "ready": 1}
    assert conditions(qwen)["ReplicasScheduled"] == (
        "True",
        "ReplicasCreated",
        "Scheduled 1 of 1 replicas",
    )
    assert conditions(qwen)["ReplicasReady"] == ("True", "AllReplicasReady", "1 of 1 ready")
    assert condition_status(qwen, "Ready") == "True"
    # The survivor was never touched: same object, same remote objects.
    assert uid(find(fleet, "ModelReplica", GKE_0)) == kept[GKE_0]
    assert remote_objects(fleet, find(fleet, "ModelReplica", GKE_0)) == remote_before[GKE_0]
    # Nothing of the removed replicas is left on any cluster.
    everything_remote = {
        (c, k, n) for r in fleet.list(kind="ModelReplica") for (c, k, n) in remote_objects(fleet, r)
    }
    assert not any(name.startswith((EAST_0, EAST_1, WEST_0)) for _, _, name in everything_remote)
    # lab-east and lab-west run no replica any more: their deletion guards are gone.
    assert replica_usage(fleet, "lab-east") is None
    assert replica_usage(fleet, "lab-west") is None

    # Nothing else changed: only Qwen's removed replica (and everything under it), its
    # deployment's spec and references, the route, and lab-east's deletion guard.
    after = snapshot(fleet)
    change = diff(before, after)
    east_0_family = {k for k in before if k not in after}
    assert f"ModelReplica/{NAMESPACE}/{EAST_0}" in east_0_family
    assert f"ModelEndpoint/{NAMESPACE}/{EAST_0}" in east_0_family
    assert change.added == set()
    assert change.recreated == set()
    unchanged_families = (
        family(fleet, find(fleet, "ModelReplica", GKE_0))
        | family(fleet, find(fleet, "ModelEndpoint", GKE_0))
        | family(fleet, find(fleet, "ModelDeployment", "embed"))
        | family(fleet, find(fleet, "ModelCache", QWEN))
        | family(fleet, find(fleet, "InferenceGateway", "default", None))
        | family(fleet, find(fleet, "ModelEndpoint", "hosted-llama"))
    )
    assert not change.touched & unchanged_families
    assert change.changed == {
        f"ModelDeployment/{NAMESPACE}/{QWEN}",
        label(fleet.composed_by(find(fleet, "ModelService", "chat"))[0]),
        "InferenceCluster/lab-east",
    }
