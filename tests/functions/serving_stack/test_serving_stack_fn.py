"""compose-serving-stack through real gRPC, and the ServingStack pipeline with compose-usages."""

from __future__ import annotations

import copy

import yaml
from compose_serving_stack.fn import ServingStackFunction
from modelplane.pipeline import FunctionHost, run_pipeline
from modelplane.repo import root
from modelplane.validation import defaulted, validate_object
from modelplane_common.naming import child_name
from modelplane_common.serving import run_function
from modelplane_common.testing import (
    desired_ready,
    desired_resources,
    desired_status,
    make_request,
    observe,
    ready_status,
    results,
)

NS = "modelplane-system"
NAME = child_name("gke-us-central", "serving-stack")
PC_NAME = child_name(NAME, "cluster")
RELEASES = {
    "cert-manager", "envoy-gateway", "ai-gateway-crds", "ai-gateway", "prometheus",
    "leader-worker-set", "node-feature-discovery", "dra-driver",
}  # fmt: skip
OBJECTS = {
    "gaie-crd-inferencepools.inference.networking.k8s.io",
    "gaie-crd-inferencepools.inference.networking.x-k8s.io",
    "gaie-crd-inferenceobjectives.inference.networking.x-k8s.io",
    "dra-driver-critical-pods-quota", "gateway-namespace", "gateway-class", "gateway",
    "nvidia-driver-installer",  # GKE_STACK's: its pools leave the driver to the cluster
}  # fmt: skip
PROMETHEUS_REPO = "https://prometheus-community.github.io/helm-charts"
USAGES = {"usage-gateway-class-by-gateway", "usage-envoy-gw-by-gateway-class"}


def stack(secrets: list[dict] | None = None, **spec: object) -> dict:
    xr = {
        "apiVersion": "infrastructure.modelplane.ai/v1alpha1",
        "kind": "ServingStack",
        "metadata": {"name": NAME, "namespace": NS},
        "spec": {
            "secrets": secrets or [
                {"type": "Kubeconfig", "name": "gke-kubeconfig", "key": "kubeconfig"},
                {"type": "GCPServiceAccountKey", "name": "gke-sa-key", "key": "private_key"},
            ],
            **spec,
        },
    }  # fmt: skip
    xr = defaulted(xr)
    assert validate_object(xr) == []
    return xr


GKE_DRIVER_ROOT = "/home/kubernetes/bin/nvidia"
# What compose-inference-cluster composes for a GKE cluster.
GKE_STACK = stack(nvidiaDriverRoot=GKE_DRIVER_ROOT, nvidiaDriverInstaller="GKE")


def run(xr: dict, observed: dict | None = None):
    rsp = run_function(ServingStackFunction(), make_request(xr, observed))
    for key, body in desired_resources(rsp).items():
        assert validate_object(body, source=key) == [], (key, validate_object(body))
        manifest = (body.get("spec") or {}).get("forProvider", {}).get("manifest")
        if manifest is not None:
            assert validate_object(manifest, source=key) == [], (key, validate_object(manifest))
    return rsp


def with_provider_configs(xr: dict) -> dict:
    desired = desired_resources(run(xr))
    return {k: observe(v) for k, v in desired.items()}


def test_provider_configs_come_first_and_carry_the_identity():
    rsp = run(GKE_STACK)
    desired = desired_resources(rsp)
    assert set(desired) == {"provider-config-kubernetes", "provider-config-helm"}
    for key, api in (("provider-config-kubernetes", "kubernetes.m.crossplane.io/v1alpha1"),
                     ("provider-config-helm", "helm.m.crossplane.io/v1beta1")):  # fmt: skip
        pc = desired[key]
        assert (pc["apiVersion"], pc["kind"]) == (api, "ProviderConfig")
        assert pc["metadata"] == {"name": PC_NAME, "namespace": NS}
        assert pc["spec"]["credentials"] == {
            "source": "Secret",
            "secretRef": {"name": "gke-kubeconfig", "namespace": NS, "key": "kubeconfig"},
        }
        assert pc["spec"]["identity"] == {
            "type": "GoogleApplicationCredentials", "source": "Secret",
            "secretRef": {"name": "gke-sa-key", "namespace": NS, "key": "private_key"},
        }  # fmt: skip
    assert all(desired_ready(rsp).values())


def test_no_identity_without_a_service_account_key():
    xr = stack([{"type": "Kubeconfig", "name": "k", "key": "kubeconfig"}])
    desired = desired_resources(run(xr))
    assert "identity" not in desired["provider-config-helm"]["spec"]


def test_remote_releases_and_objects_once_both_provider_configs_are_observed():
    observed = with_provider_configs(GKE_STACK)
    only_one = {"provider-config-helm": observed["provider-config-helm"]}
    assert set(desired_resources(run(GKE_STACK, only_one))) == {
        "provider-config-kubernetes", "provider-config-helm"
    }  # fmt: skip
    rsp = run(GKE_STACK, observed)
    desired = desired_resources(rsp)
    assert set(desired) == {"provider-config-kubernetes", "provider-config-helm"} | RELEASES | (
        OBJECTS | USAGES
    )
    for key in RELEASES | OBJECTS:
        assert desired[key]["spec"]["providerConfigRef"] == {
            "kind": "ProviderConfig",
            "name": PC_NAME,
        }
        assert desired[key]["metadata"]["labels"] == {"modelplane.ai/resource": key}
        assert desired_ready(rsp)[key] is False  # nothing reported Ready yet
    assert all(desired_ready(rsp)[k] for k in USAGES)


def chart(desired: dict, key: str) -> tuple[str, str, str, str]:
    fp = desired[key]["spec"]["forProvider"]
    return fp["chart"]["name"], fp["chart"]["repository"], fp["chart"]["version"], fp["namespace"]


def test_every_chart_repo_and_version_is_pinned_as_specified():
    desired = desired_resources(run(GKE_STACK, with_provider_configs(GKE_STACK)))
    oci = "oci://docker.io/envoyproxy"
    assert {k: chart(desired, k) for k in RELEASES} == {
        "cert-manager": ("cert-manager", "https://charts.jetstack.io", "v1.17.1", "cert-manager"),
        "envoy-gateway": ("gateway-helm", oci, "v1.8.1", "envoy-gateway-system"),
        "ai-gateway-crds": ("ai-gateway-crds-helm", oci, "v0.7.0", "envoy-ai-gateway-system"),
        "ai-gateway": ("ai-gateway-helm", oci, "v0.7.0", "envoy-ai-gateway-system"),
        "prometheus": ("kube-prometheus-stack", PROMETHEUS_REPO, "72.6.2", "monitoring"),
        "leader-worker-set": ("lws", "oci://registry.k8s.io/lws/charts", "v0.8.0", "lws-system"),
        "node-feature-discovery": ("node-feature-discovery", "oci://registry.k8s.io/nfd/charts",
                                   "0.18.3", "node-feature-discovery"),
        "dra-driver": ("dra-driver-nvidia-gpu", "oci://registry.k8s.io/dra-driver-nvidia/charts",
                       "0.4.0", "dra-driver-nvidia-gpu"),
    }  # fmt: skip
    # Helm release names stay short (<= 53) whatever the stack's name.
    for key in RELEASES:
        assert desired[key]["metadata"]["annotations"] == {"crossplane.io/external-name": key}


def test_versions_override_the_pins():
    xr = stack(versions={"envoyGateway": "v1.9.0", "certManager": "v1.18.0"})
    desired = desired_resources(run(xr, with_provider_configs(xr)))
    assert chart(desired, "envoy-gateway")[2] == "v1.9.0"
    assert chart(desired, "cert-manager")[2] == "v1.18.0"


def test_release_values():
    desired = desired_resources(run(GKE_STACK, with_provider_configs(GKE_STACK)))
    values = {k: desired[k]["spec"]["forProvider"].get("values") for k in RELEASES}
    assert values["cert-manager"] == {"crds": {"enabled": True, "keep": False}}
    eg = values["envoy-gateway"]["config"]["envoyGateway"]
    assert eg["extensionApis"] == {"enableBackend": True}
    manager = eg["extensionManager"]
    assert manager["hooks"]["xdsTranslator"]["post"] == ["Translation", "Cluster", "Route"]
    assert set(manager["hooks"]["xdsTranslator"]["translation"]) == {
        "listener", "route", "cluster", "secret"
    }  # fmt: skip
    assert manager["service"]["fqdn"] == {
        "hostname": "ai-gateway-controller.envoy-ai-gateway-system.svc.cluster.local", "port": 1063
    }  # fmt: skip
    assert manager["backendResources"] == [
        {"group": "inference.networking.k8s.io", "kind": "InferencePool", "version": "v1"}
    ]
    prom = values["prometheus"]
    assert prom["fullnameOverride"] == "prometheus"
    assert prom["grafana"] == {"enabled": False} and prom["alertmanager"] == {"enabled": False}
    spec = prom["prometheus"]["prometheusSpec"]
    assert spec["podMonitorSelectorNilUsesHelmValues"] is False
    (job,) = spec["additionalScrapeConfigs"]
    assert job["job_name"] == "envoy-gateway-proxy"
    assert job["metrics_path"] == "/stats/prometheus"
    assert job["relabel_configs"][1]["replacement"] == "$1:19001"
    assert values["dra-driver"] == {
        "gpuResourcesEnabledOverride": True,
        "resources": {"computeDomains": {"enabled": False}},
        "kubeletPlugin": {
            "tolerations": [{"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}]
        },
        "nvidiaDriverRoot": "/home/kubernetes/bin/nvidia",
    }
    # NFD's worker labels every node, GPU nodes of either vendor included (their taints).
    assert values["node-feature-discovery"] == {
        "worker": {
            "tolerations": [
                {"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"},
                {"key": "amd.com/gpu", "operator": "Exists", "effect": "NoSchedule"},
            ]
        }
    }
    for key in ("ai-gateway", "ai-gateway-crds", "leader-worker-set"):
        assert values[key] is None


def test_driver_root_is_omitted_at_the_default():
    xr = stack()
    desired = desired_resources(run(xr, with_provider_configs(xr)))
    assert "nvidiaDriverRoot" not in desired["dra-driver"]["spec"]["forProvider"]["values"]


def test_manifests_gateway_quota_and_inference_extension_crds():
    desired = desired_resources(run(GKE_STACK, with_provider_configs(GKE_STACK)))
    manifest = {k: desired[k]["spec"]["forProvider"]["manifest"] for k in OBJECTS}
    gateway = desired["gateway"]
    assert gateway["spec"]["readiness"] == {
        "policy": "DeriveFromCelQuery",
        "celQuery": "has(object.status.addresses) && object.status.addresses.size() > 0",
    }
    assert manifest["gateway"]["metadata"] == {"name": "inference-gateway", "namespace": NS}
    assert manifest["gateway"]["spec"] == {
        "gatewayClassName": "envoy",
        "listeners": [{"name": "http", "protocol": "HTTP", "port": 80,
                       "allowedRoutes": {"namespaces": {"from": "All"}}}],
    }  # fmt: skip
    assert manifest["gateway-class"]["spec"] == {
        "controllerName": "gateway.envoyproxy.io/gatewayclass-controller"
    }
    assert manifest["gateway-namespace"]["metadata"] == {"name": NS}
    quota = manifest["dra-driver-critical-pods-quota"]
    assert quota["metadata"] == {
        "name": "allow-critical-pods",
        "namespace": "dra-driver-nvidia-gpu",
    }
    assert quota["spec"]["hard"] == {"pods": "1000"}
    for key in OBJECTS:
        if key.startswith("gaie-crd-"):
            crd = manifest[key]
            assert crd["kind"] == "CustomResourceDefinition"
            assert key == f"gaie-crd-{crd['metadata']['name']}"
            assert "status" not in crd and "creationTimestamp" not in crd["metadata"]


def test_custom_gateway_listeners_and_class():
    listeners = [{"name": "http", "protocol": "HTTP", "port": 8080},
                 {"name": "grpc", "protocol": "TCP", "port": 9000}]  # fmt: skip
    xr = stack(gateway={"className": "eg", "listeners": listeners})
    desired = desired_resources(run(xr, with_provider_configs(xr)))
    gw = desired["gateway"]["spec"]["forProvider"]["manifest"]["spec"]
    assert gw["gatewayClassName"] == "eg"
    assert [(x["name"], x["port"]) for x in gw["listeners"]] == [("http", 8080), ("grpc", 9000)]
    assert desired["gateway-class"]["spec"]["forProvider"]["manifest"]["metadata"]["name"] == "eg"


def test_teardown_order_usages():
    desired = desired_resources(run(GKE_STACK, with_provider_configs(GKE_STACK)))
    k8s, helm = "kubernetes.m.crossplane.io/v1alpha1", "helm.m.crossplane.io/v1beta1"

    def sel(api: str, kind: str, key: str) -> dict:
        selector = {"matchControllerRef": True, "matchLabels": {"modelplane.ai/resource": key}}
        return {"apiVersion": api, "kind": kind, "resourceSelector": selector}

    assert desired["usage-gateway-class-by-gateway"]["spec"] == {
        "of": sel(k8s, "Object", "gateway-class"), "by": sel(k8s, "Object", "gateway"),
        "replayDeletion": True,
    }  # fmt: skip
    assert desired["usage-envoy-gw-by-gateway-class"]["spec"] == {
        "of": sel(helm, "Release", "envoy-gateway"), "by": sel(k8s, "Object", "gateway-class"),
        "replayDeletion": True,
    }  # fmt: skip


def test_address_published_from_the_gateway_object_and_everything_ready():
    desired = desired_resources(run(GKE_STACK, with_provider_configs(GKE_STACK)))
    observed = {k: observe(v, ready_status()) for k, v in desired.items()}
    # A Ready kube-prometheus-stack brings the engines' PodMonitor: observe it Ready too.
    desired = desired_resources(run(GKE_STACK, observed))
    observed = {k: observe(v, ready_status()) for k, v in desired.items()}
    observed["gateway"]["status"]["atProvider"] = {
        "manifest": {"status": {"addresses": [{"type": "IPAddress", "value": "34.1.2.3"}]}}
    }
    rsp = run(GKE_STACK, observed)
    assert desired_status(rsp) == {"gateway": {"address": "34.1.2.3"}}
    assert validate_object({**GKE_STACK, "status": desired_status(rsp)}) == []
    assert all(desired_ready(rsp).values())


def test_provider_config_gate_closing_keeps_everything_on_the_cluster():
    desired = desired_resources(run(GKE_STACK, with_provider_configs(GKE_STACK)))
    observed = {k: observe(v, ready_status()) for k, v in desired.items()}
    del observed["provider-config-helm"]  # e.g. a cache miss: not "gone"
    assert set(desired_resources(run(GKE_STACK, observed))) == set(desired)


def test_invalid_stack_holds_and_names_the_field():
    desired = desired_resources(run(GKE_STACK, with_provider_configs(GKE_STACK)))
    observed = {k: observe(v) for k, v in desired.items()}
    assert set(RELEASES) <= set(observed)  # a whole installed stack is at stake
    broken = copy.deepcopy(GKE_STACK)
    broken["spec"]["secrets"][0]["type"] = "Token"
    rsp = run(broken, observed)
    held = desired_resources(rsp)
    assert set(held) == set(observed)
    for key, body in held.items():
        assert body["spec"] == observed[key]["spec"], key
    ((severity, message),) = results(rsp)
    assert severity == "SEVERITY_WARNING" and "spec.secrets[0].type" in message


def test_xrd_requires_a_kubeconfig_secret():
    xr = copy.deepcopy(GKE_STACK)
    xr["spec"]["secrets"] = [{"type": "GCPServiceAccountKey", "name": "a", "key": "b"}]
    problems = " ".join(str(p) for p in validate_object(xr))
    assert "spec.secrets must contain an entry of type Kubeconfig" in problems


def test_pipeline_with_compose_usages_protects_both_provider_configs():
    composition = yaml.safe_load((root() / "apis/servingstacks/composition.yaml").read_text())
    observed = {k: observe(v) for k, v in desired_resources(run(GKE_STACK)).items()}
    with FunctionHost() as host:
        result = run_pipeline(host, composition, GKE_STACK, observed, [])
    resources = {k: r.body for k, r in result.resources.items()}
    consumers = RELEASES | OBJECTS
    assert {f"usage-pc-{k}" for k in consumers} <= set(resources)
    for key in consumers:
        assert resources[key]["metadata"]["labels"]["modelplane.ai/usage-consumer"] == key
        usage = resources[f"usage-pc-{key}"]
        assert validate_object(usage) == []
        assert usage["spec"]["of"]["kind"] == "ProviderConfig"
        assert usage["spec"]["of"]["resourceRef"] == {"name": PC_NAME}
        assert usage["spec"]["of"]["apiVersion"] == resources[key]["apiVersion"]
        assert usage["spec"]["by"]["resourceSelector"]["matchLabels"] == {
            "modelplane.ai/usage-consumer": key
        }
    # Readiness set by the first step survives the second.
    assert result.resources["envoy-gateway"].ready == "False"
    assert result.resources["usage-pc-envoy-gateway"].ready == "True"


def test_held_releases_keep_their_helm_release_name():
    desired = desired_resources(run(GKE_STACK, with_provider_configs(GKE_STACK)))
    observed = {k: observe(v, ready_status()) for k, v in desired.items()}
    del observed["provider-config-kubernetes"]
    held = desired_resources(run(GKE_STACK, observed))
    assert held["envoy-gateway"]["metadata"]["annotations"] == {
        "crossplane.io/external-name": "envoy-gateway"
    }
