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
    guards_replicas,
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
    east_0 = family(fleet, find(fleet, "ModelReplica", EAST_0)) | family(
        fleet, find(fleet, "ModelEndpoint", EAST_0)
    )
    lab_east_guard = label(replica_usage(fleet, "lab-east"))

    # --- up to 4: spread first (lab-west had none), then pack (lab-east's second node) -------
    scale(fleet, 4)
    for _ in range(10):
        fleet.round()
        if len(replicas(fleet, QWEN)) == 4:
            break
    assert replicas(fleet, QWEN) == {
        GKE_0: "gke-us",
        EAST_0: "lab-east",
        EAST_1: "lab-east",
        WEST_0: "lab-west",
    }
    # Created but not serving yet: no endpoints, the service keeps routing to the two.
    assert set(endpoints(fleet, QWEN)) == {GKE_0, EAST_0}
    assert routed(fleet, "chat") == {GKE_0: 9, EAST_0: 9, "hosted-llama": 2}
    qwen = find(fleet, "ModelDeployment", QWEN)
    assert conditions(qwen)["ReplicasReady"] == ("False", "ModelStarting", "2 of 4 ready")

    converge(fleet)
    qwen = find(fleet, "ModelDeployment", QWEN)
    assert qwen["status"]["replicas"] == {"total": 4, "ready": 4}
    assert conditions(qwen)["ReplicasScheduled"] == (
        "True",
        "ReplicasCreated",
        "Scheduled 4 of 4 replicas",
    )
    assert conditions(qwen)["ReplicasReady"] == ("True", "AllReplicasReady", "4 of 4 ready")
    assert condition_status(qwen, "Ready") == "True"
    assert set(endpoints(fleet, QWEN)) == {GKE_0, EAST_0, EAST_1, WEST_0}
    # 90 over four replicas against 10 (routing.md §5.5): 90 = 23 + 23 + 22 + 22, the extra
    # units going to the endpoints whose names sort first.
    assert sorted([EAST_0, EAST_1, WEST_0, GKE_0]) == [EAST_0, EAST_1, WEST_0, GKE_0]
    assert routed(fleet, "chat") == {
        EAST_0: 23,
        EAST_1: 23,
        WEST_0: 22,
        GKE_0: 22,
        "hosted-llama": 10,
    }
    for name, cluster in (("lab-west", WEST_0), ("lab-east", EAST_1)):
        placed = remote_objects(fleet, find(fleet, "ModelReplica", cluster))
        assert {c for c, _, _ in placed} == {name}
    assert guards_replicas(fleet, "lab-west")
    at_four = {name: uid(find(fleet, "ModelReplica", name)) for name in replicas(fleet, QWEN)}

    # --- up to 5: the fleet is full ----------------------------------------------------------
    scale(fleet, 5)
    converge(fleet)
    assert {name: uid(find(fleet, "ModelReplica", name)) for name in replicas(fleet, QWEN)} == (
        at_four
    )
    qwen = find(fleet, "ModelDeployment", QWEN)
    assert qwen["status"]["replicas"] == {"total": 4, "ready": 4}
    status, reason, message = conditions(qwen)["ReplicasScheduled"]
    # D6: a partial shortfall is InsufficientCapacity, with the reason per cluster.
    assert (status, reason) == ("False", "InsufficientCapacity")
    assert message.startswith(
        "4 of 5 replicas scheduled; 0/3 clusters available for the rest: "
        "3 insufficient free devices"
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
    # lab-east and lab-west run no replica any more, and their guards say so.
    assert not guards_replicas(fleet, "lab-east")
    assert not guards_replicas(fleet, "lab-west")

    # Nothing else changed: lab-east's original replica went with everything under it, and
    # lab-east's guard no longer names replicas; the replicas added on the way up went again.
    change = diff(before, snapshot(fleet))
    assert change.removed == east_0
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
        lab_east_guard,  # its reason
        "ConfigMap/modelplane-system/capacity-lab-east",  # counts fewer replicas
        "ConfigMap/modelplane-system/caches-lab-east",  # lists fewer mounting the cache
    }
