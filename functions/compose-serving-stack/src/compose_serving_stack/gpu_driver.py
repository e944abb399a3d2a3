"""The NVIDIA driver on GPU nodes whose driver nobody else installs (design/cloud-clusters.md).

GKE's DRA guide creates GPU pools with automatic driver installation disabled and has the
driver installed on the cluster by GKE's driver-installer DaemonSet. On Container-Optimized
OS (the image every Modelplane GKE pool uses) the installer image is preloaded on the node
under a local name and writes the driver to ``/home/kubernetes/bin/nvidia``: the
``nvidiaDriverRoot`` the InferenceCluster gives the stack, so the DRA driver finds it there.

The manifest below follows the facts of GKE's ``nvidia-driver-installer/cos/
daemonset-preloaded.yaml`` (node selection, host paths, the installer's environment), without
its MIG-partitioning step: GKE's DRA guide rules multi-instance GPUs out.
"""

from __future__ import annotations

from modelplane_common.plain import JSON

KEY_DRIVER_INSTALLER = "nvidia-driver-installer"
INSTALLER_NAME = "nvidia-driver-installer"
INSTALLER_NAMESPACE = "kube-system"
# Preloaded on GKE COS GPU nodes under this local name, never pulled.
COS_INSTALLER_IMAGE = "cos-nvidia-installer:fixed"
# Keeps the pod (and so the DaemonSet's rollout) alive once the init container has installed.
IDLE_IMAGE = "busybox:1.37"
INSTALL_DIR = "/home/kubernetes/bin/nvidia"
VULKAN_ICD_DIR = f"{INSTALL_DIR}/vulkan/icd.d"
COS_TOOLS_DIR = "/var/lib/cos-tools"
# GKE puts this on every GPU node; nodes labelled with a driver version got GKE's own driver.
ACCELERATOR_LABEL = "cloud.google.com/gke-accelerator"
GKE_DRIVER_LABEL = "cloud.google.com/gke-gpu-driver-version"


def _host_path(name: str, path: str) -> JSON:
    return {"name": name, "hostPath": {"path": path}}


def cos_driver_installer() -> JSON:
    """GKE's COS driver installer as a DaemonSet, on GPU nodes without GKE's own driver."""
    labels = {"k8s-app": INSTALLER_NAME}
    env = {
        "NVIDIA_INSTALL_DIR_HOST": INSTALL_DIR,
        "NVIDIA_INSTALL_DIR_CONTAINER": "/usr/local/nvidia",
        "VULKAN_ICD_DIR_HOST": VULKAN_ICD_DIR,
        "VULKAN_ICD_DIR_CONTAINER": "/etc/vulkan/icd.d",
        "ROOT_MOUNT_DIR": "/root",
        "COS_TOOLS_DIR_HOST": COS_TOOLS_DIR,
        "COS_TOOLS_DIR_CONTAINER": "/build/cos-tools",
    }
    mounts = {
        "nvidia-install-dir-host": "/usr/local/nvidia",
        "vulkan-icd-mount": "/etc/vulkan/icd.d",
        "dev": "/dev",
        "root-mount": "/root",
        "cos-tools": "/build/cos-tools",
    }
    installer = {
        "name": INSTALLER_NAME,
        "image": COS_INSTALLER_IMAGE,
        "imagePullPolicy": "Never",
        "securityContext": {"privileged": True},
        "resources": {"requests": {"cpu": "150m"}},
        "env": [{"name": k, "value": v} for k, v in env.items()],
        "volumeMounts": [{"name": k, "mountPath": v} for k, v in mounts.items()],
    }
    idle = {
        "name": "idle",
        "image": IDLE_IMAGE,
        "command": ["sh", "-c", "while true; do sleep 3600; done"],
        "resources": {"requests": {"cpu": "1m", "memory": "8Mi"}},
    }
    return {
        "apiVersion": "apps/v1",
        "kind": "DaemonSet",
        "metadata": {"name": INSTALLER_NAME, "namespace": INSTALLER_NAMESPACE, "labels": labels},
        "spec": {
            "selector": {"matchLabels": labels},
            "updateStrategy": {"type": "RollingUpdate"},
            "template": {
                "metadata": {"labels": labels},
                "spec": {
                    "priorityClassName": "system-node-critical",
                    "affinity": {
                        "nodeAffinity": {
                            "requiredDuringSchedulingIgnoredDuringExecution": {
                                "nodeSelectorTerms": [
                                    {
                                        "matchExpressions": [
                                            {"key": ACCELERATOR_LABEL, "operator": "Exists"},
                                            {"key": GKE_DRIVER_LABEL, "operator": "DoesNotExist"},
                                        ]
                                    }
                                ]
                            }
                        }
                    },
                    # GPU nodes carry GKE's nvidia.com/gpu taint; the driver must go on anyway.
                    "tolerations": [{"operator": "Exists"}],
                    "hostNetwork": True,
                    "hostPID": True,
                    "volumes": [
                        _host_path("dev", "/dev"),
                        _host_path("vulkan-icd-mount", VULKAN_ICD_DIR),
                        _host_path("nvidia-install-dir-host", INSTALL_DIR),
                        _host_path("root-mount", "/"),
                        _host_path("cos-tools", COS_TOOLS_DIR),
                    ],
                    "initContainers": [installer],
                    "containers": [idle],
                },
            },
        },
    }
