"""The tolerant reader (issue 14): malformed, partial and missing data reads as unknown, and
the ReadinessKnown condition every function sets through the servicer base."""

from __future__ import annotations

from typing import Any

import pytest
from modelplane_common import tolerant
from modelplane_common.function import CompositionFunction, Outcome, Request
from modelplane_common.observed import is_ready, readiness
from modelplane_common.serving import run_function
from modelplane_common.testing import conditions, make_request, observe, ready_status

CLUSTER = {
    "kind": "InferenceCluster",
    "metadata": {"name": "gke-us", "labels": {"tier": "prod"}},
    "status": {"gateway": {"address": "203.0.113.7"}, "gpuPools": [{"name": "p"}]},
}


@pytest.mark.parametrize(
    ("path", "found"),
    [
        (("status", "gateway", "address"), "203.0.113.7"),
        (("status", "gpuPools", 0, "name"), "p"),
        (("status", "gpuPools", -1, "name"), "p"),
        (("status", "gpuPools", 1, "name"), None),  # past the end
        (("status", "gateway", 0), None),  # an index into a map
        (("status", "gpuPools", "name"), None),  # a key into a list
        (("status", "missing", "address"), None),
        (("metadata", "name", "first"), None),  # into a string
    ],
)
def test_at_follows_keys_and_indexes_or_reads_unknown(path: tuple[Any, ...], found: Any):
    assert tolerant.at(CLUSTER, *path) == found


@pytest.mark.parametrize("garbage", [None, "oops", 7, True, ["a"], {"address": 1}])
def test_typed_accessors_never_raise_and_read_wrong_types_as_unknown(garbage: Any):
    obj = {"status": {"gateway": garbage}}
    assert tolerant.text(obj, "status", "gateway", "address") is None
    assert tolerant.mapping(obj, "status", "gateway", "address") is None
    assert tolerant.listing(obj, "status", "gateway", "addresses") is None
    assert tolerant.maps(obj, "status", "gateway", "addresses") == []
    assert tolerant.status({"status": garbage}) == (garbage if isinstance(garbage, dict) else {})
    assert tolerant.name_of(garbage) == ""


def test_typed_accessors_keep_values_of_the_right_type():
    assert tolerant.mapping(CLUSTER, "metadata", "labels") == {"tier": "prod"}
    assert tolerant.listing(CLUSTER, "status", "gpuPools") == [{"name": "p"}]
    assert tolerant.maps({"c": [{"a": 1}, "x", 2, {"b": 2}]}, "c") == [{"a": 1}, {"b": 2}]
    assert tolerant.integer({"n": 3}, "n") == 3
    assert tolerant.integer({"n": True}, "n") is None  # a bool is not a count
    assert tolerant.describe(CLUSTER) == "InferenceCluster gke-us"


def test_unknowns_name_object_and_field_once_each():
    unknowns = tolerant.Unknowns()
    assert not unknowns
    for _ in range(2):
        unknowns.note("InferenceCluster a", "status.gateway.address")
    unknowns.note("ModelReplica r", "Ready condition", "not known")
    assert unknowns.message() == (
        "InferenceCluster a: status.gateway.address missing or malformed; "
        "ModelReplica r: Ready condition not known"
    )


def _ready(status: str, **extra: Any) -> dict[str, Any]:
    return {"status": {"conditions": [{"type": "Ready", "status": status}, *extra.values()]}}


def test_readiness_is_true_false_or_unknown():
    assert readiness(_ready("True")) is True
    assert readiness(_ready("False")) is False
    assert readiness(_ready("Unknown")) is None
    assert readiness({"status": {"conditions": "garbage"}}) is None
    assert readiness({}) is None
    unknown = {"type": "ReadinessKnown", "status": "False", "reason": "StatusUnknown"}
    assert readiness(_ready("False", known=unknown)) is None
    assert not is_ready(_ready("False", known=unknown))


class _Holds(CompositionFunction):
    """Keeps every observed resource, ready as observed (as every Modelplane function does)."""

    name = "holds"

    def compose(self, request: Request) -> Outcome:
        outcome = Outcome()
        for key, body in request.observed.items():
            outcome.compose(key, body, ready=is_ready(body))
        return outcome


def test_servicer_says_when_kept_resources_have_unknown_readiness_and_when_it_ends():
    body = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "a"}}
    xr = {"apiVersion": "example.org/v1", "kind": "XR", "metadata": {"name": "x"}}
    stripped = {"a": observe(body, name="a"), "b": observe(body, ready_status(), name="b")}
    rsp = run_function(_Holds(), make_request(xr, stripped))
    assert conditions(rsp)["ReadinessKnown"] == (
        "False",
        "StatusUnknown",
        "no readable Ready condition yet on a",
    )

    back = {"a": observe(body, ready_status(), name="a"), "b": stripped["b"]}
    assert "ReadinessKnown" not in conditions(run_function(_Holds(), make_request(xr, back)))
    marked = {**xr, "status": {"conditions": [{"type": "ReadinessKnown", "status": "False"}]}}
    assert conditions(run_function(_Holds(), make_request(marked, back)))["ReadinessKnown"] == (
        "True",
        "Observed",
        "",
    )
