"""compose-serving-stack through real gRPC: AMD's GPU DRA driver where spec.draDrivers asks."""

from __future__ import annotations

import copy

from compose_serving_stack.fn import ServingStackFunction
from modelplane.validation import defaulted, validate_object
from modelplane_common.naming import child_name
from modelplane_common.serving import run_function
from modelplane_common.testing import desired_resources, make_request, observe, results

NS = "modelplane-system"
NAME = child_name("lab-mi300x", "serving-stack")
AMD_KEY = "amd-gpu-dra-driver"
NVIDIA_KEY = "dra-driver"
QUOTA_KEY = "dra-driver-critical-pods-quota"
AMD_CHART = ("k8s-gpu-dra-driver", "https://rocm.github.io/k8s-gpu-dra-driver", "v1.0.1")


def stack(**spec: object) -> dict:
    xr = {
        "apiVersion": "infrastructure.modelplane.ai/v1alpha1",
        "kind": "ServingStack",
        "metadata": {"name": NAME, "namespace": NS},
        "spec": {
            "secrets": [{"type": "Kubeconfig", "name": "lab-kubeconfig", "key": "kubeconfig"}],
            **spec,
        },
    }
    xr = defaulted(xr)
    assert validate_object(xr) == []
    return xr


def composed(xr: dict, observed: dict | None = None) -> dict:
    """The desired resources once both provider configs are observed, each schema-valid."""
    if observed is None:
        first = run_function(ServingStackFunction(), make_request(xr))
        observed = {k: observe(v) for k, v in desired_resources(first).items()}
    rsp = run_function(ServingStackFunction(), make_request(xr, observed))
    desired = desired_resources(rsp)
    for key, body in desired.items():
        assert validate_object(body, source=key) == [], (key, validate_object(body))
    return desired


def chart(body: dict) -> tuple[str, str, str]:
    c = body["spec"]["forProvider"]["chart"]
    return c["name"], c["repository"], c["version"]


def test_an_amd_only_stack_installs_amds_driver_and_not_nvidias() -> None:
    desired = composed(stack(draDrivers=["gpu.amd.com"]))
    release = desired[AMD_KEY]
    assert chart(release) == AMD_CHART
    assert release["spec"]["forProvider"]["namespace"] == "kube-amd-gpu"
    assert release["metadata"]["annotations"] == {"crossplane.io/external-name": AMD_KEY}
    # The kubelet plugin must reach nodes tainted amd.com/gpu to publish their GPUs.
    assert release["spec"]["forProvider"]["values"] == {
        "kubeletPlugin": {
            "tolerations": [{"key": "amd.com/gpu", "operator": "Exists", "effect": "NoSchedule"}]
        }
    }
    # Nothing of NVIDIA's: neither its DRA driver nor the quota in that driver's namespace.
    assert NVIDIA_KEY not in desired and QUOTA_KEY not in desired
    # The rest of the stack is there as on any cluster.
    assert {"cert-manager", "envoy-gateway", "leader-worker-set", "gateway"} <= set(desired)


def test_a_mixed_stack_installs_both_drivers() -> None:
    desired = composed(stack(draDrivers=["gpu.nvidia.com", "gpu.amd.com"]))
    assert chart(desired[AMD_KEY]) == AMD_CHART
    assert chart(desired[NVIDIA_KEY])[0] == "dra-driver-nvidia-gpu"
    assert QUOTA_KEY in desired


def test_without_dra_drivers_the_stack_stays_nvidia_only() -> None:
    desired = composed(stack())
    assert AMD_KEY not in desired
    assert NVIDIA_KEY in desired and QUOTA_KEY in desired


def test_the_amd_chart_version_can_be_overridden() -> None:
    desired = composed(stack(draDrivers=["gpu.amd.com"], versions={"amdGpuDraDriver": "v1.1.0"}))
    assert chart(desired[AMD_KEY])[2] == "v1.1.0"


def test_an_installed_amd_driver_is_kept_when_the_stack_turns_invalid() -> None:
    xr = stack(draDrivers=["gpu.amd.com"])
    observed = {k: observe(v) for k, v in composed(xr).items()}
    broken = copy.deepcopy(xr)
    broken["spec"]["draDrivers"] = ["gpu.intel.com"]
    rsp = run_function(ServingStackFunction(), make_request(broken, observed))
    held = desired_resources(rsp)
    assert held[AMD_KEY]["spec"] == observed[AMD_KEY]["spec"]
    ((severity, message),) = results(rsp)
    assert severity == "SEVERITY_WARNING" and "draDrivers" in message


def test_the_xrd_refuses_an_unknown_dra_driver() -> None:
    xr = stack()
    xr["spec"]["draDrivers"] = ["gpu.intel.com"]
    problems = " ".join(str(p) for p in validate_object(xr))
    assert "spec.draDrivers[0]" in problems
