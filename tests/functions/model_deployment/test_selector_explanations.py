"""Issue 22 item 5 through gRPC RunFunction: selectors compile against Kubernetes' typed
``DRADevice`` (a misspelt field is ``InvalidNodeSelector`` naming the field path), and when no
pool fits, the reason says per pool what failed: the device count, a selector (with the
attribute or capacity it reads, as published), or unreadable device data."""

from __future__ import annotations

import md_fleet as f
from compose_model_deployment.fn import ModelDeploymentFunction
from modelplane_common.serving import run_function
from modelplane_common.testing import conditions, desired_resources, fleet_required, make_request

PATH = "spec.engines[0].members[0].nodeSelector.devices[0].selectors[0].cel"


def call(spec: dict, clusters: list[dict]):
    xr = {
        "apiVersion": "modelplane.ai/v1alpha1",
        "kind": "ModelDeployment",
        "metadata": {"name": "m", "namespace": f.NAMESPACE},
        "spec": spec,
    }
    required = {**fleet_required(clusters), "service-routes": []}
    return run_function(ModelDeploymentFunction(), make_request(xr, required=required))


def scheduled(spec: dict, clusters: list[dict]) -> tuple[str, str, str]:
    return conditions(call(spec, clusters))["ReplicasScheduled"]


def test_a_misspelt_device_field_is_an_invalid_node_selector_naming_the_field():
    selector = 'device.atributes["gpu.nvidia.com"].architecture == "Hopper"'
    status, reason, message = scheduled(f.spec(1, f.standalone("main", selector)), [f.cluster("a")])
    assert (status, reason) == ("False", "InvalidNodeSelector")
    assert message == (
        f"Invalid nodeSelector CEL expression: {PATH}: <input>:1:7: undefined field 'atributes'"
    )


def test_a_single_equals_is_an_invalid_node_selector_with_cel_gos_syntax_error():
    selector = 'device.attributes["gpu.nvidia.com"].architecture = "Hopper"'
    status, reason, message = scheduled(f.spec(1, f.standalone("main", selector)), [f.cluster("a")])
    assert (status, reason) == ("False", "InvalidNodeSelector")
    assert message.startswith(
        f"Invalid nodeSelector CEL expression: {PATH}: "
        "<input>:1:50: Syntax error: token recognition error at: '= '"
    )


def test_a_well_spelt_selector_still_places_the_replica():
    selector = 'device.attributes["gpu.nvidia.com"].architecture == "Hopper"'
    rsp = call(f.spec(1, f.standalone("main", selector)), [f.cluster("a")])
    assert set(desired_resources(rsp)) == {"replica-a-0"}
    assert conditions(rsp)["ReplicasScheduled"][1] != "InvalidNodeSelector"


def test_a_request_for_more_devices_than_a_node_has_says_the_count():
    clusters = [f.cluster("x", f.pool("a100", 4, f.gpu(count=8, architecture="Ampere")))]
    status, reason, message = scheduled(f.spec(1, f.standalone(count=16)), clusters)
    assert (status, reason) == ("False", "InsufficientCapacity")
    assert message == (
        "0 of 1 replicas scheduled (checked 1 clusters); 0/1 clusters available: "
        '1 no pool matches engine "main" (pool "a100" has 8 matching devices per node, '
        'request "gpu" needs 16)'
    )


def test_each_pool_says_which_part_failed_across_clusters():
    memory = 'device.capacity["gpu.nvidia.com"].memory.compareTo(quantity("40Gi")) >= 0'
    hopper = 'device.attributes["gpu.nvidia.com"].architecture == "Hopper"'
    clusters = [
        f.cluster("x", f.pool("l4", 2, f.gpu(architecture="Ada", memory="24Gi"))),
        f.cluster("y", f.pool("a100", 2, f.gpu(count=8, architecture="Ampere"))),
        f.cluster("z", f.pool("h100", 2, f.gpu(count=8, memory="24Gi"))),
    ]
    _, reason, message = scheduled(f.spec(1, f.standalone("main", hopper, memory)), clusters)
    assert reason == "InsufficientCapacity"
    assert message == (
        "0 of 1 replicas scheduled (checked 3 clusters); 0/3 clusters available: "
        '3 no pool matches engine "main" ('
        'pool "l4": request "gpu" selector 0 matches no device '
        '(attribute gpu.nvidia.com/architecture is "Ada"); '
        'pool "a100": request "gpu" selector 0 matches no device '
        '(attribute gpu.nvidia.com/architecture is "Ampere"); '
        'pool "h100": request "gpu" selector 1 matches no device '
        "(capacity gpu.nvidia.com/memory is 24Gi))"
    )


def test_devices_taken_by_the_members_earlier_request_are_counted():
    engine = f.standalone()
    engine["members"][0]["nodeSelector"] = {
        "devices": [
            {"name": "prefill", "count": 6, "selectors": [{"cel": f.GPU_SELECTOR}]},
            {"name": "decode", "count": 4, "selectors": [{"cel": f.GPU_SELECTOR}]},
        ]
    }
    clusters = [f.cluster("x", f.pool("h100", 2, f.gpu(count=8)))]
    _, _, message = scheduled(f.spec(1, engine), clusters)
    assert message.endswith(
        '1 no pool matches engine "main" (pool "h100" has 8 matching devices per node, '
        '2 left after the member\'s earlier requests, request "decode" needs 4)'
    )


def test_selectors_each_met_by_a_different_device_are_named_together():
    hopper = 'device.attributes["gpu.nvidia.com"].architecture == "Hopper"'
    big = 'device.capacity["gpu.nvidia.com"].memory.compareTo(quantity("100Gi")) >= 0'
    pool = f.pool("mixed", 2, f.gpu(memory="80Gi"), f.gpu(architecture="Ada", memory="141Gi"))
    _, _, message = scheduled(f.spec(1, f.standalone("main", hopper, big)), [f.cluster("x", pool)])
    assert message.endswith(
        '1 no pool matches engine "main" '
        '(pool "mixed": no one device satisfies every selector of request "gpu")'
    )


def test_a_pool_publishing_no_attributes_says_the_attribute_is_not_published():
    bare = {**f.gpu(), "attributes": None}
    hopper = 'device.attributes["gpu.nvidia.com"].architecture == "Hopper"'
    clusters = [f.cluster("x", f.pool("bare", 2, bare))]
    _, _, message = scheduled(f.spec(1, f.standalone("main", hopper)), clusters)
    assert message.endswith(
        '1 no pool matches engine "main" (pool "bare": request "gpu" selector 0 matches no '
        "device (attribute gpu.nvidia.com/architecture is not published))"
    )
