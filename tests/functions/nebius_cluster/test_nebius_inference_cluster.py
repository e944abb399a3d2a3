"""InferenceCluster with ``source: Nebius``: compose-inference-cluster through real gRPC composes
a NebiusCluster from its pools' classes (each pool's one zone is its InfiniBand fabric), gates
the provider config and serving stack on it (the published kubeconfig with the platform team's
Nebius credentials as identity), says KubeconfigIncomplete while those are missing, and
publishes capacity; simulated end to end, the whole chain converges Ready once they exist."""

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

NAME = "nebius-eu-north"
NS = "modelplane-system"
ADMIN = "nebius-credentials"
PUBLISHED = child_name(NAME, "kubeconfig")
CLASS = defaulted(
    {
        "apiVersion": "modelplane.ai/v1alpha1",
        "kind": "InferenceClass",
        "metadata": {"name": "nebius-h100-8x"},
        "spec": {
            "description": "Nebius gpu-h100-sxm, eight NVIDIA H100 80GB on InfiniBand",
            "provisioning": {
                "provider": "Nebius",
                "nebius": {
                    "platform": "gpu-h100-sxm",
                    "preset": "8gpu-128vcpu-1600gb",
                    "accelerator": {"type": "nvidia-h100-80gb", "count": 8},
                },
            },
            "devices": [
                {
                    "name": "gpu",
                    "driver": "gpu.nvidia.com",
                    "deviceClassName": "gpu.nvidia.com",
                    "count": 8,
                    "attributes": {"architecture": {"string": "Hopper"}},
                    "capacity": {"memory": {"value": "81559Mi"}},
                }
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
            "cluster": {
                "source": "Nebius",
                "nebius": {
                    "projectId": "project-e00abc123",
                    "credentialsSecretRef": {"name": ADMIN},
                },
            },
            "nodePools": [
                {
                    "name": "h100",
                    "className": "nebius-h100-8x",
                    "nodeCount": 2,
                    "maxNodeCount": 4,
                    "zones": ["fabric-3"],
                }
            ],
        },
    }
)
SECRET = {
    "apiVersion": "v1",
    "kind": "Secret",
    "metadata": {"name": ADMIN, "namespace": NS},
    "stringData": {"credentials.json": "{}"},
}


def required(xr: dict, classes: tuple[dict, ...] = (CLASS,)) -> dict:
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


def nebius_ready() -> dict:
    return ready_status(
        secrets=[
            {"type": "Kubeconfig", "name": PUBLISHED, "key": "kubeconfig"},
            {"type": "NebiusServiceAccountCredentials", "name": ADMIN, "key": "credentials.json"},
        ]
    )


def kubeconfig_incomplete() -> dict:
    """A NebiusCluster whose cloud resources run but whose platform kubeconfig is missing."""
    return {
        "secrets": [],
        "conditions": [
            {"type": "Ready", "status": "False", "reason": "Creating"},
            {
                "type": "KubeconfigReady",
                "status": "False",
                "reason": "KubeconfigIncomplete",
                "message": f"Secret {ADMIN} not found. Nebius publishes ... (docs/platform.md)",
            },
        ],
    }


def test_the_xrd_accepts_the_nebius_cluster_and_its_class():
    assert validate_object(CLUSTER) == []
    assert validate_object(CLASS) == []


def test_first_pass_composes_a_nebius_cluster_from_the_class_with_fabric_and_cache():
    rsp = run(CLUSTER)
    desired = desired_resources(rsp)
    assert set(desired) == {"nebius-cluster", "capacity-summary", "cache-summary", "usage-replicas"}
    nebius = desired["nebius-cluster"]
    assert (nebius["kind"], nebius["metadata"]) == (
        "NebiusCluster",
        {"name": NAME, "namespace": NS},
    )
    assert nebius["spec"] == {
        "projectId": "project-e00abc123",
        "kubernetesVersion": "1.34",
        "credentialsSecretRef": {"name": ADMIN, "key": "credentials.json"},
        "cache": {"sizeGibibytes": 1024, "type": "NETWORK_SSD"},
        "nodePools": [
            {"name": "h100", "role": "GPU", "platform": "gpu-h100-sxm",
             "preset": "8gpu-128vcpu-1600gb", "diskSizeGb": 256, "driversPreset": "cuda12",
             "infinibandFabric": "fabric-3", "nodeCount": 2, "maxNodeCount": 4,
             "gpu": {"acceleratorType": "nvidia-h100-80gb"}}
        ],
    }  # fmt: skip
    (pool,) = desired_status(rsp)["gpuPools"]
    assert (pool["name"], pool["nodes"], pool["maxNodes"]) == ("h100", 2, 4)
    assert conditions(rsp)["ClusterReady"][:2] == ("False", "Provisioning")


def test_another_cache_class_composes_no_filesystem():
    xr = copy.deepcopy(CLUSTER)
    xr["spec"]["cluster"]["nebius"]["cache"] = {"storageClassName": "my-rwx"}
    nebius = desired_resources(run(xr))["nebius-cluster"]
    assert "cache" not in nebius["spec"]


def test_missing_platform_kubeconfig_is_reported_naming_the_step():
    nebius = desired_resources(run(CLUSTER))["nebius-cluster"]
    observed = {"nebius-cluster": observe(nebius, kubeconfig_incomplete())}
    rsp = run(CLUSTER, observed)
    assert set(desired_resources(rsp)) == {
        "nebius-cluster",
        "capacity-summary",
        "cache-summary",
        "usage-replicas",
    }  # no provider config, no stack
    status, reason, message = conditions(rsp)["ClusterReady"]
    assert (status, reason) == ("False", "KubeconfigIncomplete")
    assert message.startswith(f"NebiusCluster {NAME}: Secret {ADMIN} not found")
    assert "docs/platform.md" in message
    assert conditions(rsp)["BackendReady"][:2] == ("False", "WaitingForCluster")


def test_a_nebius_cluster_publishing_no_credentials_keeps_the_gate_closed():
    nebius = desired_resources(run(CLUSTER))["nebius-cluster"]
    status = nebius_ready()
    status["secrets"] = status["secrets"][:1]  # the published kubeconfig alone
    rsp = run(CLUSTER, {"nebius-cluster": observe(nebius, status)})
    assert set(desired_resources(rsp)) == {
        "nebius-cluster",
        "capacity-summary",
        "cache-summary",
        "usage-replicas",
    }


def test_ready_nebius_cluster_opens_provider_config_and_stack_with_the_images_driver():
    nebius = desired_resources(run(CLUSTER))["nebius-cluster"]
    observed = {"nebius-cluster": observe(nebius, nebius_ready())}
    desired = desired_resources(run(CLUSTER, observed))
    assert set(desired) == {
        "capacity-summary", "cache-summary",
        "nebius-cluster", "cluster-provider-config-kubernetes", "serving-stack",
        "usage-nebius-by-backend", "usage-replicas",
    }  # fmt: skip
    config = desired["cluster-provider-config-kubernetes"]["spec"]
    assert config["credentials"]["secretRef"]["name"] == PUBLISHED
    assert config["identity"] == {
        "type": "NebiusServiceAccountCredentials",
        "source": "Secret",
        "secretRef": {"namespace": NS, "name": ADMIN, "key": "credentials.json"},
    }
    stack = desired["serving-stack"]["spec"]
    assert [s["type"] for s in stack["secrets"]] == [
        "Kubeconfig",
        "NebiusServiceAccountCredentials",
    ]
    # The drivers preset puts the driver on the node image at /: the DRA driver's default.
    assert "nvidiaDriverRoot" not in stack and "nvidiaDriverInstaller" not in stack
    assert desired["usage-nebius-by-backend"]["spec"]["of"]["kind"] == "NebiusCluster"


def test_nebius_cluster_converges_ready_with_the_gateway_address():
    nebius = desired_resources(run(CLUSTER))["nebius-cluster"]
    observed = {"nebius-cluster": observe(nebius, nebius_ready())}
    for key, body in desired_resources(run(CLUSTER, observed)).items():
        if key not in observed:
            extra = {"gateway": {"address": "195.242.1.2"}} if key == "serving-stack" else {}
            observed[key] = observe(body, ready_status(**extra))
    rsp = run(CLUSTER, observed)
    assert set(desired_resources(rsp)) == set(observed)
    assert all(desired_ready(rsp).values()), desired_ready(rsp)
    assert desired_status(rsp)["gateway"] == {"address": "195.242.1.2"}
    assert conditions(rsp)["ClusterReady"][:2] == ("True", "ClusterRunning")


def test_a_nebius_cluster_whose_status_is_lost_keeps_provider_config_stack_and_usage():
    """After a restore the NebiusCluster's status (its secrets, its Ready) may be gone for a
    while: the provider config, serving stack and usage stay exactly as they were."""
    nebius = desired_resources(run(CLUSTER))["nebius-cluster"]
    observed = {"nebius-cluster": observe(nebius, nebius_ready())}
    for key, body in desired_resources(run(CLUSTER, observed)).items():
        if key not in observed:
            observed[key] = observe(body, ready_status())
    observed["nebius-cluster"].pop("status")
    rsp = run(CLUSTER, observed)
    desired = desired_resources(rsp)
    assert set(desired) == set(observed)
    for key in ("cluster-provider-config-kubernetes", "serving-stack", "usage-nebius-by-backend"):
        assert desired[key]["spec"] == observed[key]["spec"], key
    assert desired["nebius-cluster"]["spec"] == observed["nebius-cluster"]["spec"]
    assert conditions(rsp)["ClusterReady"][:2] == ("False", "Provisioning")
    assert desired_status(rsp)["providerConfigRef"]["name"] == child_name(
        NAME, "cluster-kubeconfig"
    )


def test_a_missing_class_on_a_running_cluster_keeps_its_pool_as_it_runs():
    nebius = desired_resources(run(CLUSTER))["nebius-cluster"]
    observed = {"nebius-cluster": observe(nebius, nebius_ready())}
    rsp = run_function(
        InferenceClusterFunction(),
        make_request(CLUSTER, observed, required(CLUSTER, classes=())),
    )
    kept = desired_resources(rsp)["nebius-cluster"]
    assert kept["spec"]["nodePools"] == nebius["spec"]["nodePools"]


def test_model_caches_on_a_nebius_cluster_use_the_mounted_filesystem_class():
    published = {**CLUSTER, "status": {"providerConfigRef": {"name": "pc"}}}
    assert staging.storage_class(published) == "csi-mounted-fs-path-sc"
    custom = copy.deepcopy(published)
    custom["spec"]["cluster"]["nebius"]["cache"] = {"storageClassName": "my-rwx"}
    assert staging.storage_class(custom) == "my-rwx"


def test_simulated_nebius_inference_cluster_waits_for_the_kubeconfig_then_converges(
    tmp_path: Path,
):
    (tmp_path / "cluster.yaml").write_text(yaml.safe_dump_all([CLASS, CLUSTER]))
    with session(tmp_path) as plane:
        assert plane.run(max_rounds=40).converged
        cluster = plane.find("InferenceCluster", NAME)
        ready = {c["type"]: c for c in cluster["status"]["conditions"]}
        assert ready["ClusterReady"]["reason"] == "KubeconfigIncomplete", ready
        nebius = plane.find("NebiusCluster", NAME, NS)
        assert condition_status(nebius, "Ready") == "False"
        assert condition_status(nebius, "KubeconfigReady") == "False"
        # The cloud side is built meanwhile.
        assert plane.list(kind="NodeGroup", namespace=NS)

        plane.apply(copy.deepcopy(SECRET))
        assert plane.run(max_rounds=40).converged
        cluster = plane.find("InferenceCluster", NAME)
        assert condition_status(cluster, "Ready") == "True", cluster["status"]
        assert [p["name"] for p in cluster["status"]["gpuPools"]] == ["h100"]
        nebius = plane.find("NebiusCluster", NAME, NS)
        assert condition_status(nebius, "KubeconfigReady") == "True"
        groups = {
            g["spec"]["forProvider"]["name"]: g["spec"]["forProvider"]
            for g in plane.list(kind="NodeGroup", namespace=NS)
        }
        assert set(groups) == {"system", "h100"}
        assert groups["h100"]["template"]["resources"]["preset"] == "8gpu-128vcpu-1600gb"
        (gpu_cluster,) = plane.list(kind="GpuCluster", namespace=NS)
        assert gpu_cluster["spec"]["forProvider"]["infinibandFabric"] == "fabric-3"


def test_a_class_whose_preset_disagrees_with_its_gpu_count_holds_back_its_pool():
    wrong = copy.deepcopy(CLASS)
    wrong["spec"]["provisioning"]["nebius"]["preset"] = "1gpu-16vcpu-200gb"
    rsp = run_function(
        InferenceClusterFunction(), make_request(CLUSTER, None, required(CLUSTER, (wrong,)))
    )
    assert "nebius-cluster" not in desired_resources(rsp)  # no pool left to build
    status, reason, message = conditions(rsp)["PoolsResolved"]
    assert (status, reason) == ("False", "InvalidNodePool")
    assert "provisioning.nebius.preset 1gpu-16vcpu-200gb does not have accelerator.count 8" in (
        message
    )
