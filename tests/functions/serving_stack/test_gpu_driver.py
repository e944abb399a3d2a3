"""The NVIDIA driver and the DRA driver's kubelet plugin on the GPU nodes GKECluster and
EKSCluster compose, through real gRPC (design/cloud-clusters.md, "GPU driver and DRA")."""

from __future__ import annotations

from compose_eks_cluster.fn import EKSClusterFunction
from compose_gke_cluster.fn import GKEClusterFunction
from compose_serving_stack.fn import ServingStackFunction
from crossplane.function.proto.v1.run_function_pb2_grpc import FunctionRunnerServiceServicer
from modelplane.validation import defaulted, validate_object
from modelplane_common.naming import child_name
from modelplane_common.serving import run_function
from modelplane_common.testing import desired_resources, make_request, observe

NS = "modelplane-system"
GKE_DRIVER_ROOT = "/home/kubernetes/bin/nvidia"
SECRETS = [{"type": "Kubeconfig", "name": "kubeconfig", "key": "kubeconfig"}]
# GKE taints GPU nodes itself (GKE's "Run GPUs in GKE Standard node pools").
GKE_GPU_TAINT = {"key": "nvidia.com/gpu", "value": "present", "effect": "NoSchedule"}
# The DRA driver chart's kubelet-plugin node affinity accepts this label alone (its values.yaml).
GPU_PRESENT = ("nvidia.com/gpu.present", "true")


def stack(**spec: object) -> dict:
    xr = defaulted(
        {
            "apiVersion": "infrastructure.modelplane.ai/v1alpha1",
            "kind": "ServingStack",
            "metadata": {"name": child_name("c", "serving-stack"), "namespace": NS},
            "spec": {"secrets": SECRETS, **spec},
        }
    )
    assert validate_object(xr) == []
    return xr


def remote(xr: dict) -> dict[str, dict]:
    """What the stack composes once its ProviderConfigs are observed."""
    first = desired_resources(run_function(ServingStackFunction(), make_request(xr)))
    observed = {key: observe(body) for key, body in first.items()}
    rsp = run_function(ServingStackFunction(), make_request(xr, observed))
    return desired_resources(rsp)


def manifest(body: dict) -> dict:
    return body["spec"]["forProvider"]["manifest"]


def cloud(function: FunctionRunnerServiceServicer, xr: dict) -> dict[str, dict]:
    xr = defaulted(xr)
    assert validate_object(xr) == []
    return desired_resources(run_function(function, make_request(xr)))


def tolerates(tolerations: list[dict], taint: dict) -> bool:
    """Kubernetes' toleration matching, for the operators the charts use."""
    for t in tolerations:
        if t.get("effect") not in (None, "", taint["effect"]):
            continue
        if t.get("operator") == "Exists" and t.get("key") in (None, "", taint["key"]):
            return True
        if t.get("key") == taint["key"] and t.get("value") == taint.get("value"):
            return True
    return False


def test_a_gke_stack_installs_the_driver_where_the_dra_driver_looks_for_it():
    desired = remote(stack(nvidiaDriverRoot=GKE_DRIVER_ROOT, nvidiaDriverInstaller="GKE"))
    installer = desired["nvidia-driver-installer"]
    assert installer["metadata"]["labels"] == {"modelplane.ai/resource": "nvidia-driver-installer"}
    daemonset = manifest(installer)
    assert validate_object(daemonset) == []
    assert (daemonset["kind"], daemonset["metadata"]["namespace"]) == ("DaemonSet", "kube-system")
    pod = daemonset["spec"]["template"]["spec"]
    (init,) = pod["initContainers"]
    # The installer preloaded on COS nodes, never pulled.
    assert (init["image"], init["imagePullPolicy"]) == ("cos-nvidia-installer:fixed", "Never")
    assert init["securityContext"] == {"privileged": True}
    env = {e["name"]: e["value"] for e in init["env"]}
    dra_values = desired["dra-driver"]["spec"]["forProvider"]["values"]
    # The driver lands exactly where the DRA driver's kubelet plugin is told to find it.
    assert env["NVIDIA_INSTALL_DIR_HOST"] == dra_values["nvidiaDriverRoot"] == GKE_DRIVER_ROOT
    host_paths = {v["name"]: v["hostPath"]["path"] for v in pod["volumes"]}
    mounts = {m["name"]: m["mountPath"] for m in init["volumeMounts"]}
    assert host_paths["nvidia-install-dir-host"] == GKE_DRIVER_ROOT
    assert mounts["nvidia-install-dir-host"] == env["NVIDIA_INSTALL_DIR_CONTAINER"]
    # Every GPU node except those whose driver GKE installed, taint or no taint.
    (term,) = pod["affinity"]["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"][
        "nodeSelectorTerms"
    ]
    assert term["matchExpressions"] == [
        {"key": "cloud.google.com/gke-accelerator", "operator": "Exists"},
        {"key": "cloud.google.com/gke-gpu-driver-version", "operator": "DoesNotExist"},
    ]
    assert tolerates(pod["tolerations"], GKE_GPU_TAINT)
    assert pod["priorityClassName"] == "system-node-critical"
    assert pod["hostPID"] is True
    assert [c["name"] for c in pod["containers"]] == ["idle"]


def test_stacks_whose_nodes_bring_their_driver_install_none():
    for xr in (stack(), stack(nvidiaDriverInstaller="None")):
        desired = remote(xr)
        assert "dra-driver" in desired
        assert "nvidia-driver-installer" not in desired


def test_the_xrd_refuses_an_unknown_installer():
    xr = stack()
    xr["spec"]["nvidiaDriverInstaller"] = "GPUOperator"
    problems = " ".join(str(p) for p in validate_object(xr))
    assert "spec.nvidiaDriverInstaller" in problems


def test_the_dra_kubelet_plugin_reaches_the_gpu_nodes_each_cloud_composes():
    gke = cloud(
        GKEClusterFunction(),
        {
            "apiVersion": "infrastructure.modelplane.ai/v1alpha1",
            "kind": "GKECluster",
            "metadata": {"name": "g", "namespace": NS},
            "spec": {
                "project": "acme-inference",
                "region": "us-central1",
                "nodePools": [
                    {"name": "l4", "role": "GPU", "machineType": "g2-standard-8",
                     "gpu": {"acceleratorType": "nvidia-l4", "acceleratorCount": 1},
                     "zones": ["us-central1-a"]},
                ],
            },
        },
    )  # fmt: skip
    eks = cloud(
        EKSClusterFunction(),
        {
            "apiVersion": "infrastructure.modelplane.ai/v1alpha1",
            "kind": "EKSCluster",
            "metadata": {"name": "e", "namespace": NS},
            "spec": {
                "region": "us-east-1",
                "nodePools": [
                    {"name": "l4", "role": "GPU", "instanceType": "g6.xlarge",
                     "gpu": {"acceleratorType": "nvidia-l4"}, "zones": ["us-east-1a"]},
                ],
            },
        },
    )  # fmt: skip
    eks_taints = [
        {**t, "effect": {"NO_SCHEDULE": "NoSchedule"}[t["effect"]]}
        for t in eks["nodegroup-l4"]["spec"]["forProvider"]["taint"]
    ]
    for xr in (stack(nvidiaDriverRoot=GKE_DRIVER_ROOT, nvidiaDriverInstaller="GKE"), stack()):
        plugin = remote(xr)["dra-driver"]["spec"]["forProvider"]["values"]["kubeletPlugin"]
        for taint in [GKE_GPU_TAINT, *eks_taints]:
            assert tolerates(plugin["tolerations"], taint), taint
    # GKE pools carry the label the chart's affinity accepts before NFD has run; EKS's
    # AL2023 NVIDIA AMI applies it at boot (AWS's DRA guide), so the node group need not.
    gke_labels = gke["nodepool-l4"]["spec"]["forProvider"]["nodeConfig"]["labels"]
    assert gke_labels[GPU_PRESENT[0]] == GPU_PRESENT[1]
    eks_group = eks["nodegroup-l4"]["spec"]["forProvider"]
    assert eks_group["amiType"] == "AL2023_x86_64_NVIDIA"
