"""A cluster turns not Ready, then recovers (model-deployment.md §4.3, S6, §5; decisions D6;
routing.md §4).

The GKE control plane of gke-us becomes unavailable. Its replicas are kept where they are
(retention ignores readiness: moving them would only add load while the cluster may come
back), but their endpoints are withdrawn so the ModelService stops sending traffic there, and
the conditions on the cluster and on each deployment say why.
"""

from __future__ import annotations

from modelplane.controlplane import ControlPlane
from modelplane.kube import condition_status
from modelplane.providers import matching
from scenario_world import (
    NAMESPACE,
    conditions,
    converge,
    diff,
    endpoints,
    family,
    find,
    gateway_address,
    label,
    remote_objects,
    replica_name,
    replicas,
    routed,
    snapshot,
    uid,
)

QWEN_GKE = replica_name("qwen3-8b", "gke-us", 0)
QWEN_EAST = replica_name("qwen3-8b", "lab-east", 0)
EMBED_GKE = replica_name("embed", "gke-us", 0)
OUTAGE = {
    "conditions": [
        {
            "type": "Ready",
            "status": "False",
            "reason": "Unavailable",
            "message": "cluster control plane unreachable",
        }
    ]
}


def test_cluster_not_ready_keeps_replicas_withholds_endpoints_and_says_why(fleet: ControlPlane):
    before = snapshot(fleet)
    on_gke = {name: find(fleet, "ModelReplica", name) for name in (QWEN_GKE, EMBED_GKE)}
    remote_before = {name: remote_objects(fleet, replica) for name, replica in on_gke.items()}
    endpoints_on_gke = family(fleet, find(fleet, "ModelEndpoint", QWEN_GKE)) | family(
        fleet, find(fleet, "ModelEndpoint", EMBED_GKE)
    )
    (gke_cluster,) = fleet.list(kind="Cluster", namespace="modelplane-system")
    outage = fleet.providers.inject(
        matching(kind="Cluster", name=gke_cluster["metadata"]["name"]), status=OUTAGE
    )
    converge(fleet)

    cluster = find(fleet, "InferenceCluster", "gke-us", None)
    assert condition_status(cluster, "Ready") == "False"
    status, _, message = conditions(cluster)["ClusterReady"]
    assert status == "False"
    assert "gke-us" in message and "not Ready" in message, message

    # Replicas stay where they are, untouched, with everything they run on the cluster.
    assert replicas(fleet, "qwen3-8b") == {QWEN_GKE: "gke-us", QWEN_EAST: "lab-east"}
    assert replicas(fleet, "embed") == {EMBED_GKE: "gke-us"}
    for name, replica in on_gke.items():
        assert uid(find(fleet, "ModelReplica", name)) == uid(replica)
        assert remote_objects(fleet, find(fleet, "ModelReplica", name)) == remote_before[name]
    # No replica was added on a healthy cluster to make up for them (retention, §4.3).
    assert fleet.list(kind="ModelReplica", labels={"modelplane.ai/cluster": "lab-west"}) == []

    # Their endpoints are withdrawn: traffic goes only to the healthy replica and the SaaS.
    assert set(endpoints(fleet, "qwen3-8b")) == {QWEN_EAST}
    assert endpoints(fleet, "embed") == {}
    assert routed(fleet, "chat") == {QWEN_EAST: 9, "hosted-llama": 1}
    service = find(fleet, "ModelService", "chat")
    assert conditions(service)["EndpointsResolved"][:2] == ("True", "Resolved")
    assert condition_status(service, "Ready") == "True"

    # The deployments say how many replicas serve, and why the others do not.
    qwen = find(fleet, "ModelDeployment", "qwen3-8b")
    assert qwen["status"]["replicas"] == {"total": 2, "ready": 1}
    assert conditions(qwen)["ReplicasScheduled"][:2] == ("True", "ReplicasCreated")
    assert conditions(qwen)["ReplicasReady"] == (
        "False",
        "ModelStarting",
        "1 of 2 ready; withheld from traffic: gke-us (not Ready)",
    )
    assert condition_status(qwen, "Ready") == "False"
    embed = find(fleet, "ModelDeployment", "embed")
    assert embed["status"]["replicas"] == {"total": 1, "ready": 0}
    assert conditions(embed)["ReplicasReady"] == (
        "False",
        "ModelStarting",
        "0 of 1 ready; withheld from traffic: gke-us (not Ready)",
    )

    # Only the withdrawn endpoints (and what they composed) went; the route and the
    # deployments' references changed; nothing was created or recreated.
    change = diff(before, snapshot(fleet))
    assert change.removed == endpoints_on_gke
    assert change.added == change.recreated == set()
    assert change.changed == {
        f"ModelDeployment/{NAMESPACE}/qwen3-8b",
        f"ModelDeployment/{NAMESPACE}/embed",
        label(fleet.composed_by(service)[0]),
        "ConfigMap/modelplane-system/capacity-gke-us",  # its capacity summary: not Ready
    }
    assert not change.touched & (
        family(fleet, find(fleet, "ModelCache", "qwen3-8b"))
        | family(fleet, find(fleet, "ModelReplica", QWEN_EAST))
        | family(fleet, find(fleet, "ModelEndpoint", QWEN_EAST))
    )

    # --- the control plane comes back: endpoints return under the same names ---------------
    fleet.providers.clear(outage)
    converge(fleet)
    assert condition_status(find(fleet, "InferenceCluster", "gke-us", None), "Ready") == "True"
    address = gateway_address(fleet, "gke-us")
    assert endpoints(fleet, "qwen3-8b")[QWEN_GKE] == (f"http://{address}/{NAMESPACE}/{QWEN_GKE}/v1")
    assert set(endpoints(fleet, "embed")) == {EMBED_GKE}
    assert routed(fleet, "chat") == {QWEN_GKE: 9, QWEN_EAST: 9, "hosted-llama": 2}
    for name in ("qwen3-8b", "embed"):
        deployment = find(fleet, "ModelDeployment", name)
        assert condition_status(deployment, "Ready") == "True"
        assert conditions(deployment)["ReplicasReady"][:2] == ("True", "AllReplicasReady")
    for name, replica in on_gke.items():
        assert uid(find(fleet, "ModelReplica", name)) == uid(replica)
