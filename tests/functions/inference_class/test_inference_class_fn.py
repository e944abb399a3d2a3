"""compose-inference-class through real gRPC."""

from compose_inference_class.fn import InferenceClassFunction
from crossplane.function.proto.v1 import run_function_pb2 as fnv1
from modelplane_common.plain import to_plain, to_struct
from modelplane_common.serving import run_function

L4 = {
    "apiVersion": "modelplane.ai/v1alpha1",
    "kind": "InferenceClass",
    "metadata": {"name": "gke-l4-1x-g2"},
    "spec": {
        "provisioning": {
            "provider": "GKE",
            "gke": {
                "machineType": "g2-standard-8",
                "accelerator": {"type": "nvidia-l4", "count": 1},
            },
        },
        "devices": [
            {
                "name": "gpu",
                "driver": "gpu.nvidia.com",
                "deviceClassName": "gpu.nvidia.com",
                "attributes": {"architecture": {"string": "Ada Lovelace"}},
                "capacity": {"memory": {"value": "23034Mi"}},
            }
        ],
    },
}


def _request(xr: dict) -> fnv1.RunFunctionRequest:
    return fnv1.RunFunctionRequest(
        observed=fnv1.State(composite=fnv1.Resource(resource=to_struct(xr)))
    )


def test_valid_class_is_accepted_and_ready():
    rsp = run_function(InferenceClassFunction(), _request(L4))
    assert not [r for r in rsp.results if r.severity == fnv1.SEVERITY_FATAL]
    assert rsp.desired.composite.ready == fnv1.READY_TRUE
    assert dict(rsp.desired.resources) == {}
    (accepted,) = rsp.conditions
    assert (accepted.type, accepted.status, accepted.reason) == (
        "Accepted",
        fnv1.STATUS_CONDITION_TRUE,
        "Available",
    )
    assert to_plain(rsp.desired.composite.resource) == {"status": {}}


def test_invalid_class_is_not_accepted_and_names_the_field():
    broken = {**L4, "spec": {"devices": [{"name": "gpu", "driver": "d", "count": 0}]}}
    rsp = run_function(InferenceClassFunction(), _request(broken))
    (accepted,) = rsp.conditions
    assert accepted.status == fnv1.STATUS_CONDITION_FALSE
    assert accepted.reason == "InvalidSpec"
    assert "spec.devices[0].count" in accepted.message
    assert rsp.desired.composite.ready == fnv1.READY_FALSE
