"""InferenceCluster with ``source: AKS``: compose-inference-cluster through real gRPC composes an
AKSCluster from its pools' classes, gates the provider config and serving stack on it, and
publishes capacity; simulated end to end, the whole chain converges Ready."""

from __future__ import annotations

import copy
from pathlib import Path

import yaml
from compose_inference_cluster.fn import InferenceClusterFunction
from compose_model_cache import staging
from modelplane.controlplane import session
from modelplane.kube import condition_status
from modelplane.validation import defaulted, validate_object
from modelplane_common.naming import child_name
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

NAME = "aks-east-us"
CLASS = defaulted(
    {
        "apiVersion": "modelplane.ai/v1alpha1",
        "kind": "InferenceClass",
        "metadata": {"name": "aks-a100-1x-nc24"},
        "spec": {
            "description": "AKS Standard_NC24ads_A100_v4 with one NVIDIA A100 80GB",
            "provisioning": {
                "provider": "AKS",
                "aks": {
                    "vmSize": "Standard_NC24ads_A100_v4",
                    "diskSizeGb": 256,
                    "accelerator": {"type": "nvidia-a100-80gb", "count": 1},
                },
            },
            "devices": [
                {
                    "name": "gpu",
                    "driver": "gpu.nvidia.com",
                    "deviceClassName": "gpu.nvidia.com",
                    "attributes": {"architecture": {"string": "Ampere"}},
                    "capacity": {"memory": {"value": "81920Mi"}},
                }
            ],
        },
    }
)
GKE_CLASS = defaulted(
    {
        "apiVersion": "modelplane.ai/v1alpha1",
        "kind": "InferenceClass",
        "metadata": {"name": "gke-l4-1x-g2"},
        "spec": {
            "provisioning": {
                "provider": "GKE",
                "gke": {
                    "machineType": "g2-standard-8",
                    "accelerator": {"type": "nvidia-l4", "count": 1},
                },
            },
            "devices": [
                {"name": "gpu", "driver": "gpu.nvidia.com", "deviceClassName": "gpu.nvidia.com"}
            ],
        },
    }
)
CLUSTER = defaulted(
    {
        "apiVersion": "modelplane.ai/v1alpha1",
        "kind": "InferenceCluster",
        "metadata": {"name": NAME},
        "spec": {
            "cluster": {"source": "AKS", "aks": {"location": "eastus2"}},
            "nodePools": [
                {
                    "name": "a100",
                    "className": "aks-a100-1x-nc24",
                    "nodeCount": 1,
                    "maxNodeCount": 4,
                    "zones": ["1", "2"],
                }
            ],
        },
    }
)


def required(xr: dict, classes: tuple[dict, ...] = (CLASS, GKE_CLASS)) -> dict:
    by_name = {c["metadata"]["name"]: c for c in classes}
    req = {
        f"class-{p['className']}": [by_name[p["className"]]] if p["className"] in by_name else []
        for p in xr["spec"]["nodePools"]
    }
    return req | {"model-replicas": [], "replica-objects": [], "cache-objects": []}


def run(xr: dict, observed: dict | None = None):
    rsp = run_function(InferenceClusterFunction(), make_request(xr, observed, required(xr)))
    assert not [r for r in results(rsp) if r[0] == "SEVERITY_FATAL"], results(rsp)
    for key, body in desired_resources(rsp).items():
        assert validate_object(body, source=key) == [], key
    return rsp


def aks_ready() -> dict:
    return ready_status(
        secrets=[
            {"type": "Kubeconfig", "name": child_name(NAME, "kubeconfig"), "key": "kubeconfig"}
        ]
    )


def test_the_xrd_accepts_the_aks_cluster_and_its_class():
    assert validate_object(CLUSTER) == []
    assert validate_object(CLASS) == []


def test_first_pass_composes_an_aks_cluster_sized_from_the_class_and_publishes_capacity():
    rsp = run(CLUSTER)
    desired = desired_resources(rsp)
    assert set(desired) == {"aks-cluster", "capacity-summary", "cache-summary", "usage-replicas"}
    aks = desired["aks-cluster"]
    assert (aks["kind"], aks["metadata"]) == (
        "AKSCluster",
        {"name": NAME, "namespace": "modelplane-system"},
    )
    assert aks["spec"] == {
        "location": "eastus2",
        "kubernetesVersion": "1.35",
        "nodePools": [
            {"name": "a100", "role": "GPU", "vmSize": "Standard_NC24ads_A100_v4",
             "diskSizeGb": 256, "nodeCount": 1, "maxNodeCount": 4,
             "gpu": {"acceleratorType": "nvidia-a100-80gb"}, "zones": ["1", "2"]}
        ],
    }  # fmt: skip
    (pool,) = desired_status(rsp)["gpuPools"]
    assert (pool["name"], pool["nodes"], pool["maxNodes"]) == ("a100", 1, 4)
    assert pool["devices"][0]["capacity"] == {"memory": {"value": "81920Mi"}}
    assert conditions(rsp)["ClusterReady"][:2] == ("False", "Provisioning")


def test_ready_aks_cluster_opens_provider_config_and_stack_with_the_hosts_driver():
    aks = desired_resources(run(CLUSTER))["aks-cluster"]
    observed = {"aks-cluster": observe(aks, aks_ready())}
    desired = desired_resources(run(CLUSTER, observed))
    assert set(desired) == {
        "capacity-summary", "cache-summary",
        "aks-cluster", "cluster-provider-config-kubernetes", "serving-stack",
        "usage-aks-by-backend", "usage-replicas",
    }  # fmt: skip
    config = desired["cluster-provider-config-kubernetes"]["spec"]
    assert "identity" not in config  # the kubeconfig carries a client certificate
    assert config["credentials"]["secretRef"]["name"] == child_name(NAME, "kubeconfig")
    stack = desired["serving-stack"]["spec"]
    # AKS installs the driver at / (gpuDriver: Install): the DRA driver's default root.
    assert "nvidiaDriverRoot" not in stack and "nvidiaDriverInstaller" not in stack
    assert desired["usage-aks-by-backend"]["spec"]["of"]["kind"] == "AKSCluster"
    assert desired["usage-aks-by-backend"]["metadata"]["name"] == child_name(
        NAME, "usage-aks-by-backend"
    )


def test_aks_cluster_converges_ready_with_the_gateway_address():
    aks = desired_resources(run(CLUSTER))["aks-cluster"]
    observed = {"aks-cluster": observe(aks, aks_ready())}
    for key, body in desired_resources(run(CLUSTER, observed)).items():
        if key not in observed:
            extra = {"gateway": {"address": "20.1.2.3"}} if key == "serving-stack" else {}
            observed[key] = observe(body, ready_status(**extra))
    rsp = run(CLUSTER, observed)
    assert set(desired_resources(rsp)) == set(observed)
    assert all(desired_ready(rsp).values()), desired_ready(rsp)
    assert desired_status(rsp)["gateway"] == {"address": "20.1.2.3"}
    assert conditions(rsp)["ClusterReady"][:2] == ("True", "ClusterRunning")


def test_a_class_without_an_aks_block_holds_back_only_its_pool():
    xr = copy.deepcopy(CLUSTER)
    xr["spec"]["nodePools"].append({**xr["spec"]["nodePools"][0], "name": "l4",
                                    "className": "gke-l4-1x-g2"})  # fmt: skip
    rsp = run(xr)
    aks = desired_resources(rsp)["aks-cluster"]
    assert [p["name"] for p in aks["spec"]["nodePools"]] == ["a100"]
    status, reason, message = conditions(rsp)["PoolsResolved"]
    assert (status, reason) == ("False", "InvalidNodePool")
    assert "pool l4 (class gke-l4-1x-g2): InferenceClass gke-l4-1x-g2 has no AKS provisioning" in (
        message
    )
    assert desired_status(rsp)["unavailablePools"][0]["name"] == "l4"


def test_a_missing_class_on_a_running_cluster_keeps_its_pool_as_it_runs():
    aks = desired_resources(run(CLUSTER))["aks-cluster"]
    observed = {"aks-cluster": observe(aks, aks_ready())}
    rsp = run_function(
        InferenceClusterFunction(),
        make_request(CLUSTER, observed, required(CLUSTER, classes=())),
    )
    kept = desired_resources(rsp)["aks-cluster"]
    assert kept["spec"]["nodePools"] == aks["spec"]["nodePools"]
    assert desired_status(rsp)["gpuPools"] == []


def test_simulated_aks_inference_cluster_converges_ready(tmp_path: Path):
    (tmp_path / "cluster.yaml").write_text(yaml.safe_dump_all([CLASS, CLUSTER]))
    with session(tmp_path) as plane:
        assert plane.run(max_rounds=40).converged
        cluster = plane.find("InferenceCluster", NAME)
        assert condition_status(cluster, "Ready") == "True", cluster["status"]
        assert [p["name"] for p in cluster["status"]["gpuPools"]] == ["a100"]
        aks = plane.find("AKSCluster", NAME, "modelplane-system")
        assert condition_status(aks, "Ready") == "True"
        assert aks["status"]["endpoint"].endswith(".hcp.eastus2.azmk8s.io")
        pools = plane.list(kind="KubernetesClusterNodePool", namespace="modelplane-system")
        (pool,) = pools
        assert pool["spec"]["forProvider"]["gpuDriver"] == "Install"
        assert pool["spec"]["forProvider"]["vmSize"] == "Standard_NC24ads_A100_v4"


def test_model_caches_on_an_aks_cluster_use_azure_files_unless_told_otherwise():
    published = {**CLUSTER, "status": {"providerConfigRef": {"name": "pc"}}}
    assert staging.storage_class(published) == "azurefile-csi"
    custom = copy.deepcopy(published)
    custom["spec"]["cluster"]["aks"]["cache"] = {"storageClassName": "azurefile-csi-premium"}
    assert staging.storage_class(custom) == "azurefile-csi-premium"


def test_an_aks_cluster_whose_status_is_lost_keeps_provider_config_stack_and_usage():
    """After a restore the AKSCluster's status (its secrets, its Ready) may be gone for a
    while: the provider config, serving stack and usage stay exactly as they were."""
    aks = desired_resources(run(CLUSTER))["aks-cluster"]
    observed = {"aks-cluster": observe(aks, aks_ready())}
    for key, body in desired_resources(run(CLUSTER, observed)).items():
        if key not in observed:
            observed[key] = observe(body, ready_status())
    observed["aks-cluster"].pop("status")
    rsp = run(CLUSTER, observed)
    desired = desired_resources(rsp)
    assert set(desired) == set(observed)
    for key in ("cluster-provider-config-kubernetes", "serving-stack", "usage-aks-by-backend"):
        assert desired[key]["spec"] == observed[key]["spec"], key
    assert conditions(rsp)["ClusterReady"][:2] == ("False", "Provisioning")
    assert desired_status(rsp)["providerConfigRef"]["name"] == child_name(
        NAME, "cluster-kubeconfig"
    )
