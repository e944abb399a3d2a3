"""The schemas a user meets for Vultr: bad input is refused by the XRDs (CEL included), each
message naming the field, before anything is composed."""

from __future__ import annotations

import copy

import pytest
from modelplane.validation import defaulted, validate_object

VULTR_CLUSTER = {
    "apiVersion": "infrastructure.modelplane.ai/v1alpha1",
    "kind": "VultrCluster",
    "metadata": {"name": "vke-ewr", "namespace": "modelplane-system"},
    "spec": {
        "region": "ewr",
        "nodePools": [
            {
                "name": "a100",
                "role": "GPU",
                "plan": "vcg-a100-12c-120g-80vram",
                "gpu": {"acceleratorType": "nvidia-a100-80gb"},
            }
        ],
    },
}
INFERENCE_CLUSTER = {
    "apiVersion": "modelplane.ai/v1alpha1",
    "kind": "InferenceCluster",
    "metadata": {"name": "vke-ewr"},
    "spec": {
        "cluster": {"source": "Vultr", "vultr": {"region": "ewr"}},
        "nodePools": [{"name": "a100", "className": "vultr-a100-1x"}],
    },
}
INFERENCE_CLASS = {
    "apiVersion": "modelplane.ai/v1alpha1",
    "kind": "InferenceClass",
    "metadata": {"name": "vultr-a100-1x"},
    "spec": {
        "provisioning": {
            "provider": "Vultr",
            "vultr": {
                "plan": "vcg-a100-12c-120g-80vram",
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


def test_valid_vultr_objects_pass_and_get_their_defaults():
    for obj in (VULTR_CLUSTER, INFERENCE_CLUSTER, INFERENCE_CLASS):
        assert problems(obj) == ""
    spec = defaulted(copy.deepcopy(VULTR_CLUSTER))["spec"]
    assert (spec["kubernetesVersion"], spec["highAvailability"]) == ("v1.35.0+1", False)
    pool = spec["nodePools"][0]
    assert (pool["nodeCount"], pool["minNodeCount"], pool["maxNodeCount"]) == (1, 0, 8)
    assert pool["gpu"]["vendor"] == "NVIDIA"
    vultr = defaulted(copy.deepcopy(INFERENCE_CLUSTER))["spec"]["cluster"]["vultr"]
    assert vultr == {
        "region": "ewr",
        "kubernetesVersion": "v1.35.0+1",
        "highAvailability": False,
        "cache": {"storageClassName": "vultr-vfs-storage"},
    }


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({"plan": "VCG_A100"}, "spec.nodePools[].plan must be a Vultr plan ID"),
        ({"plan": "vcg a100"}, "spec.nodePools[].plan must be a Vultr plan ID"),
        ({"plan": "vc2-4c-8gb"}, "spec.nodePools[].plan must be a Vultr Cloud GPU plan"),
        ({"name": "system"}, "spec.nodePools[].name must not be system"),
        ({"nodeCount": 9}, "spec.nodePools[].nodeCount must not exceed maxNodeCount"),
        ({"gpu": None}, "spec.nodePools[].gpu is required when role is GPU"),
    ],
)
def test_vultr_cluster_rejects_bad_pools_naming_the_field(change: dict, message: str):
    xr = copy.deepcopy(VULTR_CLUSTER)
    xr["spec"]["nodePools"][0].update(change)
    xr["spec"]["nodePools"][0] = {k: v for k, v in xr["spec"]["nodePools"][0].items() if v}
    assert message in problems(xr)


@pytest.mark.parametrize(
    ("field", "value", "message"),
    [
        ("region", "EWR", "spec.region must be a Vultr region ID"),
        ("kubernetesVersion", "1.35", "spec.kubernetesVersion must be a VKE version"),
    ],
)
def test_vultr_cluster_rejects_a_bad_region_or_version(field: str, value: str, message: str):
    xr = copy.deepcopy(VULTR_CLUSTER)
    xr["spec"][field] = value
    assert message in problems(xr)


@pytest.mark.parametrize(
    ("mutate", "message"),
    [
        (lambda s: s["cluster"].pop("vultr"), "spec.cluster.vultr is required when"),
        (
            lambda s: s["cluster"].update(aks={"location": "eastus2"}),
            "spec.cluster.aks is only allowed",
        ),
        (
            lambda s: s["nodePools"][0].update(zones=["ewr-1"]),
            "spec.nodePools[].zones is not allowed when spec.cluster.source is Vultr",
        ),
        (lambda s: s.pop("nodePools"), "spec.nodePools is required (at least one pool)"),
        (lambda s: s["cluster"]["vultr"].update(region="NJ1"), "spec.cluster.vultr.region"),
        (
            lambda s: s["cluster"]["vultr"].update(kubernetesVersion="v1.35"),
            "spec.cluster.vultr.kubernetesVersion must be a VKE version",
        ),
    ],
)
def test_inference_cluster_rejects_bad_vultr_input_naming_the_field(mutate, message: str):
    xr = copy.deepcopy(INFERENCE_CLUSTER)
    mutate(xr["spec"])
    assert message in problems(xr)


def test_vultr_block_is_refused_on_another_source():
    xr = copy.deepcopy(INFERENCE_CLUSTER)
    xr["spec"]["cluster"]["source"] = "Existing"
    xr["spec"]["cluster"]["existing"] = {"secretRef": {"name": "kubeconfig"}}
    assert "spec.cluster.vultr is only allowed when spec.cluster.source is Vultr" in problems(xr)


@pytest.mark.parametrize(
    "plan",
    ["Standard_NC24ads_A100_v4", "vc2-4c-8gb", "vcg_a100", "vcg-A100-12c", "vbm-8c-mi300x"],
)
def test_inference_class_rejects_an_unknown_plan_format_naming_the_field(plan: str):
    klass = copy.deepcopy(INFERENCE_CLASS)
    klass["spec"]["provisioning"]["vultr"]["plan"] = plan
    assert "spec.provisioning.vultr.plan must be a Vultr Cloud GPU plan ID" in problems(klass)


def test_inference_class_for_vultr_needs_its_vultr_block():
    klass = copy.deepcopy(INFERENCE_CLASS)
    klass["spec"]["provisioning"].pop("vultr")
    assert (
        "spec.provisioning.vultr is required when spec.provisioning.provider is Vultr"
        in problems(klass)
    )
