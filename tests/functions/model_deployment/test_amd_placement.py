"""compose-model-deployment through real gRPC on a fleet with an AMD MI300X pool: the same DRA
CEL selectors, over the attributes and capacity AMD's DRA driver (gpu.amd.com) publishes."""

from __future__ import annotations

import md_fleet as f
from compose_model_deployment.fn import ModelDeploymentFunction
from modelplane_common.serving import run_function
from modelplane_common.testing import (
    conditions,
    desired_resources,
    fleet_required,
    make_request,
    results,
)

MI300X = {
    "name": "gpu",
    "claim": "DRA",
    "driver": "gpu.amd.com",
    "deviceClassName": "gpu.amd.com",
    "count": 8,
    "attributes": {"type": {"string": "amdgpu"}, "deviceID": {"string": "0x74a1"}},
    "capacity": {"memory": {"value": "192Gi"}, "computeUnits": {"value": "304"}},
}
AMD_GPU = 'device.attributes["gpu.amd.com"].type == "amdgpu"'
AT_LEAST_160GI = 'device.capacity["gpu.amd.com"].memory.compareTo(quantity("160Gi")) >= 0'


def fleet() -> list[dict]:
    return [
        f.cluster("nvidia", f.pool("h100", 2, f.gpu(8, memory="80Gi"))),
        f.cluster("amd", f.pool("mi300x", 1, MI300X)),
    ]


def place(*selectors: str, replicas: int = 2, count: int = 1):
    spec = f.spec(replicas, f.standalone("main", *selectors, count=count))
    required = {**fleet_required(fleet()), "service-routes": []}
    return run_function(ModelDeploymentFunction(), make_request(
        {"apiVersion": "modelplane.ai/v1alpha1", "kind": "ModelDeployment",
         "metadata": {"name": "m", "namespace": f.NAMESPACE}, "spec": spec},
        observed={}, required=required,
    ))  # fmt: skip


def test_amd_selectors_place_every_replica_on_the_mi300x_pool_claiming_amds_device_class():
    rsp = place(AMD_GPU, AT_LEAST_160GI)
    replicas = {k: v for k, v in desired_resources(rsp).items() if k.startswith("replica-")}
    assert set(replicas) == {"replica-amd-0", "replica-amd-1"}
    for body in replicas.values():
        (member,) = body["spec"]["engines"][0]["members"]
        assert member["nodePoolName"] == "mi300x"
        (request,) = member["deviceRequests"]
        assert request["deviceClassName"] == "gpu.amd.com"
        assert [s["cel"] for s in request["selectors"]] == [AMD_GPU, AT_LEAST_160GI]
    assert ("SEVERITY_NORMAL", "Scheduled 2 replicas across 1 clusters: amd") in results(rsp)


def test_a_whole_mi300x_node_fits_one_replica_and_the_second_says_why_not():
    rsp = place(AMD_GPU, replicas=2, count=8)
    assert {k for k in desired_resources(rsp) if k.startswith("replica-")} == {"replica-amd-0"}
    status, reason, message = conditions(rsp)["ReplicasScheduled"]
    assert (status, reason) == ("False", "InsufficientCapacity")
    assert "mi300x" in message
