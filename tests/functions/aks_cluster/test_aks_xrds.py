"""The schemas a user meets for AKS: bad input is refused by the XRDs (CEL included), each
message naming the field, before anything is composed."""

from __future__ import annotations

import copy

import pytest
from modelplane.validation import defaulted, validate_object

AKS_CLUSTER = {
    "apiVersion": "infrastructure.modelplane.ai/v1alpha1",
    "kind": "AKSCluster",
    "metadata": {"name": "aks-east-us", "namespace": "modelplane-system"},
    "spec": {
        "location": "eastus2",
        "nodePools": [
            {
                "name": "a100",
                "role": "GPU",
                "vmSize": "Standard_NC24ads_A100_v4",
                "gpu": {"acceleratorType": "nvidia-a100-80gb"},
                "zones": ["1"],
            }
        ],
    },
}
INFERENCE_CLUSTER = {
    "apiVersion": "modelplane.ai/v1alpha1",
    "kind": "InferenceCluster",
    "metadata": {"name": "aks-east-us"},
    "spec": {
        "cluster": {"source": "AKS", "aks": {"location": "eastus2"}},
        "nodePools": [{"name": "a100", "className": "aks-a100-1x-nc24", "zones": ["1", "2"]}],
    },
}
INFERENCE_CLASS = {
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


def problems(obj: dict) -> str:
    return " | ".join(str(p) for p in validate_object(defaulted(copy.deepcopy(obj))))


def test_valid_aks_objects_pass_and_get_their_defaults():
    for obj in (AKS_CLUSTER, INFERENCE_CLUSTER, INFERENCE_CLASS):
        assert problems(obj) == ""
    spec = defaulted(copy.deepcopy(AKS_CLUSTER))["spec"]
    assert spec["kubernetesVersion"] == "1.35"
    assert spec["networking"] == {
        "vnetCidr": "10.0.0.0/16",
        "subnetCidr": "10.0.0.0/20",
        "podCidr": "10.244.0.0/16",
        "serviceCidr": "10.2.0.0/16",
    }
    pool = spec["nodePools"][0]
    assert (pool["diskSizeGb"], pool["nodeCount"], pool["minNodeCount"], pool["maxNodeCount"]) == (
        128,
        1,
        0,
        8,
    )
    aks = defaulted(copy.deepcopy(INFERENCE_CLUSTER))["spec"]["cluster"]["aks"]
    assert aks == {
        "location": "eastus2",
        "kubernetesVersion": "1.35",
        "cache": {"storageClassName": "azurefile-csi"},
    }


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({"vmSize": "NC24ads_A100_v4"}, "spec.nodePools[].vmSize must be an Azure VM size"),
        ({"vmSize": "Standard_NC24 ads"}, "spec.nodePools[].vmSize must be an Azure VM size"),
        ({"vmSize": "Standard_D8s_v5"}, "must be a GPU (N-series) VM size when role is GPU"),
        ({"zones": ["4"]}, "spec.nodePools[].zones must be Azure availability zones"),
        ({"name": "system"}, "spec.nodePools[].name must not be system"),
        ({"nodeCount": 9}, "spec.nodePools[].nodeCount must not exceed maxNodeCount"),
    ],
)
def test_aks_cluster_rejects_bad_pools_naming_the_field(change: dict, message: str):
    xr = copy.deepcopy(AKS_CLUSTER)
    xr["spec"]["nodePools"][0].update(change)
    assert message in problems(xr)


def test_aks_cluster_rejects_a_location_that_is_not_a_region_name():
    xr = copy.deepcopy(AKS_CLUSTER)
    xr["spec"]["location"] = "East US 2"
    assert "spec.location must be an Azure region name" in problems(xr)


@pytest.mark.parametrize(
    ("mutate", "message"),
    [
        (lambda s: s["cluster"].pop("aks"), "spec.cluster.aks is required when"),
        (
            lambda s: s["cluster"].update(eks={"region": "us-east-1"}),
            "spec.cluster.eks is only allowed",
        ),
        (lambda s: s["nodePools"][0].update(zones=["eastus2-a"]), "zones 1, 2 or 3"),
        (lambda s: s["nodePools"][0].pop("zones"), "spec.nodePools[].zones is required"),
        (lambda s: s.pop("nodePools"), "spec.nodePools is required (at least one pool)"),
        (lambda s: s["cluster"]["aks"].update(location="East US"), "spec.cluster.aks.location"),
    ],
)
def test_inference_cluster_rejects_bad_aks_input_naming_the_field(mutate, message: str):
    xr = copy.deepcopy(INFERENCE_CLUSTER)
    mutate(xr["spec"])
    assert message in problems(xr)


def test_aks_block_is_refused_on_another_source():
    xr = copy.deepcopy(INFERENCE_CLUSTER)
    xr["spec"]["cluster"]["source"] = "Existing"
    xr["spec"]["cluster"]["existing"] = {"secretRef": {"name": "kubeconfig"}}
    assert "spec.cluster.aks is only allowed when spec.cluster.source is AKS" in problems(xr)


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({"vmSize": "nc24ads_a100_v4"}, "spec.provisioning.aks.vmSize must be an Azure GPU VM"),
        ({"vmSize": "Standard_D8s_v5"}, "spec.provisioning.aks.vmSize must be an Azure GPU VM"),
    ],
)
def test_inference_class_rejects_an_unknown_vm_size_format(change: dict, message: str):
    klass = copy.deepcopy(INFERENCE_CLASS)
    klass["spec"]["provisioning"]["aks"].update(change)
    assert message in problems(klass)


def test_inference_class_for_aks_needs_its_aks_block():
    klass = copy.deepcopy(INFERENCE_CLASS)
    klass["spec"]["provisioning"].pop("aks")
    assert "spec.provisioning.aks is required when spec.provisioning.provider is AKS" in problems(
        klass
    )
