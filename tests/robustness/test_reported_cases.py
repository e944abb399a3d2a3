"""Issues 14 and 21's reported cases, one by one, over real gRPC on the converged examples'
requests.

Each case damages one thing a function reads but does not own, exactly as the issue found it.
Before the fix each either crashed (a Fatal result that stops the XR reconciling) or left a
live resource out of desired state (which Crossplane deletes). Now every one answers without a
Fatal, keeps every observed resource the undamaged request kept, and, where it holds something
because of the damage, names the object and field in a condition or status message. A function
behind other steps of its pipeline (compose-usages) is called behind them, as Crossplane calls
it: what the earlier step carries over from the damaged observed state reaches it.
"""

from __future__ import annotations

import copy
import json
from collections.abc import Callable
from typing import Any

import pytest
from crossplane.function.proto.v1 import run_function_pb2 as fnv1
from modelplane.pipeline import repository_functions
from modelplane_common.plain import to_plain, to_struct
from modelplane_common.serving import serve_in_background
from modelplane_common.testing import conditions
from robustness_fuzz import Base, Run, chained

JSON = dict[str, Any]
Edit = Callable[[JSON, dict[str, JSON], dict[str, list[JSON]]], None]
IC = "InferenceCluster"


def _rebuilt(base: Base, edit: Edit) -> fnv1.RunFunctionRequest:
    xr = copy.deepcopy(base.xr)
    observed = copy.deepcopy(base.observed)
    required = copy.deepcopy(base.required)
    edit(xr, observed, required)
    req = fnv1.RunFunctionRequest()
    req.CopyFrom(base.request)
    req.observed.composite.resource.CopyFrom(to_struct(xr))
    req.observed.ClearField("resources")
    for key, obj in observed.items():
        req.observed.resources[key].resource.CopyFrom(to_struct(obj))
    for key, objs in required.items():
        req.required_resources[key].CopyFrom(
            fnv1.Resources(items=[fnv1.Resource(resource=to_struct(o)) for o in objs])
        )
    return req


def _devices(obj: JSON) -> list[JSON]:
    """The devices an InferenceCluster publishes, or an InferenceClass declares (what the
    scheduler joins with a capacity summary's pool)."""
    if obj.get("kind") == "InferenceClass":
        return obj["spec"]["devices"]
    if obj.get("kind") == IC:
        return [d for pool in obj["status"]["gpuPools"] for d in pool["devices"]]
    return []


def _each_device(change: Callable[[JSON], None]) -> Edit:
    def edit(_xr: JSON, _observed: dict, required: dict) -> None:
        devices = [d for objs in required.values() for o in objs for d in _devices(o)]
        assert devices, "the request carries no devices to damage"
        for device in devices:
            change(device)

    return edit


def _each(kind: str, change: Callable[[JSON], None]) -> Edit:
    """Apply ``change`` to every observed resource and required object of ``kind``."""

    def edit(xr: JSON, observed: dict, required: dict) -> None:
        for obj in [xr, *observed.values(), *(o for objs in required.values() for o in objs)]:
            if obj.get("kind") == kind:
                change(obj)

    return edit


def _set(*path: Any, value: Any) -> Callable[[JSON], None]:
    def change(obj: JSON) -> None:
        target = obj
        for key in path[:-1]:
            target = target.setdefault(key, {}) if isinstance(target, dict) else target[key]
        target[path[-1]] = copy.deepcopy(value)

    return change


def _drop(*path: Any) -> Callable[[JSON], None]:
    def change(obj: JSON) -> None:
        target = obj
        for key in path[:-1]:
            target = target.get(key) or {}
        if isinstance(target, dict):
            target.pop(path[-1], None)

    return change


def _members(change: Callable[[JSON], None]) -> Callable[[JSON], None]:
    def each(replica: JSON) -> None:
        for engine in replica["spec"]["engines"]:
            for member in engine["members"]:
                change(member)

    return each


def _status_of(key: str, change: Callable[[JSON], None]) -> Edit:
    def edit(_xr: JSON, observed: dict, _required: dict) -> None:
        change(observed[key])

    return edit


def _pools(change: Callable[[JSON], None]) -> Callable[[JSON], None]:
    def each(cluster: JSON) -> None:
        for pool in cluster["status"]["gpuPools"]:
            change(pool)

    return each


def _route_condition_type_list(_xr: JSON, observed: dict, _required: dict) -> None:
    for parent in observed["httproute"]["status"]["parents"]:
        for condition in parent["conditions"]:
            condition["type"] = ["Accepted"]


def _without(key: str, then: Edit | None = None) -> Edit:
    """An observed resource gone (e.g. a ProviderConfig, which closes compose-serving-stack's
    gate so that it holds everything else as observed), then ``then``."""

    def edit(xr: JSON, observed: dict, required: dict) -> None:
        observed.pop(key, None)
        if then is not None:
            then(xr, observed, required)

    return edit


def _consumers(change: Callable[[JSON], None]) -> Edit:
    """Apply ``change`` to every observed Release and Object (compose-usages' consumers)."""

    def edit(_xr: JSON, observed: dict, _required: dict) -> None:
        for obj in observed.values():
            if obj.get("kind") in ("Release", "Object"):
                change(obj)

    return edit


# (case, function, example, edit): the issues' lists, in their order.
CASES: list[tuple[str, str, str, Edit]] = [
    # Tracebacks.
    *(
        (f"atProvider-not-a-map-{fn}", f"compose-{fn}", "multi-cluster", edit)
        for fn in ("gke-cluster", "eks-cluster")
        for edit in [_status_of("cluster", _set("status", "atProvider", value="garbage"))]
    ),
    (
        "serving-stack-status-gateway-a-string",
        "compose-inference-cluster",
        "multi-cluster",
        _each("ServingStack", _set("status", "gateway", value="203.0.113.9")),
    ),
    (
        "cluster-status-gateway-and-provider-config-strings",
        "compose-model-deployment",
        "multi-cluster",
        _each(
            "InferenceCluster",
            lambda c: c["status"].update(gateway="203.0.113.9", providerConfigRef="pc"),
        ),
    ),
    (
        "gateway-status-addresses-a-map",
        "compose-inference-gateway",
        "multi-cluster",
        _each("Gateway", _set("status", "addresses", value={"value": "203.0.113.9"})),
    ),
    (
        "cluster-spec-source-a-map",
        "compose-model-cache",
        "multi-node",
        _each("InferenceCluster", _set("spec", "cluster", "source", value={"kind": "GKE"})),
    ),
    (
        "xr-status-conditions-not-a-list",
        "compose-model-deployment",
        "multi-node",
        lambda xr, _o, _r: xr["status"].update(conditions=7),
    ),
    (
        "replica-worker-a-list",
        "compose-model-deployment",
        "multi-node",
        _each("ModelReplica", _members(_set("worker", value=[{"nodes": 2}]))),
    ),
    (
        "replica-engine-name-a-list",
        "compose-model-deployment",
        "multi-node",
        _each("ModelReplica", lambda r: r["spec"]["engines"][0].update(name=["main"])),
    ),
    (
        "endpoint-status-routing-not-a-map",
        "compose-model-service",
        "multi-cluster",
        _each("ModelEndpoint", _set("status", "routing", value="qwen3-32b-backend")),
    ),
    (
        "httproute-condition-type-a-list",
        "compose-model-service",
        "multi-cluster",
        _route_condition_type_list,
    ),
    (
        "gateway-object-manifest-a-list",
        "compose-serving-stack",
        "multi-cluster",
        _status_of("gateway", _set("status", "atProvider", "manifest", value=["garbage"])),
    ),
    (
        "device-driver-a-map",
        "compose-model-deployment",
        "multi-node",
        _each_device(_set("driver", value={"name": "gpu.nvidia.com"})),
    ),
    # Deletions.
    *(
        (f"cache-pvc-kept-without-cluster-{what}", "compose-model-cache", "multi-node", edit)
        for what, edit in [
            ("status", _each("InferenceCluster", _drop("status"))),
            ("provider-config", _each("InferenceCluster", _drop("status", "providerConfigRef"))),
        ]
    ),
    *(
        (f"replica-kept-with-{field}-{how}-{example}", "compose-model-deployment", example, edit)
        for example in ("multi-cluster", "multi-node")
        for field in ("count", "attributes", "capacity")
        for how, edit in [
            ("null", _each_device(_set(field, value=None))),
            ("missing", _each_device(_drop(field))),
        ]
    ),
    *(
        (f"replica-kept-with-pool-devices-{how}", "compose-model-deployment", "multi-node", edit)
        for how, edit in [
            ("null", _each(IC, _pools(_set("devices", value=None)))),
            ("missing", _each(IC, _pools(_drop("devices")))),
        ]
    ),
    *(
        (f"endpoint-kept-with-{what}-{example}", "compose-model-deployment", example, edit)
        for example in ("multi-cluster", "multi-node")
        for what, edit in [
            ("status-missing", _each(IC, _drop("status"))),
            ("conditions-missing", _each(IC, _drop("status", "conditions"))),
            ("conditions-garbage", _each(IC, _set("status", "conditions", value="ok"))),
            ("gateway-address-missing", _each(IC, _drop("status", "gateway", "address"))),
            ("gateway-address-garbage", _each(IC, _set("status", "gateway", "address", value=[1]))),
            ("replica-status-missing", _each("ModelReplica", _drop("status"))),
        ]
    ),
    # Issue 21: a Usage observed with spec.by (or below) of the wrong type made the
    # ServingStack's compose-usages step return Fatal, and so did a consumer compose-serving-stack
    # holds (its gate closed) without a readable provider config name or labels.
    *(
        (f"usage-{what}-{example}", "compose-usages", example, _each("Usage", edit))
        for example in ("multi-cluster", "multi-node")
        for what, edit in [
            ("spec-a-list", _set("spec", value=["garbage"])),
            ("spec-null", _set("spec", value=None)),
            ("by-a-string", _set("spec", "by", value="garbage")),
            ("by-null", _set("spec", "by", value=None)),
            ("by-resource-selector-a-string", _set("spec", "by", "resourceSelector", value="x")),
            ("by-match-labels-a-list", _set("spec", "by", "resourceSelector", "matchLabels",
                                            value=["garbage"])),
        ]
    ),
    *(
        (f"held-consumer-{what}", "compose-usages", "multi-cluster",
         _without("provider-config-kubernetes", _consumers(edit)))
        for what, edit in [
            ("provider-config-name-missing", _drop("spec", "providerConfigRef", "name")),
            ("provider-config-name-a-map", _set("spec", "providerConfigRef", "name",
                                                value={"name": "pc"})),
            ("labels-a-string", _set("metadata", "labels", value="garbage")),
            ("metadata-a-list", _set("metadata", value=["garbage"])),
        ]
    ),
]  # fmt: skip


@pytest.fixture(scope="module")
def servers():
    """One gRPC server per function, shared by the cases."""
    stubs: dict[str, Any] = {}
    opened = []
    try:

        def stub(function: str) -> Any:
            if function not in stubs:
                servicer = repository_functions()[function].load()()
                context = serve_in_background(servicer)
                stubs[function] = context.__enter__()
                opened.append(context)
            return stubs[function]

        yield stub
    finally:
        for context in opened:
            context.__exit__(None, None, None)


def _pipeline(servers: Callable[[str], Any], base: Base, function: str) -> Run:
    """``function`` over gRPC behind the steps that run before it in its pipeline."""

    def over_grpc(step: str) -> Run:
        stub = servers(step)
        return lambda req: stub.RunFunction(req, timeout=60)

    return chained([over_grpc(step) for step in (*base.upstream, function)])


def _fatal(rsp: fnv1.RunFunctionResponse) -> str | None:
    return next((r.message for r in rsp.results if r.severity == fnv1.SEVERITY_FATAL), None)


@pytest.mark.parametrize(
    ("function", "example", "edit"), [c[1:] for c in CASES], ids=[c[0] for c in CASES]
)
def test_reported_case_neither_crashes_nor_deletes(servers, fuzz_bases, function, example, edit):
    for base in [b for b in fuzz_bases[function] if b.name.startswith(f"{example}:")]:
        answer = _pipeline(servers, base, function)
        kept = set(answer(base.request).desired.resources) & set(base.observed)
        rsp = answer(_rebuilt(base, edit))
        assert _fatal(rsp) is None, f"{base.name}: {_fatal(rsp)}"
        missing = kept - set(rsp.desired.resources)
        assert not missing, f"{base.name}: would delete {sorted(missing)}"


def _endpoint_held_message(stub: Any, base: Base, edit: Edit) -> str:
    rsp = stub.RunFunction(_rebuilt(base, edit), timeout=60)
    return conditions(rsp)["EndpointsHeld"][2]


def test_held_endpoints_are_explained_naming_object_and_field(servers, fuzz_bases):
    stub = servers("compose-model-deployment")
    (base,) = [b for b in fuzz_bases["compose-model-deployment"] if b.name.startswith("multi-node")]
    message = _endpoint_held_message(
        stub, base, _each("InferenceCluster", _drop("status", "gateway", "address"))
    )
    assert message == (
        "endpoints kept as they are: InferenceCluster lab-h200: status.gateway.address missing "
        "or malformed"
    )
    message = _endpoint_held_message(stub, base, _each("ModelReplica", _drop("status")))
    assert "ModelReplica kimi-k2-" in message and "Ready condition not known" in message


def test_ready_false_still_withdraws_the_endpoint(servers, fuzz_bases):
    """The definite signal keeps working: a cluster reporting Ready=False loses its endpoint."""
    stub = servers("compose-model-deployment")
    (base,) = [b for b in fuzz_bases["compose-model-deployment"] if b.name.startswith("multi-node")]

    def not_ready(cluster: JSON) -> None:
        for condition in cluster["status"]["conditions"]:
            if condition["type"] == "Ready":
                condition["status"] = "False"

    rsp = stub.RunFunction(_rebuilt(base, _each("InferenceCluster", not_ready)), timeout=60)
    desired = set(rsp.desired.resources)
    assert any(k.startswith("replica-") for k in desired)
    assert not any(k.startswith("endpoint-") for k in desired)


def _summary_without_status(configmap: JSON) -> None:
    """A capacity summary that lost what the cluster's status gave it (as after a restore)."""
    content = json.loads(configmap["data"]["summary.json"])
    content.pop("status", None)
    configmap["data"]["summary.json"] = json.dumps(content)


def test_cache_names_the_unreadable_provider_config(servers, fuzz_bases):
    stub = servers("compose-model-cache")
    (base,) = [b for b in fuzz_bases["compose-model-cache"] if b.name.endswith("/kimi-k2")]
    rsp = stub.RunFunction(_rebuilt(base, _each("ConfigMap", _summary_without_status)), timeout=60)
    (entry,) = to_plain(rsp.desired.composite.resource)["status"]["clusters"]
    assert entry["phase"] == "Ready"
    assert entry["message"] == (
        "InferenceCluster lab-h200: status.providerConfigRef.name is missing or malformed; its "
        "PVC and Job are kept as they are"
    )


def test_service_keeps_routing_an_endpoint_whose_status_was_stripped_and_says_so(
    servers, fuzz_bases
):
    stub = servers("compose-model-service")
    for base in fuzz_bases["compose-model-service"]:
        routed = to_plain(
            stub.RunFunction(base.request, timeout=60).desired.resources["httproute"].resource
        )
        rsp = stub.RunFunction(_rebuilt(base, _each("ModelEndpoint", _drop("status"))), timeout=60)
        assert to_plain(rsp.desired.resources["httproute"].resource) == routed
        message = conditions(rsp)["EndpointsResolved"][2]
        assert "status.routing of ModelEndpoint" in message, message


def test_usages_keep_an_unreadable_usage_and_its_consumer_label_and_say_so(servers, fuzz_bases):
    """Issue 21: compose-usages reads a Usage whose selector it cannot read as unknown: the
    Usage stays as compose-serving-stack carried it over, its consumer keeps the label it
    carries, and a warning names the Usage and the field."""
    (base,) = [b for b in fuzz_bases["compose-usages"] if b.name.startswith("multi-node:")]
    answer = _pipeline(servers, base, "compose-usages")
    damaged = _status_of("usage-pc-gateway", _set("spec", "by", value="garbage"))
    rsp = answer(_rebuilt(base, damaged))
    desired = {k: to_plain(r.resource) for k, r in rsp.desired.resources.items()}
    assert desired["usage-pc-gateway"]["spec"]["by"] == "garbage"
    assert desired["gateway"]["metadata"]["labels"]["modelplane.ai/usage-consumer"] == "gateway"
    assert [(r.severity, r.message) for r in rsp.results] == [
        (
            fnv1.SEVERITY_WARNING,
            "desired resource usage-pc-gateway: spec.by.resourceSelector.matchLabels missing or "
            "malformed; kept as it is",
        )
    ]


def _replica_label(value: Any) -> Edit:
    def edit(xr: JSON, observed: dict, required: dict) -> None:
        _each("InferenceCluster", _drop("status"))(xr, observed, required)
        labels = observed["replica-lab-l4-1"]["metadata"]["labels"]
        if value is None:
            del labels["modelplane.ai/replica-index"]
        else:
            labels["modelplane.ai/replica-index"] = value

    return edit


@pytest.mark.parametrize("value", [None, "", "garbage", 7], ids=["missing", "empty", "text", "int"])
def test_a_replica_with_an_unreadable_index_label_is_kept(servers, fuzz_bases, value):
    stub = servers("compose-model-deployment")
    (base,) = [b for b in fuzz_bases["compose-model-deployment"] if b.name.endswith("/qwen3-8b")]
    kept = set(stub.RunFunction(base.request, timeout=60).desired.resources)
    rsp = stub.RunFunction(_rebuilt(base, _replica_label(value)), timeout=60)
    assert _fatal(rsp) is None
    assert not kept - set(rsp.desired.resources), sorted(kept - set(rsp.desired.resources))
