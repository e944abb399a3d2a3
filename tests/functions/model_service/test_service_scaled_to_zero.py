"""A ModelService whose deployment is scaled to zero, through real gRPC RunFunction.

With no ModelEndpoint left the service keeps its HTTPRoute: the rule keeps its path match and
has no backendRefs, so the gateway answers 500 there (Gateway API: a rule whose backendRefs
are all invalid or absent answers 500) rather than 404 for a path nobody owns, and keeps
counting the requests that arrive, what a scale-from-zero trigger reads. Scaling back up routes
to the new endpoint without recreating the route.
"""

from __future__ import annotations

from compose_model_service.fn import ModelServiceFunction
from crossplane.function.proto.v1 import run_function_pb2 as fnv1
from modelplane_common.plain import to_plain, to_struct
from modelplane_common.serving import run_function
from modelplane_schemas.generated.gateway_networking_k8s_io.v1.httproute import HTTPRoute

NS = "ml-team"
GATEWAY = {
    "apiVersion": "modelplane.ai/v1alpha1",
    "kind": "InferenceGateway",
    "metadata": {"name": "default"},
    "spec": {},
    "status": {"address": "203.0.113.50"},
}
SERVICE = {
    "apiVersion": "modelplane.ai/v1alpha1",
    "kind": "ModelService",
    "metadata": {"name": "chat", "namespace": NS},
    "spec": {"endpoints": [{"selector": {"matchLabels": {"modelplane.ai/deployment": "qwen"}}}]},
}


def endpoint(name: str) -> dict:
    return {
        "apiVersion": "modelplane.ai/v1alpha1",
        "kind": "ModelEndpoint",
        "metadata": {"name": name, "namespace": NS, "labels": {"modelplane.ai/deployment": "qwen"}},
        "spec": {"url": f"http://198.51.100.7/{NS}/{name}/v1", "rewritePath": f"/{NS}/{name}/"},
        "status": {"routing": {"backendName": f"{name}-svc"}},
    }


def accepted(route: dict) -> dict:
    parent = {
        "parentRef": {"name": "modelplane", "namespace": "modelplane-system"},
        "controllerName": "traefik.io/gateway-controller",
        "conditions": [
            {"type": "Accepted", "status": "True", "reason": "Accepted"},
            {"type": "ResolvedRefs", "status": "True", "reason": "ResolvedRefs"},
        ],
    }
    metadata = {**route["metadata"], "name": "chat-x1"}
    return {**route, "metadata": metadata, "status": {"parents": [parent]}}


def run(endpoints: list[dict], route: dict | None = None) -> fnv1.RunFunctionResponse:
    req = fnv1.RunFunctionRequest(
        observed=fnv1.State(
            composite=fnv1.Resource(resource=to_struct(SERVICE)),
            resources={"httproute": fnv1.Resource(resource=to_struct(route))} if route else {},
        )
    )
    for key, items in (("inference-gateway", [GATEWAY]), ("endpoints-0", endpoints)):
        req.required_resources[key].SetInParent()
        req.required_resources[key].items.extend(
            [fnv1.Resource(resource=to_struct(i)) for i in items]
        )
    return run_function(ModelServiceFunction(), req)


def route_of(rsp: fnv1.RunFunctionResponse) -> dict:
    body = to_plain(rsp.desired.resources["httproute"].resource)
    HTTPRoute.model_validate(body)
    return body


def condition(rsp: fnv1.RunFunctionResponse, type_: str) -> tuple[int, str, str]:
    (found,) = [c for c in rsp.conditions if c.type == type_]
    return found.status, found.reason, found.message


def test_scaled_to_zero_keeps_the_route_with_no_backend_and_says_500():
    serving = run([endpoint("qwen-a")])
    route = accepted(route_of(serving))
    assert [r["name"] for r in route["spec"]["rules"][0]["backendRefs"]] == ["qwen-a-svc"]

    # The deployment scaled to zero: its endpoint is gone.
    rsp = run([], route)
    body = route_of(rsp)
    (rule,) = body["spec"]["rules"]
    assert "backendRefs" not in rule
    assert rule["matches"] == [{"path": {"type": "PathPrefix", "value": f"/{NS}/chat/"}}]
    assert body["spec"]["parentRefs"] == [{"name": "modelplane", "namespace": "modelplane-system"}]
    message = f"no ModelEndpoint in namespace {NS} matches any spec.endpoints[].selector"
    assert condition(rsp, "EndpointsResolved") == (
        fnv1.STATUS_CONDITION_FALSE,
        "NoEndpoints",
        message,
    )
    assert condition(rsp, "RoutingReady") == (
        fnv1.STATUS_CONDITION_FALSE,
        "NoEndpoints",
        f"{message}; the gateway answers 500 until one does",
    )
    assert rsp.desired.resources["httproute"].ready == fnv1.READY_FALSE
    assert rsp.desired.composite.ready == fnv1.READY_FALSE
    # The public address does not change while scaled to zero.
    status = to_plain(rsp.desired.composite.resource)["status"]
    assert status["address"] == f"http://203.0.113.50/{NS}/chat"

    # Scaled back up: the same route gets the new endpoint's backend.
    rsp = run([endpoint("qwen-b")], accepted(body))
    (rule,) = route_of(rsp)["spec"]["rules"]
    assert [r["name"] for r in rule["backendRefs"]] == ["qwen-b-svc"]
    assert condition(rsp, "RoutingReady")[:2] == (fnv1.STATUS_CONDITION_TRUE, "RouteConfigured")
