"""InferenceClass objects against the real XRD in apis/: schema, defaults and CEL rules."""

from __future__ import annotations

import copy
from typing import Any

import pytest
from modelplane import openapi, validation


def valid_class() -> dict[str, Any]:
    return {
        "apiVersion": "modelplane.ai/v1alpha1",
        "kind": "InferenceClass",
        "metadata": {"name": "h100-80gb"},
        "spec": {
            "description": "8x H100",
            "provisioning": {
                "provider": "GKE",
                "gke": {
                    "machineType": "a3-highgpu-8g",
                    "accelerator": {"type": "nvidia-h100-80gb", "count": 8},
                },
            },
            "devices": [
                {
                    "name": "gpu",
                    "driver": "gpu.nvidia.com",
                    "deviceClassName": "gpu.nvidia.com",
                    "count": 8,
                    "attributes": {"productName": {"string": "H100"}, "cc": {"version": "9.0.0"}},
                    "capacity": {"memory": {"value": "80Gi"}},
                }
            ],
        },
    }


def with_change(path: str, value: Any) -> dict[str, Any]:
    """valid_class() with the dotted path (list indexes as numbers) set, or removed if value is
    DELETE."""
    obj = valid_class()
    parts = [int(p) if p.isdigit() else p for p in path.split(".")]
    parent: Any = obj
    for part in parts[:-1]:
        parent = parent[part]
    if value is DELETE:
        del parent[parts[-1]]
    else:
        parent[parts[-1]] = copy.deepcopy(value)
    return obj


DELETE = object()


def messages(obj: dict[str, Any]) -> list[str]:
    return [str(p) for p in validation.validate_object(obj, "examples/ic.yaml")]


def test_a_valid_class_has_no_problems():
    assert messages(valid_class()) == []


CASES = [
    # (change path, new value, expected problem line)
    (
        "spec.devices",
        DELETE,
        "examples/ic.yaml: InferenceClass/h100-80gb: spec.devices: Required value",
    ),
    (
        "spec.devices.0.driver",
        DELETE,
        "examples/ic.yaml: InferenceClass/h100-80gb: spec.devices[0].driver: Required value",
    ),
    (
        "spec.devices.0.count",
        "eight",
        # The API server's words (kube-openapi's InvalidType).
        'examples/ic.yaml: InferenceClass/h100-80gb: spec.devices[0].count: Invalid value: "string"'
        ': spec.devices[0].count in body must be of type integer: "string"',
    ),
    (
        "spec.provisioning.provider",
        "OCI",
        "examples/ic.yaml: InferenceClass/h100-80gb: spec.provisioning.provider: Unsupported value:"
        ' "OCI": supported values: "GKE", "EKS", "AKS", "Vultr", "Nebius"',
    ),
    (
        "spec.devices.0.count",
        65,
        "examples/ic.yaml: InferenceClass/h100-80gb: spec.devices[0].count: Invalid value: 65: "
        "should be less than or equal to 64",
    ),
    (
        "spec.provisioning.gke.diskSizeGb",
        5,
        "examples/ic.yaml: InferenceClass/h100-80gb: spec.provisioning.gke.diskSizeGb: Invalid "
        "value: 5: should be greater than or equal to 10",
    ),
    (
        "spec.devices.0.name",
        "",
        'examples/ic.yaml: InferenceClass/h100-80gb: spec.devices[0].name: Invalid value: "": '
        "should be at least 1 chars long",
    ),
    (
        "spec.provisioning.gke.machineType",
        "m" * 64,
        "examples/ic.yaml: InferenceClass/h100-80gb: spec.provisioning.gke.machineType: Too long: "
        "may not be more than 63 bytes",  # the API server's word, though it counts characters
    ),
    (
        "spec.devices",
        [],
        "examples/ic.yaml: InferenceClass/h100-80gb: spec.devices: Invalid value: 0: must have at "
        "least 1 items",
    ),
    (
        "spec.devices",
        [{"name": f"d{i}", "driver": "x", "claim": "Synthetic"} for i in range(17)],
        "examples/ic.yaml: InferenceClass/h100-80gb: spec.devices: Too many: 17: must have at "
        "most 16 items",
    ),
    (
        "spec.devices.0.attributes",
        {f"a{i}": {"string": "x"} for i in range(33)},
        "examples/ic.yaml: InferenceClass/h100-80gb: spec.devices[0].attributes: Too many: 33: "
        "must have at most 32 properties",
    ),
    (
        "spec.devices.0.gpus",
        8,
        'examples/ic.yaml: InferenceClass/h100-80gb: spec.devices[0].gpus: unknown field "gpus" '
        "(not declared in the schema)",
    ),
    (
        "spec.colour",
        "blue",
        'examples/ic.yaml: InferenceClass/h100-80gb: spec.colour: unknown field "colour" '
        "(not declared in the schema)",
    ),
    (
        "spec.devices",
        [
            {"name": "gpu", "driver": "a", "claim": "Synthetic"},
            {"name": "gpu", "driver": "b", "claim": "Synthetic"},
        ],
        'examples/ic.yaml: InferenceClass/h100-80gb: spec.devices[1]: Duplicate value: {"name": '
        '"gpu"}',
    ),
    (
        "spec.devices.0.attributes.cc",
        {"int": 2**63},
        # Schema errors name a map's key with a dot, as the API server does (rules index it).
        "examples/ic.yaml: InferenceClass/h100-80gb: spec.devices[0].attributes.cc.int: Invalid "
        "value: 9223372036854775808: must fit in int64",
    ),
    (
        "metadata.name",
        "H100_GPU",
        'examples/ic.yaml: InferenceClass/H100_GPU: metadata.name: Invalid value: "H100_GPU": a '
        "lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or "
        "'.', and must start and end with an alphanumeric character",
    ),
]
RULE_CASES = [
    # The CEL rules, with their messages.
    (
        "spec.provisioning.gke",
        DELETE,
        "examples/ic.yaml: InferenceClass/h100-80gb: spec.provisioning: spec.provisioning.gke is "
        "required when spec.provisioning.provider is GKE",
    ),
    (
        "spec.provisioning",
        {"provider": "EKS"},
        "examples/ic.yaml: InferenceClass/h100-80gb: spec.provisioning: spec.provisioning.eks is "
        "required when spec.provisioning.provider is EKS",
    ),
    (
        "spec.devices.0.deviceClassName",
        DELETE,
        "examples/ic.yaml: InferenceClass/h100-80gb: spec.devices[0]: deviceClassName is required "
        "when claim is DRA",
    ),
    (
        "spec.devices.0.attributes.productName",
        {"string": "H100", "int": 3},
        "examples/ic.yaml: InferenceClass/h100-80gb: spec.devices[0].attributes[productName]: "
        "exactly one of string, version, bool, int must be set",
    ),
    (
        "spec.devices.0.attributes.productName",
        {},
        "examples/ic.yaml: InferenceClass/h100-80gb: spec.devices[0].attributes[productName]: "
        "exactly one of string, version, bool, int must be set",
    ),
]
RULE_MESSAGES = {expected for _, _, expected in RULE_CASES}
# The schema errors that stop the rules (apiextensions-apiserver's blocking error types).
BLOCKING = ("Required value", "Unsupported value", "Too long", "Too many")
CASES += RULE_CASES


@pytest.mark.parametrize(
    ("path", "value", "expected"), CASES, ids=[f"{c[0]}={str(c[1])[:20]}" for c in CASES]
)
def test_one_bad_field_gives_exactly_its_problem(path, value, expected):
    found = messages(with_change(path, value))
    problem = expected.split(": ", 3)[-1]
    blocking = problem.startswith(BLOCKING) or "must be of type" in problem
    if expected in RULE_MESSAGES or not blocking:
        assert found == [expected]
    else:  # as on the API server, the rules wait for the schema error, and it says so
        name = expected.split(": ")[1]
        assert found == [expected, f"examples/ic.yaml: {name}: {openapi.RULES_NOT_CHECKED}"]


def test_the_dra_rule_holds_once_claim_defaults_to_dra():
    """claim defaults to DRA, so a device without claim needs a deviceClassName."""
    obj = with_change("spec.devices.0.deviceClassName", DELETE)
    assert "claim" not in obj["spec"]["devices"][0]
    assert any("deviceClassName is required when claim is DRA" in m for m in messages(obj))
    obj["spec"]["devices"][0]["claim"] = "Synthetic"
    assert messages(obj) == []


def test_defaults_are_applied_before_validation():
    obj = valid_class()
    obj["spec"]["devices"][0]["count"] = None  # null is pruned, then defaulted
    stored = validation.defaulted(obj)
    device = stored["spec"]["devices"][0]
    assert device["count"] == 1
    assert device["claim"] == "DRA"
    assert stored["spec"]["provisioning"]["gke"]["diskSizeGb"] == 100
    assert messages(obj) == []


def test_crossplane_fields_and_metadata_are_allowed():
    obj = valid_class()
    obj["spec"]["crossplane"] = {"compositionRef": {"name": "inferenceclasses.modelplane.ai"}}
    obj["metadata"]["labels"] = {"team": "ml"}
    obj["metadata"]["annotations"] = {"modelplane.ai/note": "anything goes here"}
    obj["status"] = {"conditions": [{"type": "Ready", "status": "True"}]}
    assert messages(obj) == []


def test_every_problem_is_reported_not_only_the_first():
    obj = with_change("spec.provisioning", {"provider": "EKS"})
    obj["spec"]["devices"][0]["count"] = 0  # below its minimum: the rules still run
    obj["spec"]["devices"][0].pop("deviceClassName")
    found = messages(obj)
    assert len(found) == 3
    assert any("spec.devices[0].count" in m for m in found)
    assert any("eks is required" in m for m in found)
    assert any("deviceClassName is required" in m for m in found)
    # A blocking schema error (a missing required field): the API server reports the schema
    # errors and does not run the rules until they are fixed, and says so.
    obj["spec"]["devices"][0].pop("driver")
    found = messages(obj)
    assert len(found) == 3
    assert any("spec.devices[0].count" in m for m in found)
    assert any("spec.devices[0].driver: Required value" in m for m in found)
    assert found[-1].endswith(openapi.RULES_NOT_CHECKED)


def test_validate_xr_is_the_render_entry_point():
    assert validation.validate_xr(valid_class()) == []
    problems = validation.validate_xr(with_change("spec.devices.0.deviceClassName", DELETE))
    assert [(p.path, p.message) for p in problems] == [
        ("spec.devices[0]", "deviceClassName is required when claim is DRA")
    ]
    unknown = validation.validate_xr({"apiVersion": "modelplane.ai/v1alpha1", "kind": "Nope"})
    assert "no XRD in apis/ defines apiVersion modelplane.ai/v1alpha1 kind Nope" in str(unknown[0])


def test_an_unserved_version_is_reported():
    obj = valid_class()
    obj["apiVersion"] = "modelplane.ai/v9"
    (problem,) = validation.validate_object(obj, "x.yaml")
    assert problem.path == "apiVersion"
    assert "modelplane.ai/v9 is not served" in problem.message


def test_status_is_a_subresource_and_ignored():
    """kubectl apply never writes status, so even a malformed one is no problem."""
    obj = valid_class()
    obj["status"] = {"conditions": "not a list", "bogus": 1}
    assert messages(obj) == []


def test_crossplane_spec_fields_are_checked_too():
    obj = valid_class()
    obj["spec"]["crossplane"] = {
        "compositionUpdatePolicy": "Sometimes",
        "compositionRef": {},
        "someFutureField": {"kept": True},
    }
    assert sorted(messages(obj)) == [
        f"examples/ic.yaml: InferenceClass/h100-80gb: {openapi.RULES_NOT_CHECKED}",
        "examples/ic.yaml: InferenceClass/h100-80gb: spec.crossplane.compositionRef.name: "
        "Required value",
        "examples/ic.yaml: InferenceClass/h100-80gb: spec.crossplane.compositionUpdatePolicy: "
        'Unsupported value: "Sometimes": supported values: "Automatic", "Manual"',
    ]
