"""Fleet operations on examples/multi-cluster, round by round (issue 15): draining a cluster
with a NoExecute taint, and failing over off a cluster that stays not Ready past its grace
period. The zero-downtime property is measured: after every simulated round, the number of
replicas that are Ready and routed (ModelReplica Ready, ModelEndpoint Ready, a backend of the
ModelService's route with weight > 0) never drops below what it was when the drain began.
"""

from __future__ import annotations

from collections.abc import Callable

from modelplane.controlplane import ControlPlane
from modelplane.kube import condition_status
from modelplane.providers import matching
from scenario_world import NAMESPACE, conditions, find, fork, replica_name, replicas, routed

DEPLOYMENT = SERVICE = "qwen3-32b"
EKS_0 = replica_name(DEPLOYMENT, "eks-us-east", 0)
GKE_0 = replica_name(DEPLOYMENT, "gke-us-central", 0)
MAINTENANCE = {"key": "modelplane.ai/maintenance", "effect": "NoExecute"}
OUTAGE = {"conditions": [{"type": "Ready", "status": "False", "reason": "Unavailable"}]}
MAX_ROUNDS = 40


def route_weights(plane: ControlPlane) -> dict[str, int]:
    """``routed``, or nothing while the service has no route or a route without backends."""
    routes = plane.composed_by(find(plane, "ModelService", SERVICE), recursive=False)
    if not any(rule.get("backendRefs") for r in routes for rule in r["spec"]["rules"]):
        return {}
    return routed(plane, SERVICE)


def serving(plane: ControlPlane) -> set[str]:
    """Replicas that are Ready and routed right now."""
    weights = route_weights(plane)
    found = set()
    for name in replicas(plane, DEPLOYMENT):
        endpoint = plane.find("ModelEndpoint", name, NAMESPACE)
        if (
            condition_status(find(plane, "ModelReplica", name), "Ready") == "True"
            and endpoint is not None
            and condition_status(endpoint, "Ready") == "True"
            and weights.get(name, 0) > 0
        ):
            found.add(name)
    return found


def rounds(plane: ControlPlane) -> list[tuple[dict[str, str], set[str]]]:
    """Run round by round to a fixed point; after each: (replica -> cluster, serving)."""
    seen = []
    for _ in range(MAX_ROUNDS):
        report = plane.round()
        seen.append((replicas(plane, DEPLOYMENT), serving(plane)))
        if not report.changed:
            return seen
    raise AssertionError(f"no fixed point after {MAX_ROUNDS} rounds")


def test_draining_a_cluster_never_drops_a_serving_replica(converged_example: Callable):
    plane = fork(converged_example("multi-cluster").plane)
    assert replicas(plane, DEPLOYMENT) == {EKS_0: "eks-us-east"}
    before = serving(plane)
    assert before == {EKS_0}

    plane.patch(plane.key("InferenceCluster", "eks-us-east"), {"spec": {"taints": [MAINTENANCE]}})
    history = rounds(plane)

    counts = [len(now) for _, now in history]
    print("serving per round:", counts)
    assert min(counts) >= len(before), counts
    # Make-before-break: both were composed at once, and the old one went only once the
    # replacement's endpoint was Ready and routable.
    both = [i for i, (where, _) in enumerate(history) if set(where) == {EKS_0, GKE_0}]
    assert both, history
    assert len(both) >= 2, "both replicas ran side by side while the replacement came up"
    assert replicas(plane, DEPLOYMENT) == {GKE_0: "gke-us-central"}
    assert serving(plane) == {GKE_0}
    assert routed(plane, SERVICE) == {GKE_0: 1}
    deployment = find(plane, "ModelDeployment", DEPLOYMENT)
    assert conditions(deployment)["ReplicasScheduled"] == (
        "True",
        "ReplicasCreated",
        "Scheduled 1 of 1 replicas",
    )
    assert condition_status(deployment, "Ready") == "True"
    cluster = find(plane, "InferenceCluster", "eks-us-east", None)
    assert conditions(cluster)["ReplicasDrained"][:2] == ("True", "Drained")


def test_a_drain_waits_for_a_model_service_that_has_not_routed_the_replacement_yet(
    converged_example: Callable,
):
    # The real plane's order (issue 20): the deployment may see its replacement routable long
    # before the ModelService's next reconcile adds it to the route. Paused here, the service
    # is that slow reconcile; the old replica must keep serving until the route moves.
    plane = fork(converged_example("multi-cluster").plane)
    service = plane.key("ModelService", SERVICE, NAMESPACE)
    plane.patch(service, {"metadata": {"annotations": {"crossplane.io/paused": "true"}}})
    plane.patch(plane.key("InferenceCluster", "eks-us-east"), {"spec": {"taints": [MAINTENANCE]}})
    history = rounds(plane)
    assert all(now == {EKS_0} for _, now in history), history
    assert replicas(plane, DEPLOYMENT) == {EKS_0: "eks-us-east", GKE_0: "gke-us-central"}
    endpoint = plane.find("ModelEndpoint", GKE_0, NAMESPACE)
    assert endpoint is not None and condition_status(endpoint, "Ready") == "True"

    plane.patch(service, {"metadata": {"annotations": {"crossplane.io/paused": "false"}}})
    history = rounds(plane)
    assert min(len(now) for _, now in history) >= 1, history
    assert replicas(plane, DEPLOYMENT) == {GKE_0: "gke-us-central"}
    assert routed(plane, SERVICE) == {GKE_0: 1}


def test_a_drain_with_nowhere_to_go_keeps_serving_and_both_objects_say_why(
    converged_example: Callable,
):
    plane = fork(converged_example("multi-cluster").plane)
    cordon = {"key": "modelplane.ai/maintenance", "effect": "NoSchedule"}
    plane.patch(plane.key("InferenceCluster", "gke-us-central"), {"spec": {"taints": [cordon]}})
    plane.patch(plane.key("InferenceCluster", "eks-us-east"), {"spec": {"taints": [MAINTENANCE]}})
    history = rounds(plane)
    assert all(now == {EKS_0} for _, now in history)
    assert replicas(plane, DEPLOYMENT) == {EKS_0: "eks-us-east"}
    status, reason, message = conditions(find(plane, "ModelDeployment", DEPLOYMENT))[
        "ReplicasScheduled"
    ]
    assert (status, reason) == ("False", "InsufficientCapacity")
    assert message == (
        "0 of 1 replicas scheduled (checked 2 clusters); 0/2 clusters available: "
        "2 untolerated taint modelplane.ai/maintenance; kept serving, no other cluster fits: "
        f"{EKS_0} on eks-us-east (taint modelplane.ai/maintenance:NoExecute)"
    )
    status, reason, message = conditions(find(plane, "InferenceCluster", "eks-us-east", None))[
        "ReplicasDrained"
    ]
    assert (status, reason) == ("False", "DrainBlocked")
    assert message == (
        f"1 replica keeps serving, no other cluster fits: {NAMESPACE}/{EKS_0} "
        "(taint modelplane.ai/maintenance:NoExecute): 2 untolerated taint "
        "modelplane.ai/maintenance"
    )

    # The cordon is lifted: the drain continues by itself.
    plane.patch(plane.key("InferenceCluster", "gke-us-central"), {"spec": {"taints": []}})
    history = rounds(plane)
    assert min(len(now) for _, now in history) >= 1
    assert replicas(plane, DEPLOYMENT) == {GKE_0: "gke-us-central"}


def test_failover_off_a_dead_cluster_after_its_grace_period(converged_example: Callable):
    plane = fork(converged_example("multi-cluster").plane)
    (eks,) = [c for c in plane.list(kind="Cluster") if "eks" in c["apiVersion"]]
    plane.providers.inject(matching(kind="Cluster", name=eks["metadata"]["name"]), status=OUTAGE)
    history = rounds(plane)
    assert condition_status(find(plane, "InferenceCluster", "eks-us-east", None), "Ready") == (
        "False"
    )
    # Within the grace period nothing moves: the cluster may come back.
    assert replicas(plane, DEPLOYMENT) == {EKS_0: "eks-us-east"}
    at_failover = len(serving(plane))  # 0: a dead cluster's replica gets no traffic

    plane.advance(10 * 60)
    history = rounds(plane)
    counts = [len(now) for _, now in history]
    print("serving per round:", counts)
    assert min(counts) >= at_failover
    both = [where for where, _ in history if set(where) == {EKS_0, GKE_0}]
    assert both, "the old replica stayed composed until its replacement served"
    assert replicas(plane, DEPLOYMENT) == {GKE_0: "gke-us-central"}
    assert serving(plane) == {GKE_0}
    deployment = find(plane, "ModelDeployment", DEPLOYMENT)
    assert conditions(deployment)["ReplicasReady"][:2] == ("True", "AllReplicasReady")


def test_a_replica_made_in_the_shared_namespace_moves_to_its_own_make_before_break(
    converged_example: Callable,
):
    # Issue 21 (D10): a replica an earlier Modelplane put in the workload cluster's shared
    # namespace ``default``. Its Objects are made to look like that; from then on the replica
    # keeps them exactly as they run, and its deployment replaces it with one in ml-team.
    plane = fork(converged_example("multi-cluster").plane)
    old = find(plane, "ModelReplica", EKS_0)
    for obj in plane.composed_by(old):
        if obj["kind"] == "Object":
            legacy = {"spec": {"forProvider": {"manifest": {"metadata": {"namespace": "default"}}}}}
            plane.patch(plane.key("Object", obj["metadata"]["name"], NAMESPACE), legacy)
    before = serving(plane)
    assert before == {EKS_0}

    history = rounds(plane)
    counts = [len(now) for _, now in history]
    print("serving per round:", counts)
    assert min(counts) >= 1, history  # never unserved while it moves
    assert any(len(where) == 2 for where, _ in history), "old and new ran side by side"
    (new,) = replicas(plane, DEPLOYMENT)
    assert new != EKS_0
    assert serving(plane) == {new} and routed(plane, SERVICE) == {new: 1}
    replica = find(plane, "ModelReplica", new)
    assert replica["status"]["remoteNamespace"] == NAMESPACE
    manifests = [o["spec"]["forProvider"]["manifest"] for o in plane.composed_by(replica)]
    assert {m["metadata"]["namespace"] for m in manifests if m["kind"] != "Namespace"} == {
        NAMESPACE
    }
    # Nothing of the old replica is left in the shared namespace.
    assert not [
        o
        for o in plane.list(kind="Object")
        if o["spec"]["forProvider"]["manifest"]["metadata"].get("namespace") == "default"
    ]


def test_a_cluster_whose_devices_no_longer_fit_drains_its_replica_make_before_break(
    converged_example: Callable,
):
    # Issue 21: the class behind eks-us-east's l40s pool now publishes 24Gi GPUs; the 40Gi
    # engine no longer fits there. The running replica is kept exactly as it runs and drained,
    # never deleted before its replacement (on gke-us-central's h100 pool) serves.
    plane = fork(converged_example("multi-cluster").plane)
    smaller = plane.find("InferenceClass", "eks-l40s-1x-g6e")
    devices = smaller["spec"]["devices"]
    devices[0]["capacity"]["memory"] = {"value": "24Gi"}
    plane.patch(plane.key("InferenceClass", "eks-l40s-1x-g6e"), {"spec": {"devices": devices}})
    watched: list[str] = []
    history = []
    for _ in range(MAX_ROUNDS):
        report = plane.round()
        history.append((replicas(plane, DEPLOYMENT), serving(plane)))
        message = conditions(find(plane, "ModelDeployment", DEPLOYMENT))["ReplicasScheduled"][2]
        watched.append(message)
        if not report.changed:
            break
    counts = [len(now) for _, now in history]
    print("serving per round:", counts)
    assert min(counts) >= 1, history
    assert any(len(where) == 2 for where, _ in history), "old and new ran side by side"
    assert any(
        'no longer fits: engine main does not match the devices of pool "l40s"' in m
        for m in watched
    ), watched
    assert replicas(plane, DEPLOYMENT) == {GKE_0: "gke-us-central"}
    assert serving(plane) == {GKE_0}
