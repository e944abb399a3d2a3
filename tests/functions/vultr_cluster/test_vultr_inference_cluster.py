"""InferenceCluster with ``source: Vultr``: compose-inference-cluster through real gRPC composes
a VultrCluster from its pools' classes (NVIDIA and AMD), gates the provider config and serving
stack on it, and publishes capacity; simulated end to end, the whole chain converges Ready."""

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

NAME = "vke-ewr"
A100 = defaulted(
    {
        "apiVersion": "modelplane.ai/v1alpha1",
        "kind": "InferenceClass",
        "metadata": {"name": "vultr-a100-1x"},
        "spec": {
            "description": "Vultr Cloud GPU with one NVIDIA A100 80GB",
            "provisioning": {
                "provider": "Vultr",
                "vultr": {
                    "plan": "vcg-a100-12c-120g-80vram",
                    "accelerator": {"type": "nvidia-a100-80gb", "count": 1},
                },
            },
            "devices": [
                {
                    "name": "gpu",
                    "driver": "gpu.nvidia.com",
                    "deviceClassName": "gpu.nvidia.com",
                    "capacity": {"memory": {"value": "81920Mi"}},
                }
            ],
        },
    }
)
MI300X = defaulted(
    {
        "apiVersion": "modelplane.ai/v1alpha1",
        "kind": "InferenceClass",
        "metadata": {"name": "vultr-mi300x-8x"},
        "spec": {
            "description": "Vultr Cloud GPU with eight AMD Instinct MI300X",
            "provisioning": {
                "provider": "Vultr",
                "vultr": {
                    "plan": "vcg-mi300x-8c-192g-192vram",
                    "accelerator": {"type": "amd-mi300x", "count": 8},
                },
            },
            "devices": [
                {
                    "name": "gpu",
                    "driver": "gpu.amd.com",
                    "deviceClassName": "gpu.amd.com",
                    "count": 8,
                    "attributes": {"type": {"string": "amdgpu"}},
                    "capacity": {"memory": {"value": "192Gi"}},
                }
            ],
        },
    }
)
AKS_CLASS = defaulted(
    {
        "apiVersion": "modelplane.ai/v1alpha1",
        "kind": "InferenceClass",
        "metadata": {"name": "aks-a100-1x-nc24"},
        "spec": {
            "provisioning": {
                "provider": "AKS",
                "aks": {
                    "vmSize": "Standard_NC24ads_A100_v4",
                    "accelerator": {"type": "nvidia-a100-80gb", "count": 1},
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
            "cluster": {"source": "Vultr", "vultr": {"region": "ewr"}},
            "nodePools": [
                {"name": "a100", "className": "vultr-a100-1x", "nodeCount": 1, "maxNodeCount": 4}
            ],
        },
    }
)


def amd_cluster() -> dict:
    xr = copy.deepcopy(CLUSTER)
    xr["spec"]["nodePools"] = [
        {"name": "mi300x", "className": "vultr-mi300x-8x", "nodeCount": 1, "maxNodeCount": 2}
    ]
    return defaulted(xr)


def required(xr: dict, classes: tuple[dict, ...] = (A100, MI300X, AKS_CLASS)) -> dict:
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


def vultr_ready() -> dict:
    return ready_status(
        secrets=[
            {"type": "Kubeconfig", "name": child_name(NAME, "kubeconfig"), "key": "kubeconfig"}
        ]
    )


def converged(xr: dict) -> dict[str, dict]:
    """Every resource observed Ready, the cloud XR with its kubeconfig."""
    vke = desired_resources(run(xr))["vultr-cluster"]
    observed = {"vultr-cluster": observe(vke, vultr_ready())}
    for key, body in desired_resources(run(xr, observed)).items():
        if key not in observed:
            observed[key] = observe(body, ready_status())
    return observed


def test_the_xrds_accept_the_vultr_cluster_and_its_classes():
    assert validate_object(CLUSTER) == []
    assert validate_object(amd_cluster()) == []
    assert validate_object(A100) == []
    assert validate_object(MI300X) == []


def test_first_pass_composes_a_vultr_cluster_planned_from_the_class_and_publishes_capacity():
    rsp = run(CLUSTER)
    desired = desired_resources(rsp)
    assert set(desired) == {"vultr-cluster", "capacity-summary", "cache-summary", "usage-replicas"}
    vke = desired["vultr-cluster"]
    assert (vke["kind"], vke["metadata"]) == (
        "VultrCluster",
        {"name": NAME, "namespace": "modelplane-system"},
    )
    assert vke["spec"] == {
        "region": "ewr",
        "kubernetesVersion": "v1.35.0+1",
        "highAvailability": False,
        "nodePools": [
            {"name": "a100", "role": "GPU", "plan": "vcg-a100-12c-120g-80vram", "nodeCount": 1,
             "maxNodeCount": 4, "gpu": {"acceleratorType": "nvidia-a100-80gb", "vendor": "NVIDIA"}}
        ],
    }  # fmt: skip
    (pool,) = desired_status(rsp)["gpuPools"]
    assert (pool["name"], pool["nodes"], pool["maxNodes"]) == ("a100", 1, 4)
    assert pool["devices"][0]["capacity"] == {"memory": {"value": "81920Mi"}}
    assert conditions(rsp)["ClusterReady"][:2] == ("False", "Provisioning")


def test_ready_vultr_cluster_opens_provider_config_and_stack_with_the_hosts_driver():
    vke = desired_resources(run(CLUSTER))["vultr-cluster"]
    observed = {"vultr-cluster": observe(vke, vultr_ready())}
    desired = desired_resources(run(CLUSTER, observed))
    assert set(desired) == {
        "capacity-summary", "cache-summary",
        "vultr-cluster", "cluster-provider-config-kubernetes", "serving-stack",
        "usage-vultr-by-backend", "usage-replicas",
    }  # fmt: skip
    config = desired["cluster-provider-config-kubernetes"]["spec"]
    assert "identity" not in config  # VKE's kubeconfig carries a client certificate
    assert config["credentials"]["secretRef"]["name"] == child_name(NAME, "kubeconfig")
    assert config["credentials"]["secretRef"]["key"] == "kubeconfig"
    stack = desired["serving-stack"]["spec"]
    assert "nvidiaDriverRoot" not in stack and "nvidiaDriverInstaller" not in stack
    assert "draDrivers" not in stack  # NVIDIA's alone, the stack's default
    assert desired["usage-vultr-by-backend"]["spec"]["of"]["kind"] == "VultrCluster"


def test_an_amd_class_provisions_an_amd_vultr_pool_and_the_stack_installs_amds_driver():
    rsp = run(amd_cluster())
    (pool,) = desired_resources(rsp)["vultr-cluster"]["spec"]["nodePools"]
    assert pool["plan"] == "vcg-mi300x-8c-192g-192vram"
    assert pool["gpu"] == {"acceleratorType": "amd-mi300x", "vendor": "AMD"}
    (published,) = desired_status(rsp)["gpuPools"]
    assert published["devices"][0]["driver"] == "gpu.amd.com"
    observed = converged(amd_cluster())
    stack = desired_resources(run(amd_cluster(), observed))["serving-stack"]["spec"]
    assert stack["draDrivers"] == ["gpu.amd.com"]


def test_a_mixed_vultr_cluster_installs_both_dra_drivers():
    xr = copy.deepcopy(CLUSTER)
    xr["spec"]["nodePools"].append(amd_cluster()["spec"]["nodePools"][0])
    xr = defaulted(xr)
    stack = desired_resources(run(xr, converged(xr)))["serving-stack"]["spec"]
    assert stack["draDrivers"] == ["gpu.amd.com", "gpu.nvidia.com"]


def test_vultr_cluster_converges_ready_with_the_gateway_address():
    observed = converged(CLUSTER)
    observed["serving-stack"]["status"]["gateway"] = {"address": "45.1.2.3"}
    rsp = run(CLUSTER, observed)
    assert set(desired_resources(rsp)) == set(observed)
    assert all(desired_ready(rsp).values()), desired_ready(rsp)
    assert desired_status(rsp)["gateway"] == {"address": "45.1.2.3"}
    assert conditions(rsp)["ClusterReady"][:2] == ("True", "ClusterRunning")


def test_a_class_without_a_vultr_block_holds_back_only_its_pool():
    xr = copy.deepcopy(CLUSTER)
    xr["spec"]["nodePools"].append({**xr["spec"]["nodePools"][0], "name": "aks",
                                    "className": "aks-a100-1x-nc24"})  # fmt: skip
    rsp = run(xr)
    vke = desired_resources(rsp)["vultr-cluster"]
    assert [p["name"] for p in vke["spec"]["nodePools"]] == ["a100"]
    status, reason, message = conditions(rsp)["PoolsResolved"]
    assert (status, reason) == ("False", "InvalidNodePool")
    assert "InferenceClass aks-a100-1x-nc24 has no Vultr provisioning block" in message
    assert desired_status(rsp)["unavailablePools"][0]["name"] == "aks"


def test_a_missing_class_on_a_running_cluster_keeps_its_pool_as_it_runs():
    observed = converged(amd_cluster())
    rsp = run_function(
        InferenceClusterFunction(),
        make_request(amd_cluster(), observed, required(amd_cluster(), classes=())),
    )
    desired = desired_resources(rsp)
    kept = desired["vultr-cluster"]
    assert kept["spec"]["nodePools"] == observed["vultr-cluster"]["spec"]["nodePools"]
    assert desired_status(rsp)["gpuPools"] == []
    # The AMD driver its nodes use stays installed while the class is away.
    assert desired["serving-stack"]["spec"]["draDrivers"] == ["gpu.amd.com"]


def test_a_vultr_cluster_whose_status_is_lost_keeps_provider_config_stack_and_usage():
    """After a restore the VultrCluster's status (its secrets, its Ready) may be gone for a
    while: the provider config, serving stack and usage stay exactly as they were."""
    observed = converged(CLUSTER)
    observed["vultr-cluster"].pop("status")
    rsp = run(CLUSTER, observed)
    desired = desired_resources(rsp)
    assert set(desired) == set(observed)
    for key in ("cluster-provider-config-kubernetes", "serving-stack", "usage-vultr-by-backend"):
        assert desired[key]["spec"] == observed[key]["spec"], key
    assert conditions(rsp)["ClusterReady"][:2] == ("False", "Provisioning")
    assert desired_status(rsp)["providerConfigRef"]["name"] == child_name(
        NAME, "cluster-kubeconfig"
    )


def test_model_caches_on_a_vultr_cluster_use_vultr_file_system_unless_told_otherwise():
    published = {**CLUSTER, "status": {"providerConfigRef": {"name": "pc"}}}
    assert staging.storage_class(published) == "vultr-vfs-storage"
    custom = copy.deepcopy(published)
    custom["spec"]["cluster"]["vultr"]["cache"] = {"storageClassName": "my-rwx"}
    assert staging.storage_class(custom) == "my-rwx"


def test_simulated_amd_vultr_inference_cluster_converges_with_amds_dra_driver(tmp_path: Path):
    (tmp_path / "cluster.yaml").write_text(yaml.safe_dump_all([MI300X, amd_cluster()]))
    with session(tmp_path) as plane:
        assert plane.run(max_rounds=40).converged
        cluster = plane.find("InferenceCluster", NAME)
        assert condition_status(cluster, "Ready") == "True", cluster["status"]
        assert [p["name"] for p in cluster["status"]["gpuPools"]] == ["mi300x"]
        vke = plane.find("VultrCluster", NAME, "modelplane-system")
        assert condition_status(vke, "Ready") == "True"
        assert vke["status"]["endpoint"].endswith(".vultr-k8s.com")
        (pool,) = plane.list(kind="KubernetesNodePool", namespace="modelplane-system")
        assert pool["spec"]["forProvider"]["taints"][0]["key"] == "amd.com/gpu"
        (stack,) = plane.list(kind="ServingStack")
        assert stack["spec"]["draDrivers"] == ["gpu.amd.com"]
        releases = {r["spec"]["forProvider"]["chart"]["name"] for r in plane.list(kind="Release")}
        assert "k8s-gpu-dra-driver" in releases
        assert condition_status(stack, "Ready") == "True"
