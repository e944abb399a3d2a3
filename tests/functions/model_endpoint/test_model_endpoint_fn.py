"""compose-model-endpoint through real gRPC: in-fleet, https SaaS and invalid URLs."""

from __future__ import annotations

from pathlib import Path

import kubernetes_validate
import pytest
import yaml
from compose_model_endpoint.fn import ModelEndpointFunction
from crossplane.function.proto.v1 import run_function_pb2 as fnv1
from modelplane.render import render
from modelplane_common.plain import to_plain, to_struct
from modelplane_common.serving import run_function
from modelplane_common.testing import function_results
from modelplane_schemas.generated.gateway_networking_k8s_io.v1.backendtlspolicy import (
    BackendTLSPolicy,
)
from modelplane_schemas.generated.modelplane_ai.v1alpha1.modelendpoint import ModelEndpoint

NS = "ml-team"


def endpoint(url: str, name: str = "qwen-demo-9c1e0", rewrite: str | None = None) -> dict:
    spec: dict = {"url": url}
    if rewrite:
        spec["rewritePath"] = rewrite
    xr = {
        "apiVersion": "modelplane.ai/v1alpha1",
        "kind": "ModelEndpoint",
        "metadata": {"name": name, "namespace": NS},
        "spec": spec,
    }
    ModelEndpoint.model_validate(xr)
    return xr


def request(xr: dict, observed: dict[str, dict] | None = None) -> fnv1.RunFunctionRequest:
    return fnv1.RunFunctionRequest(
        observed=fnv1.State(
            composite=fnv1.Resource(resource=to_struct(xr)),
            resources={
                key: fnv1.Resource(resource=to_struct(body))
                for key, body in (observed or {}).items()
            },
        )
    )


def run(xr: dict, observed: dict[str, dict] | None = None) -> fnv1.RunFunctionResponse:
    return run_function(ModelEndpointFunction(), request(xr, observed))


def desired(rsp: fnv1.RunFunctionResponse) -> dict[str, dict]:
    return {key: to_plain(r.resource) for key, r in rsp.desired.resources.items()}


def condition(rsp: fnv1.RunFunctionResponse, type_: str) -> fnv1.Condition:
    (found,) = [c for c in rsp.conditions if c.type == type_]
    return found


def observe(body: dict, name: str) -> dict:
    """What Crossplane would observe after creating ``body`` under ``name``."""
    return {**body, "metadata": {**body["metadata"], "name": name, "uid": "u-1"}}


def converge(xr: dict) -> tuple[fnv1.RunFunctionResponse, dict[str, dict]]:
    """Reconcile until everything composed is observed; the last response and observed set."""
    observed: dict[str, dict] = {}
    for _ in range(4):
        rsp = run(xr, observed)
        objects = desired(rsp)
        if set(objects) == set(observed):
            return rsp, observed
        observed = {
            key: observed.get(key) or observe(body, f"{xr['metadata']['name']}-{key[:4]}")
            for key, body in objects.items()
        }
    raise AssertionError("did not converge")


def check_core(body: dict, name: str = "generated-name") -> None:
    """Validate a core object strictly, named as Crossplane would name it."""
    named = {**body, "metadata": {"name": name, **body["metadata"]}}
    kubernetes_validate.validate(named, "1.33", strict=True)


def check_backend_tls_policy(body: dict) -> None:
    """Validate against the repository's BackendTLSPolicy model, plus Modelplane's choices."""
    BackendTLSPolicy.model_validate(body)
    assert body["apiVersion"] == "gateway.networking.k8s.io/v1"
    assert body["kind"] == "BackendTLSPolicy"
    assert set(body) == {"apiVersion", "kind", "metadata", "spec"}
    spec = body["spec"]
    assert set(spec) <= {"targetRefs", "validation", "options"}
    assert 1 <= len(spec["targetRefs"]) <= 16
    for ref in spec["targetRefs"]:
        assert set(ref) <= {"group", "kind", "name", "sectionName"}
        assert (ref["group"], ref["kind"]) == ("", "Service")
        assert ref["name"]
    validation = spec["validation"]
    assert set(validation) <= {
        "caCertificateRefs",
        "wellKnownCACertificates",
        "hostname",
        "subjectAltNames",
    }
    assert validation["hostname"]
    # Exactly one source of trust.
    assert ("caCertificateRefs" in validation) != ("wellKnownCACertificates" in validation)
    assert validation.get("wellKnownCACertificates", "System") == "System"


def test_in_fleet_endpoint_first_reconcile_composes_only_the_service():
    rsp = run(endpoint("http://198.51.100.7/ml-team/qwen-demo-9c1e0/v1"))
    objects = desired(rsp)
    assert list(objects) == ["service"]
    service = objects["service"]
    assert "selector" not in service["spec"]
    assert service["spec"]["ports"] == [
        {"name": "http", "protocol": "TCP", "port": 80, "targetPort": 80}
    ]
    check_core(service)
    routing = condition(rsp, "RoutingReady")
    assert (routing.status, routing.reason) == (fnv1.STATUS_CONDITION_FALSE, "WaitingForBackend")
    assert to_plain(rsp.desired.composite.resource)["status"] == {"routing": {}}


def test_in_fleet_endpoint_becomes_routable_once_service_and_slice_are_observed():
    xr = endpoint("http://198.51.100.7/ml-team/qwen-demo-9c1e0/v1")
    rsp, observed = converge(xr)
    objects = desired(rsp)
    assert set(objects) == {"service", "endpointslice-ipv4"}
    slice_ = objects["endpointslice-ipv4"]
    service_name = observed["service"]["metadata"]["name"]
    assert slice_["metadata"]["labels"]["kubernetes.io/service-name"] == service_name
    assert slice_["addressType"] == "IPv4"
    assert slice_["endpoints"] == [{"addresses": ["198.51.100.7"], "conditions": {"ready": True}}]
    assert slice_["ports"] == [{"name": "http", "protocol": "TCP", "port": 80}]
    for body in objects.values():
        check_core(body)
    assert to_plain(rsp.desired.composite.resource)["status"] == {
        "routing": {"backendName": service_name}
    }
    routing = condition(rsp, "RoutingReady")
    assert (routing.status, routing.reason) == (fnv1.STATUS_CONDITION_TRUE, "BackendConfigured")
    assert all(r.ready == fnv1.READY_TRUE for r in rsp.desired.resources.values())


def test_backend_name_is_not_published_while_the_slice_is_not_observed():
    xr = endpoint("http://198.51.100.7/v1")
    service = observe(desired(run(xr))["service"], "svc-1")
    rsp = run(xr, {"service": service})
    assert "endpointslice-ipv4" in desired(rsp)
    assert to_plain(rsp.desired.composite.resource)["status"] == {"routing": {}}
    assert condition(rsp, "RoutingReady").reason == "WaitingForBackend"


def test_https_saas_endpoint_gets_fqdn_slice_and_tls_policy():
    xr = endpoint("https://api.provider.example/openai/v1", name="hosted-llama", rewrite="/openai/")
    rsp, observed = converge(xr)
    objects = desired(rsp)
    assert set(objects) == {"service", "endpointslice-fqdn", "backendtlspolicy"}
    service_name = observed["service"]["metadata"]["name"]
    assert objects["service"]["spec"]["ports"][0]["port"] == 443
    slice_ = objects["endpointslice-fqdn"]
    assert slice_["addressType"] == "FQDN"
    assert slice_["endpoints"][0]["addresses"] == ["api.provider.example"]
    tls = objects["backendtlspolicy"]
    assert tls["spec"] == {
        "targetRefs": [{"group": "", "kind": "Service", "name": service_name}],
        "validation": {"hostname": "api.provider.example", "wellKnownCACertificates": "System"},
    }
    check_core(objects["service"])
    check_core(slice_)
    check_backend_tls_policy(tls)
    assert to_plain(rsp.desired.composite.resource)["status"]["routing"] == {
        "backendName": service_name
    }


def test_https_endpoint_is_not_routable_before_its_tls_policy_exists():
    # Routing before the policy exists would send plain HTTP to a TLS port.
    xr = endpoint("https://api.provider.example/v1")
    first = desired(run(xr))
    service = observe(first["service"], "svc-1")
    second = desired(run(xr, {"service": service}))
    observed = {
        "service": service,
        "endpointslice-fqdn": observe(second["endpointslice-fqdn"], "s"),
    }
    rsp = run(xr, observed)
    assert to_plain(rsp.desired.composite.resource)["status"] == {"routing": {}}
    assert "BackendTLSPolicy" in condition(rsp, "RoutingReady").message


def test_ipv6_endpoint_with_explicit_port():
    rsp, _ = converge(endpoint("http://[2001:db8::10]:8080/v1"))
    slice_ = desired(rsp)["endpointslice-ipv6"]
    assert slice_["addressType"] == "IPv6"
    assert slice_["endpoints"][0]["addresses"] == ["2001:db8::10"]
    assert slice_["ports"][0]["port"] == 8080
    check_core(slice_)


@pytest.mark.parametrize(
    ("url", "problem"),
    [
        ("https://203.0.113.10/v1", "DNS hostname"),
        ("http:///v1", "no host"),
        ("http://api.example:0/v1", "outside 1-65535"),
        ("http://api.example:70000/v1", "1-65535"),
        ("http://bad_host/v1", "not a valid DNS name"),
        ("http://user:secret@api.example/v1", "credentials"),
        ("http://user:secret@api.example:99999/v1", "1-65535"),
    ],
)
def test_invalid_url_composes_nothing_and_names_the_problem(url: str, problem: str):
    rsp = run(endpoint(url))
    assert desired(rsp) == {}
    routing = condition(rsp, "RoutingReady")
    assert (routing.status, routing.reason) == (fnv1.STATUS_CONDITION_FALSE, "InvalidURL")
    assert problem in routing.message
    # The message names the URL too (credentials masked).
    assert f"spec.url '{url.replace('user:secret@', '***@')}'" in routing.message
    assert "secret" not in routing.message
    assert "secret" not in str(list(rsp.results))
    (warning,) = [r for r in rsp.results if r.severity == fnv1.SEVERITY_WARNING]
    assert warning.reason == "InvalidURL"
    assert rsp.desired.composite.ready == fnv1.READY_FALSE


def test_url_edited_to_invalid_keeps_existing_objects_but_stops_routing():
    xr = endpoint("http://198.51.100.7/v1")
    rsp, observed = converge(xr)
    broken = endpoint("http://198.51.100.7:99999/v1")
    rsp = run(broken, observed)
    assert set(desired(rsp)) == set(observed)
    assert desired(rsp)["service"]["metadata"]["name"] == observed["service"]["metadata"]["name"]
    assert "uid" not in desired(rsp)["service"]["metadata"]
    assert to_plain(rsp.desired.composite.resource)["status"] == {"routing": {}}
    assert condition(rsp, "RoutingReady").reason == "InvalidURL"


def test_changing_address_type_replaces_the_immutable_slice():
    rsp, observed = converge(endpoint("http://198.51.100.7/v1"))
    rsp = run(endpoint("http://gw.cluster-b.example/v1"), observed)
    objects = desired(rsp)
    assert "endpointslice-ipv4" not in objects
    assert objects["endpointslice-fqdn"]["addressType"] == "FQDN"
    assert to_plain(rsp.desired.composite.resource)["status"] == {"routing": {}}


# --- through `modelplane render`, over the examples users read ----------------------------

ROOT = Path(__file__).resolve().parents[3]
EXAMPLES = ROOT / "examples" / "routing"


def render_example(name: str, observed: str | None = None) -> tuple[dict, dict[str, dict], list]:
    text = render(
        str(EXAMPLES / name),
        observed_location=str(EXAMPLES / observed) if observed else None,
        include_results=True,
    )
    documents = [d for d in yaml.safe_load_all(text) if d]
    xr, rest = documents[0], documents[1:]
    composed = {
        d["metadata"]["annotations"]["crossplane.io/composition-resource-name"]: d
        for d in rest
        if d["kind"] != "Result"
    }
    return xr, composed, function_results(rest)


def xr_condition(xr: dict, type_: str) -> dict:
    (found,) = [c for c in xr["status"]["conditions"] if c["type"] == type_]
    return found


def test_render_in_fleet_endpoint_before_and_after_its_objects_exist():
    xr, composed, _ = render_example("endpoint-in-fleet.yaml")
    assert list(composed) == ["service"]
    assert xr["status"]["routing"] == {}
    check_core(composed["service"])

    xr, composed, _ = render_example("endpoint-in-fleet.yaml", "endpoint-in-fleet-observed.yaml")
    assert set(composed) == {"service", "endpointslice-ipv4"}
    for body in composed.values():
        check_core(body)
    assert xr["status"]["routing"] == {"backendName": "qwen-demo-9c1e0-4xk2p"}
    assert xr_condition(xr, "RoutingReady")["reason"] == "BackendConfigured"
    assert xr_condition(xr, "Ready")["status"] == "True"


def test_render_https_saas_endpoint():
    xr, composed, _ = render_example("endpoint-saas.yaml", "endpoint-saas-observed.yaml")
    assert set(composed) == {"service", "endpointslice-fqdn", "backendtlspolicy"}
    check_core(composed["service"])
    check_core(composed["endpointslice-fqdn"])
    check_backend_tls_policy(
        {
            k: v
            for k, v in composed["backendtlspolicy"].items()
            if k in ("apiVersion", "kind", "metadata", "spec")
        }
    )
    assert composed["backendtlspolicy"]["spec"]["validation"]["hostname"] == "api.provider.example"
    assert xr["status"]["routing"] == {"backendName": "hosted-llama-m2c8v"}


def test_render_invalid_url():
    xr, composed, results = render_example("endpoint-invalid.yaml")
    assert composed == {}
    routing = xr_condition(xr, "RoutingReady")
    assert (routing["status"], routing["reason"]) == ("False", "InvalidURL")
    assert "DNS hostname" in routing["message"]
    assert [r["severity"] for r in results] == ["Warning"]
    assert xr_condition(xr, "Ready")["status"] == "False"


def test_slice_and_tls_policy_are_held_while_the_service_is_not_observed():
    # The Service vanished (deleted by hand, or not read back yet): the gate is closed, but
    # leaving the slice and the policy out of desired state would delete them.
    xr = endpoint("https://api.provider.example/v1", name="hosted-llama")
    _, observed = converge(xr)
    without_service = {k: v for k, v in observed.items() if k != "service"}
    rsp = run(xr, without_service)
    objects = desired(rsp)
    assert set(objects) == {"service", "endpointslice-fqdn", "backendtlspolicy"}
    for key in ("endpointslice-fqdn", "backendtlspolicy"):
        assert (
            objects[key]["spec" if key == "backendtlspolicy" else "endpoints"]
            == (observed[key]["spec" if key == "backendtlspolicy" else "endpoints"])
        )
        assert objects[key]["metadata"]["name"] == observed[key]["metadata"]["name"]
    assert to_plain(rsp.desired.composite.resource)["status"] == {"routing": {}}
    assert condition(rsp, "RoutingReady").status == fnv1.STATUS_CONDITION_FALSE
