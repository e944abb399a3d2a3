"""compose-inference-cluster reports drains (issue 15): ReplicasDrained from the drain
annotations the ModelDeployment function stamps on the replicas of the cluster."""

from __future__ import annotations

from compose_inference_cluster.fn import InferenceClusterFunction
from modelplane_common.serving import run_function
from modelplane_common.testing import conditions, make_request

MAINTENANCE = {"key": "modelplane.ai/maintenance", "effect": "NoExecute"}


def cluster(taints=None, previous=None) -> dict:
    xr = {
        "apiVersion": "modelplane.ai/v1alpha1",
        "kind": "InferenceCluster",
        "metadata": {"name": "lab"},
        "spec": {
            "cluster": {"source": "Existing", "existing": {"secretRef": {"name": "kc"}}},
            "nodePools": [{"name": "l4", "className": "l4", "nodeCount": 1}],
        },
    }
    if taints:
        xr["spec"]["taints"] = taints
    if previous:
        xr["status"] = {"conditions": [previous]}
    return xr


def replica(name: str, **annotations: str) -> dict:
    return {
        "apiVersion": "modelplane.ai/v1alpha1",
        "kind": "ModelReplica",
        "metadata": {
            "name": name,
            "namespace": "ml-team",
            "labels": {"modelplane.ai/cluster": "lab"},
            "annotations": {
                f"modelplane.ai/{k.replace('_', '-')}": v for k, v in annotations.items()
            },
        },
        "spec": {"clusterName": "lab"},
    }


def drained(xr: dict, replicas: list[dict] | None) -> tuple[str, str, str] | None:
    # The class is left unresolved: the report comes before any hold, like the replica guard.
    required = {"class-l4": []} | ({} if replicas is None else {"model-replicas": replicas})
    rsp = run_function(InferenceClusterFunction(), make_request(xr, {}, required))
    return conditions(rsp).get("ReplicasDrained")


def test_replicas_moving_off_say_which_and_why():
    why = "taint modelplane.ai/maintenance:NoExecute"
    found = drained(
        cluster([MAINTENANCE]), [replica("b", draining=why), replica("a", draining=why)]
    )
    assert found == (
        "False",
        "Draining",
        "2 replicas moving to other clusters, each serving until its replacement does: "
        f"ml-team/a ({why}), ml-team/b ({why})",
    )


def test_a_blocked_drain_says_why_no_other_cluster_fits():
    why = "cluster not Ready for longer than its failover grace period 10m"
    found = drained(
        cluster(),
        [replica("a", draining=why, drain_blocked="1 insufficient free nodes"), replica("c")],
    )
    assert found == (
        "False",
        "DrainBlocked",
        f"1 replica keeps serving, no other cluster fits: ml-team/a ({why}): "
        "1 insufficient free nodes",
    )


def test_drained_once_nothing_must_leave():
    assert drained(cluster([MAINTENANCE]), [replica("tolerates-it")]) == (
        "True",
        "Drained",
        "no replica is moving off this cluster",
    )
    # The taint is lifted after a drain: the condition is kept true, not left stale.
    previous = {"type": "ReplicasDrained", "status": "False", "reason": "Draining"}
    assert drained(cluster(previous=previous), [])[:2] == ("True", "Drained")


def test_no_condition_on_a_cluster_that_never_drained():
    assert drained(cluster(), [replica("a")]) is None
    # Replicas not resolved yet: say nothing rather than "drained".
    assert drained(cluster([MAINTENANCE]), None) is None
