"""compose-model-service through real gRPC: canary weights, tenancy, vanishing endpoints."""

from __future__ import annotations

from datetime import timedelta
from pathlib import Path

import yaml
from compose_model_service.fn import ModelServiceFunction
from crossplane.function.proto.v1 import run_function_pb2 as fnv1
from modelplane.render import render
from modelplane_common.plain import to_plain, to_struct
from modelplane_common.serving import run_function
from modelplane_schemas.generated.gateway_networking_k8s_io.v1.httproute import HTTPRoute
from modelplane_schemas.generated.modelplane_ai.v1alpha1.modelendpoint import ModelEndpoint
from modelplane_schemas.generated.modelplane_ai.v1alpha1.modelservice import ModelService

NS = "ml-team"
GATEWAY = {
    "apiVersion": "modelplane.ai/v1alpha1",
    "kind": "InferenceGateway",
    "metadata": {"name": "default"},
    "spec": {},
    "status": {"address": "203.0.113.50"},
}


def service(*entries: tuple[dict, int | None], name: str = "chat", ns: str = NS) -> dict:
    endpoints = []
    for labels, weight in entries:
        entry: dict = {"selector": {"matchLabels": labels}}
        if weight is not None:
            entry["weight"] = weight
        endpoints.append(entry)
    xr = {
        "apiVersion": "modelplane.ai/v1alpha1",
        "kind": "ModelService",
        "metadata": {"name": name, "namespace": ns},
        "spec": {"endpoints": endpoints},
    }
    ModelService.model_validate(xr)
    return xr


def endpoint(
    name: str,
    url: str,
    labels: dict,
    rewrite: str | None = None,
    backend: str | None = "svc",
    ns: str = NS,
) -> dict:
    body: dict = {
        "apiVersion": "modelplane.ai/v1alpha1",
        "kind": "ModelEndpoint",
        "metadata": {"name": name, "namespace": ns, "labels": labels},
        "spec": {"url": url, "rewritePath": rewrite or "/"},
        "status": {"routing": {"backendName": f"{name}-{backend}"} if backend else {}},
    }
    ModelEndpoint.model_validate(body)
    return body


def replica(deployment: str, suffix: str, gateway: str, backend: str | None = "svc") -> dict:
    name = f"{deployment}-{suffix}"
    return endpoint(
        name,
        f"http://{gateway}/{NS}/{name}/v1",
        {"modelplane.ai/deployment": deployment, "modelplane.ai/cluster": "c"},
        rewrite=f"/{NS}/{name}/",
        backend=backend,
    )


def request(
    xr: dict,
    required: dict[str, list[dict]] | None,
    observed: dict[str, dict] | None = None,
) -> fnv1.RunFunctionRequest:
    req = fnv1.RunFunctionRequest(
        observed=fnv1.State(
            composite=fnv1.Resource(resource=to_struct(xr)),
            resources={
                key: fnv1.Resource(resource=to_struct(body))
                for key, body in (observed or {}).items()
            },
        )
    )
    for key, items in (required or {}).items():
        req.required_resources[key].SetInParent()
        req.required_resources[key].items.extend(
            [fnv1.Resource(resource=to_struct(item)) for item in items]
        )
    return req


def resolve(xr: dict, pool: list[dict], gateway: dict | None = GATEWAY) -> dict[str, list[dict]]:
    """What a resolver honouring labels (but, like crossplane render, not namespaces) returns."""
    resolved = {"inference-gateway": [gateway] if gateway else []}
    for i, entry in enumerate(xr["spec"]["endpoints"]):
        labels = entry["selector"]["matchLabels"]
        resolved[f"endpoints-{i}"] = [
            e for e in pool if all(e["metadata"]["labels"].get(k) == v for k, v in labels.items())
        ]
    return resolved


def run(xr: dict, required: dict | None, observed: dict | None = None) -> fnv1.RunFunctionResponse:
    return run_function(ModelServiceFunction(), request(xr, required, observed))


def route_of(rsp: fnv1.RunFunctionResponse) -> dict:
    body = to_plain(rsp.desired.resources["httproute"].resource)
    HTTPRoute.model_validate(body)
    return body


def condition(rsp: fnv1.RunFunctionResponse, type_: str) -> fnv1.Condition:
    (found,) = [c for c in rsp.conditions if c.type == type_]
    return found


def accepted(route: dict, resolved: str = "True", message: str = "") -> dict:
    parent = {
        "parentRef": {"name": "modelplane", "namespace": "modelplane-system"},
        "controllerName": "traefik.io/gateway-controller",
        "conditions": [
            {"type": "Accepted", "status": "True", "reason": "Accepted"},
            {"type": "ResolvedRefs", "status": resolved, "reason": "x", "message": message},
        ],
    }
    return {
        **route,
        "metadata": {**route["metadata"], "name": "chat-x1"},
        "status": {"parents": [parent]},
    }


CANARY = service(
    ({"modelplane.ai/deployment": "qwen-demo"}, 95),
    ({"modelplane.ai/deployment": "qwen-canary"}, 5),
)
POOL = [
    replica("qwen-demo", "9c1e0", "198.51.100.7"),
    replica("qwen-demo", "1ab2c", "198.51.100.8"),
    replica("qwen-canary", "77f00", "198.51.100.7"),
]


def test_first_call_asks_for_gateway_and_same_namespace_endpoints():
    rsp = run(CANARY, None)
    assert dict(rsp.desired.resources) == {}
    wanted = rsp.requirements.resources
    assert set(wanted) == {"inference-gateway", "endpoints-0", "endpoints-1"}
    assert (wanted["inference-gateway"].kind, wanted["inference-gateway"].match_name) == (
        "InferenceGateway",
        "default",
    )
    for key in ("endpoints-0", "endpoints-1"):
        assert wanted[key].kind == "ModelEndpoint"
        assert wanted[key].namespace == NS
    assert dict(wanted["endpoints-1"].match_labels.labels) == {
        "modelplane.ai/deployment": "qwen-canary"
    }


def test_canary_95_5_over_two_deployments():
    rsp = run(CANARY, resolve(CANARY, POOL))
    route = route_of(rsp)
    assert route["metadata"]["namespace"] == NS
    assert route["spec"]["parentRefs"] == [{"name": "modelplane", "namespace": "modelplane-system"}]
    (rule,) = route["spec"]["rules"]
    assert rule["matches"] == [{"path": {"type": "PathPrefix", "value": "/ml-team/chat/"}}]
    refs = rule["backendRefs"]
    # Sorted by name within each entry: 1ab2c before 9c1e0.
    assert [(r["name"], r["weight"]) for r in refs] == [
        ("qwen-demo-1ab2c-svc", 48),
        ("qwen-demo-9c1e0-svc", 47),
        ("qwen-canary-77f00-svc", 5),
    ]
    for ref in refs:
        assert "group" not in ref and "kind" not in ref  # core Service refs (D1)
        assert ref["port"] == 80
        (rewrite,) = ref["filters"]
        assert rewrite["type"] == "URLRewrite"
        replica_name = ref["name"].removesuffix("-svc")
        assert rewrite["urlRewrite"] == {
            "path": {
                "type": "ReplacePrefixMatch",
                "replacePrefixMatch": f"/ml-team/{replica_name}/",
            }
        }
    status = to_plain(rsp.desired.composite.resource)["status"]
    assert status == {"address": "http://203.0.113.50/ml-team/chat"}
    resolved = condition(rsp, "EndpointsResolved")
    assert (resolved.status, resolved.message) == (
        fnv1.STATUS_CONDITION_TRUE,
        "Matched 3 endpoint(s)",
    )
    # Not observed yet, so not accepted yet.
    routing = condition(rsp, "RoutingReady")
    assert (routing.status, routing.reason) == (fnv1.STATUS_CONDITION_FALSE, "Configuring")
    assert rsp.desired.resources["httproute"].ready == fnv1.READY_FALSE


def test_route_is_ready_once_its_gateway_accepts_and_resolves_it():
    first = route_of(run(CANARY, resolve(CANARY, POOL)))
    rsp = run(CANARY, resolve(CANARY, POOL), {"httproute": accepted(first)})
    routing = condition(rsp, "RoutingReady")
    assert (routing.status, routing.reason) == (fnv1.STATUS_CONDITION_TRUE, "RouteConfigured")
    assert rsp.desired.resources["httproute"].ready == fnv1.READY_TRUE


def test_a_route_its_gateway_rejects_reports_the_gateways_message():
    first = route_of(run(CANARY, resolve(CANARY, POOL)))
    observed = {"httproute": accepted(first, resolved="False", message="service not found")}
    rsp = run(CANARY, resolve(CANARY, POOL), observed)
    routing = condition(rsp, "RoutingReady")
    assert (routing.status, routing.reason) == (fnv1.STATUS_CONDITION_FALSE, "Configuring")
    assert "service not found" in routing.message


def test_look_alike_endpoint_in_another_namespace_is_never_routed_to():
    xr = service(({"modelplane.ai/endpoint": "hosted-llama"}, None), ns="team-a")
    mine = endpoint(
        "hosted-llama",
        "https://api.provider.example/openai/v1",
        {"modelplane.ai/endpoint": "hosted-llama"},
        rewrite="/openai/",
        ns="team-a",
    )
    intruder = endpoint(
        "hosted-llama",
        "http://evil.example/v1",
        {"modelplane.ai/endpoint": "hosted-llama"},
        backend="steal",
        ns="team-b",
    )
    rsp = run(xr, resolve(xr, [intruder, mine]))
    assert rsp.requirements.resources["endpoints-0"].namespace == "team-a"
    refs = route_of(rsp)["spec"]["rules"][0]["backendRefs"]
    assert [r["name"] for r in refs] == ["hosted-llama-svc"]
    assert refs[0]["port"] == 443
    # DNS endpoints also get their own Host header.
    assert refs[0]["filters"][0]["urlRewrite"] == {
        "path": {"type": "ReplacePrefixMatch", "replacePrefixMatch": "/openai/"},
        "hostname": "api.provider.example",
    }
    assert condition(rsp, "EndpointsResolved").message == "Matched 1 endpoint(s)"

    # Only the look-alike exists: nothing is routed (the route keeps its path, no backend).
    rsp = run(xr, resolve(xr, [intruder]))
    (rule,) = route_of(rsp)["spec"]["rules"]
    assert "backendRefs" not in rule
    assert condition(rsp, "EndpointsResolved").reason == "NoEndpoints"


def test_endpoints_not_yet_routable_are_counted_but_get_no_traffic():
    pool = [*POOL[:2], replica("qwen-canary", "77f00", "198.51.100.7", backend=None)]
    rsp = run(CANARY, resolve(CANARY, pool))
    refs = route_of(rsp)["spec"]["rules"][0]["backendRefs"]
    # The canary entry drops out of the split entirely until its endpoint is routable.
    assert [(r["name"], r["weight"]) for r in refs] == [
        ("qwen-demo-1ab2c-svc", 48),
        ("qwen-demo-9c1e0-svc", 47),
    ]
    assert condition(rsp, "EndpointsResolved").message == (
        "Matched 3 endpoint(s); 1 waiting for Backend"
    )


def test_service_whose_endpoints_vanish_keeps_serving_the_rest():
    first = route_of(run(CANARY, resolve(CANARY, POOL)))
    observed = {"httproute": accepted(first)}
    rsp = run(CANARY, resolve(CANARY, POOL[1:]), observed)
    refs = route_of(rsp)["spec"]["rules"][0]["backendRefs"]
    assert [(r["name"], r["weight"]) for r in refs] == [
        ("qwen-demo-1ab2c-svc", 19),
        ("qwen-canary-77f00-svc", 1),
    ]
    assert condition(rsp, "RoutingReady").status == fnv1.STATUS_CONDITION_TRUE


def test_no_routable_endpoint_keeps_the_route_without_backends():
    pool = [replica("qwen-demo", "9c1e0", "198.51.100.7", backend=None)]
    xr = service(({"modelplane.ai/deployment": "qwen-demo"}, None))
    rsp = run(xr, resolve(xr, pool))
    (rule,) = route_of(rsp)["spec"]["rules"]
    assert "backendRefs" not in rule
    assert rule["matches"][0]["path"]["value"] == "/ml-team/chat/"
    assert condition(rsp, "RoutingReady").reason == "Configuring"
    # Even once the gateway accepts the route, a route with no backend is not "configured".
    rsp = run(xr, resolve(xr, pool), {"httproute": accepted(route_of(rsp))})
    routing = condition(rsp, "RoutingReady")
    assert (routing.status, routing.reason) == (fnv1.STATUS_CONDITION_FALSE, "Configuring")
    assert rsp.desired.resources["httproute"].ready == fnv1.READY_FALSE


def test_no_matching_endpoint_keeps_a_route_without_backends_and_is_not_ready():
    rsp = run(CANARY, resolve(CANARY, []))
    # The path stays the service's: the gateway answers 500 there (test_service_scaled_to_zero).
    assert list(rsp.desired.resources) == ["httproute"]
    assert "backendRefs" not in route_of(rsp)["spec"]["rules"][0]
    assert condition(rsp, "EndpointsResolved").reason == "NoEndpoints"
    assert condition(rsp, "RoutingReady").reason == "NoEndpoints"
    assert rsp.desired.composite.ready == fnv1.READY_FALSE
    assert [r.reason for r in rsp.results if r.severity == fnv1.SEVERITY_WARNING] == ["NoEndpoints"]
    # The address is written whenever the gateway has one.
    assert to_plain(rsp.desired.composite.resource)["status"]["address"].endswith("/ml-team/chat")


def test_missing_gateway_still_composes_the_route():
    rsp = run(CANARY, resolve(CANARY, POOL, gateway=None))
    assert route_of(rsp)["spec"]["rules"][0]["backendRefs"]
    routing = condition(rsp, "RoutingReady")
    assert (routing.status, routing.reason) == (fnv1.STATUS_CONDITION_FALSE, "WaitingForGateway")
    assert to_plain(rsp.desired.composite.resource)["status"] == {}


def test_ipv6_gateway_address_is_bracketed():
    gateway = {**GATEWAY, "status": {"address": "2001:db8::5"}}
    rsp = run(CANARY, resolve(CANARY, POOL, gateway=gateway))
    status = to_plain(rsp.desired.composite.resource)["status"]
    assert status["address"] == "http://[2001:db8::5]/ml-team/chat"


def test_endpoint_selected_by_two_entries_belongs_to_the_first():
    xr = service(
        ({"modelplane.ai/deployment": "qwen-demo"}, 1),
        ({"modelplane.ai/cluster": "c"}, 1),
    )
    rsp = run(xr, resolve(xr, POOL))
    refs = route_of(rsp)["spec"]["rules"][0]["backendRefs"]
    # Entry 0: two demo replicas; entry 1: only the canary is left for it.
    assert [(r["name"], r["weight"]) for r in refs] == [
        ("qwen-demo-1ab2c-svc", 1),
        ("qwen-demo-9c1e0-svc", 1),
        ("qwen-canary-77f00-svc", 2),
    ]


def test_unresolved_requirements_keep_the_existing_route():
    route = accepted(route_of(run(CANARY, resolve(CANARY, POOL))))
    rsp = run(CANARY, None, {"httproute": route})
    kept = to_plain(rsp.desired.resources["httproute"].resource)
    assert kept["spec"] == route["spec"]
    assert "status" not in kept


# --- through `modelplane render`, over the examples users read ----------------------------

EXAMPLES = Path(__file__).resolve().parents[3] / "examples" / "routing"


def render_example(name: str) -> tuple[dict, dict[str, dict]]:
    text = render(
        str(EXAMPLES / name),
        required_location=str(EXAMPLES / "endpoints.yaml"),
        include_results=True,
    )
    documents = [d for d in yaml.safe_load_all(text) if d]
    composed = {
        d["metadata"]["annotations"]["crossplane.io/composition-resource-name"]: d
        for d in documents[1:]
        if d["kind"] != "Result"
    }
    return documents[0], composed


def test_render_canary_service():
    xr, composed = render_example("service-canary.yaml")
    route = composed["httproute"]
    HTTPRoute.model_validate(route)
    refs = route["spec"]["rules"][0]["backendRefs"]
    assert [(r["name"], r["weight"]) for r in refs] == [
        ("qwen-demo-9c1e0-4xk2p", 48),
        ("qwen-demo-e41b7-q8m2x", 47),
        ("qwen-canary-30f5a-z7c4d", 5),
    ]
    assert [r["filters"][0]["urlRewrite"]["path"]["replacePrefixMatch"] for r in refs] == [
        "/ml-team/qwen-demo-9c1e0/",
        "/ml-team/qwen-demo-e41b7/",
        "/ml-team/qwen-canary-30f5a/",
    ]
    assert xr["status"]["address"] == "http://203.0.113.50/ml-team/chat"


def test_render_service_never_routes_to_the_look_alike_in_another_namespace():
    xr, composed = render_example("service-hosted.yaml")
    route = composed["httproute"]
    HTTPRoute.model_validate(route)
    assert route["metadata"]["namespace"] == "team-a"
    refs = route["spec"]["rules"][0]["backendRefs"]
    assert [r["name"] for r in refs] == ["hosted-llama-m2c8v"]
    assert "attacker" not in yaml.safe_dump(route)
    (resolved,) = [c for c in xr["status"]["conditions"] if c["type"] == "EndpointsResolved"]
    assert resolved["message"] == "Matched 1 endpoint(s)"


def test_the_modelplane_render_command_prints_the_canary_route():
    from click.testing import CliRunner  # noqa: PLC0415
    from modelplane.main import cli  # noqa: PLC0415

    result = CliRunner().invoke(
        cli,
        [
            "render",
            str(EXAMPLES / "service-canary.yaml"),
            "-e",
            str(EXAMPLES / "endpoints.yaml"),
        ],
    )
    assert result.exit_code == 0, result.output
    documents = [d for d in yaml.safe_load_all(result.output) if d]
    (route,) = [d for d in documents if d["kind"] == "HTTPRoute"]
    assert [r["weight"] for r in route["spec"]["rules"][0]["backendRefs"]] == [48, 47, 5]


def test_spec_the_schema_would_reject_holds_the_existing_route():
    route = accepted(route_of(run(CANARY, resolve(CANARY, POOL))))
    broken = {**CANARY, "spec": {"endpoints": [{"selector": {"matchLabels": {}}, "weight": 0}]}}
    rsp = run(broken, None, {"httproute": route})
    assert to_plain(rsp.desired.resources["httproute"].resource)["spec"] == route["spec"]
    routing = condition(rsp, "RoutingReady")
    assert routing.reason == "InvalidSpec"
    assert "spec.endpoints[0]" in routing.message


def test_a_service_looks_again_soon_because_its_endpoints_are_not_watched() -> None:
    """Crossplane re-runs a pipeline on a composed resource's change or after the response's
    TTL; endpoints arrive through requirements, which it does not watch. A new replica must be
    routed within seconds: 5 s while anything settles, 15 s once routed."""
    xr = service(({"modelplane.ai/deployment": "qwen"}, None))
    pool = [replica("qwen", "a", "10.0.0.1")]
    creating = run(xr, resolve(xr, pool))
    assert creating.meta.ttl.ToTimedelta() == timedelta(seconds=5)
    routed = run(xr, resolve(xr, pool), {"httproute": accepted(route_of(creating))})
    assert condition(routed, "RoutingReady").status == fnv1.STATUS_CONDITION_TRUE
    assert routed.meta.ttl.ToTimedelta() == timedelta(seconds=15)
    waiting = run(xr, resolve(xr, []))
    assert condition(waiting, "EndpointsResolved").reason == "NoEndpoints"
    assert waiting.meta.ttl.ToTimedelta() == timedelta(seconds=5)
