"""The schemas a user meets for Nebius: bad input is refused by the XRDs (CEL included), each
message naming the field, before anything is composed."""

from __future__ import annotations

import copy

import pytest
from modelplane.validation import defaulted, validate_object

NEBIUS_CLUSTER = {
    "apiVersion": "infrastructure.modelplane.ai/v1alpha1",
    "kind": "NebiusCluster",
    "metadata": {"name": "nebius-eu-north", "namespace": "modelplane-system"},
    "spec": {
        "projectId": "project-e00abc123",
        "credentialsSecretRef": {"name": "nebius-admin-kubeconfig"},
        "nodePools": [
            {
                "name": "h100",
                "role": "GPU",
                "platform": "gpu-h100-sxm",
                "preset": "8gpu-128vcpu-1600gb",
                "infinibandFabric": "fabric-3",
                "gpu": {"acceleratorType": "nvidia-h100-80gb"},
            }
        ],
    },
}
INFERENCE_CLUSTER = {
    "apiVersion": "modelplane.ai/v1alpha1",
    "kind": "InferenceCluster",
    "metadata": {"name": "nebius-eu-north"},
    "spec": {
        "cluster": {
            "source": "Nebius",
            "nebius": {
                "projectId": "project-e00abc123",
                "credentialsSecretRef": {"name": "nebius-admin-kubeconfig"},
            },
        },
        "nodePools": [{"name": "h100", "className": "nebius-h100-8x", "zones": ["fabric-3"]}],
    },
}
INFERENCE_CLASS = {
    "apiVersion": "modelplane.ai/v1alpha1",
    "kind": "InferenceClass",
    "metadata": {"name": "nebius-h100-8x"},
    "spec": {
        "provisioning": {
            "provider": "Nebius",
            "nebius": {
                "platform": "gpu-h100-sxm",
                "preset": "8gpu-128vcpu-1600gb",
                "accelerator": {"type": "nvidia-h100-80gb", "count": 8},
            },
        },
        "devices": [
            {"name": "gpu", "driver": "gpu.nvidia.com", "deviceClassName": "gpu.nvidia.com"}
        ],
    },
}


def problems(obj: dict) -> str:
    return " | ".join(str(p) for p in validate_object(defaulted(copy.deepcopy(obj))))


def test_valid_nebius_objects_pass_and_get_their_defaults():
    for obj in (NEBIUS_CLUSTER, INFERENCE_CLUSTER, INFERENCE_CLASS):
        assert problems(obj) == ""
    spec = defaulted(copy.deepcopy(NEBIUS_CLUSTER))["spec"]
    assert spec["kubernetesVersion"] == "1.34"
    assert spec["credentialsSecretRef"] == {
        "name": "nebius-admin-kubeconfig",
        "key": "credentials.json",
    }
    assert "cache" not in spec  # no cache block, no filesystem
    pool = spec["nodePools"][0]
    assert (pool["diskSizeGb"], pool["driversPreset"], pool["nodeCount"], pool["maxNodeCount"]) == (
        256,
        "cuda12",
        1,
        8,
    )
    nebius = defaulted(copy.deepcopy(INFERENCE_CLUSTER))["spec"]["cluster"]["nebius"]
    assert nebius["cache"] == {
        "storageClassName": "csi-mounted-fs-path-sc",
        "filesystemSizeGibibytes": 1024,
        "filesystemType": "NETWORK_SSD",
    }
    block = defaulted(copy.deepcopy(INFERENCE_CLASS))["spec"]["provisioning"]["nebius"]
    assert (block["diskSizeGb"], block["driversPreset"]) == (256, "cuda12")


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({"platform": "cpu-d3"}, "must be a Nebius GPU platform when role is GPU"),
        ({"platform": "GPU H100"}, "spec.nodePools[].platform must be a Nebius platform name"),
        ({"preset": "8 GPUs"}, "spec.nodePools[].preset must be a Nebius preset"),
        ({"driversPreset": "rocm6"}, "spec.nodePools[].driversPreset must be a Nebius drivers"),
        ({"infinibandFabric": "Fabric 3"}, "spec.nodePools[].infinibandFabric must be a Nebius"),
        ({"name": "system"}, "spec.nodePools[].name must not be system"),
        ({"nodeCount": 9}, "spec.nodePools[].nodeCount must not exceed maxNodeCount"),
        ({"gpu": None}, "spec.nodePools[].gpu is required when role is GPU"),
    ],
)
def test_nebius_cluster_rejects_bad_pools_naming_the_field(change: dict, message: str):
    xr = copy.deepcopy(NEBIUS_CLUSTER)
    xr["spec"]["nodePools"][0].update(change)
    xr["spec"]["nodePools"][0] = {k: v for k, v in xr["spec"]["nodePools"][0].items() if v}
    assert message in problems(xr)


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({"projectId": "my-project"}, "spec.projectId must be a Nebius project ID"),
        ({"kubernetesVersion": "1.34.2"}, "spec.kubernetesVersion must be <major>.<minor>"),
        ({"cache": {"type": "LOCAL"}}, "spec.cache.type"),
    ],
)
def test_nebius_cluster_rejects_bad_cluster_fields(change: dict, message: str):
    xr = copy.deepcopy(NEBIUS_CLUSTER)
    xr["spec"].update(change)
    assert message in problems(xr)


def test_nebius_cluster_needs_the_credentials_secret_reference():
    xr = copy.deepcopy(NEBIUS_CLUSTER)
    xr["spec"].pop("credentialsSecretRef")
    assert "credentialsSecretRef" in problems(xr)


@pytest.mark.parametrize(
    ("mutate", "message"),
    [
        (lambda s: s["cluster"].pop("nebius"), "spec.cluster.nebius is required when"),
        (
            lambda s: s["cluster"].update(aks={"location": "eastus2"}),
            "spec.cluster.aks is only allowed",
        ),
        (
            lambda s: s["nodePools"][0].update(zones=["fabric-3", "fabric-4"]),
            "at most one InfiniBand fabric",
        ),
        (lambda s: s["nodePools"][0].update(zones=["Fabric 3"]), "at most one InfiniBand fabric"),
        (lambda s: s.pop("nodePools"), "spec.nodePools is required (at least one pool)"),
        (
            lambda s: s["cluster"]["nebius"].update(projectId="acme"),
            "spec.cluster.nebius.projectId",
        ),
        (
            lambda s: s["cluster"]["nebius"].update(kubernetesVersion="v1.34"),
            "spec.cluster.nebius.kubernetesVersion",
        ),
        (lambda s: s["cluster"]["nebius"].pop("credentialsSecretRef"), "credentialsSecretRef"),
    ],
)
def test_inference_cluster_rejects_bad_nebius_input_naming_the_field(mutate, message: str):
    xr = copy.deepcopy(INFERENCE_CLUSTER)
    mutate(xr["spec"])
    assert message in problems(xr)


def test_a_nebius_pool_without_zones_needs_no_fabric():
    xr = copy.deepcopy(INFERENCE_CLUSTER)
    xr["spec"]["nodePools"][0].pop("zones")
    assert problems(xr) == ""


def test_nebius_block_is_refused_on_another_source():
    xr = copy.deepcopy(INFERENCE_CLUSTER)
    xr["spec"]["cluster"]["source"] = "Existing"
    xr["spec"]["cluster"]["existing"] = {"secretRef": {"name": "kubeconfig"}}
    assert "spec.cluster.nebius is only allowed when spec.cluster.source is Nebius" in problems(xr)


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({"platform": "cpu-e2"}, "spec.provisioning.nebius.platform must be a Nebius GPU"),
        ({"preset": "128vcpu-1600gb"}, "spec.provisioning.nebius.preset must be a Nebius GPU"),
        ({"driversPreset": "latest"}, "spec.provisioning.nebius.driversPreset"),
    ],
)
def test_inference_class_rejects_bad_nebius_provisioning(change: dict, message: str):
    klass = copy.deepcopy(INFERENCE_CLASS)
    klass["spec"]["provisioning"]["nebius"].update(change)
    assert message in problems(klass)


def test_inference_class_for_nebius_needs_its_nebius_block():
    klass = copy.deepcopy(INFERENCE_CLASS)
    klass["spec"]["provisioning"].pop("nebius")
    assert "spec.provisioning.nebius is required when spec.provisioning.provider is Nebius" in (
        problems(klass)
    )
