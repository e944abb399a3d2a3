"""AMD pools provisioned on AKS (ND MI300X v5): an InferenceClass whose devices are gpu.amd.com
becomes an AKS node pool with AMD's taint, Modelplane's labels and no NVIDIA driver, its
cluster's stack installs AMD's DRA driver; GKE and EKS, which have no AMD GPUs, refuse such a
class by pool. Through real gRPC, `modelplane validate` and `modelplane simulate`."""

from __future__ import annotations

import copy
from pathlib import Path

import yaml
from click.testing import CliRunner
from compose_aks_cluster.fn import AKSClusterFunction
from compose_inference_cluster.fn import InferenceClusterFunction
from modelplane.controlplane import session
from modelplane.kube import condition_status
from modelplane.main import cli
from modelplane.validation import defaulted, validate_object
from modelplane_common.naming import child_name
from modelplane_common.serving import run_function
from modelplane_common.testing import (
    conditions,
    desired_resources,
    desired_status,
    make_request,
    observe,
    ready_status,
    results,
)
from modelplane_schemas.generated.containerservice_azure_m_upbound_io.v1beta1 import (
    kubernetesclusternodepool,
)

NAME = "aks-mi300x"
MI300X_VM = "Standard_ND96isr_MI300X_v5"
AMD_DEVICES = [
    {"name": "gpu", "driver": "gpu.amd.com", "deviceClassName": "gpu.amd.com", "count": 8,
     "attributes": {"type": {"string": "amdgpu"}, "deviceID": {"string": "0x74a1"}},
     "capacity": {"memory": {"value": "192Gi"}, "computeUnits": {"value": "304"}}},
]  # fmt: skip


def amd_class(name: str, provisioning: dict) -> dict:
    body = defaulted(
        {
            "apiVersion": "modelplane.ai/v1alpha1",
            "kind": "InferenceClass",
            "metadata": {"name": name},
            "spec": {"provisioning": provisioning, "devices": copy.deepcopy(AMD_DEVICES)},
        }
    )
    assert validate_object(body) == []
    return body


AKS_MI300X = amd_class(
    "aks-mi300x-8x-nd96",
    {"provider": "AKS", "aks": {"vmSize": MI300X_VM, "diskSizeGb": 512,
                                "accelerator": {"type": "amd-mi300x", "count": 8}}},
)  # fmt: skip
GKE_AMD = amd_class(
    "gke-amd-8x",
    {"provider": "GKE", "gke": {"machineType": "a3-highgpu-8g",
                                "accelerator": {"type": "amd-mi300x", "count": 8}}},
)  # fmt: skip
EKS_AMD = amd_class(
    "eks-amd-8x",
    {"provider": "EKS", "eks": {"instanceType": "p5.48xlarge",
                                "accelerator": {"type": "amd-mi300x", "count": 8}}},
)  # fmt: skip
CLASSES = {c["metadata"]["name"]: c for c in (AKS_MI300X, GKE_AMD, EKS_AMD)}


def aks_inference_cluster() -> dict:
    return defaulted(
        {
            "apiVersion": "modelplane.ai/v1alpha1",
            "kind": "InferenceCluster",
            "metadata": {"name": NAME},
            "spec": {
                "cluster": {"source": "AKS", "aks": {"location": "westus"}},
                "nodePools": [{"name": "mi300x", "className": "aks-mi300x-8x-nd96",
                               "nodeCount": 1, "maxNodeCount": 2, "zones": ["1"]}],
            },
        }
    )  # fmt: skip


def run_cluster(xr: dict, observed: dict | None = None):
    assert validate_object(xr) == []
    required = {
        f"class-{p['className']}": [CLASSES[p["className"]]] for p in xr["spec"]["nodePools"]
    } | {"model-replicas": [], "replica-objects": [], "cache-objects": []}
    rsp = run_function(InferenceClusterFunction(), make_request(xr, observed, required))
    assert not [r for r in results(rsp) if r[0] == "SEVERITY_FATAL"], results(rsp)
    for key, body in desired_resources(rsp).items():
        assert validate_object(body, source=key) == [], key
    return rsp


def test_an_amd_class_on_aks_becomes_an_amd_pool_and_an_amd_stack() -> None:
    xr = aks_inference_cluster()
    rsp = run_cluster(xr)
    aks = desired_resources(rsp)["aks-cluster"]
    (pool,) = aks["spec"]["nodePools"]
    assert pool["vmSize"] == MI300X_VM
    assert pool["gpu"] == {"acceleratorType": "amd-mi300x", "vendor": "AMD"}
    (published,) = desired_status(rsp)["gpuPools"]
    assert published["devices"][0]["driver"] == "gpu.amd.com"

    ready = ready_status(
        secrets=[{"type": "Kubeconfig", "name": child_name(NAME, "kubeconfig"),
                  "key": "kubeconfig"}]
    )  # fmt: skip
    stack = desired_resources(run_cluster(xr, {"aks-cluster": observe(aks, ready)}))
    assert stack["serving-stack"]["spec"]["draDrivers"] == ["gpu.amd.com"]


def aks_xr(vendor: str | None) -> dict:
    gpu = {"acceleratorType": "amd-mi300x"} | ({"vendor": vendor} if vendor else {})
    return defaulted(
        {
            "apiVersion": "infrastructure.modelplane.ai/v1alpha1",
            "kind": "AKSCluster",
            "metadata": {"name": NAME, "namespace": "modelplane-system"},
            "spec": {
                "location": "westus",
                "nodePools": [{"name": "mi300x", "role": "GPU", "vmSize": MI300X_VM,
                               "gpu": gpu, "zones": ["1"]}],
            },
        }
    )  # fmt: skip


def test_an_amd_aks_pool_gets_amds_taint_modelplanes_labels_and_no_nvidia_driver() -> None:
    xr = aks_xr("AMD")
    assert validate_object(xr) == []
    rsp = run_function(AKSClusterFunction(), make_request(xr))
    pool = desired_resources(rsp)["nodepool-mi300x"]
    # Against the provider's CRD model (the name is Crossplane's to generate).
    kubernetesclusternodepool.KubernetesClusterNodePool.model_validate(pool)
    fp = pool["spec"]["forProvider"]
    # AKS's Install is NVIDIA's driver: None leaves the amdgpu driver to the platform team.
    assert fp["gpuDriver"] == "None"
    # The engines claiming gpu.amd.com and AMD's DRA kubelet plugin tolerate amd.com/gpu.
    assert fp["nodeTaints"] == ["amd.com/gpu=true:NoSchedule"]
    assert fp["nodeLabels"] == {"modelplane.ai/pool": "mi300x", "modelplane.ai/gpu": "amd-mi300x"}
    assert fp["vmSize"] == MI300X_VM


def test_the_aks_vendor_defaults_to_nvidia_and_refuses_others(tmp_path: Path) -> None:
    assert defaulted(aks_xr(None))["spec"]["nodePools"][0]["gpu"]["vendor"] == "NVIDIA"
    path = tmp_path / "aks.yaml"
    path.write_text(yaml.safe_dump(aks_xr("Intel")))
    result = CliRunner().invoke(cli, ["validate", str(path)])
    assert result.exit_code != 0
    assert "spec.nodePools[0].gpu.vendor" in result.output + result.stderr


def refused(source: str, block: dict, class_name: str) -> tuple[str, str, str]:
    xr = defaulted(
        {
            "apiVersion": "modelplane.ai/v1alpha1",
            "kind": "InferenceCluster",
            "metadata": {"name": f"{source.lower()}-amd"},
            "spec": {
                "cluster": {"source": source, source.lower(): block},
                "nodePools": [{"name": "mi300x", "className": class_name, "nodeCount": 1,
                               "zones": [block.pop("zone")]}],
            },
        }
    )  # fmt: skip
    rsp = run_cluster(xr)
    assert not [k for k in desired_resources(rsp) if k.endswith("-cluster")]
    assert desired_status(rsp)["unavailablePools"][0]["name"] == "mi300x"
    return conditions(rsp)["PoolsResolved"]


def test_gke_and_eks_refuse_an_amd_class_naming_pool_and_class() -> None:
    for source, block, class_name in (
        ("GKE", {"project": "my-project", "region": "us-central1", "zone": "us-central1-a"},
         "gke-amd-8x"),
        ("EKS", {"region": "us-east-1", "zone": "us-east-1a"}, "eks-amd-8x"),
    ):  # fmt: skip
        status, reason, message = refused(source, block, class_name)
        assert (status, reason) == ("False", "InvalidNodePool")
        assert message.startswith(
            f"pool mi300x (class {class_name}): InferenceClass {class_name} has AMD devices "
            f"(driver gpu.amd.com) and {source} offers no AMD GPUs"
        ), message


def test_a_simulated_aks_mi300x_cluster_converges_with_an_amd_pool(tmp_path: Path) -> None:
    (tmp_path / "cluster.yaml").write_text(
        yaml.safe_dump_all([AKS_MI300X, aks_inference_cluster()])
    )
    with session(tmp_path) as plane:
        assert plane.run(max_rounds=40).converged
        cluster = plane.find("InferenceCluster", NAME)
        assert condition_status(cluster, "Ready") == "True", cluster["status"]
        (pool,) = plane.list(kind="KubernetesClusterNodePool", namespace="modelplane-system")
        fp = pool["spec"]["forProvider"]
        assert (fp["gpuDriver"], fp["nodeTaints"]) == ("None", ["amd.com/gpu=true:NoSchedule"])
        (stack,) = plane.list(kind="ServingStack", namespace="modelplane-system")
        assert stack["spec"]["draDrivers"] == ["gpu.amd.com"]
        assert condition_status(stack, "Ready") == "True"
