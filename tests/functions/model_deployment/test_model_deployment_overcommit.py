"""Spec §5.5 item 5 (first half): a pool that shrank under running replicas is reported,
never acted on. Retention ignores capacity, so every replica stays where it is."""

from __future__ import annotations

import md_fleet as f
from compose_model_deployment import scheduler
from compose_model_deployment.fn import ModelDeploymentFunction
from modelplane_common.serving import run_function
from modelplane_common.testing import (
    conditions,
    desired_resources,
    fleet_required,
    make_request,
    observe,
    ready_status,
    results,
)

OVERCOMMITTED_A = 'over-committed: a pool "p" needs 3 devices, has 1'


def _fleet(nodes_on_a: int) -> tuple[dict, list[dict], list[dict]]:
    """Two of ours and one of another deployment's one-GPU replicas on a/p (one GPU per node);
    b has room."""
    deployment = f.spec(2)
    ours = [f.replica(deployment, "a", 0, ready=True), f.replica(deployment, "a", 1)]
    other = f.replica(f.spec(), "a", 0, deployment_name="other")
    clusters = [f.cluster("a", f.pool("p", nodes_on_a)), f.cluster("b", f.pool("p", 4))]
    return deployment, clusters, [*ours, other]


def test_shrunk_pool_keeps_every_replica_and_is_named():
    deployment, clusters, replicas = _fleet(nodes_on_a=1)
    result = f.run(deployment, clusters, replicas)
    assert f.where(result) == ["a/0", "a/1"] and f.pools_of(result) == [["p"], ["p"]]
    assert result.overcommitted == [scheduler.Overcommit("a", "p", needs=3, has=1)]
    assert scheduler.overcommit_message(result) == OVERCOMMITTED_A


def test_healthy_fleet_reports_no_overcommitment():
    deployment, clusters, replicas = _fleet(nodes_on_a=3)
    result = f.run(deployment, clusters, replicas)
    assert f.where(result) == ["a/0", "a/1"]
    assert result.overcommitted == [] and scheduler.overcommit_message(result) == ""


def test_overcommitted_pool_without_our_replicas_is_not_ours_to_report():
    deployment = f.spec(1)
    others = [f.replica(f.spec(), "b", i, deployment_name="other") for i in range(3)]
    clusters = [f.cluster("a", f.pool("p", 1)), f.cluster("b", f.pool("p", 1))]
    result = f.run(deployment, clusters, [f.replica(deployment, "a", 0), *others])
    assert f.where(result) == ["a/0"] and result.overcommitted == []


def test_many_overcommitted_pools_give_a_bounded_stable_message():
    deployment = f.spec(8)
    clusters = [f.cluster(f"c{i}", f.pool("p", 0)) for i in range(8)]
    replicas = [f.replica(deployment, f"c{i}", 0) for i in reversed(range(8))]
    result = f.run(deployment, clusters, replicas)
    assert len(result.placements) == 8
    message = scheduler.overcommit_message(result)
    assert message.startswith('over-committed: c0 pool "p" needs 1 device, has 0, c1 pool')
    assert message.endswith('c5 pool "p" needs 1 device, has 0, 2 more pools')
    assert message == scheduler.overcommit_message(f.run(deployment, clusters[::-1], replicas))


def _call(nodes_on_a: int, previous: list[dict] | None = None):
    deployment, clusters, replicas = _fleet(nodes_on_a)
    observed = {
        "replica-a-0": observe(f.replica(deployment, "a", 0), ready_status()),
        "replica-a-1": observe(f.replica(deployment, "a", 1)),
    }
    xr = {
        "apiVersion": "modelplane.ai/v1alpha1",
        "kind": "ModelDeployment",
        "metadata": {"name": "m", "namespace": f.NAMESPACE},
        "spec": deployment,
    }
    if previous:
        xr["status"] = {"conditions": previous}
    required = {**fleet_required(clusters, replicas, observed), "service-routes": []}
    return run_function(
        ModelDeploymentFunction(), make_request(xr, observed=observed, required=required)
    )


def test_pool_shrinking_under_running_replicas_is_surfaced_over_grpc():
    rsp = _call(nodes_on_a=1)
    desired = desired_resources(rsp)
    # Nothing moves to b (which has room) and the ready replica keeps serving.
    assert set(desired) == {"replica-a-0", "replica-a-1", "endpoint-a-0"}
    assert desired["replica-a-1"]["spec"]["clusterName"] == "a"
    assert conditions(rsp)["ReplicasScheduled"][:2] == ("True", "ReplicasCreated")
    assert conditions(rsp)["ReplicasReady"] == (
        "False",
        "ModelStarting",
        f"1 of 2 ready; {OVERCOMMITTED_A}",
    )
    assert results(rsp) == [("SEVERITY_WARNING", OVERCOMMITTED_A)]


def test_overcommitment_warns_only_on_the_transition():
    previous = [
        {"type": "ReplicasScheduled", "status": "True", "reason": "ReplicasCreated"},
        {
            "type": "ReplicasReady",
            "status": "False",
            "reason": "ModelStarting",
            "message": f"1 of 2 ready; {OVERCOMMITTED_A}",
        },
    ]
    rsp = _call(nodes_on_a=1, previous=previous)
    assert conditions(rsp)["ReplicasReady"][2] == f"1 of 2 ready; {OVERCOMMITTED_A}"
    assert results(rsp) == []


def test_healthy_fleet_says_nothing_over_grpc():
    rsp = _call(nodes_on_a=3)
    assert conditions(rsp)["ReplicasReady"] == ("False", "ModelStarting", "1 of 2 ready")
    assert results(rsp) == []
