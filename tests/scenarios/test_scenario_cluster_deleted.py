"""A cluster is deleted (model-deployment.md §4.3 rule 1, S7, §4.7; model-cache.md §9.1).

lab-east runs one Qwen replica. When it goes, that replica is re-placed on the only cluster
with a free node (lab-west), the cache forgets lab-east, and nothing else moves: the replicas
on gke-us, the other deployment, the gateway and the other clusters keep their objects.

The ClusterUsage ``usage-replicas`` blocks the deletion while replicas run there (platform.md
§4.8), in the simulator as on a real control plane: the first test shows the denial and then
an operator removing the guard to force it; the second drains the cluster first by taking it
out of the deployments' selectors, the intended way.
"""

from __future__ import annotations

from modelplane.controlplane import ControlPlane
from modelplane.kube import condition_status, key_of, lookup
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
WEST_0 = replica_name(QWEN, "lab-west", 0)
EMBED_GKE = replica_name("embed", "gke-us", 0)


def cache_objects_on(plane: ControlPlane, cluster: str) -> set[str]:
    """The cache's Objects whose remote object lives on ``cluster``."""
    config = lookup(find(plane, "InferenceCluster", cluster, None), ".status.providerConfigRef")
    return {
        label(obj)
        for obj in plane.composed_by(find(plane, "ModelCache", QWEN))
        if lookup(obj, ".spec.providerConfigRef.name") == config["name"]
    }


def assert_replica_moved_to_lab_west(plane: ControlPlane, kept_uids: dict[str, str]) -> None:
    assert replicas(plane, QWEN) == {GKE_0: "gke-us", WEST_0: "lab-west"}
    assert replicas(plane, "embed") == {EMBED_GKE: "gke-us"}
    for name, kept in kept_uids.items():
        assert uid(find(plane, "ModelReplica", name)) == kept
    assert set(endpoints(plane, QWEN)) == {GKE_0, WEST_0}
    assert routed(plane, "chat") == {GKE_0: 9, WEST_0: 9, "hosted-llama": 2}
    assert {c for c, _, _ in remote_objects(plane, find(plane, "ModelReplica", WEST_0))} == {
        "lab-west"
    }
    qwen = find(plane, "ModelDeployment", QWEN)
    assert qwen["status"]["replicas"] == {"total": 2, "ready": 2}
    assert conditions(qwen)["ReplicasScheduled"] == (
        "True",
        "ReplicasCreated",
        "Scheduled 2 of 2 replicas",
    )
    assert condition_status(qwen, "Ready") == "True"
    # lab-west now runs a replica, and its guard says so.
    assert guards_replicas(plane, "lab-west")
    # The cache no longer counts lab-east; the other clusters keep their weights.
    cache = find(plane, "ModelCache", QWEN)
    assert cache["status"]["clusters"] == [
        {"name": "gke-us", "phase": "Ready"},
        {"name": "lab-west", "phase": "Ready"},
    ]
    assert conditions(cache)["ArtifactReady"][:2] == ("True", "Staged")


def test_deleted_cluster_replicas_are_re_placed_and_nothing_else_moves(fleet: ControlPlane):
    before = snapshot(fleet)
    kept_uids = {name: uid(find(fleet, "ModelReplica", name)) for name in (GKE_0, EMBED_GKE)}
    gone = (
        family(fleet, find(fleet, "InferenceCluster", "lab-east", None))
        | family(fleet, find(fleet, "ModelReplica", EAST_0))
        | family(fleet, find(fleet, "ModelEndpoint", EAST_0))
        | cache_objects_on(fleet, "lab-east")
    )
    untouched = (
        family(fleet, find(fleet, "InferenceCluster", "gke-us", None))
        | family(fleet, find(fleet, "ModelDeployment", "embed"))
        | family(fleet, find(fleet, "ModelReplica", GKE_0))
        | family(fleet, find(fleet, "ModelEndpoint", GKE_0))
        | family(fleet, find(fleet, "InferenceGateway", "default", None))
        | family(fleet, find(fleet, "ModelEndpoint", "hosted-llama"))
        | cache_objects_on(fleet, "gke-us")
        | cache_objects_on(fleet, "lab-west")
    )

    # The ClusterUsage usage-replicas denies the delete while a replica runs there (§4.8).
    cluster = fleet.key("InferenceCluster", "lab-east")
    assert fleet.delete(cluster) == []
    converge(fleet)
    held = diff(before, snapshot(fleet))
    assert held.removed == held.added == held.recreated == set()
    # Only the webhook's note of the refused delete, as Crossplane's writes it, and the
    # cluster's capacity summary: from now on it takes no new replica.
    assert held.changed == {
        "InferenceCluster/lab-east",
        "ConfigMap/modelplane-system/capacity-lab-east",
    }
    annotations = find(fleet, "InferenceCluster", "lab-east", None)["metadata"]["annotations"]
    assert annotations["usage.crossplane.io/deletion-attempt-with-policy"] == "Background"
    summary = find(fleet, "ConfigMap", "capacity-lab-east", "modelplane-system")
    assert "modelplane.ai/deletion-requested" in summary["data"]["summary.json"]
    assert "ModelReplicas are scheduled" in fleet.pending_deletions[cluster]
    # An operator who wants it gone anyway removes the guard and deletes in one go (S7).
    guard = replica_usage(fleet, "lab-east")
    assert guard is not None
    fleet.delete(key_of(guard))
    fleet.delete(cluster)
    converge(fleet)

    assert_replica_moved_to_lab_west(fleet, kept_uids)
    after = snapshot(fleet)
    change = diff(before, after)
    assert change.removed == gone
    assert change.added == (
        family(fleet, find(fleet, "ModelReplica", WEST_0))
        | family(fleet, find(fleet, "ModelEndpoint", WEST_0))
    )
    assert change.recreated == set()
    assert not change.touched & untouched
    # Only the references of the owners of what went or came, the route, and lab-west's
    # capacity and cache summaries (they count the replica placed there now, which mounts
    # the cache) changed.
    assert change.changed == {
        f"ModelDeployment/{NAMESPACE}/{QWEN}",
        f"ModelCache/{NAMESPACE}/{QWEN}",
        label(replica_usage(fleet, "lab-west")),  # its reason: a replica is there now
        "ConfigMap/modelplane-system/capacity-lab-west",
        "ConfigMap/modelplane-system/caches-lab-west",
        label(fleet.composed_by(find(fleet, "ModelService", "chat"))[0]),
    }


def test_drained_cluster_loses_its_replicas_then_deletes_cleanly(fleet: ControlPlane):
    """The way it works with deletion protection: drain by label, then delete."""
    kept_uids = {name: uid(find(fleet, "ModelReplica", name)) for name in (GKE_0, EMBED_GKE)}
    fleet.patch(
        fleet.key("InferenceCluster", "lab-east"), {"metadata": {"labels": {"tier": "off"}}}
    )
    converge(fleet)

    assert_replica_moved_to_lab_west(fleet, kept_uids)
    # Drained: nothing of the fleet's runs there, and its guard says so.
    assert fleet.list(kind="ModelReplica", labels={"modelplane.ai/cluster": "lab-east"}) == []
    assert cache_objects_on(fleet, "lab-east") == set()
    assert not guards_replicas(fleet, "lab-east")

    before = snapshot(fleet)
    cluster = family(fleet, find(fleet, "InferenceCluster", "lab-east", None))
    key = fleet.key("InferenceCluster", "lab-east")
    # The guard refuses the delete once, saying it goes ahead once Modelplane has looked; the
    # cluster's function finds it empty, lets go, and the deletion is replayed.
    assert fleet.delete(key) == []
    assert "checked that none is left" in fleet.pending_deletions[key]
    converge(fleet)
    assert key not in fleet.pending_deletions
    change = diff(before, snapshot(fleet))
    assert change.removed == cluster
    assert change.added == change.changed == change.recreated == set()
