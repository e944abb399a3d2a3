"""compose-inference-cluster through real gRPC: GKE, EKS, Existing, missing classes, holds."""

from __future__ import annotations

import copy
import json

import pytest
from compose_inference_cluster.fn import InferenceClusterFunction
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

NS = "modelplane-system"


def klass(name: str, provisioning: dict | None, memory: str = "23034Mi") -> dict:
    spec: dict = {
        "devices": [
            {
                "name": "gpu",
                "driver": "gpu.nvidia.com",
                "deviceClassName": "gpu.nvidia.com",
                "attributes": {"architecture": {"string": "Ada Lovelace"}},
                "capacity": {"memory": {"value": memory}},
            }
        ]
    }
    if provisioning:
        spec["provisioning"] = provisioning
    return defaulted(
        {"apiVersion": "modelplane.ai/v1alpha1", "kind": "InferenceClass",
         "metadata": {"name": name}, "spec": spec}
    )  # fmt: skip


L4 = klass(
    "gke-l4-1x-g2",
    {"provider": "GKE", "gke": {"machineType": "g2-standard-8",
                                "accelerator": {"type": "nvidia-l4", "count": 1}}},
)  # fmt: skip
H100 = klass(
    "gke-h100-8x-a3",
    {"provider": "GKE", "gke": {"machineType": "a3-highgpu-8g", "diskSizeGb": 500,
                                "accelerator": {"type": "nvidia-h100-80gb", "count": 8}}},
    memory="81559Mi",
)  # fmt: skip
EKS_L4 = klass(
    "eks-l4-1x-g6",
    {"provider": "EKS", "eks": {"instanceType": "g6.xlarge",
                                "accelerator": {"type": "nvidia-l4", "count": 1}}},
)  # fmt: skip
BYO = klass("h100-8x-byo", None, memory="81559Mi")
CLASSES = {c["metadata"]["name"]: c for c in (L4, H100, EKS_L4, BYO)}


def cluster(name: str, cluster_spec: dict, pools: list[dict] | None) -> dict:
    xr = {
        "apiVersion": "modelplane.ai/v1alpha1",
        "kind": "InferenceCluster",
        "metadata": {"name": name},
        "spec": {"cluster": cluster_spec},
    }
    if pools is not None:
        xr["spec"]["nodePools"] = pools
    xr = defaulted(xr)
    assert validate_object(xr) == []
    return xr


GKE = cluster(
    "gke-us-central",
    {"source": "GKE", "gke": {"project": "acme-inference", "region": "us-central1"}},
    [
        {"name": "l4", "className": "gke-l4-1x-g2", "nodeCount": 1, "maxNodeCount": 4,
         "zones": ["us-central1-a", "us-central1-c"]},
        {"name": "h100", "className": "gke-h100-8x-a3", "nodeCount": 2, "minNodeCount": 1,
         "zones": ["us-central1-b"]},
    ],
)  # fmt: skip
EKS = cluster(
    "eks-us-east",
    {"source": "EKS", "eks": {"region": "us-east-1"}},
    [{"name": "l4", "className": "eks-l4-1x-g6", "nodeCount": 3, "maxNodeCount": 6,
      "zones": ["us-east-1a", "us-east-1b"]}],
)  # fmt: skip
EXISTING = cluster(
    "lab-h100",
    {"source": "Existing", "existing": {"secretRef": {"name": "lab-h100-kubeconfig"},
                                        "identitySecretRef": {"name": "lab-h100-sa"}}},
    [{"name": "h100", "className": "h100-8x-byo", "nodeCount": 2}],
)  # fmt: skip


def required_for(
    xr: dict,
    replicas: list[dict] | None = None,
    drop: set[str] = frozenset(),
    objects: list[dict] | None = None,
):
    wanted = {p["className"] for p in xr["spec"].get("nodePools", [])}
    req = {f"class-{n}": ([] if n in drop else [CLASSES[n]]) for n in wanted}
    req["model-replicas"] = replicas or []
    req["replica-objects"] = objects or []
    req["cache-objects"] = []
    return req


def run(xr, observed=None, required=None):
    rsp = run_function(
        InferenceClusterFunction(),
        make_request(xr, observed, required if required is not None else required_for(xr)),
    )
    assert not [r for r in results(rsp) if r[0] == "SEVERITY_FATAL"], results(rsp)
    for key, body in desired_resources(rsp).items():
        assert validate_object(body, source=key) == [], key
    return rsp


def summary_of(rsp) -> dict:
    """The capacity summary the function composed, parsed."""
    return json.loads(desired_resources(rsp)["capacity-summary"]["data"]["summary.json"])


def assert_valid_status(xr: dict, status: dict) -> None:
    assert validate_object({**xr, "status": status}) == []


def provider_status(kind: str, xr_name: str, network: str | None = None) -> dict:
    secrets = [
        {"type": "Kubeconfig", "name": child_name(xr_name, "kubeconfig"), "key": "kubeconfig"}
    ]
    if kind == "GKECluster":
        secrets.append(
            {"type": "GCPServiceAccountKey", "name": child_name(xr_name, "sa-key"),
             "key": "private_key"}
        )  # fmt: skip
    extra: dict = {"secrets": secrets}
    if network:
        extra["network"] = {"name": network}
    return ready_status(**extra)


def converge_gke(xr: dict = GKE):
    """Drive the GKE cluster to the point where every gate is open and everything is Ready."""
    first = desired_resources(run(xr))
    observed = {
        "gke-cluster": observe(
            first["gke-cluster"], provider_status("GKECluster", xr["metadata"]["name"], "vpc-x1")
        )
    }
    second = desired_resources(run(xr, observed))
    for key, body in second.items():
        if key not in observed:
            status = (
                ready_status(gateway={"address": "34.1.2.3"})
                if key == "serving-stack"
                else (ready_status())
            )
            observed[key] = observe(body, status)
    return observed


# --- GKE ---------------------------------------------------------------------------------


def test_gke_first_pass_composes_the_cluster_with_both_pools_and_publishes_capacity():
    rsp = run(GKE)
    desired = desired_resources(rsp)
    # Nothing reaches the cluster before it exists; its capacity summary is the control
    # plane's own.
    assert set(desired) == {"gke-cluster", "capacity-summary", "cache-summary", "usage-replicas"}
    gke = desired["gke-cluster"]
    assert gke["metadata"] == {"name": "gke-us-central", "namespace": NS}
    assert gke["spec"]["project"] == "acme-inference"
    assert gke["spec"]["kubernetesVersion"] == "1.35"
    l4, h100 = gke["spec"]["nodePools"]
    assert l4 == {
        "name": "l4", "role": "GPU", "machineType": "g2-standard-8", "diskSizeGb": 100,
        "nodeCount": 1, "maxNodeCount": 4,
        "gpu": {"acceleratorType": "nvidia-l4", "acceleratorCount": 1},
        "zones": ["us-central1-a", "us-central1-c"],
    }  # fmt: skip
    assert h100["machineType"] == "a3-highgpu-8g"
    assert h100["diskSizeGb"] == 500
    assert h100["gpu"] == {"acceleratorType": "nvidia-h100-80gb", "acceleratorCount": 8}
    assert (h100["nodeCount"], h100["minNodeCount"]) == (2, 1)
    assert "maxNodeCount" not in h100  # unset values are not passed
    assert desired_ready(rsp)["gke-cluster"] is False

    status = desired_status(rsp)
    assert_valid_status(GKE, status)
    assert status["namespace"] == NS
    assert "providerConfigRef" not in status
    pools = {p["name"]: p for p in status["gpuPools"]}
    assert [p["name"] for p in status["gpuPools"]] == ["l4", "h100"]
    # D5: nodes is the current size, the autoscaling maximum is separate.
    assert (pools["l4"]["nodes"], pools["l4"]["maxNodes"]) == (1, 4)
    assert pools["h100"]["nodes"] == 2 and "maxNodes" not in pools["h100"]
    assert pools["h100"]["devices"] == [
        {"name": "gpu", "claim": "DRA", "driver": "gpu.nvidia.com",
         "deviceClassName": "gpu.nvidia.com", "count": 1,
         "attributes": {"architecture": {"string": "Ada Lovelace"}},
         "capacity": {"memory": {"value": "81559Mi"}}}
    ]  # fmt: skip
    conds = conditions(rsp)
    assert conds["ClusterReady"][:2] == ("False", "Provisioning")
    assert conds["BackendReady"][:2] == ("False", "WaitingForCluster")


def test_gke_ready_cluster_opens_provider_config_stack_storage_class_and_usage():
    observed = {
        "gke-cluster": observe(
            desired_resources(run(GKE))["gke-cluster"],
            provider_status("GKECluster", "gke-us-central", "gke-us-central-vpc-7fk2p"),
        )
    }
    rsp = run(GKE, observed)
    desired = desired_resources(rsp)
    assert set(desired) == {
        "gke-cluster", "usage-replicas", "cluster-provider-config-kubernetes", "storage-class-rwx",
        "serving-stack", "usage-gke-by-backend", "capacity-summary", "cache-summary",
    }  # fmt: skip
    cpc = desired["cluster-provider-config-kubernetes"]
    assert cpc["kind"] == "ClusterProviderConfig"
    assert cpc["metadata"]["name"] == child_name("gke-us-central", "cluster-kubeconfig")
    assert cpc["spec"]["credentials"] == {
        "source": "Secret",
        "secretRef": {"namespace": NS, "name": child_name("gke-us-central", "kubeconfig"),
                      "key": "kubeconfig"},
    }  # fmt: skip
    assert cpc["spec"]["identity"]["type"] == "GoogleApplicationCredentials"
    assert cpc["spec"]["identity"]["secretRef"]["name"] == child_name("gke-us-central", "sa-key")

    stack = desired["serving-stack"]
    assert stack["metadata"]["name"] == child_name("gke-us-central", "serving-stack")
    assert stack["metadata"]["namespace"] == NS
    assert stack["spec"]["nvidiaDriverRoot"] == "/home/kubernetes/bin/nvidia"
    # GKECluster's GPU pools leave the driver to the cluster: the stack installs it.
    assert stack["spec"]["nvidiaDriverInstaller"] == "GKE"
    assert [s["type"] for s in stack["spec"]["secrets"]] == ["Kubeconfig", "GCPServiceAccountKey"]

    sc = desired["storage-class-rwx"]
    manifest = sc["spec"]["forProvider"]["manifest"]
    assert manifest == {
        "apiVersion": "storage.k8s.io/v1", "kind": "StorageClass",
        "metadata": {"name": "modelplane-rwx"},
        "provisioner": "filestore.csi.storage.gke.io",
        "parameters": {"tier": "enterprise", "network": "gke-us-central-vpc-7fk2p"},
        "volumeBindingMode": "Immediate",
        "allowVolumeExpansion": True,
    }  # fmt: skip
    assert sc["metadata"]["namespace"] == NS
    assert validate_object(manifest) == []  # a valid core StorageClass
    assert sc["spec"]["providerConfigRef"] == {
        "kind": "ClusterProviderConfig", "name": cpc["metadata"]["name"]
    }  # fmt: skip
    assert sc["spec"]["managementPolicies"] == ["Observe", "Create", "Update"]
    assert sc["spec"]["readiness"] == {"policy": "SuccessfulCreate"}

    usage = desired["usage-gke-by-backend"]
    assert (usage["kind"], usage["metadata"]["namespace"]) == ("Usage", NS)
    mine = {"matchControllerRef": True}
    assert usage["spec"] == {
        "of": {"apiVersion": "infrastructure.modelplane.ai/v1alpha1", "kind": "GKECluster",
               "resourceSelector": mine},
        "by": {"apiVersion": "infrastructure.modelplane.ai/v1alpha1", "kind": "ServingStack",
               "resourceSelector": mine},
        "replayDeletion": True,
    }  # fmt: skip

    ready = desired_ready(rsp)
    assert ready["gke-cluster"] is True and ready["serving-stack"] is False
    status = desired_status(rsp)
    assert status["providerConfigRef"] == {"name": cpc["metadata"]["name"]}
    assert "gateway" not in status
    assert conditions(rsp)["BackendReady"][:2] == ("False", "Installing")
    assert (
        "SEVERITY_NORMAL",
        "GKECluster gke-us-central is ready: composing the serving stack",
    ) in (results(rsp))


def test_gke_storage_class_waits_for_the_network_name():
    observed = {
        "gke-cluster": observe(
            desired_resources(run(GKE))["gke-cluster"],
            provider_status("GKECluster", "gke-us-central", network=None),
        )
    }
    desired = desired_resources(run(GKE, observed))
    assert "storage-class-rwx" not in desired
    assert "serving-stack" in desired


def test_gke_custom_storage_class_name_composes_none():
    xr = copy.deepcopy(GKE)
    xr["spec"]["cluster"]["gke"]["cache"] = {"storageClassName": "my-rwx"}
    observed = {
        "gke-cluster": observe(
            desired_resources(run(xr))["gke-cluster"],
            provider_status("GKECluster", "gke-us-central", "vpc-1"),
        )
    }
    assert "storage-class-rwx" not in desired_resources(run(xr, observed))


def test_gke_converged_publishes_gateway_address_and_every_resource_ready():
    observed = converge_gke()
    rsp = run(GKE, observed)
    assert all(desired_ready(rsp).values()), desired_ready(rsp)
    status = desired_status(rsp)
    assert status["gateway"] == {"address": "34.1.2.3"}
    assert_valid_status(GKE, status)
    conds = conditions(rsp)
    assert conds["ClusterReady"][:2] == ("True", "ClusterRunning")
    assert conds["BackendReady"][:2] == ("True", "BackendHealthy")


def test_gke_cluster_going_unready_keeps_provider_config_stack_and_storage_class():
    observed = converge_gke()
    observed["gke-cluster"] = {**observed["gke-cluster"], "status": {"conditions": [
        {"type": "Ready", "status": "False", "reason": "Creating"}]}}  # fmt: skip
    rsp = run(GKE, observed)
    desired = desired_resources(rsp)
    assert set(desired) == set(observed)
    assert desired["serving-stack"]["spec"] == observed["serving-stack"]["spec"]
    assert desired["storage-class-rwx"]["spec"] == observed["storage-class-rwx"]["spec"]
    assert desired_status(rsp)["providerConfigRef"]["name"]
    assert conditions(rsp)["ClusterReady"][:2] == ("False", "Provisioning")


# --- missing, unresolved and unprovisionable classes --------------------------------------


def _pools_resolved(rsp) -> tuple[str, str, str]:
    return conditions(rsp)["PoolsResolved"]


def test_missing_class_on_a_new_cluster_composes_the_other_pools_and_names_the_bad_one():
    rsp = run(GKE, {}, required_for(GKE, drop={"gke-h100-8x-a3"}))
    pools = desired_resources(rsp)["gke-cluster"]["spec"]["nodePools"]
    assert [p["name"] for p in pools] == ["l4"]
    status, reason, message = _pools_resolved(rsp)
    assert (status, reason) == ("False", "InvalidNodePool")
    assert message.startswith(
        "pool h100 (class gke-h100-8x-a3): InferenceClass gke-h100-8x-a3 not found"
    )
    assert ("SEVERITY_WARNING", message) in results(rsp)
    published = desired_status(rsp)
    assert [p["name"] for p in published["gpuPools"]] == ["l4"]
    assert published["unavailablePools"] == [
        {
            "name": "h100",
            "className": "gke-h100-8x-a3",
            "reason": "InferenceClass gke-h100-8x-a3 not found",
        }
    ]


def test_missing_class_on_a_running_cluster_holds_back_only_its_pool():
    observed = converge_gke()
    previous = desired_status(run(GKE, observed))
    xr = {**GKE, "status": previous}
    rsp = run(xr, observed, required_for(GKE, drop={"gke-l4-1x-g2"}))
    desired = desired_resources(rsp)
    assert set(desired) == set(observed)
    for key, body in desired.items():
        if key not in ("capacity-summary", "cache-summary"):
            assert body["spec"] == observed[key]["spec"], key  # the l4 pool runs on as it is
    # The cluster stays Ready for its other pools: nothing on them is withdrawn or moved.
    assert conditions(rsp)["ClusterReady"][:2] == ("True", "ClusterRunning")
    assert [p["name"] for p in desired_status(rsp)["gpuPools"]] == ["h100"]
    # The scheduler's summary publishes the same pools the cluster does.
    assert [p["name"] for p in summary_of(rsp)["status"]["gpuPools"]] == ["h100"]
    assert "pool l4 (class gke-l4-1x-g2)" in _pools_resolved(rsp)[2]


def test_renamed_class_keeps_the_existing_pool():
    observed = converge_gke()
    xr = copy.deepcopy(GKE)
    xr["spec"]["nodePools"][0]["className"] = "gke-l4-renamed"
    rsp = run(xr, observed, {**required_for(GKE), "class-gke-l4-renamed": []})
    pools = desired_resources(rsp)["gke-cluster"]["spec"]["nodePools"]
    assert [p["name"] for p in pools] == ["l4", "h100"]
    assert pools[0]["machineType"] == "g2-standard-8"
    assert "pool l4 (class gke-l4-renamed)" in _pools_resolved(rsp)[2]


def test_unresolved_classes_hold_quietly():
    observed = converge_gke()
    rsp = run(GKE, observed, {})
    assert set(desired_resources(rsp)) == set(observed)
    assert results(rsp) == []
    assert conditions(rsp)["ClusterReady"][1] == "WaitingForClasses"


def test_class_without_gke_provisioning_is_an_invalid_node_pool():
    xr = copy.deepcopy(GKE)
    xr["spec"]["nodePools"][1]["className"] = "eks-l4-1x-g6"
    rsp = run(xr)
    pools = desired_resources(rsp)["gke-cluster"]["spec"]["nodePools"]
    assert [p["name"] for p in pools] == ["l4"]
    status, reason, message = _pools_resolved(rsp)
    assert (status, reason) == ("False", "InvalidNodePool")
    assert message.startswith(
        "pool h100 (class eks-l4-1x-g6): InferenceClass eks-l4-1x-g6 has no GKE provisioning block"
    )
    assert ("SEVERITY_WARNING", message) in results(rsp)


def test_class_without_provisioning_on_a_running_cluster_holds_back_only_its_pool():
    observed = converge_gke()
    previous = desired_status(run(GKE, observed))
    xr = copy.deepcopy({**GKE, "status": previous})
    xr["spec"]["nodePools"][1]["className"] = "h100-8x-byo"  # no provisioning block at all
    rsp = run(xr, observed, {**required_for(GKE), "class-h100-8x-byo": [BYO]})
    desired = desired_resources(rsp)
    assert set(desired) == set(observed)
    for key, body in desired.items():
        if key not in ("capacity-summary", "cache-summary"):
            assert body["spec"] == observed[key]["spec"], key
    assert [p["name"] for p in desired["gke-cluster"]["spec"]["nodePools"]] == ["l4", "h100"]
    assert [p["name"] for p in summary_of(rsp)["status"]["gpuPools"]] == ["l4"]
    assert conditions(rsp)["ClusterReady"][0] == "True"
    assert "InferenceClass h100-8x-byo has no GKE provisioning block" in _pools_resolved(rsp)[2]


def test_requirements_ask_for_each_class_once_and_for_replicas():
    rsp = run(GKE)
    reqs = rsp.requirements.resources
    assert sorted(reqs) == [
        "cache-objects",
        "class-gke-h100-8x-a3",
        "class-gke-l4-1x-g2",
        "model-replicas",
        "replica-objects",
    ]
    # The caches' Objects on this cluster, in every namespace: their tenants need one here.
    assert dict(reqs["cache-objects"].match_labels.labels) == {
        "modelplane.ai/cache-cluster": "gke-us-central"
    }
    assert reqs["cache-objects"].namespace == ""
    assert reqs["class-gke-l4-1x-g2"].match_name == "gke-l4-1x-g2"
    for key, kind in (("model-replicas", "ModelReplica"), ("replica-objects", "Object")):
        assert reqs[key].kind == kind
        assert dict(reqs[key].match_labels.labels) == {"modelplane.ai/cluster": "gke-us-central"}
        assert reqs[key].namespace == ""  # every namespace


# --- EKS ---------------------------------------------------------------------------------


def test_eks_cluster_composes_eks_xr_then_stack_without_identity_or_storage_class():
    rsp = run(EKS)
    desired = desired_resources(rsp)
    assert set(desired) == {"eks-cluster", "capacity-summary", "cache-summary", "usage-replicas"}
    eks = desired["eks-cluster"]
    assert eks["spec"]["region"] == "us-east-1"
    assert eks["spec"]["kubernetesVersion"] == "1.36"
    assert eks["spec"]["nodePools"] == [
        {"name": "l4", "role": "GPU", "instanceType": "g6.xlarge", "diskSizeGb": 100,
         "nodeCount": 3, "maxNodeCount": 6, "gpu": {"acceleratorType": "nvidia-l4"},
         "zones": ["us-east-1a", "us-east-1b"]}
    ]  # fmt: skip
    pools = desired_status(rsp)["gpuPools"]
    assert (pools[0]["nodes"], pools[0]["maxNodes"]) == (3, 6)

    observed = {"eks-cluster": observe(eks, provider_status("EKSCluster", "eks-us-east"))}
    rsp = run(EKS, observed)
    desired = desired_resources(rsp)
    assert set(desired) == {
        "eks-cluster", "cluster-provider-config-kubernetes", "serving-stack",
        "usage-eks-by-backend", "capacity-summary", "cache-summary", "usage-replicas",
    }  # fmt: skip
    assert "identity" not in desired["cluster-provider-config-kubernetes"]["spec"]
    assert "nvidiaDriverRoot" not in desired["serving-stack"]["spec"]  # default "/"
    assert "nvidiaDriverInstaller" not in desired["serving-stack"]["spec"]  # the AMI's driver
    assert desired["usage-eks-by-backend"]["spec"] == {
        "of": {"apiVersion": "infrastructure.modelplane.ai/v1alpha1", "kind": "EKSCluster",
               "resourceSelector": {"matchControllerRef": True}},
        "by": {"apiVersion": "infrastructure.modelplane.ai/v1alpha1", "kind": "ServingStack",
               "resourceSelector": {"matchControllerRef": True}},
        "replayDeletion": True,
    }  # fmt: skip


def test_eks_cluster_converges_with_gateway_address_and_every_resource_ready():
    eks = desired_resources(run(EKS))["eks-cluster"]
    observed = {"eks-cluster": observe(eks, provider_status("EKSCluster", "eks-us-east"))}
    for key, body in desired_resources(run(EKS, observed)).items():
        if key not in observed:
            extra = {"gateway": {"address": "3.4.5.6"}} if key == "serving-stack" else {}
            observed[key] = observe(body, ready_status(**extra))
    rsp = run(EKS, observed)
    assert set(desired_resources(rsp)) == set(observed)
    assert all(desired_ready(rsp).values()), desired_ready(rsp)
    assert desired_status(rsp)["gateway"] == {"address": "3.4.5.6"}
    conds = conditions(rsp)
    assert conds["ClusterReady"][:2] == ("True", "ClusterRunning")
    assert conds["BackendReady"][:2] == ("True", "BackendHealthy")


def test_eks_rejects_gke_only_class():
    xr = copy.deepcopy(EKS)
    xr["spec"]["nodePools"][0]["className"] = "gke-l4-1x-g2"
    rsp = run(xr)
    assert _pools_resolved(rsp)[2].startswith(
        "pool l4 (class gke-l4-1x-g2): InferenceClass gke-l4-1x-g2 has no EKS provisioning block"
    )


# --- Existing ----------------------------------------------------------------------------


def test_existing_cluster_composes_provider_config_and_stack_at_once():
    rsp = run(EXISTING)
    desired = desired_resources(rsp)
    assert set(desired) == {
        "cluster-provider-config-kubernetes", "serving-stack", "capacity-summary", "cache-summary",
        "usage-replicas",
    }  # fmt: skip
    cpc = desired["cluster-provider-config-kubernetes"]["spec"]
    assert cpc["credentials"]["secretRef"] == {
        "namespace": NS, "name": "lab-h100-kubeconfig", "key": "kubeconfig"
    }  # fmt: skip
    assert cpc["identity"]["secretRef"] == {"namespace": NS, "name": "lab-h100-sa",
                                            "key": "private_key"}  # fmt: skip
    assert desired["serving-stack"]["spec"]["secrets"] == [
        {"type": "Kubeconfig", "name": "lab-h100-kubeconfig", "key": "kubeconfig"},
        {"type": "GCPServiceAccountKey", "name": "lab-h100-sa", "key": "private_key"},
    ]
    assert "nvidiaDriverRoot" not in desired["serving-stack"]["spec"]  # the driver under "/"
    assert "nvidiaDriverInstaller" not in desired["serving-stack"]["spec"]  # the operator's
    assert conditions(rsp)["ClusterReady"][:2] == ("True", "ClusterRunning")
    status = desired_status(rsp)
    assert status["providerConfigRef"]["name"] == child_name("lab-h100", "cluster-kubeconfig")
    assert status["gpuPools"][0]["name"] == "h100" and status["gpuPools"][0]["nodes"] == 2


def test_existing_cluster_converges_once_its_stack_is_ready():
    desired = desired_resources(run(EXISTING))
    observed = {
        "cluster-provider-config-kubernetes": observe(
            desired["cluster-provider-config-kubernetes"], ready_status()
        ),
        "serving-stack": observe(
            desired["serving-stack"], ready_status(gateway={"address": "10.89.0.7"})
        ),
    }
    rsp = run(EXISTING, observed)
    assert all(desired_ready(rsp).values()), desired_ready(rsp)
    assert desired_status(rsp)["gateway"] == {"address": "10.89.0.7"}
    assert conditions(rsp)["BackendReady"][:2] == ("True", "BackendHealthy")


def test_existing_cluster_without_pools_publishes_no_pools():
    xr = cluster("bare", {"source": "Existing", "existing": {"secretRef": {"name": "k"}}}, None)
    rsp = run(xr, {}, {"model-replicas": [], "replica-objects": [], "cache-objects": []})
    assert desired_status(rsp)["gpuPools"] == []
    assert set(desired_resources(rsp)) == {
        "cluster-provider-config-kubernetes", "serving-stack", "capacity-summary", "cache-summary",
        "usage-replicas",
    }  # fmt: skip


# --- replica guard -----------------------------------------------------------------------


REPLICA = {
    "apiVersion": "modelplane.ai/v1alpha1",
    "kind": "ModelReplica",
    "metadata": {"name": "r", "namespace": "ml", "labels": {"modelplane.ai/cluster": "lab-h100"}},
}


DELETION_ATTEMPTED = {"usage.crossplane.io/deletion-attempt-with-policy": "Background"}


def deletion_attempted(xr: dict) -> dict:
    """The cluster after Crossplane's Usage webhook refused a delete of it."""
    refused = copy.deepcopy(xr)
    refused["metadata"]["annotations"] = dict(DELETION_ATTEMPTED)
    return refused


def test_replicas_on_the_cluster_block_its_deletion():
    rsp = run(EXISTING, {}, required_for(EXISTING, replicas=[REPLICA]))
    usage = desired_resources(rsp)["usage-replicas"]
    assert usage["kind"] == "ClusterUsage"
    assert usage["spec"] == {
        "of": {"apiVersion": "modelplane.ai/v1alpha1", "kind": "InferenceCluster",
               "resourceRef": {"name": "lab-h100"}},
        "reason": "ModelReplicas are scheduled to this InferenceCluster",
        "replayDeletion": True,
    }  # fmt: skip
    # Even a deletion attempt does not release it while the replica is there; the cluster
    # takes no new replica meanwhile (a NoSchedule taint in its summary), and keeps this one.
    attempted = run(deletion_attempted(EXISTING), {"usage-replicas": observe(usage)},
                    required_for(EXISTING, replicas=[REPLICA]))  # fmt: skip
    assert desired_resources(attempted)["usage-replicas"]["spec"] == usage["spec"]
    assert summary_of(attempted)["spec"]["taints"] == [
        {"key": "modelplane.ai/deletion-requested", "effect": "NoSchedule"}
    ]
    assert "taints" not in summary_of(rsp).get("spec", {})


def test_an_empty_cluster_is_guarded_until_a_deletion_finds_it_empty():
    """A replica is placed before this function next reads the replicas (a requirement is not
    watched), so the guard stands from the cluster's creation: a delete in that window would
    strand the new replica's Objects. The webhook refuses the first delete and marks the
    cluster; the next call, finding nothing on it, lets go, and Crossplane replays the
    deletion."""
    fresh = desired_resources(run(EXISTING, {}))["usage-replicas"]
    assert "checked that none is left" in fresh["spec"]["reason"]
    assert fresh["spec"]["replayDeletion"] is True
    observed = {"usage-replicas": observe(fresh)}
    assert "usage-replicas" in desired_resources(run(EXISTING, observed))
    released = run(deletion_attempted(EXISTING), observed)
    assert "usage-replicas" not in desired_resources(released)
    # Unanswered is not "empty": the guard stays as it stands.
    kept = run_function(InferenceClusterFunction(),
                        make_request(deletion_attempted(EXISTING), observed, {}))  # fmt: skip
    assert desired_resources(kept)["usage-replicas"]["spec"] == fresh["spec"]


def guarded_observation() -> dict:
    """Observed state of a cluster that composed its deletion guard for a replica."""
    guarded = run(EXISTING, {}, required_for(EXISTING, replicas=[REPLICA]))
    return {"usage-replicas": observe(desired_resources(guarded)["usage-replicas"])}


def test_a_deleted_replicas_objects_still_block_the_clusters_deletion():
    """Deleting a replica deletes its Objects in the background; until they are gone they need
    the cluster's ProviderConfig and the CRDs its stack installed (an InferencePool's Object
    whose CRD went first is stuck for ever), so the cluster stays protected."""
    leftover = {"apiVersion": "kubernetes.m.crossplane.io/v1alpha1", "kind": "Object",
                "metadata": {"name": "o", "namespace": "ml",
                             "labels": {"modelplane.ai/cluster": "lab-h100"}}}  # fmt: skip
    observed = guarded_observation()
    deleting = deletion_attempted(EXISTING)
    kept = run(deleting, observed, required_for(EXISTING, objects=[leftover]))
    reason = desired_resources(kept)["usage-replicas"]["spec"]["reason"]
    assert (
        reason
        == "Objects of deleted ModelReplicas are still being deleted on this InferenceCluster"
    )
    released = run(deleting, observed, required_for(EXISTING))
    assert "usage-replicas" not in desired_resources(released)


def test_a_held_cluster_releases_its_guard_once_nothing_uses_it():
    """Deleting everything at once deletes the InferenceClass too: the cluster then holds its
    resources (classes missing), but must still let go of the guard, or Usage protection
    keeps it (and its serving stack) for ever."""
    observed = guarded_observation()
    deleting = deletion_attempted(EXISTING)
    held = run(deleting, observed, required_for(EXISTING, drop={"h100-8x-byo"}))
    assert _pools_resolved(held)[1] == "InvalidNodePool"
    assert "usage-replicas" not in desired_resources(held)
    still_used = run(deleting, observed,
                     required_for(EXISTING, replicas=[REPLICA], drop={"h100-8x-byo"}))  # fmt: skip
    assert "usage-replicas" in desired_resources(still_used)


def settled(xr: dict, required: dict) -> dict:
    """Observed state once every resource the cluster composes exists and is Ready."""
    observed: dict = {}
    for _ in range(4):
        desired = desired_resources(run(xr, observed, required))
        observed = {
            key: observe(body, ready_status(gateway={"address": "10.89.0.7"})
                         if key == "serving-stack" else ready_status())
            for key, body in desired.items()
        }  # fmt: skip
    return observed


@pytest.mark.parametrize("on_it", [[REPLICA], []], ids=["busy", "idle"])
def test_a_cluster_whose_deletion_waits_looks_again_within_seconds(on_it: list) -> None:
    """What a refused deletion waits for (its replicas and their Objects leaving) comes by
    requirement, which Crossplane does not watch: the cluster asks to be called again in 5 s,
    not at its settled minute, so it goes within seconds of its last replica rather than a
    poll interval after. Without a deletion a settled cluster keeps the minute."""
    required = required_for(EXISTING, replicas=on_it)
    steady = run(EXISTING, settled(EXISTING, required), required)
    assert steady.meta.ttl.ToTimedelta().total_seconds() == 60
    deleting = deletion_attempted(EXISTING)
    waiting = run(deleting, settled(deleting, required), required)
    assert waiting.meta.ttl.ToTimedelta().total_seconds() == 5


def test_a_cluster_with_a_leaving_replica_looks_again_within_seconds() -> None:
    """A replica being deleted (a scale-down's, a drain's) still holds its devices in the
    summary, and its going comes by requirement, unwatched: while one is leaving the cluster
    asks to be called again in 5 s, so a deployment waiting for those devices places within
    seconds of the replica's going, not at the cluster's settled minute (the real plane's
    race waited 64 s for it). Once it is gone the cluster keeps the minute."""
    metadata = {**REPLICA["metadata"], "deletionTimestamp": "2026-11-29T03:00:00Z"}
    leaving = required_for(EXISTING, replicas=[{**REPLICA, "metadata": metadata}])
    waiting = run(EXISTING, settled(EXISTING, leaving), leaving)
    assert waiting.meta.ttl.ToTimedelta().total_seconds() == 5
    held = summary_of(waiting)["replicas"]
    assert [entry[3] for entries in held.values() for entry in entries] == ["2026-11-29T03:00:00Z"]
    gone = required_for(EXISTING, replicas=[])
    after = run(EXISTING, settled(EXISTING, gone), gone)
    assert after.meta.ttl.ToTimedelta().total_seconds() == 60
    assert summary_of(after)["replicas"] == {}


# --- XRD rules ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("mutate", "field"),
    [
        (lambda s: s["cluster"].pop("gke"), "spec.cluster.gke is required"),
        (lambda s: s["cluster"].update(eks={"region": "us-east-1"}), "spec.cluster.eks is only"),
        (lambda s: s["nodePools"][0].pop("zones"), "spec.nodePools[].zones is required"),
        (lambda s: s.pop("nodePools"), "spec.nodePools is required (at least one pool)"),
        (lambda s: s["nodePools"][0].update(name="system"), "must not be 'system'"),
        (lambda s: s["nodePools"][0].update(name="L4_pool"), "spec.nodePools[0].name"),
        (lambda s: s["nodePools"][0].update(nodeCount=5), "nodeCount must be <= maxNodeCount"),
        (lambda s: s["nodePools"][1].update(minNodeCount=3), "minNodeCount must be <= nodeCount"),
        (lambda s: s["nodePools"][1].update(nodeCount=9), "maxNodeCount must be set"),
        (lambda s: s["nodePools"][0].update(zones=["eu-west4-a"]), "of spec.cluster.gke.region"),
        (lambda s: s["nodePools"].append(dict(s["nodePools"][0])), "spec.nodePools[2]"),
    ],
)  # fmt: skip
def test_xrd_rejects_bad_input_naming_the_field(mutate, field):
    xr = copy.deepcopy(GKE)
    mutate(xr["spec"])
    problems = " | ".join(str(p) for p in validate_object(defaulted(xr)))
    assert field in problems, problems


def test_status_fields_crossplane_adds_do_not_stop_the_function():
    xr = {**GKE, "status": {"claimConditionTypes": ["X"], "crossplane": {"x": 1}}}
    assert set(desired_resources(run(xr))) == {
        "gke-cluster",
        "capacity-summary",
        "cache-summary",
        "usage-replicas",
    }


def test_a_spec_the_schema_would_reject_holds_every_resource_and_names_the_field():
    observed = converge_gke()
    previous = desired_status(run(GKE, observed))
    broken = copy.deepcopy({**GKE, "status": previous})
    broken["spec"]["nodePools"][0]["nodeCount"] = -1
    rsp = run(broken, observed)
    desired = desired_resources(rsp)
    assert set(desired) == set(observed)
    for key, body in desired.items():
        if key not in ("capacity-summary", "cache-summary"):
            assert body["spec"] == observed[key]["spec"], key
    # The capacity summary is the same but for Ready: a held cluster takes nothing new.
    held = json.loads(desired["capacity-summary"]["data"]["summary.json"])
    before = json.loads(observed["capacity-summary"]["data"]["summary.json"])
    assert held["status"].pop("conditions") == [{"type": "Ready", "status": "False"}]
    # Its pools and the rest are what the cluster published last (the status it keeps).
    assert held["status"].get("gateway") == previous.get("gateway")
    assert held["status"]["gpuPools"] == before["status"]["gpuPools"]
    assert {k: v for k, v in held.items() if k != "status"} == {
        k: v for k, v in before.items() if k != "status"
    }
    assert desired_status(rsp) == previous
    status, reason, message = conditions(rsp)["ClusterReady"]
    assert (status, reason) == ("False", "InvalidSpec")
    assert "spec.nodePools[0].nodeCount" in message


def test_class_with_a_version_attribute_that_is_not_semver_is_reported_naming_it():
    # Stored before the XRD checked semver: its pools could never match a selector, so the
    # cluster says so instead of publishing them.
    bad = copy.deepcopy(L4)
    bad["spec"]["devices"][0]["attributes"]["cudaComputeCapability"] = {"version": "8.9"}
    rsp = run(GKE, None, {**required_for(GKE), "class-gke-l4-1x-g2": [bad]})
    status, reason, message = _pools_resolved(rsp)
    assert (status, reason) == ("False", "InvalidNodePool")
    assert message.startswith(
        "pool l4 (class gke-l4-1x-g2): InferenceClass gke-l4-1x-g2 is invalid: "
        "spec.devices[0].attributes[cudaComputeCapability].version: '8.9' is not a semantic "
        "version (MAJOR.MINOR.PATCH, e.g. 8.9.0)"
    )
    assert ("SEVERITY_WARNING", message) in results(rsp)


# --- issue 21: one namespace per tenant on the workload cluster (D10) ---------------------


def _user(kind: str, namespace: str, name: str = "x") -> dict:
    return {
        "apiVersion": "modelplane.ai/v1alpha1"
        if kind == "ModelReplica"
        else "kubernetes.m.crossplane.io/v1alpha1",
        "kind": kind,
        "metadata": {"name": name, "namespace": namespace},
    }


def _tenant_namespaces(rsp) -> dict[str, dict]:
    return {
        key: body["spec"]["forProvider"]["manifest"]
        for key, body in desired_resources(rsp).items()
        if key.startswith("tenant-namespace-")
    }


def test_every_tenant_on_the_cluster_gets_one_namespace_there_leaving_ones_once_it_is_empty():
    users = [_user("ModelReplica", "team-a", "r1"), _user("ModelReplica", "team-a", "r2")]
    objects = [_user("Object", "team-b"), _user("Object", "default"), _user("Object", "team-a")]
    required = required_for(EXISTING, users)
    del required["replica-objects"]  # not asked for while replicas are on the cluster
    required["cache-objects"] = [_user("Object", "team-c"), _user("Object", "team-a")]
    rsp = run(EXISTING, required=required)
    assert "replica-objects" not in rsp.requirements.resources
    found = _tenant_namespaces(rsp)
    # Exactly one Object per namespace however many users; default always exists.
    assert {k: m["metadata"]["name"] for k, m in found.items()} == {
        "tenant-namespace-team-a": "team-a",
        "tenant-namespace-team-c": "team-c",  # a cache stages here, no replica yet
    }
    # Once no replica is left, the Objects still being deleted are read: their tenants too.
    required["model-replicas"] = []
    first = run(EXISTING, required=required)
    assert "replica-objects" in first.requirements.resources
    required["replica-objects"] = objects
    leaving = _tenant_namespaces(run(EXISTING, required=required))
    assert {m["metadata"]["name"] for m in leaving.values()} == {"team-a", "team-b", "team-c"}
    # Cache Objects do not guard the cluster against deletion; replicas' Objects do.
    required["model-replicas"], required["replica-objects"] = [], []
    deleting = deletion_attempted(EXISTING)
    assert "usage-replicas" not in desired_resources(run(deleting, required=required))
    body = desired_resources(rsp)["tenant-namespace-team-a"]
    # Never deleted by Modelplane (it may hold the tenant's own Secrets), and not labelled as
    # a replica's Object: it must not keep the cluster from being deleted.
    assert "Delete" not in body["spec"]["managementPolicies"]
    assert "modelplane.ai/cluster" not in body["metadata"].get("labels", {})
    assert body["spec"]["providerConfigRef"]["kind"] == "ClusterProviderConfig"


@pytest.mark.parametrize("namespace", ["kube-system", "modelplane-system", "monitoring"])
def test_no_namespace_is_composed_for_a_reserved_name(namespace):
    rsp = run(EXISTING, required=required_for(EXISTING, [_user("ModelReplica", namespace)]))
    assert _tenant_namespaces(rsp) == {}


def test_tenant_namespaces_are_kept_while_the_users_are_not_resolved():
    users = [_user("ModelReplica", "team-a")]
    first = desired_resources(run(EXISTING, required=required_for(EXISTING, users)))
    observed = {k: observe(v, ready_status()) for k, v in first.items()}
    required = required_for(EXISTING)
    del required["model-replicas"]
    later = desired_resources(run(EXISTING, observed, required))
    assert "tenant-namespace-team-a" in later
    # Resolved and empty: the tenant left, its namespace Object goes (the namespace stays).
    gone = desired_resources(run(EXISTING, observed, required_for(EXISTING)))
    assert "tenant-namespace-team-a" not in gone
