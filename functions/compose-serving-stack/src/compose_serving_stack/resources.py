"""Manifests compose-serving-stack composes on a workload cluster (platform spec §7.2)."""

from __future__ import annotations

import json
from collections.abc import Sequence
from functools import cache
from importlib import resources as importlib_resources
from typing import Any

from modelplane_common import helm
from modelplane_common.naming import child_name
from modelplane_common.plain import JSON
from modelplane_common.provider_configs import (
    IDENTITY_TYPES,
    SecretKey,
    kubeconfig_provider_configs,
)
from modelplane_schemas.generated.helm_m_crossplane_io.v1beta1 import release as hr
from modelplane_schemas.generated.infrastructure_modelplane_ai.v1alpha1 import servingstack as ss
from modelplane_schemas.generated.kubernetes_m_crossplane_io.v1alpha1 import object as kobj
from modelplane_schemas.generated.protection_crossplane_io.v1beta1 import usage

from compose_serving_stack import amd_driver

RESOURCE_LABEL = "modelplane.ai/resource"
HELM_API = "helm.m.crossplane.io/v1beta1"
KUBERNETES_API = "kubernetes.m.crossplane.io/v1alpha1"
GATEWAY_NAMESPACE = "modelplane-system"
GATEWAY_NAME = "inference-gateway"
ENVOY_CONTROLLER = "gateway.envoyproxy.io/gatewayclass-controller"
DRA_NAMESPACE = "dra-driver-nvidia-gpu"
ENVOY_NAMESPACE = "envoy-gateway-system"
AI_GATEWAY_VERSION = "v0.7.0"  # fixed by the spec, not a user setting
GPU_TOLERATION = {"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}
GATEWAY_READY_QUERY = "has(object.status.addresses) && object.status.addresses.size() > 0"

KEY_PC_KUBERNETES = "provider-config-kubernetes"
KEY_PC_HELM = "provider-config-helm"
KEY_ENVOY_GATEWAY = "envoy-gateway"
KEY_NVIDIA_DRA_DRIVER = "dra-driver"
KEY_GATEWAY_NAMESPACE = "gateway-namespace"
KEY_GATEWAY_CLASS = "gateway-class"
KEY_GATEWAY = "gateway"
KEY_QUOTA = "dra-driver-critical-pods-quota"
KEY_USAGE_CLASS_BY_GATEWAY = "usage-gateway-class-by-gateway"
KEY_USAGE_ENVOY_BY_CLASS = "usage-envoy-gw-by-gateway-class"
GAIE_KEY_PREFIX = "gaie-crd-"


def provider_config_name(stack_name: str) -> str:
    return child_name(stack_name, "cluster")


@cache
def inference_extension_crds() -> tuple[JSON, ...]:
    """The Gateway API Inference Extension CRDs shipped with the function (status stripped)."""
    data = importlib_resources.files("compose_serving_stack") / "data"
    return tuple(json.loads((data / "inference-extension-crds.json").read_text()))


def provider_configs(
    stack_name: str, namespace: str, kubeconfig: ss.Secret, identity: ss.Secret | None
) -> tuple[JSON, JSON]:
    """The stack's kubernetes and helm ProviderConfigs, both reading the cluster's kubeconfig."""
    return kubeconfig_provider_configs(
        provider_config_name(stack_name),
        SecretKey(kubeconfig.name, namespace, kubeconfig.key),
        SecretKey(identity.name, namespace, identity.key) if identity else None,
        namespace=namespace,
        identity_type=IDENTITY_TYPES[identity.type if identity else "GCPServiceAccountKey"],
    )


def _envoy_gateway_values() -> JSON:
    return {
        "config": {
            "envoyGateway": {
                "extensionApis": {"enableBackend": True},
                # Lets HTTPRoutes point at InferencePools, resolved by the AI gateway's ext-proc.
                "extensionManager": {
                    "hooks": {
                        "xdsTranslator": {
                            "translation": {
                                part: {"includeAll": True}
                                for part in ("listener", "route", "cluster", "secret")
                            },
                            "post": ["Translation", "Cluster", "Route"],
                        }
                    },
                    "service": {
                        "fqdn": {
                            "hostname": "ai-gateway-controller.envoy-ai-gateway-system.svc"
                            ".cluster.local",
                            "port": 1063,
                        }
                    },
                    "backendResources": [
                        {
                            "group": "inference.networking.k8s.io",
                            "kind": "InferencePool",
                            "version": "v1",
                        }
                    ],
                },
            }
        }
    }


def _prometheus_values() -> JSON:
    return {
        "fullnameOverride": "prometheus",
        "grafana": {"enabled": False},
        "alertmanager": {"enabled": False},
        "prometheus": {
            "prometheusSpec": {
                "podMonitorSelectorNilUsesHelmValues": False,
                "podMonitorNamespaceSelector": {},
                "additionalScrapeConfigs": [
                    {
                        "job_name": "envoy-gateway-proxy",
                        "metrics_path": "/stats/prometheus",
                        "kubernetes_sd_configs": [
                            {"role": "pod", "namespaces": {"names": [ENVOY_NAMESPACE]}}
                        ],
                        "relabel_configs": [
                            {
                                "source_labels": [
                                    "__meta_kubernetes_pod_label_app_kubernetes_io_component"
                                ],
                                "action": "keep",
                                "regex": "proxy",
                            },
                            {
                                "source_labels": ["__address__"],
                                "action": "replace",
                                "regex": "([^:]+)(?::\\d+)?",
                                "replacement": "$1:19001",
                                "target_label": "__address__",
                            },
                        ],
                    }
                ],
            }
        },
    }


def _nfd_values() -> JSON:
    """NFD's worker must label every node, GPU nodes included: the chart tolerates no taint,
    and GPU nodes carry nvidia.com/gpu or amd.com/gpu. Both, whatever the cluster's pools: a
    toleration only permits, so on a cluster without such nodes it changes nothing."""
    return {"worker": {"tolerations": [dict(GPU_TOLERATION), dict(amd_driver.AMD_GPU_TOLERATION)]}}


def release_specs(spec: ss.Spec) -> list[tuple[str, helm.Chart, str, JSON | None]]:
    """(key, chart, target namespace, values) for every release, versions pinned (§7.2)."""
    # Chart pins are the XRD's defaults (one place, D9), read through the generated model.
    versions, pins = spec.versions or ss.Versions(), ss.Versions()
    dra_values: JSON = {
        "gpuResourcesEnabledOverride": True,
        "resources": {"computeDomains": {"enabled": False}},
        # The chart tolerates no taint, and GPU nodes carry nvidia.com/gpu (GKE's own,
        # EKSCluster's node groups): without this the kubelet plugin never reaches a GPU.
        "kubeletPlugin": {"tolerations": [GPU_TOLERATION]},
    }
    if spec.nvidiaDriverRoot and spec.nvidiaDriverRoot != "/":
        dra_values["nvidiaDriverRoot"] = spec.nvidiaDriverRoot
    oci_envoy = "oci://docker.io/envoyproxy"
    nfd_version = versions.nodeFeatureDiscovery or pins.nodeFeatureDiscovery
    specs: list[tuple[str, helm.Chart, str, JSON | None]] = [
        ("cert-manager", helm.Chart("cert-manager", "https://charts.jetstack.io",
                                    versions.certManager or pins.certManager),
         "cert-manager", {"crds": {"enabled": True, "keep": False}}),
        (KEY_ENVOY_GATEWAY, helm.Chart("gateway-helm", oci_envoy,
                                       versions.envoyGateway or pins.envoyGateway),
         ENVOY_NAMESPACE, _envoy_gateway_values()),
        ("ai-gateway-crds", helm.Chart("ai-gateway-crds-helm", oci_envoy, AI_GATEWAY_VERSION),
         "envoy-ai-gateway-system", None),
        ("ai-gateway", helm.Chart("ai-gateway-helm", oci_envoy, AI_GATEWAY_VERSION),
         "envoy-ai-gateway-system", None),
        ("prometheus", helm.Chart("kube-prometheus-stack",
                                  "https://prometheus-community.github.io/helm-charts",
                                  versions.prometheus or pins.prometheus),
         "monitoring", _prometheus_values()),
        ("leader-worker-set", helm.Chart("lws", "oci://registry.k8s.io/lws/charts",
                                         versions.leaderWorkerSet or pins.leaderWorkerSet),
         "lws-system", None),
        ("node-feature-discovery", helm.Chart("node-feature-discovery",
                                              "oci://registry.k8s.io/nfd/charts",
                                              nfd_version),
         "node-feature-discovery", _nfd_values()),
        (KEY_NVIDIA_DRA_DRIVER, helm.Chart("dra-driver-nvidia-gpu",
                                  "oci://registry.k8s.io/dra-driver-nvidia/charts",
                                  versions.nvidiaDraDriver or pins.nvidiaDraDriver),
         DRA_NAMESPACE, dra_values),
    ]  # fmt: skip
    if amd_driver.NVIDIA_DRIVER not in amd_driver.drivers(spec):
        specs = [s for s in specs if s[0] != KEY_NVIDIA_DRA_DRIVER]
    amd = amd_driver.release_spec(spec)
    return [*specs, amd] if amd is not None else specs


def workload_release(
    stack_name: str, namespace: str, key: str, chart: helm.Chart, *, target: str, values: Any
) -> hr.Release:
    return helm.release(
        chart,
        target,
        ("ProviderConfig", provider_config_name(stack_name)),
        {RESOURCE_LABEL: key},
        values=values,
        name=child_name(stack_name, key),
        metadata_namespace=namespace,
        # Helm release names are at most 53 characters; the key is short and unique per cluster.
        release_name=key,
    )


def workload_object(
    stack_name: str,
    namespace: str,
    key: str,
    manifest: JSON,
    readiness: kobj.Readiness | None = None,
) -> kobj.Object:
    spec = kobj.Spec(
        forProvider=kobj.ForProvider(manifest=manifest),
        providerConfigRef=kobj.ProviderConfigRef(
            kind="ProviderConfig", name=provider_config_name(stack_name)
        ),
    )
    if readiness is not None:
        spec.readiness = readiness
    return kobj.Object(
        metadata={
            "name": child_name(stack_name, key),
            "namespace": namespace,
            "labels": {RESOURCE_LABEL: key},
        },
        spec=spec,
    )


def observe_object(stack_name: str, namespace: str, key: str, manifest: JSON) -> kobj.Object:
    """An Object that only reads ``manifest``'s resource (Observe): never creates, updates or
    deletes it, on the stack's deletion neither. Ready once the resource is found."""
    body = workload_object(stack_name, namespace, key, manifest)
    body.spec.managementPolicies = ["Observe"]
    body.spec.readiness = kobj.Readiness(policy="SuccessfulCreate")
    return body


def gaie_key(crd: JSON) -> str:
    return GAIE_KEY_PREFIX + crd["metadata"]["name"]


def critical_pods_quota() -> JSON:
    """GKE admits system-critical pods only where such a quota exists; elsewhere it is inert."""
    return {
        "apiVersion": "v1",
        "kind": "ResourceQuota",
        "metadata": {"name": "allow-critical-pods", "namespace": DRA_NAMESPACE},
        "spec": {
            "hard": {"pods": "1000"},
            "scopeSelector": {
                "matchExpressions": [
                    {
                        "scopeName": "PriorityClass",
                        "operator": "In",
                        "values": ["system-node-critical", "system-cluster-critical"],
                    }
                ]
            },
        },
    }


def gateway_namespace() -> JSON:
    return {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": GATEWAY_NAMESPACE}}


def gateway_class(class_name: str) -> JSON:
    return {
        "apiVersion": "gateway.networking.k8s.io/v1",
        "kind": "GatewayClass",
        "metadata": {"name": class_name},
        "spec": {"controllerName": ENVOY_CONTROLLER},
    }


def gateway(class_name: str, listeners: Sequence[ss.Listener]) -> JSON:
    return {
        "apiVersion": "gateway.networking.k8s.io/v1",
        "kind": "Gateway",
        "metadata": {"name": GATEWAY_NAME, "namespace": GATEWAY_NAMESPACE},
        "spec": {
            "gatewayClassName": class_name,
            "listeners": [
                {
                    "name": listener.name,
                    "protocol": listener.protocol,
                    "port": listener.port,
                    "allowedRoutes": {"namespaces": {"from": "All"}},
                }
                for listener in listeners
            ],
        },
    }


def gateway_readiness() -> kobj.Readiness:
    """Ready only with an address, so provider-kubernetes keeps polling until one appears."""
    return kobj.Readiness(policy="DeriveFromCelQuery", celQuery=GATEWAY_READY_QUERY)


def _selector(api_version: str, kind: str, key: str) -> JSON:
    return {
        "apiVersion": api_version,
        "kind": kind,
        "resourceSelector": {"matchControllerRef": True, "matchLabels": {RESOURCE_LABEL: key}},
    }


def ordering_usage(
    stack_name: str, namespace: str, key: str, of: tuple[str, str, str], by: tuple[str, str, str]
) -> usage.Usage:
    """``of`` (apiVersion, kind, resource key) outlives ``by`` (same shape)."""
    return usage.Usage(
        metadata={"name": child_name(stack_name, key), "namespace": namespace},
        spec=usage.Spec(
            of=usage.Of.model_validate(_selector(*of)),
            by=usage.By.model_validate(_selector(*by)),
            replayDeletion=True,
        ),
    )
