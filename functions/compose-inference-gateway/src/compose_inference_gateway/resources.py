"""Manifests compose-inference-gateway composes (platform spec §2 as amended by decisions D1)."""

from __future__ import annotations

import json
from collections.abc import Mapping
from functools import cache
from importlib import resources as importlib_resources

from modelplane_common import helm
from modelplane_common.naming import child_name
from modelplane_common.plain import JSON
from modelplane_schemas.generated.helm_m_crossplane_io.v1beta1 import providerconfig as hpc
from modelplane_schemas.generated.helm_m_crossplane_io.v1beta1 import release as hr
from modelplane_schemas.generated.monitoring_coreos_com.v1 import podmonitor as pm
from modelplane_schemas.generated.protection_crossplane_io.v1beta1 import clusterusage as cu
from modelplane_schemas.generated.protection_crossplane_io.v1beta1 import usage

NAMESPACE = "modelplane-system"
GATEWAY_OWNER = "default"  # the only InferenceGateway there is
PROVIDER_CONFIG = "modelplane-in-cluster"
RELEASE_LABEL = "modelplane.ai/release"
HELM_API = "helm.m.crossplane.io/v1beta1"
GATEWAY_API = "gateway.networking.k8s.io/v1"

TRAEFIK_NAMESPACE = "traefik-system"
TRAEFIK_SERVICE = "traefik"
TRAEFIK_REPO = "https://traefik.github.io/charts"
GATEWAY_CLASS = "traefik"
GATEWAY_CONTROLLER = "traefik.io/gateway-controller"
GATEWAY = "modelplane"
LISTENER = "web"
# Traefik's web entry point listens on 8000 in the pod; its Service exposes it on 80.
LISTENER_PORT = 8000
# The chart's metrics entry point: container port "metrics" (9100), path /metrics.
METRICS_PORT = "metrics"

METALLB_NAMESPACE = "metallb-system"
METALLB_CHART = helm.Chart("metallb", "https://metallb.github.io/metallb", "0.14.9")
METALLB_POOL = "modelplane"

# Composed-resource keys (spec C2).
KEY_PROVIDER_CONFIG = "provider-config-helm"
KEY_NAMESPACE_METALLB = "namespace-metallb"
KEY_METALLB = "metallb"
KEY_METALLB_POOL = "metallb-pool"
KEY_METALLB_L2 = "metallb-l2"
KEY_TRAEFIK = "traefik"
KEY_GATEWAY_CLASS = "gateway-class"
KEY_GATEWAY = "gateway"
KEY_POD_MONITOR = "traefik-pod-monitor"
KEY_USAGE_GATEWAY_CLASS = "usage-gateway-class-by-traefik"
KEY_USAGE_GATEWAY = "usage-gateway-by-traefik"
CRD_KEY_PREFIX = "gateway-api-crd-"


def usage_pc_key(release_key: str) -> str:
    return f"usage-pc-by-{release_key}"


@cache
def gateway_api_crds() -> tuple[JSON, ...]:
    """The Gateway API standard-channel CRDs shipped with the function (status stripped)."""
    data = importlib_resources.files("compose_inference_gateway") / "data"
    return tuple(json.loads((data / "gateway-api-standard-crds.json").read_text()))


def crd_key(crd: JSON) -> str:
    """``gateway-api-crd-<plural>``, e.g. gateway-api-crd-httproutes."""
    return CRD_KEY_PREFIX + crd["spec"]["names"]["plural"]


def provider_config() -> hpc.ProviderConfig:
    return helm.injected_identity_config(PROVIDER_CONFIG, NAMESPACE)


def _release(key: str, chart: helm.Chart, namespace: str, values: JSON | None) -> hr.Release:
    return helm.release(
        chart,
        namespace,
        ("ProviderConfig", PROVIDER_CONFIG),
        {RELEASE_LABEL: key},
        values=values,
        # Release name == chart name, so the chart's Service is plainly "traefik".
        name=key,
        metadata_namespace=NAMESPACE,
    )


def traefik_release(version: str) -> hr.Release:
    values = {
        "providers": {
            "kubernetesGateway": {
                "enabled": True,
                "statusAddress": {
                    "service": {"name": TRAEFIK_SERVICE, "namespace": TRAEFIK_NAMESPACE}
                },
            },
            "kubernetesIngress": {"enabled": False},
        },
        "service": {"nameOverride": TRAEFIK_SERVICE},
        # Per-router series (traefik_router_requests_total{router=...}): the wake-up signal
        # of a ModelService scaled to zero, whose route stays (docs/operations.md). The chart
        # exports entry point and service series only by default.
        "metrics": {"prometheus": {"addRoutersLabels": True}},
        # Modelplane composes its own GatewayClass and Gateway.
        "gateway": {"enabled": False},
        "gatewayClass": {"enabled": False},
    }
    chart = helm.Chart("traefik", TRAEFIK_REPO, version)
    return _release(KEY_TRAEFIK, chart, TRAEFIK_NAMESPACE, values)


def traefik_pod_monitor(labels: Mapping[str, str]) -> JSON:
    """Traefik's pods (the chart's name label), scraped on the chart's ``metrics`` port."""
    monitor = pm.PodMonitor(
        metadata={
            "name": TRAEFIK_SERVICE,
            "namespace": TRAEFIK_NAMESPACE,
            "labels": {"app.kubernetes.io/managed-by": "modelplane", **labels},
        },
        spec=pm.Spec(
            selector=pm.Selector(matchLabels={"app.kubernetes.io/name": "traefik"}),
            namespaceSelector=pm.NamespaceSelector(matchNames=[TRAEFIK_NAMESPACE]),
            podMetricsEndpoints=[pm.PodMetricsEndpoint(port=METRICS_PORT, path="/metrics")],
        ),
    )
    return monitor.model_dump(mode="json", exclude_none=True)


def metallb_release() -> hr.Release:
    return _release(KEY_METALLB, METALLB_CHART, METALLB_NAMESPACE, None)


def metallb_namespace() -> JSON:
    return {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": METALLB_NAMESPACE}}


def metallb_pool(address_pool: str) -> JSON:
    return {
        "apiVersion": "metallb.io/v1beta1",
        "kind": "IPAddressPool",
        "metadata": {"name": METALLB_POOL, "namespace": METALLB_NAMESPACE},
        "spec": {"addresses": [address_pool]},
    }


def metallb_l2() -> JSON:
    return {
        "apiVersion": "metallb.io/v1beta1",
        "kind": "L2Advertisement",
        "metadata": {"name": METALLB_POOL, "namespace": METALLB_NAMESPACE},
        "spec": {"ipAddressPools": [METALLB_POOL]},
    }


def gateway_class() -> JSON:
    return {
        "apiVersion": GATEWAY_API,
        "kind": "GatewayClass",
        "metadata": {"name": GATEWAY_CLASS},
        "spec": {"controllerName": GATEWAY_CONTROLLER},
    }


def gateway() -> JSON:
    return {
        "apiVersion": GATEWAY_API,
        "kind": "Gateway",
        "metadata": {"name": GATEWAY, "namespace": NAMESPACE},
        "spec": {
            "gatewayClassName": GATEWAY_CLASS,
            "listeners": [
                {
                    "name": LISTENER,
                    "protocol": "HTTP",
                    "port": LISTENER_PORT,
                    "allowedRoutes": {"namespaces": {"from": "All"}},
                }
            ],
        },
    }


def _by_release(release_key: str) -> usage.By:
    return usage.By(
        apiVersion=HELM_API,
        kind="Release",
        resourceSelector=usage.ResourceSelector(
            matchControllerRef=True, matchLabels={RELEASE_LABEL: release_key}
        ),
    )


def _usage_name(key: str) -> str:
    return child_name(GATEWAY_OWNER, key)


def provider_config_usage(release_key: str) -> usage.Usage:
    """provider-helm needs its ProviderConfig to uninstall the release (§2.4)."""
    return usage.Usage(
        metadata={"name": _usage_name(usage_pc_key(release_key)), "namespace": NAMESPACE},
        spec=usage.Spec(
            of=usage.Of(
                apiVersion=HELM_API,
                kind="ProviderConfig",
                resourceRef=usage.ResourceRef1(name=PROVIDER_CONFIG),
            ),
            by=_by_release(release_key),
            replayDeletion=True,
        ),
    )


def gateway_class_usage() -> cu.ClusterUsage:
    """Traefik clears the GatewayClass finalizer, so it must outlive the class (§2.4)."""
    by = _by_release(KEY_TRAEFIK)
    return cu.ClusterUsage(
        metadata={"name": _usage_name(KEY_USAGE_GATEWAY_CLASS)},
        spec=cu.Spec(
            of=cu.Of(
                apiVersion=GATEWAY_API,
                kind="GatewayClass",
                resourceRef=cu.ResourceRef(name=GATEWAY_CLASS),
            ),
            by=cu.By.model_validate(by.model_dump(exclude_unset=True)),
            replayDeletion=True,
        ),
    )


def gateway_usage() -> usage.Usage:
    """... and the Gateway (§2.4)."""
    return usage.Usage(
        metadata={"name": _usage_name(KEY_USAGE_GATEWAY), "namespace": NAMESPACE},
        spec=usage.Spec(
            of=usage.Of(
                apiVersion=GATEWAY_API, kind="Gateway", resourceRef=usage.ResourceRef1(name=GATEWAY)
            ),
            by=_by_release(KEY_TRAEFIK),
            replayDeletion=True,
        ),
    )
