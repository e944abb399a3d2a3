"""compose-inference-gateway through real gRPC: default mode, MetalLB mode, gates, Usages."""

from __future__ import annotations

import copy
import json

import pytest
from compose_inference_gateway.fn import InferenceGatewayFunction
from modelplane import generate, repo
from modelplane.validation import defaulted, validate_object
from modelplane_common.serving import run_function
from modelplane_common.testing import (
    conditions,
    desired_ready,
    desired_resources,
    desired_status,
    make_request,
    observe,
    ready_status,
    results,
)

NS = "modelplane-system"
# The bundle as `modelplane generate` committed it from ../shared/crds/gateway-api/standard.
(GATEWAY_BUNDLE,) = (b for b in generate.BUNDLES if "gateway-api-standard" in b.target)
BUNDLE_CRDS = json.loads((repo.root() / GATEWAY_BUNDLE.target).read_text())
CRD_KEYS = {f"gateway-api-crd-{crd['spec']['names']['plural']}" for crd in BUNDLE_CRDS}


def test_the_whole_standard_channel_is_composed_and_stamped_with_its_pin():
    # D1: all ten standard-channel CRDs, BackendTLSPolicy and GRPCRoute included.
    kinds = {crd["spec"]["names"]["kind"] for crd in BUNDLE_CRDS}
    assert len(kinds) == 10 and {"BackendTLSPolicy", "GRPCRoute", "HTTPRoute"} <= kinds
    desired = desired_resources(run(DEFAULT, {}))
    for crd in BUNDLE_CRDS:
        composed = desired[f"gateway-api-crd-{crd['spec']['names']['plural']}"]
        assert composed == crd
        assert composed["metadata"]["labels"][generate.BUNDLE_VERSION_LABEL] == "v1.6.1"
        assert composed["metadata"]["annotations"]["gateway.networking.k8s.io/channel"] == (
            "standard"
        )


def gateway_xr(name: str = "default", traefik: dict | None = None) -> dict:
    xr = {"apiVersion": "modelplane.ai/v1alpha1", "kind": "InferenceGateway",
          "metadata": {"name": name}, "spec": {}}  # fmt: skip
    if traefik is not None:
        xr["spec"]["traefik"] = traefik
    return defaulted(xr)


DEFAULT = gateway_xr()
METALLB = gateway_xr(
    traefik={"loadBalancer": "MetalLB", "metallb": {"addressPool": "172.18.255.200-172.18.255.250"}}
)


def run(xr: dict, observed: dict | None = None):
    rsp = run_function(InferenceGatewayFunction(), make_request(xr, observed))
    for key, body in desired_resources(rsp).items():
        assert validate_object(body, source=key) == [], (key, validate_object(body))
    return rsp


def provider_status(body: dict) -> dict:
    """The status a healthy controller would write for ``body``."""
    kind = body["kind"]
    if kind == "CustomResourceDefinition":
        established = {"type": "Established", "status": "True", "reason": "InitialNamesAccepted"}
        return {"conditions": [established]}
    if kind == "GatewayClass":
        return {"conditions": [{"type": "Accepted", "status": "True", "reason": "Accepted"}]}
    if kind == "Gateway":
        return {
            "conditions": [{"type": "Accepted", "status": "True", "reason": "Accepted"}],
            "addresses": [{"type": "IPAddress", "value": "172.18.255.200"}],
        }
    return ready_status()


def converge(xr: dict, passes: int = 6):
    observed: dict[str, dict] = {}
    for i in range(passes):
        desired = desired_resources(run(xr, observed))
        observed = {
            key: observed.get(key) or _observed(body, f"{key}-{i}") for key, body in desired.items()
        }
    return observed


def _observed(body: dict, name: str) -> dict:
    seen = observe(body, provider_status(body), name=name)
    if body["kind"] == "CustomResourceDefinition":
        # The API server only accepts a CRD named <plural>.<group>.
        seen["metadata"]["name"] = body["metadata"]["name"]
    return seen


def by_kind(desired: dict, kind: str) -> dict:
    return {k: v for k, v in desired.items() if v["kind"] == kind}


def test_xrd_requires_the_name_default_and_metallb_settings():
    problems = " ".join(str(p) for p in validate_object(gateway_xr("other")))
    assert "metadata.name must be 'default'" in problems
    bad = gateway_xr(traefik={"loadBalancer": "MetalLB"})
    assert "spec.traefik.metallb is required when loadBalancer is MetalLB" in " ".join(
        str(p) for p in validate_object(bad)
    )
    bad = gateway_xr(traefik={"loadBalancer": "MetalLB", "metallb": {"addressPool": "lots"}})
    assert "spec.traefik.metallb.addressPool" in " ".join(str(p) for p in validate_object(bad))
    assert validate_object(DEFAULT) == [] and validate_object(METALLB) == []
    assert DEFAULT["spec"] == {
        "backend": "Traefik", "traefik": {"version": "40.2.0", "podMonitor": {"enabled": False}}
    }  # fmt: skip


def test_first_pass_composes_provider_config_and_crds_only():
    rsp = run(DEFAULT)
    desired = desired_resources(rsp)
    assert set(desired) == {"provider-config-helm"} | CRD_KEYS
    pc = desired["provider-config-helm"]
    assert pc["metadata"] == {"name": "modelplane-in-cluster", "namespace": NS}
    assert pc["spec"] == {"credentials": {"source": "InjectedIdentity"}}
    crd = desired["gateway-api-crd-httproutes"]
    assert crd["metadata"]["name"] == "httproutes.gateway.networking.k8s.io"
    assert "status" not in crd and "creationTimestamp" not in crd["metadata"]
    ready = desired_ready(rsp)
    assert not any(ready[k] for k in CRD_KEYS)  # not Established yet
    assert conditions(rsp)["ControllerReady"] == (
        "False", "Installing", "Waiting for the Gateway API CRDs to be Established"
    )  # fmt: skip
    assert desired_status(rsp) == {}


def test_traefik_waits_for_every_crd_to_be_established():
    desired = desired_resources(run(DEFAULT))
    observed = {k: observe(v, provider_status(v)) for k, v in desired.items()}
    observed["gateway-api-crd-gateways"]["status"] = {}
    assert "traefik" not in desired_resources(run(DEFAULT, observed))
    observed["gateway-api-crd-gateways"]["status"] = provider_status(
        desired["gateway-api-crd-gateways"]
    )
    assert "traefik" in desired_resources(run(DEFAULT, observed))


def test_traefik_release_values_and_its_usages():
    desired = desired_resources(run(DEFAULT))
    observed = {k: observe(v, provider_status(v)) for k, v in desired.items()}
    rsp = run(DEFAULT, observed)
    desired = desired_resources(rsp)
    release = desired["traefik"]
    assert release["metadata"]["labels"] == {"modelplane.ai/release": "traefik"}
    assert release["metadata"]["namespace"] == NS
    spec = release["spec"]
    assert spec["providerConfigRef"] == {"kind": "ProviderConfig", "name": "modelplane-in-cluster"}
    assert spec["forProvider"]["chart"] == {
        "name": "traefik", "repository": "https://traefik.github.io/charts", "version": "40.2.0"
    }  # fmt: skip
    assert spec["forProvider"]["namespace"] == "traefik-system"
    values = spec["forProvider"]["values"]
    assert values["providers"]["kubernetesGateway"]["enabled"] is True
    assert values["providers"]["kubernetesGateway"]["statusAddress"]["service"] == {
        "name": "traefik", "namespace": "traefik-system"
    }  # fmt: skip
    assert values["providers"]["kubernetesIngress"] == {"enabled": False}
    assert values["gateway"] == {"enabled": False} and values["gatewayClass"] == {"enabled": False}

    pc_usage = desired["usage-pc-by-traefik"]
    assert pc_usage["spec"] == {
        "of": {"apiVersion": "helm.m.crossplane.io/v1beta1", "kind": "ProviderConfig",
               "resourceRef": {"name": "modelplane-in-cluster"}},
        "by": {"apiVersion": "helm.m.crossplane.io/v1beta1", "kind": "Release",
               "resourceSelector": {"matchControllerRef": True,
                                    "matchLabels": {"modelplane.ai/release": "traefik"}}},
        "replayDeletion": True,
    }  # fmt: skip
    by_traefik = {
        "apiVersion": "helm.m.crossplane.io/v1beta1", "kind": "Release",
        "resourceSelector": {"matchControllerRef": True,
                             "matchLabels": {"modelplane.ai/release": "traefik"}},
    }  # fmt: skip
    class_usage = desired["usage-gateway-class-by-traefik"]
    assert class_usage["kind"] == "ClusterUsage"
    assert "namespace" not in class_usage["metadata"]
    assert class_usage["spec"] == {
        "of": {"apiVersion": "gateway.networking.k8s.io/v1", "kind": "GatewayClass",
               "resourceRef": {"name": "traefik"}},
        "by": by_traefik,
        "replayDeletion": True,
    }  # fmt: skip
    gateway_usage = desired["usage-gateway-by-traefik"]
    assert gateway_usage["kind"] == "Usage"
    assert gateway_usage["metadata"]["namespace"] == NS
    assert gateway_usage["spec"] == {
        "of": {"apiVersion": "gateway.networking.k8s.io/v1", "kind": "Gateway",
               "resourceRef": {"name": "modelplane"}},
        "by": by_traefik,
        "replayDeletion": True,
    }  # fmt: skip
    assert "gateway" not in desired and "gateway-class" not in desired
    assert not any(k.startswith("metallb") for k in desired)
    assert conditions(rsp)["ControllerReady"][:2] == ("False", "Installing")


def test_gateway_class_and_gateway_follow_a_ready_traefik():
    desired = desired_resources(run(DEFAULT))
    observed = {k: observe(v, provider_status(v)) for k, v in desired.items()}
    desired = desired_resources(run(DEFAULT, observed))
    observed = {k: observe(v, provider_status(v)) for k, v in desired.items()}
    rsp = run(DEFAULT, observed)
    desired = desired_resources(rsp)
    assert desired["gateway-class"]["spec"] == {"controllerName": "traefik.io/gateway-controller"}
    assert desired["gateway-class"]["metadata"] == {"name": "traefik"}
    gateway = desired["gateway"]
    assert gateway["metadata"] == {"name": "modelplane", "namespace": NS}
    assert gateway["spec"] == {
        "gatewayClassName": "traefik",
        "listeners": [{"name": "web", "protocol": "HTTP", "port": 8000,
                       "allowedRoutes": {"namespaces": {"from": "All"}}}],
    }  # fmt: skip
    assert conditions(rsp)["ControllerReady"][:2] == ("True", "ControllerHealthy")
    assert ("SEVERITY_NORMAL", "Traefik is ready: composing the Gateway modelplane") in results(rsp)
    assert desired_ready(rsp)["gateway"] is False  # not Accepted yet


def test_default_mode_converges_with_address_and_everything_ready():
    observed = converge(DEFAULT)
    rsp = run(DEFAULT, observed)
    assert all(desired_ready(rsp).values()), desired_ready(rsp)
    assert desired_status(rsp) == {"address": "172.18.255.200"}
    assert validate_object({**DEFAULT, "status": desired_status(rsp)}) == []
    assert set(desired_resources(rsp)) == CRD_KEYS | {
        "provider-config-helm", "traefik", "gateway-class", "gateway",
        "usage-pc-by-traefik", "usage-gateway-class-by-traefik", "usage-gateway-by-traefik",
    }  # fmt: skip
    assert results(rsp) == []  # the "composing the Gateway" event fires once


def test_metallb_mode_installs_metallb_then_pool_and_advertisement():
    rsp = run(METALLB)
    desired = desired_resources(rsp)
    assert desired["namespace-metallb"] == {
        "apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "metallb-system"}
    }  # fmt: skip
    assert "metallb" not in desired  # waits for the ProviderConfig to be observed

    observed = {k: observe(v, provider_status(v)) for k, v in desired.items()}
    desired = desired_resources(run(METALLB, observed))
    release = desired["metallb"]["spec"]["forProvider"]
    assert release["chart"] == {
        "name": "metallb", "repository": "https://metallb.github.io/metallb", "version": "0.14.9"
    }  # fmt: skip
    assert release["namespace"] == "metallb-system"
    assert desired["usage-pc-by-metallb"]["spec"]["by"]["resourceSelector"]["matchLabels"] == {
        "modelplane.ai/release": "metallb"
    }
    assert "metallb-pool" not in desired  # waits for the MetalLB release to be Ready

    observed = converge(METALLB)
    desired = desired_resources(run(METALLB, observed))
    assert desired["metallb-pool"]["spec"] == {"addresses": ["172.18.255.200-172.18.255.250"]}
    assert desired["metallb-pool"]["metadata"] == {
        "name": "modelplane",
        "namespace": "metallb-system",
    }
    assert desired["metallb-l2"]["spec"] == {"ipAddressPools": ["modelplane"]}
    assert desired_status(run(METALLB, observed)) == {"address": "172.18.255.200"}


def test_turning_metallb_off_removes_only_metallb():
    observed = converge(METALLB)
    desired = desired_resources(run(DEFAULT, observed))
    assert not {"metallb", "metallb-pool", "metallb-l2", "namespace-metallb",
                "usage-pc-by-metallb"} & set(desired)  # fmt: skip
    assert {"traefik", "gateway", "gateway-class"} <= set(desired)


def test_traefik_going_unready_keeps_gateway_and_class():
    observed = converge(DEFAULT)
    observed["traefik"] = {**observed["traefik"], "status": {}}
    rsp = run(DEFAULT, observed)
    desired = desired_resources(rsp)
    assert {"gateway", "gateway-class", "traefik"} <= set(desired)
    assert conditions(rsp)["ControllerReady"][:2] == ("False", "Installing")


def test_a_gateway_not_named_default_composes_nothing():
    rsp = run(gateway_xr("staging"))
    assert desired_resources(rsp) == {}
    status, reason, message = conditions(rsp)["ControllerReady"]
    assert (status, reason) == ("False", "InvalidName")
    assert "metadata.name must be 'default'" in message
    assert results(rsp)[0][0] == "SEVERITY_WARNING"


@pytest.mark.parametrize("version", ["40.2.0", "39.0.0"])
def test_traefik_chart_version_follows_the_spec(version):
    xr = gateway_xr(traefik={"version": version})
    observed = converge(xr, passes=2)
    release = desired_resources(run(xr, observed))["traefik"]
    assert release["spec"]["forProvider"]["chart"]["version"] == version


def test_a_renamed_gateway_holds_what_exists():
    observed = converge(DEFAULT)
    renamed = {**DEFAULT, "metadata": {"name": "prod"}}
    rsp = run(renamed, observed)
    desired = desired_resources(rsp)
    assert set(desired) == set(observed)
    for key, body in desired.items():
        assert body.get("spec") == observed[key].get("spec"), key
    assert conditions(rsp)["ControllerReady"][1] == "InvalidName"


def test_a_crd_no_longer_shipped_is_kept():
    observed = converge(DEFAULT)
    old = copy.deepcopy(observed["gateway-api-crd-httproutes"])
    old["metadata"]["name"] = "tlsroutes.gateway.networking.k8s.io"
    old["spec"]["names"] = {**old["spec"]["names"], "plural": "tlsroutes", "kind": "TLSRoute"}
    observed["gateway-api-crd-tlsroutes"] = old
    assert "gateway-api-crd-tlsroutes" in desired_resources(run(DEFAULT, observed))


def test_a_spec_the_schema_would_reject_holds_what_exists():
    observed = converge(METALLB)
    broken = copy.deepcopy(METALLB)
    broken["spec"]["traefik"]["loadBalancer"] = "Cilium"
    rsp = run(broken, observed)
    desired = desired_resources(rsp)
    assert set(desired) == set(observed)  # MetalLB and Traefik stay installed
    for key, body in desired.items():
        assert body.get("spec") == observed[key].get("spec"), key
    status, reason, message = conditions(rsp)["ControllerReady"]
    assert (status, reason) == ("False", "InvalidSpec")
    assert "spec.traefik.loadBalancer" in message
