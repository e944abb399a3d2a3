"""compose-nebius-cluster through real gRPC: network, subnet, the mk8s cluster, the system and
GPU node groups, a GPU cluster per InfiniBand fabric, the cache filesystem, the ProviderConfigs
reading the published kubeconfig with the platform team's Nebius credentials as identity
(KubeconfigIncomplete until those exist), readiness, and hold-on-invalid."""

from __future__ import annotations

import copy

import pytest
from compose_nebius_cluster.fn import NebiusClusterFunction
from compose_nebius_cluster.nebius_compose import CREDENTIALS_REQUIREMENT
from crossplane.function.proto.v1 import run_function_pb2 as fnv1
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
NAME = "nebius-eu-north"
PUBLISHED = child_name(NAME, "kubeconfig")
ADMIN = "nebius-credentials"
PROJECT = "project-e00abc123"
SECRET = {
    "apiVersion": "v1",
    "kind": "Secret",
    "metadata": {"name": ADMIN, "namespace": NS},
    "data": {"credentials.json": "e30="},
}
PROVIDER_CONFIGS = {"provider-config-kubernetes", "provider-config-helm"}
CLOUD = {
    "network", "subnet", "cluster", "nodegroup-system", "nodegroup-h100", "nodegroup-l40s",
    "gpucluster-fabric-3", "filesystem",
}  # fmt: skip


def nebius_xr() -> dict:
    xr = defaulted(
        {
            "apiVersion": "infrastructure.modelplane.ai/v1alpha1",
            "kind": "NebiusCluster",
            "metadata": {"name": NAME, "namespace": NS},
            "spec": {
                "projectId": PROJECT,
                "credentialsSecretRef": {"name": ADMIN},
                "cache": {"sizeGibibytes": 2048},
                "nodePools": [
                    {
                        "name": "h100",
                        "role": "GPU",
                        "platform": "gpu-h100-sxm",
                        "preset": "8gpu-128vcpu-1600gb",
                        "infinibandFabric": "fabric-3",
                        "nodeCount": 2,
                        "maxNodeCount": 4,
                        "gpu": {"acceleratorType": "nvidia-h100-80gb"},
                    },
                    {
                        "name": "l40s",
                        "role": "GPU",
                        "platform": "gpu-l40s-a",
                        "preset": "1gpu-8vcpu-32gb",
                        "driversPreset": "cuda12.8",
                        "gpu": {"acceleratorType": "nvidia-l40s"},
                    },
                ],
            },
        }
    )
    assert validate_object(xr) == []
    return xr


def run(xr: dict, observed: dict[str, dict] | None = None, secret: list[dict] | None = None):
    required = {} if secret is None else {CREDENTIALS_REQUIREMENT: secret}
    rsp = run_function(NebiusClusterFunction(), make_request(xr, observed, required))
    assert not [r for r in results(rsp) if r[0] == "SEVERITY_FATAL"], results(rsp)
    return rsp


def observe_all(desired: dict[str, dict]) -> dict[str, dict]:
    """Every composed resource as its provider reports it once Ready."""
    observed = {}
    for key, body in desired.items():
        status = ready_status()
        if key == "cluster":
            status["atProvider"] = {"id": "mk8scluster-e00abc", "status": {"state": "RUNNING"}}
        observed[key] = observe(body, status, name=f"{NAME}-{key}")
    return observed


def test_requires_the_credentials_secret_by_name_in_the_xr_namespace():
    rsp = run(nebius_xr())
    selector = rsp.requirements.resources[CREDENTIALS_REQUIREMENT]
    assert (selector.api_version, selector.kind, selector.match_name, selector.namespace) == (
        "v1",
        "Secret",
        ADMIN,
        NS,
    )


def test_composes_network_cluster_node_groups_gpu_cluster_and_filesystem_all_valid():
    desired = desired_resources(run(nebius_xr(), secret=[SECRET]))
    assert set(desired) == CLOUD | PROVIDER_CONFIGS
    for body in desired.values():
        validate_against_model(body)
    for key in ("network", "subnet", "cluster", "gpucluster-fabric-3", "filesystem"):
        assert desired[key]["spec"]["forProvider"]["parentId"] == PROJECT, key
    assert desired["subnet"]["spec"]["forProvider"]["networkIdSelector"] == {
        "matchControllerRef": True
    }
    fs = desired["filesystem"]["spec"]["forProvider"]
    assert (fs["type"], fs["sizeGibibytes"]) == ("NETWORK_SSD", 2048)


def test_cluster_has_a_public_endpoint_in_the_subnet_and_publishes_its_kubeconfig():
    cluster = desired_resources(run(nebius_xr()))["cluster"]
    assert cluster["spec"]["writeConnectionSecretToRef"] == {"name": PUBLISHED}
    plane = cluster["spec"]["forProvider"]["controlPlane"]
    assert plane["version"] == "1.34"
    assert plane["endpoints"] == {"publicEndpoint": {}}
    assert plane["subnetIdSelector"] == {"matchControllerRef": True}


def test_gpu_node_groups_take_platform_preset_drivers_taint_labels_fabric_and_cache():
    desired = desired_resources(run(nebius_xr()))
    h100 = desired["nodegroup-h100"]["spec"]["forProvider"]
    assert h100["parentIdSelector"] == {"matchControllerRef": True}
    assert h100["autoscaling"] == {"minNodeCount": 0, "maxNodeCount": 4}
    template = h100["template"]
    assert template["resources"] == {"platform": "gpu-h100-sxm", "preset": "8gpu-128vcpu-1600gb"}
    assert template["gpuSettings"] == {"driversPreset": "cuda12"}
    assert template["taints"] == [
        {"key": "nvidia.com/gpu", "value": "true", "effect": "NO_SCHEDULE"}
    ]
    assert template["metadata"]["labels"] == {
        "modelplane.ai/pool": "h100",
        "modelplane.ai/gpu": "nvidia-h100-80gb",
        "nvidia.com/gpu.present": "true",
    }
    # The node group joins the GPU cluster of its fabric, selected among the XR's by label.
    assert template["gpuCluster"]["idSelector"] == {
        "matchControllerRef": True,
        "matchLabels": {"modelplane.ai/infiniband-fabric": "fabric-3"},
    }
    gpu_cluster = desired["gpucluster-fabric-3"]
    assert gpu_cluster["metadata"]["labels"] == {"modelplane.ai/infiniband-fabric": "fabric-3"}
    assert gpu_cluster["spec"]["forProvider"]["infinibandFabric"] == "fabric-3"
    assert template["filesystems"] == [
        {
            "attachMode": "READ_WRITE",
            "mountTag": "modelplane-cache",
            "existingFilesystem": {"idSelector": {"matchControllerRef": True}},
        }
    ]
    l40s = desired["nodegroup-l40s"]["spec"]["forProvider"]["template"]
    assert "gpuCluster" not in l40s  # no fabric named: no InfiniBand
    assert l40s["gpuSettings"] == {"driversPreset": "cuda12.8"}


def test_system_node_group_is_injected_untainted_on_a_cpu_platform():
    template = desired_resources(run(nebius_xr()))["nodegroup-system"]["spec"]["forProvider"]
    assert template["autoscaling"] == {"minNodeCount": 1, "maxNodeCount": 3}
    assert template["template"]["resources"]["platform"].startswith("cpu-")
    assert "taints" not in template["template"]
    assert template["template"]["metadata"]["labels"] == {"modelplane.ai/pool": "system"}


def test_fabrics_get_one_gpu_cluster_each_shared_by_their_pools():
    xr = nebius_xr()
    pools = xr["spec"]["nodePools"]
    pools.append(copy.deepcopy(pools[0]) | {"name": "h100-b"})
    pools.append(copy.deepcopy(pools[0]) | {"name": "h200", "infinibandFabric": "fabric-6"})
    desired = desired_resources(run(xr))
    assert {k for k in desired if k.startswith("gpucluster-")} == {
        "gpucluster-fabric-3",
        "gpucluster-fabric-6",
    }


def test_without_a_cache_block_no_filesystem_is_composed_or_attached():
    xr = nebius_xr()
    del xr["spec"]["cache"]
    desired = desired_resources(run(xr))
    assert "filesystem" not in desired
    assert "filesystems" not in desired["nodegroup-h100"]["spec"]["forProvider"]["template"]


def test_without_the_credentials_secret_kubeconfig_is_incomplete_and_names_the_step():
    rsp = run(nebius_xr(), secret=[])
    desired = desired_resources(rsp)
    assert set(desired) == CLOUD  # the cluster is built; only the ProviderConfigs wait
    status, reason, message = conditions(rsp)["KubeconfigReady"]
    assert (status, reason) == ("False", "KubeconfigIncomplete")
    assert f"Secret {ADMIN} not found" in message
    assert PUBLISHED in message and NS in message and "credentials.json" in message
    # Not ready: nothing can reach the cluster yet.
    assert rsp.desired.composite.ready == fnv1.READY_FALSE
    assert desired_status(rsp)["secrets"] == []


def test_a_secret_without_the_key_is_incomplete_too():
    secret = copy.deepcopy(SECRET) | {"data": {"token": "eA=="}}
    _, reason, message = conditions(run(nebius_xr(), secret=[secret]))["KubeconfigReady"]
    assert reason == "KubeconfigIncomplete"
    assert f"Secret {ADMIN} has no key credentials.json" in message


def test_once_the_credentials_exist_the_provider_configs_add_them_to_the_published_kubeconfig():
    rsp = run(nebius_xr(), secret=[SECRET])
    desired = desired_resources(rsp)
    for key in PROVIDER_CONFIGS:
        assert desired[key]["spec"] == {
            "credentials": {
                "source": "Secret",
                "secretRef": {"name": PUBLISHED, "namespace": NS, "key": "kubeconfig"},
            },
            "identity": {
                "type": "NebiusServiceAccountCredentials",
                "source": "Secret",
                "secretRef": {"name": ADMIN, "namespace": NS, "key": "credentials.json"},
            },
        }
    assert conditions(rsp)["KubeconfigReady"][:2] == ("True", "KubeconfigProvided")
    status = desired_status(rsp)
    assert status["secrets"] == [
        {"type": "Kubeconfig", "name": PUBLISHED, "key": "kubeconfig"},
        {"type": "NebiusServiceAccountCredentials", "name": ADMIN, "key": "credentials.json"},
    ]
    assert validate_object({**nebius_xr(), "status": status}) == []


def test_provider_configs_are_held_when_the_secret_goes_away_or_is_not_resolved_yet():
    observed = observe_all(desired_resources(run(nebius_xr(), secret=[SECRET])))
    for secret in ([], None):
        rsp = run(nebius_xr(), observed, secret=secret)
        desired = desired_resources(rsp)
        assert set(desired) == set(observed)
        assert desired_status(rsp)["secrets"][1]["name"] == ADMIN


def test_readiness_waits_for_the_cluster_then_names_what_is_pending():
    rsp = run(nebius_xr(), secret=[SECRET])
    assert conditions(rsp)["ClusterReady"][:2] == ("False", "Provisioning")
    observed = observe_all(desired_resources(rsp))
    rsp = run(nebius_xr(), observed, secret=[SECRET])
    assert all(desired_ready(rsp).values())
    assert conditions(rsp)["ClusterReady"][:2] == ("True", "ClusterRunning")
    assert desired_status(rsp)["clusterId"] == "mk8scluster-e00abc"
    observed["nodegroup-h100"]["status"] = {}
    rsp = run(nebius_xr(), observed, secret=[SECRET])
    status, _, message = conditions(rsp)["ClusterReady"]
    assert status == "True" and "nodegroup-h100" in message
    assert desired_ready(rsp)["nodegroup-h100"] is False


def test_missing_provider_status_loses_nothing():
    """A cloud resource whose status vanished (a restore, a provider restart) stays composed."""
    observed = observe_all(desired_resources(run(nebius_xr(), secret=[SECRET])))
    for body in observed.values():
        body.pop("status")
    rsp = run(nebius_xr(), observed, secret=[SECRET])
    assert set(desired_resources(rsp)) == set(observed)
    assert "clusterId" not in desired_status(rsp)


def test_removing_a_pool_from_a_valid_spec_deletes_only_that_pool():
    xr = nebius_xr()
    xr["spec"]["nodePools"].append(copy.deepcopy(xr["spec"]["nodePools"][1]) | {"name": "spare"})
    observed = observe_all(desired_resources(run(xr, secret=[SECRET])))
    desired = desired_resources(run(nebius_xr(), observed, secret=[SECRET]))
    assert set(observed) - set(desired) == {"nodegroup-spare"}


@pytest.mark.parametrize(
    ("change", "field"),
    [
        ({"platform": "cpu-d3"}, "spec.nodePools[0].platform"),
        ({"platform": "GPU H100"}, "spec.nodePools[0].platform"),
        ({"preset": "eight-gpus"}, "spec.nodePools[0].preset"),
        ({"driversPreset": "rocm6"}, "spec.nodePools[0].driversPreset"),
        ({"infinibandFabric": "Fabric 3"}, "spec.nodePools[0].infinibandFabric"),
        ({"minNodeCount": 3}, "spec.nodePools[0].minNodeCount"),
        ({"name": "system"}, "spec.nodePools[0].name"),
    ],
)
def test_invalid_input_holds_every_observed_resource_and_names_the_field(change, field):
    observed = observe_all(desired_resources(run(nebius_xr(), secret=[SECRET])))
    previous = desired_status(run(nebius_xr(), observed, secret=[SECRET]))
    broken = copy.deepcopy({**nebius_xr(), "status": previous})
    broken["spec"]["nodePools"][0].update(change)
    rsp = run(broken, observed, secret=[SECRET])
    desired = desired_resources(rsp)
    assert set(desired) == set(observed)
    for key, body in desired.items():
        assert body["spec"] == observed[key]["spec"], key
    assert desired_status(rsp) == previous
    status, reason, message = conditions(rsp)["ClusterReady"]
    assert (status, reason) == ("False", "InvalidSpec")
    assert field in message, message


def test_a_bad_project_id_is_held_naming_the_field():
    xr = nebius_xr()
    xr["spec"]["projectId"] = "my-project"
    rsp = run(xr)
    assert desired_resources(rsp) == {}
    assert "spec.projectId" in conditions(rsp)["ClusterReady"][2]


def test_held_provider_configs_keep_their_credentials_published_after_a_rename():
    observed = observe_all(desired_resources(run(nebius_xr(), secret=[SECRET])))
    xr = nebius_xr()
    xr["spec"]["credentialsSecretRef"]["name"] = "not-created-yet"
    rsp = run(xr, observed, secret=[])
    desired = desired_resources(rsp)
    for key in PROVIDER_CONFIGS:
        assert desired[key]["spec"] == observed[key]["spec"], key
    assert desired_status(rsp)["secrets"][1]["name"] == ADMIN
    assert conditions(rsp)["KubeconfigReady"][1] == "KubeconfigIncomplete"
