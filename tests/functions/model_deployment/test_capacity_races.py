"""Concurrent reconciles competing for the last free devices (issue 23 item 3), through real
gRPC RunFunction.

Crossplane reconciles many ModelDeployments at once, each from its own view of the fleet. Two
that both see one free GPU both place a replica there. The next reconcile of each replays the
fleet first come, first served (creationTimestamp, then name): every deployment agrees which
replica lost, and the loser's deployment places it again elsewhere, while it has not started.
Nothing running is moved, and a pool that shrank under older replicas is only reported.
"""

from __future__ import annotations

import md_fleet as f
from compose_model_deployment.fn import ModelDeploymentFunction
from compose_model_deployment.names import replica_name
from google.protobuf import struct_pb2
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

NOW = "2026-11-27T12:00:30Z"
# One free GPU on a (one node of one GPU), room on b; a sorts first, so both deployments'
# first reconciles choose a.
CLUSTERS = [f.cluster("a", f.pool("p", 1)), f.cluster("b", f.pool("p", 4))]


def replica(deployment: str, cluster: str, created: str, ready: bool = False) -> dict:
    body = f.replica(f.spec(1), cluster, 0, deployment_name=deployment)
    body["metadata"]["name"] = replica_name(deployment, cluster, 0)
    body["metadata"]["creationTimestamp"] = created
    return observe(body, ready_status()) if ready else body


def reconcile(
    deployment: str,
    ours: dict[str, dict],
    fleet: list[dict],
    now: str = NOW,
    spec: dict | None = None,
    clusters: list[dict] | None = None,
):
    xr = {
        "apiVersion": "modelplane.ai/v1alpha1",
        "kind": "ModelDeployment",
        "metadata": {"name": deployment, "namespace": f.NAMESPACE},
        "spec": spec or f.spec(1),
    }
    required = {
        **fleet_required(clusters or CLUSTERS, fleet, ours),
        "service-routes": [],
    }
    request = make_request(xr, observed=ours, required=required)
    request.context.CopyFrom(struct_pb2.Struct())
    request.context.update({"modelplane.ai/now": now})
    return run_function(ModelDeploymentFunction(), request)


def placed(rsp) -> dict[str, str]:
    return {
        body["metadata"]["name"]: body["spec"]["clusterName"]
        for key, body in desired_resources(rsp).items()
        if key.startswith("replica-")
    }


def test_two_deployments_placing_from_one_snapshot_both_take_the_last_gpu():
    # The race itself: each reconcile sees the fleet without the other's replica.
    for name in ("first", "second"):
        assert set(placed(reconcile(name, {}, [])).values()) == {"a"}


def test_the_replica_created_later_loses_and_is_placed_again_elsewhere():
    first = replica("first", "a", "2026-11-27T12:00:01Z")
    second = replica("second", "a", "2026-11-27T12:00:02Z")
    fleet = [first, second]
    # The winner (created first) keeps its GPU and reports nothing.
    rsp = reconcile("first", {"replica-a-0": first}, fleet)
    assert placed(rsp) == {replica_name("first", "a", 0): "a"}
    assert "over-committed" not in conditions(rsp)["ReplicasReady"][2]
    assert results(rsp) == []
    # The loser's deployment sees the same replay, drops its Pending replica and places a
    # new one on b: not left Pending silently, and says so.
    rsp = reconcile("second", {"replica-a-0": second}, fleet)
    assert placed(rsp) == {replica_name("second", "b", 0): "b"}
    (warning,) = [r for r in results(rsp) if "lost the last free devices" in r[1]]
    assert warning == (
        "SEVERITY_WARNING",
        f"{replica_name('second', 'a', 0)} lost the last free devices on a to replicas created "
        "before it (placed from the same view of the fleet) and cannot start there; placing "
        "it again",
    )


def test_first_come_first_served_not_name_order():
    # "alpha" sorts first but was created a second later: it is the one that loses.
    early = replica("zeta", "a", "2026-11-27T12:00:01Z")
    late = replica("alpha", "a", "2026-11-27T12:00:02Z")
    fleet = [early, late]
    assert placed(reconcile("zeta", {"replica-a-0": early}, fleet)) == {
        replica_name("zeta", "a", 0): "a"
    }
    assert set(placed(reconcile("alpha", {"replica-a-0": late}, fleet)).values()) == {"b"}


def test_created_in_the_same_second_the_name_decides_for_everyone():
    one = replica("one", "a", "2026-11-27T12:00:01Z")
    two = replica("two", "a", "2026-11-27T12:00:01Z")
    fleet = [one, two]
    assert set(placed(reconcile("one", {"replica-a-0": one}, fleet)).values()) == {"a"}
    assert set(placed(reconcile("two", {"replica-a-0": two}, fleet)).values()) == {"b"}


def test_a_loser_that_already_serves_is_never_dropped():
    # The real scheduler bound it after all (the model's node numbers are not the cluster's):
    # it runs, so it stays, and the pool is reported over-committed.
    first = replica("first", "a", "2026-11-27T12:00:01Z")
    second = replica("second", "a", "2026-11-27T12:00:02Z", ready=True)
    rsp = reconcile("second", {"replica-a-0": second}, [first, second])
    assert placed(rsp) == {replica_name("second", "a", 0): "a"}
    assert (
        'over-committed: a pool "p" needs 2 devices, has 1' in (conditions(rsp)["ReplicasReady"][2])
    )


def test_an_old_replica_on_a_pool_that_shrank_is_kept_and_reported():
    # Not a race: created long before, it is kept where it is (spec §5.5), and reported.
    first = replica("first", "a", "2026-11-27T10:00:01Z")
    second = replica("second", "a", "2026-11-27T10:00:02Z")
    rsp = reconcile("second", {"replica-a-0": second}, [first, second])
    assert placed(rsp) == {replica_name("second", "a", 0): "a"}
    assert "over-committed" in conditions(rsp)["ReplicasReady"][2]
    assert not [r for r in results(rsp) if "lost the last free devices" in r[1]]


def test_a_lost_replica_still_listed_never_makes_a_serving_replica_retire():
    # Review finding: the loser a/0, dropped last reconcile, is still listed while it is
    # deleted; with replicas: 2 it was retained again, and the scale-down then retired the
    # only serving replica, z/0. Races are judged before any scale-down now.
    clusters = [f.cluster("a", f.pool("p", 1)), f.cluster("b", f.pool("p", 4))]
    clusters.append(f.cluster("z", f.pool("p", 4)))
    winner = replica("winner", "a", "2026-11-27T12:00:01Z")
    lost = replica("m", "a", "2026-11-27T12:00:02Z")
    new = replica("m", "b", "2026-11-27T12:00:03Z")
    serving = replica("m", "z", "2026-11-27T10:00:00Z", ready=True)
    name = replica_name("m", "z", 0)
    endpoint = observe(
        {
            "apiVersion": "modelplane.ai/v1alpha1",
            "kind": "ModelEndpoint",
            "metadata": {"name": name, "namespace": f.NAMESPACE},
            "spec": {"url": "http://203.0.113.10/v1", "rewritePath": f"/{f.NAMESPACE}/{name}/"},
        },
        ready_status(),
    )
    endpoint["status"]["routing"] = {"backendName": f"{name}-svc"}
    route = {
        "apiVersion": "gateway.networking.k8s.io/v1",
        "kind": "HTTPRoute",
        "metadata": {"name": "chat", "namespace": f.NAMESPACE},
        "spec": {"rules": [{"backendRefs": [{"name": f"{name}-svc", "port": 80, "weight": 1}]}]},
    }
    xr = {
        "apiVersion": "modelplane.ai/v1alpha1",
        "kind": "ModelDeployment",
        "metadata": {"name": "m", "namespace": f.NAMESPACE},
        "spec": f.spec(2),
    }
    observed = {"replica-b-0": new, "replica-z-0": serving, "endpoint-z-0": endpoint}
    required = {
        **fleet_required(clusters, [winner, lost, new, serving], observed),
        "service-routes": [route],
    }
    request = make_request(xr, observed=observed, required=required)
    request.context.CopyFrom(struct_pb2.Struct())
    request.context.update({"modelplane.ai/now": NOW})
    rsp = run_function(ModelDeploymentFunction(), request)
    desired = desired_resources(rsp)
    assert set(desired) == {"replica-b-0", "replica-z-0", "endpoint-z-0"}
    assert "modelplane.ai/retiring" not in (desired["endpoint-z-0"]["metadata"].get("labels") or {})
    assert "retiring" not in conditions(rsp)["ReplicasScheduled"][2]
    # Dropped on an earlier reconcile: not announced again on every one while it is listed.
    assert not [r for r in results(rsp) if "lost the last free devices" in r[1]]


def test_a_loser_that_gives_way_leaves_room_for_the_replicas_after_it():
    # One node of 2 GPUs: g (1 GPU) first, then f (2 GPUs, does not fit), then o (1 GPU).
    # f gives way (its deployment places it again), so o fits and is not disturbed.
    two_gpus = [f.cluster("a", f.pool("p", 1, f.gpu(2)))]

    def shaped(deployment: str, count: int, created: str) -> dict:
        body = f.replica(f.spec(1, f.standalone(count=count)), "a", 0, deployment_name=deployment)
        body["metadata"]["name"] = replica_name(deployment, "a", 0)
        body["metadata"]["creationTimestamp"] = created
        return body

    g = shaped("g", 1, "2026-11-27T12:00:00Z")
    big = shaped("f", 2, "2026-11-27T12:00:01Z")
    o = shaped("o", 1, "2026-11-27T12:00:02Z")
    fleet = [g, big, o]
    one_gpu, two = f.spec(1, f.standalone(count=1)), f.spec(1, f.standalone(count=2))
    rsp = reconcile("o", {"replica-a-0": o}, fleet, spec=one_gpu, clusters=two_gpus)
    assert placed(rsp) == {replica_name("o", "a", 0): "a"}
    assert "over-committed" not in conditions(rsp)["ReplicasReady"][2]
    rsp = reconcile("f", {"replica-a-0": big}, fleet, spec=two, clusters=two_gpus)
    assert placed(rsp) == {}
    assert conditions(rsp)["ReplicasScheduled"][1] == "InsufficientCapacity"


def test_creation_times_are_compared_as_times_not_strings():
    # '12:00:01.5Z' sorts before '12:00:01Z' as a string, and an offset hides the order.
    early = replica("zeta", "a", "2026-11-27T13:00:01+01:00")  # 12:00:01Z
    late = replica("alpha", "a", "2026-11-27T12:00:01.500000Z")
    fleet = [early, late]
    assert set(placed(reconcile("zeta", {"replica-a-0": early}, fleet)).values()) == {"a"}
    assert set(placed(reconcile("alpha", {"replica-a-0": late}, fleet)).values()) == {"b"}
