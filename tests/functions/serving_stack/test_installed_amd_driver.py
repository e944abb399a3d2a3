"""Bring your own AMD DRA driver (ServingStack ``spec.installed`` ``amdDraDriver``), through
real gRPC: AMD's release is not installed, DeviceClass gpu.amd.com is observed, and its absence
is named (StackReady=False/ComponentMissing), as for nvidiaDraDriver."""

from __future__ import annotations

from compose_serving_stack.fn import ServingStackFunction
from modelplane.validation import defaulted, validate_object
from modelplane_common.naming import child_name
from modelplane_common.serving import run_function
from modelplane_common.testing import (
    conditions,
    desired_ready,
    desired_resources,
    make_request,
    observe,
    ready_status,
    results,
)

NS = "modelplane-system"
NAME = child_name("lab-mi300x", "serving-stack")
SECRETS = [{"type": "Kubeconfig", "name": "lab-mi300x-kubeconfig", "key": "kubeconfig"}]
AMD_KEY = "amd-gpu-dra-driver"
AMD_PROOF = "installed-deviceclass-gpu.amd.com"
NVIDIA_PROOF = "installed-deviceclass-gpu.nvidia.com"
NOT_FOUND = {
    "type": "Synced",
    "status": "False",
    "reason": "ReconcileError",
    "message": "observe failed: external resource does not exist",
}


def stack(**spec: object) -> dict:
    xr = defaulted(
        {
            "apiVersion": "infrastructure.modelplane.ai/v1alpha1",
            "kind": "ServingStack",
            "metadata": {"name": NAME, "namespace": NS},
            "spec": {"secrets": SECRETS, **spec},
        }
    )
    assert validate_object(xr) == []
    return xr


def run(xr: dict, observed: dict | None = None):
    rsp = run_function(ServingStackFunction(), make_request(xr, observed))
    for key, body in desired_resources(rsp).items():
        assert validate_object(body, source=key) == [], (key, validate_object(body))
    return rsp


def with_provider_configs(xr: dict) -> dict:
    return {k: observe(v) for k, v in desired_resources(run(xr)).items()}


def found(body: dict) -> dict:
    manifest = body["spec"]["forProvider"]["manifest"]
    return observe(body, ready_status(atProvider={"manifest": manifest}))


def test_a_declared_amd_driver_is_observed_not_installed() -> None:
    xr = stack(draDrivers=["gpu.amd.com"], installed={"components": ["amdDraDriver"]})
    rsp = run(xr, with_provider_configs(xr))
    desired = desired_resources(rsp)
    assert AMD_KEY not in desired
    proof = desired[AMD_PROOF]
    assert proof["spec"]["managementPolicies"] == ["Observe"]
    assert proof["spec"]["forProvider"]["manifest"] == {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "DeviceClass",
        "metadata": {"name": "gpu.amd.com"},
    }
    assert desired_ready(rsp)[AMD_PROOF] is False  # not seen yet
    # The rest of the stack is installed as usual.
    assert {"cert-manager", "leader-worker-set", "node-feature-discovery"} <= set(desired)
    assert conditions(rsp)["StackReady"][:2] == ("True", "NothingMissing")


def test_a_missing_amd_driver_is_named() -> None:
    xr = stack(draDrivers=["gpu.amd.com"], installed={"components": ["amdDraDriver"]})
    observed = with_provider_configs(xr)
    proof = desired_resources(run(xr, observed))[AMD_PROOF]
    observed[AMD_PROOF] = observe(proof, {"conditions": [NOT_FOUND]})
    rsp = run(xr, observed)
    status, reason, message = conditions(rsp)["StackReady"]
    assert (status, reason) == ("False", "ComponentMissing")
    assert message.startswith(
        "the workload cluster lacks amdDraDriver (DeviceClass gpu.amd.com not found)"
    )
    assert ("SEVERITY_WARNING", message) in results(rsp)
    assert AMD_KEY not in desired_resources(rsp)

    observed[AMD_PROOF] = found(proof)
    rsp = run(xr, observed)
    assert conditions(rsp)["StackReady"][:2] == ("True", "NothingMissing")
    assert desired_ready(rsp)[AMD_PROOF] is True


def test_all_installed_covers_the_drivers_the_stack_needs_only() -> None:
    # AMD-only: AMD's DeviceClass is observed, NVIDIA's is not (nothing would install it).
    xr = stack(draDrivers=["gpu.amd.com"], installed={"all": True})
    desired = desired_resources(run(xr, with_provider_configs(xr)))
    assert AMD_PROOF in desired and NVIDIA_PROOF not in desired
    assert AMD_KEY not in desired and "dra-driver" not in desired
    # Mixed: both.
    xr = stack(draDrivers=["gpu.nvidia.com", "gpu.amd.com"], installed={"all": True})
    desired = desired_resources(run(xr, with_provider_configs(xr)))
    assert {AMD_PROOF, NVIDIA_PROOF} <= set(desired)
    # NVIDIA-only (draDrivers omitted): AMD's DeviceClass is never looked for.
    xr = stack(installed={"all": True})
    desired = desired_resources(run(xr, with_provider_configs(xr)))
    assert NVIDIA_PROOF in desired and AMD_PROOF not in desired


def test_an_amd_driver_declared_on_an_nvidia_only_stack_is_ignored() -> None:
    xr = stack(installed={"components": ["amdDraDriver"]})
    rsp = run(xr, with_provider_configs(xr))
    desired = desired_resources(rsp)
    assert AMD_PROOF not in desired and AMD_KEY not in desired
    assert "dra-driver" in desired
    assert conditions(rsp)["StackReady"][:2] == ("True", "NothingMissing")


def test_an_amd_release_installed_earlier_is_kept_observe_only() -> None:
    """Declaring the driver installed never uninstalls the release Modelplane put there."""
    before = stack(draDrivers=["gpu.amd.com"])
    observed = with_provider_configs(before)
    release = desired_resources(run(before, observed))[AMD_KEY]
    observed[AMD_KEY] = observe(release, ready_status())
    after = stack(draDrivers=["gpu.amd.com"], installed={"components": ["amdDraDriver"]})
    kept = desired_resources(run(after, observed))
    assert kept[AMD_KEY]["spec"]["managementPolicies"] == ["Observe"]
    assert kept[AMD_KEY]["spec"]["forProvider"] == release["spec"]["forProvider"]
    assert AMD_PROOF in kept


def test_the_xrds_accept_amd_dra_driver() -> None:
    xr = stack(installed={"components": ["amdDraDriver", "nvidiaDraDriver"]})
    assert validate_object(xr) == []
    xr["spec"]["installed"]["components"] = ["amdGpuDraDriver"]
    problems = " ".join(str(p) for p in validate_object(xr))
    assert "spec.installed.components[0]" in problems
