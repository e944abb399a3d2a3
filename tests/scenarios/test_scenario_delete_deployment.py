"""Deleting a deployment removes exactly its replicas, endpoints and remote objects
(model-deployment.md §4.7; routing.md §4, §5.6; platform.md §4.8).

The service in front of it falls back to what it still matches (the hosted provider), the
other deployment and the cache are untouched, and a cluster left without replicas loses its
deletion guard.
"""

from __future__ import annotations

from modelplane.controlplane import ControlPlane
from modelplane.kube import condition_status
from scenario_world import (
    NAMESPACE,
    conditions,
    converge,
    diff,
    family,
    find,
    guards_replicas,
    label,
    remote_objects,
    replica_usage,
    replicas,
    routed,
    snapshot,
)

QWEN = "qwen3-8b"


def test_deleting_a_deployment_removes_exactly_what_it_composed(fleet: ControlPlane):
    before = snapshot(fleet)
    qwen = find(fleet, "ModelDeployment", QWEN)
    composed = family(fleet, qwen)
    remote = {
        obj
        for replica in fleet.list(kind="ModelReplica", namespace=NAMESPACE)
        if replica["metadata"]["labels"]["modelplane.ai/deployment"] == QWEN
        for obj in remote_objects(fleet, replica)
    }
    assert {cluster for cluster, _, _ in remote} == {"gke-us", "lab-east"}
    lab_east_guard = label(replica_usage(fleet, "lab-east"))
    embed_remote = remote_objects(fleet, find(fleet, "ModelDeployment", "embed"))

    fleet.delete(fleet.key("ModelDeployment", QWEN, NAMESPACE))
    converge(fleet)

    assert replicas(fleet, QWEN) == {}
    assert fleet.list(kind="ModelEndpoint", labels={"modelplane.ai/deployment": QWEN}) == []
    # No Object anywhere still wraps one of its remote objects.
    still_remote = {
        (kind, name)
        for obj in fleet.list(kind="Object")
        for kind, name in [
            (
                obj["spec"]["forProvider"]["manifest"]["kind"],
                obj["spec"]["forProvider"]["manifest"]["metadata"]["name"],
            )
        ]
    }
    assert not {(kind, name) for _, kind, name in remote} & still_remote
    # The other deployment still runs exactly what it ran.
    assert remote_objects(fleet, find(fleet, "ModelDeployment", "embed")) == embed_remote

    # The service routes what it still matches: the hosted provider only.
    assert routed(fleet, "chat") == {"hosted-llama": 1}
    service = find(fleet, "ModelService", "chat")
    assert conditions(service)["EndpointsResolved"] == ("True", "Resolved", "Matched 1 endpoint(s)")
    assert condition_status(service, "Ready") == "True"

    # lab-east ran only Qwen: its guard no longer says replicas are there; gke-us runs embed.
    assert not guards_replicas(fleet, "lab-east")
    assert guards_replicas(fleet, "gke-us")

    change = diff(before, snapshot(fleet))
    assert change.removed == composed
    assert change.added == change.recreated == set()
    assert change.changed == {
        lab_east_guard,  # its reason
        label(fleet.composed_by(service)[0]),  # the route
        # The clusters' capacity summaries no longer count the deleted replicas, nor their
        # cache summaries list them as mounting the cache.
        "ConfigMap/modelplane-system/capacity-lab-east",
        "ConfigMap/modelplane-system/capacity-gke-us",
        "ConfigMap/modelplane-system/caches-lab-east",
        "ConfigMap/modelplane-system/caches-gke-us",
    }
