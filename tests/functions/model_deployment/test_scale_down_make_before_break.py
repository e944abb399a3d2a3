"""Scale-down make-before-break, through real gRPC RunFunction (issue 24 item 4).

A replica a scale-down removes is first taken out of every route, then deleted: the
ModelDeployment labels its ModelEndpoint ``modelplane.ai/retiring``, each ModelService leaves
that endpoint out of its HTTPRoute, and only once no route of the namespace sends the replica
traffic does the deployment stop composing it. Before this, the replica and its endpoint went
at once and the gateway answered 500 to the share of requests the route still sent there until
the ModelService's next reconcile.
"""

from __future__ import annotations

from typing import Any

import md_fleet as f
from compose_model_deployment.fn import ModelDeploymentFunction
from compose_model_deployment.names import replica_name
from compose_model_service.fn import ModelServiceFunction
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

JSON = dict[str, Any]
RETIRING = "modelplane.ai/retiring"
CLUSTERS = [f.cluster("a"), f.cluster("b")]


def backend(cluster: str, index: int) -> str:
    return f"{replica_name('m', cluster, index)}-svc"


def endpoint(cluster: str, index: int) -> JSON:
    name = replica_name("m", cluster, index)
    path = f"/{f.NAMESPACE}/{name}/"
    body = {
        "apiVersion": "modelplane.ai/v1alpha1",
        "kind": "ModelEndpoint",
        "metadata": {
            "name": name,
            "namespace": f.NAMESPACE,
            "labels": {"modelplane.ai/deployment": "m"},
        },
        "spec": {"url": f"http://203.0.113.10{path}v1", "rewritePath": path},
    }
    observed = observe(body, ready_status())
    observed["status"]["routing"] = {"backendName": backend(cluster, index)}
    return observed


def serving(deployment: JSON, *where: tuple[str, int]) -> dict[str, JSON]:
    observed = {}
    for cluster, index in where:
        body = f.replica(deployment, cluster, index, ready=True)
        observed[f"replica-{cluster}-{index}"] = observe(body, ready_status())
        observed[f"endpoint-{cluster}-{index}"] = endpoint(cluster, index)
    return observed


def route(*where: tuple[str, int]) -> JSON:
    """A ModelService's HTTPRoute sending traffic to these replicas."""
    refs = [
        {
            "name": backend(cluster, index),
            "port": 80,
            "weight": 1,
            "filters": [
                {
                    "type": "URLRewrite",
                    "urlRewrite": {
                        "path": {
                            "type": "ReplacePrefixMatch",
                            "replacePrefixMatch": f"/{f.NAMESPACE}/"
                            f"{replica_name('m', cluster, index)}/",
                        }
                    },
                }
            ],
        }
        for cluster, index in where
    ]
    return {
        "apiVersion": "gateway.networking.k8s.io/v1",
        "kind": "HTTPRoute",
        "metadata": {"name": "chat", "namespace": f.NAMESPACE},
        "spec": {"rules": [{"backendRefs": refs}]},
    }


def scale(wanted: int, observed: dict[str, JSON], routes: list[JSON] | None):
    """The deployment, asked for ``wanted`` replicas, given the routes of its namespace
    (None: not resolved yet)."""
    xr = {
        "apiVersion": "modelplane.ai/v1alpha1",
        "kind": "ModelDeployment",
        "metadata": {"name": "m", "namespace": f.NAMESPACE},
        "spec": f.spec(wanted),
    }
    replicas = [body for key, body in observed.items() if key.startswith("replica-")]
    required: dict[str, list[JSON]] = fleet_required(CLUSTERS, replicas, observed)
    if routes is not None:
        required["service-routes"] = routes
    return run_function(
        ModelDeploymentFunction(), make_request(xr, observed=observed, required=required)
    )


def retiring(rsp, key: str) -> bool:
    labels = desired_resources(rsp)[key]["metadata"].get("labels") or {}
    return labels.get(RETIRING) == "true"


TWO = serving(f.spec(2), ("a", 0), ("b", 0))


def test_a_scaled_down_replica_still_in_a_route_is_withdrawn_first_not_deleted():
    rsp = scale(1, TWO, [route(("a", 0), ("b", 0))])
    desired = desired_resources(rsp)
    # b-0 goes (equal load: the cluster whose name sorts last), but the route still sends it
    # traffic: it stays composed exactly as it runs, and its endpoint is marked retiring.
    assert set(desired) == {"replica-a-0", "endpoint-a-0", "replica-b-0", "endpoint-b-0"}
    assert retiring(rsp, "endpoint-b-0") and not retiring(rsp, "endpoint-a-0")
    assert desired["replica-b-0"]["spec"] == TWO["replica-b-0"]["spec"]
    # The scale subresource and an autoscaler see what was asked for.
    assert desired_status(rsp)["replicas"] == {"total": 1, "ready": 1}
    scheduled = conditions(rsp)["ReplicasScheduled"]
    assert scheduled[:2] == ("True", "ReplicasCreated")
    assert (
        f"retiring, out of routes until no route sends them traffic: "
        f"{replica_name('m', 'b', 0)} (scale-down; in HTTPRoute chat)"
    ) in scheduled[2]  # names what holds it, for whoever wonders why it is still there
    # Looked at again within seconds: the routes are not watched.
    assert rsp.meta.ttl.seconds == 5


def test_the_model_service_leaves_a_retiring_endpoint_out_of_its_route():
    withdrawn = desired_resources(scale(1, TWO, [route(("a", 0), ("b", 0))]))
    endpoints = [
        observe(withdrawn["endpoint-a-0"], ready_status())
        | {"status": TWO["endpoint-a-0"]["status"]},
        observe(withdrawn["endpoint-b-0"], ready_status())
        | {"status": TWO["endpoint-b-0"]["status"]},
    ]
    service = {
        "apiVersion": "modelplane.ai/v1alpha1",
        "kind": "ModelService",
        "metadata": {"name": "chat", "namespace": f.NAMESPACE},
        "spec": {"endpoints": [{"selector": {"matchLabels": {"modelplane.ai/deployment": "m"}}}]},
    }
    gateway = {
        "apiVersion": "modelplane.ai/v1alpha1",
        "kind": "InferenceGateway",
        "metadata": {"name": "default"},
        "status": {"address": "198.51.100.1"},
    }
    required = {"inference-gateway": [gateway], "endpoints-0": endpoints}
    rsp = run_function(ModelServiceFunction(), make_request(service, required=required))
    refs = desired_resources(rsp)["httproute"]["spec"]["rules"][0]["backendRefs"]
    assert [r["name"] for r in refs] == [backend("a", 0)]


def test_the_retiring_replica_goes_once_no_route_sends_it_traffic():
    rsp = scale(1, TWO, [route(("a", 0))])
    assert set(desired_resources(rsp)) == {"replica-a-0", "endpoint-a-0"}
    assert "retiring" not in conditions(rsp)["ReplicasScheduled"][2]


def test_a_replica_no_route_reaches_goes_at_once():
    for routes in ([], [route(("a", 0))]):
        assert set(desired_resources(scale(1, TWO, routes))) == {"replica-a-0", "endpoint-a-0"}


def test_routes_not_yet_resolved_keep_the_going_replica():
    rsp = scale(1, TWO, None)
    # Nothing proves that no route sends it traffic: it retires, it is not deleted.
    assert set(desired_resources(rsp)) == set(TWO)
    assert retiring(rsp, "endpoint-b-0")


def test_an_endpoint_whose_routing_status_is_lost_is_judged_by_the_route_path():
    observed = {k: dict(v) for k, v in TWO.items()}
    lost = dict(observed["endpoint-b-0"])
    lost["status"] = {k: v for k, v in lost["status"].items() if k != "routing"}
    observed["endpoint-b-0"] = lost
    # The route still rewrites to its path: it may be sent traffic, so it retires first.
    rsp = scale(1, observed, [route(("a", 0), ("b", 0))])
    assert retiring(rsp, "endpoint-b-0")
    rsp = scale(1, observed, [route(("a", 0))])
    assert "replica-b-0" not in desired_resources(rsp)


def test_scaling_to_zero_withdraws_every_routed_replica_before_deleting_it():
    rsp = scale(0, TWO, [route(("a", 0), ("b", 0))])
    assert set(desired_resources(rsp)) == set(TWO)
    assert retiring(rsp, "endpoint-a-0") and retiring(rsp, "endpoint-b-0")
    assert desired_status(rsp)["replicas"] == {"total": 0, "ready": 0}
    assert conditions(rsp)["ReplicasScheduled"][:2] == ("True", "ScaledToZero")
    # The ModelService's route now has no backend (the gateway answers 500): they go.
    assert desired_resources(scale(0, TWO, [route()])) == {}


def test_an_endpoint_whose_backend_is_being_recreated_still_retires_first():
    # status.routing: {} (its Service is being recreated) while the route still rewrites to
    # its path: it may still be sent traffic, so it is not deleted outright.
    observed = {k: dict(v) for k, v in TWO.items()}
    recreating = dict(observed["endpoint-b-0"])
    recreating["status"] = {**recreating["status"], "routing": {}}
    observed["endpoint-b-0"] = recreating
    assert retiring(scale(1, observed, [route(("a", 0), ("b", 0))]), "endpoint-b-0")


def test_a_replica_wanted_again_loses_its_retiring_label_even_when_its_readiness_is_unknown():
    withdrawn = desired_resources(scale(1, TWO, [route(("a", 0), ("b", 0))]))
    observed = dict(TWO)
    observed["endpoint-b-0"] = observe(withdrawn["endpoint-b-0"], ready_status()) | {
        "status": TWO["endpoint-b-0"]["status"]
    }
    unknown = dict(TWO["replica-b-0"])
    unknown["status"] = {}  # its Ready condition lost
    observed["replica-b-0"] = unknown
    rsp = scale(2, observed, [route(("a", 0))])
    assert "endpoint-b-0" in desired_resources(rsp)
    assert not retiring(rsp, "endpoint-b-0")
