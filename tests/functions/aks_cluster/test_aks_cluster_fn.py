"""compose-aks-cluster through real gRPC: resource group, network, the cluster with its system
pool and kubeconfig, a node pool per GPU pool, readiness, and hold-on-invalid."""

from __future__ import annotations

import copy

import pytest
from compose_aks_cluster.fn import AKSClusterFunction
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
    validate_against_model,
)

NS = "modelplane-system"
NAME = "aks-east-us"
KUBECONFIG = child_name(NAME, "kubeconfig")
EXTERNAL_NAME = "crossplane.io/external-name"


def aks_xr() -> dict:
    xr = defaulted(
        {
            "apiVersion": "infrastructure.modelplane.ai/v1alpha1",
            "kind": "AKSCluster",
            "metadata": {"name": NAME, "namespace": NS},
            "spec": {
                "location": "eastus2",
                "nodePools": [
                    {
                        "name": "a100-pool",
                        "role": "GPU",
                        "vmSize": "Standard_NC24ads_A100_v4",
                        "diskSizeGb": 256,
                        "nodeCount": 2,
                        "maxNodeCount": 4,
                        "gpu": {"acceleratorType": "nvidia-a100-80gb"},
                        "zones": ["1", "3"],
                    }
                ],
            },
        }
    )
    assert validate_object(xr) == []
    return xr


def run(xr: dict, observed: dict[str, dict] | None = None):
    rsp = run_function(AKSClusterFunction(), make_request(xr, observed))
    assert not [r for r in results(rsp) if r[0] == "SEVERITY_FATAL"], results(rsp)
    return rsp


def observe_all(desired: dict[str, dict]) -> dict[str, dict]:
    """Every composed resource as its provider reports it once Ready."""
    observed = {}
    for key, body in desired.items():
        status = ready_status()
        if key == "cluster":
            status["atProvider"] = {"fqdn": "aks-east-us-1a2b3.hcp.eastus2.azmk8s.io"}
        observed[key] = observe(body, status, name=f"{NAME}-{key}")
    return observed


def test_first_pass_composes_network_cluster_pools_and_provider_configs_all_valid():
    rsp = run(aks_xr())
    desired = desired_resources(rsp)
    assert set(desired) == {
        "resource-group", "virtual-network", "subnet", "cluster", "nodepool-a100-pool",
        "provider-config-kubernetes", "provider-config-helm",
    }  # fmt: skip
    for body in desired.values():
        validate_against_model(body)
    assert desired["resource-group"]["spec"]["forProvider"] == {"location": "eastus2"}
    assert desired["virtual-network"]["spec"]["forProvider"]["addressSpace"] == ["10.0.0.0/16"]
    assert desired["subnet"]["spec"]["forProvider"]["addressPrefixes"] == ["10.0.0.0/20"]


def test_cluster_has_a_small_system_pool_overlay_networking_and_publishes_its_kubeconfig():
    cluster = desired_resources(run(aks_xr()))["cluster"]
    spec = cluster["spec"]
    assert spec["writeConnectionSecretToRef"] == {"name": KUBECONFIG}
    fp = spec["forProvider"]
    assert (fp["location"], fp["kubernetesVersion"]) == ("eastus2", "1.35")
    # The kubeconfig's client certificate belongs to the local account.
    assert fp["localAccountDisabled"] is False
    assert fp["identity"] == {"type": "SystemAssigned"}
    assert fp["networkProfile"]["networkPluginMode"] == "overlay"
    assert fp["networkProfile"]["dnsServiceIp"] == "10.2.0.10"
    system = fp["defaultNodePool"]
    assert system["name"] == "system"
    assert (system["minCount"], system["maxCount"]) == (1, 3)
    assert system["nodeLabels"] == {"modelplane.ai/pool": "system"}
    assert system["vnetSubnetIdSelector"] == {"matchControllerRef": True}


def test_gpu_pool_installs_the_driver_taints_labels_and_autoscales():
    pool = desired_resources(run(aks_xr()))["nodepool-a100-pool"]
    fp = pool["spec"]["forProvider"]
    assert fp["vmSize"] == "Standard_NC24ads_A100_v4"
    # The DRA driver needs the host driver (AKS installs it) and no device plugin (AKS has none).
    assert fp["gpuDriver"] == "Install"
    assert fp["nodeTaints"] == ["nvidia.com/gpu=true:NoSchedule"]
    assert fp["nodeLabels"] == {
        "modelplane.ai/pool": "a100-pool",
        "modelplane.ai/gpu": "nvidia-a100-80gb",
        "nvidia.com/gpu.present": "true",
    }
    assert (fp["autoScalingEnabled"], fp["nodeCount"], fp["minCount"], fp["maxCount"]) == (
        True,
        2,
        0,
        4,
    )
    assert (fp["zones"], fp["osDiskSizeGb"], fp["mode"]) == (["1", "3"], 256, "User")
    assert fp["kubernetesClusterIdSelector"] == {"matchControllerRef": True}
    # AKS pool names: at most 12 lowercase letters and digits, a letter first.
    agent_name = pool["metadata"]["annotations"][EXTERNAL_NAME]
    assert agent_name.isalnum() and agent_name[0].isalpha() and len(agent_name) <= 12


def test_provider_configs_read_the_kubeconfig_without_an_identity():
    desired = desired_resources(run(aks_xr()))
    for key in ("provider-config-kubernetes", "provider-config-helm"):
        spec = desired[key]["spec"]
        assert spec == {
            "credentials": {
                "source": "Secret",
                "secretRef": {"name": KUBECONFIG, "namespace": NS, "key": "kubeconfig"},
            }
        }


def test_status_publishes_the_kubeconfig_secret_then_the_endpoint_once_observed():
    rsp = run(aks_xr())
    assert desired_status(rsp) == {
        "secrets": [{"type": "Kubeconfig", "name": KUBECONFIG, "key": "kubeconfig"}]
    }
    observed = observe_all(desired_resources(rsp))
    status = desired_status(run(aks_xr(), observed))
    assert status["endpoint"] == "aks-east-us-1a2b3.hcp.eastus2.azmk8s.io"
    assert validate_object({**aks_xr(), "status": status}) == []


def test_readiness_waits_for_the_cluster_then_names_what_is_pending():
    rsp = run(aks_xr())
    assert conditions(rsp)["ClusterReady"][:2] == ("False", "Provisioning")
    observed = observe_all(desired_resources(rsp))
    rsp = run(aks_xr(), observed)
    assert all(desired_ready(rsp).values())
    assert conditions(rsp)["ClusterReady"][:2] == ("True", "ClusterRunning")
    observed["nodepool-a100-pool"]["status"] = {}
    rsp = run(aks_xr(), observed)
    status, reason, message = conditions(rsp)["ClusterReady"]
    assert (status, reason) == ("True", "ClusterRunning")
    assert "nodepool-a100-pool" in message
    assert desired_ready(rsp)["nodepool-a100-pool"] is False


def test_missing_provider_status_loses_nothing():
    """A cloud resource whose status vanished (a restore, a provider restart) stays composed."""
    desired = desired_resources(run(aks_xr()))
    observed = observe_all(desired)
    for body in observed.values():
        body.pop("status")
    again = desired_resources(run(aks_xr(), observed))
    assert set(again) == set(observed)
    assert "endpoint" not in desired_status(run(aks_xr(), observed))


def test_removing_a_pool_from_a_valid_spec_deletes_only_that_pool():
    xr = aks_xr()
    second = copy.deepcopy(xr["spec"]["nodePools"][0]) | {"name": "spare"}
    xr["spec"]["nodePools"].append(second)
    observed = observe_all(desired_resources(run(xr)))
    assert "nodepool-spare" in observed
    desired = desired_resources(run(aks_xr(), observed))
    assert set(observed) - set(desired) == {"nodepool-spare"}


@pytest.mark.parametrize(
    ("change", "field"),
    [
        ({"vmSize": "NC24ads-A100"}, "spec.nodePools[0].vmSize"),
        ({"vmSize": "Standard_D4s_v5"}, "spec.nodePools[0].vmSize"),
        ({"zones": ["4"]}, "spec.nodePools[0].zones"),
        ({"minNodeCount": 3}, "spec.nodePools[0].minNodeCount"),
    ],
)
def test_invalid_input_holds_every_observed_resource_and_names_the_field(change, field):
    observed = observe_all(desired_resources(run(aks_xr())))
    previous = desired_status(run(aks_xr(), observed))
    broken = copy.deepcopy({**aks_xr(), "status": previous})
    broken["spec"]["nodePools"][0].update(change)
    rsp = run(broken, observed)
    desired = desired_resources(rsp)
    assert set(desired) == set(observed)
    for key, body in desired.items():
        assert body["spec"] == observed[key]["spec"], key
    # The AKS pool name this function chose is kept, so the pool is never looked up anew.
    assert (
        desired["nodepool-a100-pool"]["metadata"]["annotations"][EXTERNAL_NAME]
        == (observed["nodepool-a100-pool"]["metadata"]["annotations"][EXTERNAL_NAME])
    )
    assert desired_status(rsp) == previous
    status, reason, message = conditions(rsp)["ClusterReady"]
    assert (status, reason) == ("False", "InvalidSpec")
    assert field in message, message


def test_a_subnet_outside_the_vnet_is_held_naming_the_field():
    xr = aks_xr()
    xr["spec"]["networking"]["subnetCidr"] = "192.168.0.0/24"
    rsp = run(xr)
    assert desired_resources(rsp) == {}
    assert "spec.networking.subnetCidr" in conditions(rsp)["ClusterReady"][2]
