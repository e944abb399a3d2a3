"""An InferenceCluster with AMD pools (gpu.amd.com) through real gRPC: it publishes their
devices and tells its ServingStack to install AMD's DRA driver."""

from __future__ import annotations

from compose_inference_cluster.fn import InferenceClusterFunction
from modelplane.validation import defaulted, validate_object
from modelplane_common.serving import run_function
from modelplane_common.testing import desired_resources, desired_status, make_request, observe


def _class(name: str, driver: str, memory: str, count: int = 8) -> dict:
    device = {"name": "gpu", "driver": driver, "deviceClassName": driver, "count": count,
              "attributes": {"type": {"string": "amdgpu"}} if driver == "gpu.amd.com" else {},
              "capacity": {"memory": {"value": memory}}}  # fmt: skip
    body = defaulted(
        {
            "apiVersion": "modelplane.ai/v1alpha1",
            "kind": "InferenceClass",
            "metadata": {"name": name},
            "spec": {"devices": [device]},
        }
    )
    assert validate_object(body) == []
    return body


MI300X = _class("mi300x-8x-byo", "gpu.amd.com", "192Gi")
H100 = _class("h100-8x-byo", "gpu.nvidia.com", "81559Mi")


def cluster(*pools: tuple[str, str]) -> dict:
    xr = defaulted(
        {
            "apiVersion": "modelplane.ai/v1alpha1",
            "kind": "InferenceCluster",
            "metadata": {"name": "lab-mixed"},
            "spec": {
                "cluster": {
                    "source": "Existing",
                    "existing": {"secretRef": {"name": "lab-mixed-kubeconfig"}},
                },
                "nodePools": [
                    {"name": name, "className": class_name, "nodeCount": 1}
                    for name, class_name in pools
                ],
            },
        }
    )
    assert validate_object(xr) == []
    return xr


def run(xr: dict, classes: dict[str, list[dict]], observed: dict | None = None):
    required: dict = {"model-replicas": [], "replica-objects": [], "cache-objects": []}
    required |= {f"class-{name}": found for name, found in classes.items()}
    rsp = run_function(InferenceClusterFunction(), make_request(xr, observed, required))
    for key, body in desired_resources(rsp).items():
        assert validate_object(body, source=key) == [], key
    return rsp


def test_an_amd_pool_asks_the_stack_for_amds_driver_alone_and_publishes_its_devices() -> None:
    rsp = run(cluster(("mi300x", "mi300x-8x-byo")), {"mi300x-8x-byo": [MI300X]})
    assert desired_resources(rsp)["serving-stack"]["spec"]["draDrivers"] == ["gpu.amd.com"]
    (pool,) = desired_status(rsp)["gpuPools"]
    (device,) = pool["devices"]
    assert (device["driver"], device["deviceClassName"], device["count"]) == (
        "gpu.amd.com", "gpu.amd.com", 8
    )  # fmt: skip
    assert device["capacity"]["memory"] == {"value": "192Gi"}
    assert device["attributes"]["type"] == {"string": "amdgpu"}


def test_amd_and_nvidia_pools_ask_for_both_drivers() -> None:
    xr = cluster(("mi300x", "mi300x-8x-byo"), ("h100", "h100-8x-byo"))
    rsp = run(xr, {"mi300x-8x-byo": [MI300X], "h100-8x-byo": [H100]})
    spec = desired_resources(rsp)["serving-stack"]["spec"]
    assert spec["draDrivers"] == ["gpu.amd.com", "gpu.nvidia.com"]


def test_an_nvidia_only_cluster_leaves_the_stack_as_before() -> None:
    rsp = run(cluster(("h100", "h100-8x-byo")), {"h100-8x-byo": [H100]})
    assert "draDrivers" not in desired_resources(rsp)["serving-stack"]["spec"]


def test_an_amd_class_gone_missing_keeps_amds_driver_on_the_stack() -> None:
    xr = cluster(("mi300x", "mi300x-8x-byo"), ("h100", "h100-8x-byo"))
    classes = {"mi300x-8x-byo": [MI300X], "h100-8x-byo": [H100]}
    observed = {k: observe(v) for k, v in desired_resources(run(xr, classes)).items()}
    # The MI300X class is deleted: its pool is unavailable, its nodes still run AMD's driver.
    rsp = run(xr, {**classes, "mi300x-8x-byo": []}, observed)
    spec = desired_resources(rsp)["serving-stack"]["spec"]
    assert spec["draDrivers"] == ["gpu.amd.com", "gpu.nvidia.com"]
    assert [p["name"] for p in desired_status(rsp)["unavailablePools"]] == ["mi300x"]


def test_removing_the_amd_pool_from_the_spec_drops_amd_from_the_stack() -> None:
    xr = cluster(("mi300x", "mi300x-8x-byo"), ("h100", "h100-8x-byo"))
    classes = {"mi300x-8x-byo": [MI300X], "h100-8x-byo": [H100]}
    observed = {k: observe(v) for k, v in desired_resources(run(xr, classes)).items()}
    rsp = run(cluster(("h100", "h100-8x-byo")), {"h100-8x-byo": [H100]}, observed)
    assert "draDrivers" not in desired_resources(rsp)["serving-stack"]["spec"]
