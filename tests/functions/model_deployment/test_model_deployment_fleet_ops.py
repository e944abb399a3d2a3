"""compose-model-deployment through real gRPC for issue 15: honest readiness whether or not
the scheduler can run, the scale selector, the injected clock, drain annotations."""

from __future__ import annotations

import md_fleet as f
from compose_model_deployment.fn import ModelDeploymentFunction
from compose_model_deployment.names import replica_name
from google.protobuf import struct_pb2
from modelplane_common.serving import run_function
from modelplane_common.testing import (
    conditions,
    desired_resources,
    desired_status,
    fleet_required,
    make_request,
    observe,
    ready_status,
)

BROKEN = f.standalone("main", "device.driver ==")
MAINTENANCE = {"key": "modelplane.ai/maintenance", "effect": "NoExecute"}


def call(spec, clusters, observed, context=None, routes=None):
    xr = {
        "apiVersion": "modelplane.ai/v1alpha1",
        "kind": "ModelDeployment",
        "metadata": {"name": "m", "namespace": f.NAMESPACE},
        "spec": spec,
    }
    required = {**fleet_required(clusters, [], observed), "service-routes": routes or []}
    request = make_request(xr, observed=observed, required=required)
    if context is not None:
        request.context.CopyFrom(struct_pb2.Struct())
        request.context.update(context)
    return run_function(ModelDeploymentFunction(), request)


def endpoint(cluster: str, index: int) -> dict:
    """Ready and routable (its Service exists: ``status.routing.backendName``)."""
    body = observe(
        {
            "apiVersion": "modelplane.ai/v1alpha1",
            "kind": "ModelEndpoint",
            "metadata": {"name": replica_name("m", cluster, index), "namespace": f.NAMESPACE},
            "spec": {"url": "http://x/v1", "rewritePath": "/"},
        },
        ready_status(),
    )
    body["status"]["routing"] = {"backendName": backend(cluster, index)}
    return body


def backend(cluster: str, index: int) -> str:
    return f"svc-{cluster}-{index}"


def route(*backends: str, weight: int = 1) -> dict:
    """A ModelService's HTTPRoute sending traffic to ``backends``."""
    refs = [{"name": b, "port": 8000, "weight": weight} for b in backends]
    return {
        "apiVersion": "gateway.networking.k8s.io/v1",
        "kind": "HTTPRoute",
        "metadata": {"name": "chat-x1", "namespace": f.NAMESPACE},
        "spec": {"rules": [{"backendRefs": refs}]},
    }


def weighted(weights: dict[str, int]) -> dict:
    body = route()
    body["spec"]["rules"][0]["backendRefs"] = [
        {"name": name, "port": 8000, "weight": w} for name, w in weights.items()
    ]
    return body


def serving(*where: tuple[str, int]) -> dict:
    deployment = f.spec(1)
    observed = {}
    for cluster, index in where:
        observed[f"replica-{cluster}-{index}"] = observe(
            f.replica(deployment, cluster, index), ready_status()
        )
        observed[f"endpoint-{cluster}-{index}"] = endpoint(cluster, index)
    return observed


def test_a_held_deployment_never_reads_more_ready_than_it_wants():
    # Two ready replicas (say, mid-drain) while an edit breaks the selector: held, not "2 of 1".
    observed = serving(("a", 0), ("b", 0))
    rsp = call(f.spec(1, BROKEN), [f.cluster("a"), f.cluster("b")], observed)
    assert conditions(rsp)["ReplicasScheduled"][1] == "InvalidNodeSelector"
    assert set(desired_resources(rsp)) == set(observed)
    assert conditions(rsp)["ReplicasReady"] == ("True", "AllReplicasReady", "1 of 1 ready")
    assert desired_status(rsp)["replicas"] == {"total": 2, "ready": 1}


def test_a_held_deployment_does_not_count_replicas_on_a_not_ready_cluster():
    observed = serving(("a", 0), ("b", 0))
    rsp = call(f.spec(2, BROKEN), [f.cluster("a"), f.cluster("b", ready=False)], observed)
    assert conditions(rsp)["ReplicasReady"] == (
        "False",
        "ModelStarting",
        "1 of 2 ready; withheld from traffic: b (not Ready)",
    )
    assert desired_status(rsp)["replicas"] == {"total": 2, "ready": 1}
    # The scheduling path says exactly the same about the same replicas.
    rsp = call(f.spec(2), [f.cluster("a"), f.cluster("b", ready=False)], observed)
    assert conditions(rsp)["ReplicasReady"] == (
        "False",
        "ModelStarting",
        "1 of 2 ready; withheld from traffic: b (not Ready)",
    )


def test_status_selector_selects_the_deployments_replicas():
    rsp = call(f.spec(1), [f.cluster("a")], {})
    assert desired_status(rsp)["selector"] == "modelplane.ai/deployment=m"
    replica = desired_resources(rsp)["replica-a-0"]
    assert replica["metadata"]["labels"]["modelplane.ai/deployment"] == "m"


def test_failover_follows_the_injected_clock():
    dead = f.cluster("a", ready=False, not_ready_since="2026-01-01T00:00:00Z")
    observed = serving(("a", 0))
    early = call(
        f.spec(1), [dead, f.cluster("b")], observed, {"modelplane.ai/now": "2026-01-01T00:05:00Z"}
    )
    assert sorted(k for k in desired_resources(early) if k.startswith("replica-")) == [
        "replica-a-0"
    ]
    late = call(
        f.spec(1), [dead, f.cluster("b")], observed, {"modelplane.ai/now": "2026-01-01T00:11:00Z"}
    )
    desired = desired_resources(late)
    assert sorted(k for k in desired if k.startswith("replica-")) == ["replica-a-0", "replica-b-0"]
    assert desired["replica-b-0"]["metadata"]["annotations"] == {
        "modelplane.ai/replaces": replica_name("m", "a", 0)
    }
    # Without the context key the wall clock is used: long past 2026-01-01 plus ten minutes.
    real = call(f.spec(1), [dead, f.cluster("b")], observed)
    assert "replica-b-0" in desired_resources(real)


def test_a_tainted_cluster_keeps_the_old_endpoint_until_the_replacement_is_routable():
    observed = serving(("a", 0))
    tainted = f.cluster("a", taints=[MAINTENANCE])
    rsp = call(f.spec(1), [tainted, f.cluster("b")], observed)
    assert set(desired_resources(rsp)) == {"replica-a-0", "endpoint-a-0", "replica-b-0"}
    # Replacement Ready with a Ready endpoint that is not routable yet: nothing goes.
    observed["replica-b-0"] = observe(f.replica(f.spec(1), "b", 0), ready_status())
    unroutable = endpoint("b", 0)
    del unroutable["status"]["routing"]
    observed["endpoint-b-0"] = unroutable
    rsp = call(f.spec(1), [tainted, f.cluster("b")], observed)
    assert {"replica-a-0", "endpoint-a-0"} <= set(desired_resources(rsp))
    observed["endpoint-b-0"] = endpoint("b", 0)
    rsp = call(f.spec(1), [tainted, f.cluster("b")], observed)
    assert set(desired_resources(rsp)) == {"replica-b-0", "endpoint-b-0"}


def _drain_response(routes):
    """Replica a-0 on a tainted cluster, its replacement b-0 Ready, Ready and routable: what
    stays composed, given the HTTPRoutes of the namespace (None: not resolved yet)."""
    observed = serving(("a", 0))
    observed["replica-b-0"] = observe(f.replica(f.spec(1), "b", 0), ready_status())
    observed["endpoint-b-0"] = endpoint("b", 0)
    clusters = [f.cluster("a", taints=[MAINTENANCE]), f.cluster("b")]
    xr = {
        "apiVersion": "modelplane.ai/v1alpha1",
        "kind": "ModelDeployment",
        "metadata": {"name": "m", "namespace": f.NAMESPACE},
        "spec": f.spec(1),
    }
    required = fleet_required(clusters, [], observed)
    if routes is not None:
        required["service-routes"] = routes
    return run_function(
        ModelDeploymentFunction(), make_request(xr, observed=observed, required=required)
    )


def _drained_when(routes) -> str:
    """OLD: the old replica still serves; RETIRING: it is kept, its endpoint labelled so
    ModelServices take it out of their routes; NEW: it is gone."""
    desired = desired_resources(_drain_response(routes))
    if "replica-a-0" not in desired:
        assert set(desired) == {"replica-b-0", "endpoint-b-0"}
        return NEW
    labels = desired["endpoint-a-0"]["metadata"].get("labels") or {}
    return RETIRING if labels.get("modelplane.ai/retiring") == "true" else OLD


OLD, RETIRING, NEW = "old replica serving", "old replica retiring", "old replica gone"


def test_a_draining_replica_waits_until_every_route_to_the_deployment_sends_to_its_successor():
    # The real plane's drain (issue 20): the deployment saw the replacement routable before
    # the ModelService had put it in its route; removing the old replica then left the route
    # pointing only at a backend that was gone, and the model unserved.
    cases = [
        ("no ModelService routes to the deployment", [], NEW),
        ("the route still sends only to the old backend", [route(backend("a", 0))], OLD),
        # Make-before-break to the end: out of the route first, deleted once out of it.
        ("the route sends to both", [route(backend("a", 0), backend("b", 0))], RETIRING),
        ("the route already moved on", [route(backend("b", 0))], NEW),
        (
            "one service moved, another did not",
            [route(backend("a", 0), backend("b", 0)), route(backend("a", 0))],
            OLD,
        ),
        (
            "a weight of zero sends nothing",
            [weighted({backend("a", 0): 1, backend("b", 0): 0})],
            OLD,
        ),
        ("another deployment's route does not matter", [route("svc-other")], NEW),
        ("routes not resolved yet", None, OLD),
    ]
    for why, routes, stays in cases:
        assert _drained_when(routes) == stays, why


def test_a_drain_waiting_for_a_route_is_looked_at_again_within_seconds():
    # Routes are required resources, which Crossplane does not watch: without a short TTL the
    # old replica stayed a whole minute after its successor was routed (issue 20, measured).
    waiting = _drain_response([route(backend("a", 0))])
    assert waiting.meta.ttl.seconds == 5
    # Drained, Ready and settled: the usual minute.
    done = call(f.spec(1), [f.cluster("b")], serving(("b", 0)), routes=[route(backend("b", 0))])
    assert set(desired_resources(done)) == {"replica-b-0", "endpoint-b-0"}
    assert done.meta.ttl.seconds == 60


def _deletion_refused(cluster: dict) -> dict:
    """The cluster after Crossplane's Usage webhook refused a delete of it."""
    annotations = {"usage.crossplane.io/deletion-attempt-with-policy": "Background"}
    return {**cluster, "metadata": {**cluster["metadata"], "annotations": annotations}}


def test_a_cluster_someone_tried_to_delete_takes_no_new_replica_and_keeps_its_own():
    """Its guard lets go once it is empty: a replica placed on it then would be stranded."""
    placed = desired_resources(call(f.spec(1), [f.cluster("a"), f.cluster("b")], {}))
    assert "replica-a-0" in placed  # the first choice, until its deletion is asked for
    deleting = [_deletion_refused(f.cluster("a")), f.cluster("b")]
    placed = desired_resources(call(f.spec(1), deleting, {}))
    assert "replica-b-0" in placed and "replica-a-0" not in placed
    # A replica already serving there stays: no drain, only nothing new.
    kept = desired_resources(call(f.spec(1), deleting, serving(("a", 0))))
    assert set(kept) == {"replica-a-0", "endpoint-a-0"}
