"""AMD's GPU DRA driver, for clusters whose pools have AMD devices (design/amd-gpus.md).

Pure. The ServingStack lists the DRA drivers its cluster needs (``spec.draDrivers``); the
InferenceCluster puts ``gpu.amd.com`` there when one of its pools' InferenceClasses declares a
device of that driver. The chart (ROCm's ``k8s-gpu-dra-driver``) creates the DeviceClass
``gpu.amd.com`` and runs a kubelet plugin on every node that publishes each AMD GPU, with its
``productName``, ``deviceID``, ``driverVersion``... attributes and ``memory`` capacity, in
ResourceSlices. The amdgpu kernel driver itself comes with the node image or AMD's GPU
Operator; the chart does not install it.
"""

from __future__ import annotations

from modelplane_common import helm
from modelplane_common.plain import JSON
from modelplane_schemas.generated.infrastructure_modelplane_ai.v1alpha1 import servingstack as ss

NVIDIA_DRIVER = "gpu.nvidia.com"
AMD_DRIVER = "gpu.amd.com"
KEY_AMD_DRA_DRIVER = "amd-gpu-dra-driver"
CHART = "k8s-gpu-dra-driver"
# chart-releaser publishes the chart from ROCm/k8s-gpu-dra-driver's GitHub Pages.
REPOSITORY = "https://rocm.github.io/k8s-gpu-dra-driver"
# The namespace ROCm's install instructions use.
NAMESPACE = "kube-amd-gpu"
# AMD GPU nodes are commonly tainted amd.com/gpu; the chart tolerates no taint by default.
AMD_GPU_TOLERATION = {"key": "amd.com/gpu", "operator": "Exists", "effect": "NoSchedule"}


def drivers(spec: ss.Spec) -> frozenset[str]:
    """The DRA drivers this stack installs; an omitted list means NVIDIA's alone, as before."""
    return frozenset(spec.draDrivers or [NVIDIA_DRIVER])


def release_spec(spec: ss.Spec) -> tuple[str, helm.Chart, str, JSON] | None:
    """(key, chart, target namespace, values) of AMD's DRA driver, or None when not needed."""
    if AMD_DRIVER not in drivers(spec):
        return None
    # The pin is the XRD's default (D9), read through the generated model.
    versions, pins = spec.versions or ss.Versions(), ss.Versions()
    version = versions.amdGpuDraDriver or pins.amdGpuDraDriver
    assert version is not None  # the XRD default
    values: JSON = {"kubeletPlugin": {"tolerations": [dict(AMD_GPU_TOLERATION)]}}
    return KEY_AMD_DRA_DRIVER, helm.Chart(CHART, REPOSITORY, version), NAMESPACE, values
