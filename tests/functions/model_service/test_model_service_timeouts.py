"""A ModelService's HTTPRoute states its timeouts (issue 22): the default lets a long streamed
completion finish, spec.timeouts sets them, and the XRD refuses what the route would not take."""

from __future__ import annotations

import copy

import pytest
from compose_model_service.fn import ModelServiceFunction
from crossplane.function.proto.v1 import run_function_pb2 as fnv1
from modelplane import validation
from modelplane_common.plain import to_plain, to_struct
from modelplane_common.serving import run_function

NS = "ml-team"
GATEWAY = {
    "apiVersion": "modelplane.ai/v1alpha1",
    "kind": "InferenceGateway",
    "metadata": {"name": "default"},
    "spec": {},
    "status": {"address": "203.0.113.50"},
}
LABELS = {"modelplane.ai/deployment": "qwen"}
ENDPOINT = {
    "apiVersion": "modelplane.ai/v1alpha1",
    "kind": "ModelEndpoint",
    "metadata": {"name": "qwen-a1", "namespace": NS, "labels": LABELS},
    "spec": {"url": "http://198.51.100.7/ml-team/qwen-a1/v1", "rewritePath": "/ml-team/qwen-a1/"},
    "status": {"routing": {"backendName": "qwen-a1-svc"}},
}


def service(timeouts: dict | None = None) -> dict:
    spec: dict = {"endpoints": [{"selector": {"matchLabels": LABELS}}]}
    if timeouts is not None:
        spec["timeouts"] = timeouts
    return {
        "apiVersion": "modelplane.ai/v1alpha1",
        "kind": "ModelService",
        "metadata": {"name": "chat", "namespace": NS},
        "spec": spec,
    }


def run(xr: dict, observed: dict | None = None) -> fnv1.RunFunctionResponse:
    req = fnv1.RunFunctionRequest(
        observed=fnv1.State(
            composite=fnv1.Resource(resource=to_struct(xr)),
            resources={
                key: fnv1.Resource(resource=to_struct(body))
                for key, body in (observed or {}).items()
            },
        )
    )
    for key, items in {"inference-gateway": [GATEWAY], "endpoints-0": [ENDPOINT]}.items():
        req.required_resources[key].items.extend(
            [fnv1.Resource(resource=to_struct(item)) for item in items]
        )
    return run_function(ModelServiceFunction(), req)


def route_of(rsp: fnv1.RunFunctionResponse) -> dict:
    route = to_plain(rsp.desired.resources["httproute"].resource)
    # The whole HTTPRoute CRD, CEL included (backendRequest <= request), as the API server
    # would judge it; the name is Crossplane's to give.
    named = copy.deepcopy(route)
    named["metadata"]["name"] = "chat-x1"
    assert [str(p) for p in validation.validate_object(named)] == []
    return route


def test_a_service_route_lets_a_long_streamed_completion_finish_by_default():
    (rule,) = route_of(run(service()))["spec"]["rules"]
    # Unset, Envoy's 15 s route timeout would cut any response that takes longer.
    assert rule["timeouts"] == {"request": "1h", "backendRequest": "1h"}


@pytest.mark.parametrize(
    ("given", "expected"),
    [
        ({"request": "2h"}, {"request": "2h", "backendRequest": "2h"}),
        ({"backendRequest": "10m"}, {"request": "1h", "backendRequest": "10m"}),
        (
            {"request": "1h30m", "backendRequest": "45m"},
            {"request": "1h30m", "backendRequest": "45m"},
        ),
        ({}, {"request": "1h", "backendRequest": "1h"}),
    ],
)
def test_spec_timeouts_set_the_route_timeouts(given, expected):
    xr = service(given)
    assert validation.validate_object(xr) == []
    (rule,) = route_of(run(xr))["spec"]["rules"]
    assert rule["timeouts"] == expected


def test_changing_the_timeout_updates_the_same_route_in_place():
    first = route_of(run(service()))
    observed = {**first, "metadata": {**first["metadata"], "name": "chat-x1"}}
    second = route_of(run(service({"request": "3h"}), {"httproute": observed}))
    assert second["spec"]["rules"][0]["timeouts"] == {"request": "3h", "backendRequest": "3h"}
    first["spec"]["rules"][0].pop("timeouts")
    second["spec"]["rules"][0].pop("timeouts")
    assert second == first


def test_timeouts_that_bypassed_admission_hold_the_route_and_name_the_field():
    route = route_of(run(service()))
    observed = {**route, "metadata": {**route["metadata"], "name": "chat-x1"}}
    rsp = run(service({"request": "10m", "backendRequest": "20m"}), {"httproute": observed})
    held = to_plain(rsp.desired.resources["httproute"].resource)
    assert held["spec"] == route["spec"]
    (routing,) = [c for c in rsp.conditions if c.type == "RoutingReady"]
    assert routing.reason == "InvalidSpec"
    assert (
        "spec.timeouts.backendRequest must not be longer than spec.timeouts.request"
        in routing.message
    )


def _messages(xr: dict) -> list[str]:
    return [f"{p.path}: {p.message}" for p in validation.validate_object(xr)]


@pytest.mark.parametrize(
    ("timeouts", "field", "says"),
    [
        ({"request": "5 minutes"}, "spec.timeouts.request", "must be a duration such as"),
        ({"request": "1.5h"}, "spec.timeouts.request", "must be a duration such as"),
        ({"backendRequest": "90"}, "spec.timeouts.backendRequest", "must be a duration such as"),
        ({"request": "0s"}, "spec.timeouts.request", "must be between 1s and 24h"),
        ({"request": "25h"}, "spec.timeouts.request", "must be between 1s and 24h"),
        ({"backendRequest": "500ms"}, "spec.timeouts.backendRequest", "must be between 1s and 24h"),
    ],
)
def test_the_xrd_refuses_a_bad_duration_naming_the_field(timeouts, field, says):
    messages = _messages(service(timeouts))
    assert len(messages) == 1, messages
    assert messages[0].startswith(f"{field}: {field} {says}")


@pytest.mark.parametrize(
    "timeouts",
    [
        {"request": "10m", "backendRequest": "20m"},
        # Unset, request is 1h: a longer backendRequest alone is refused too.
        {"backendRequest": "2h"},
    ],
)
def test_the_xrd_refuses_a_backend_request_longer_than_the_request(timeouts):
    assert _messages(service(timeouts)) == [
        "spec.timeouts: spec.timeouts.backendRequest must not be longer than "
        "spec.timeouts.request (1h when unset)"
    ]
