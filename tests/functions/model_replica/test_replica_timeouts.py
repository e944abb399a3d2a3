"""The replica's HTTPRoute on its workload cluster states its timeouts (issue 22): unset, Envoy
Gateway would end every completion longer than 15 s in a 504. Through real gRPC."""

from __future__ import annotations

import copy

import pytest
from compose_model_replica import names
from modelplane import validation
from modelplane_common.observed import held
from replica_support import (
    cluster,
    example,
    manifest_of,
    object_problems,
    observed_object,
    request,
    summarize,
)

CLUSTER = "gke-us-central"
FIELD = "spec.serving.timeouts"


def _compose(stub, xr, observed=None):
    return summarize(stub.RunFunction(request(xr, [cluster(CLUSTER)], observed), timeout=30))


def _route(summary) -> dict:
    obj = summary["resources"][names.ROUTE_KEY]["object"]
    # The HTTPRoute CRD as the workload cluster's API server holds it, CEL included.
    assert object_problems(obj) == []
    route = manifest_of(obj)
    assert route["kind"] == "HTTPRoute"
    return route


def _with_timeouts(case: str, timeouts: dict) -> dict:
    xr = example(case)
    serving = xr["spec"].setdefault("serving", {"mode": "Unified"})
    serving["timeouts"] = timeouts
    return xr


@pytest.mark.parametrize("case", ["standalone", "prefill-decode"])
def test_the_route_lets_a_long_streamed_completion_finish_by_default(stub, case):
    (rule,) = _route(_compose(stub, example(case)))["spec"]["rules"]
    assert rule["timeouts"] == {"request": "1h", "backendRequest": "1h"}


@pytest.mark.parametrize("case", ["standalone", "prefill-decode"])
@pytest.mark.parametrize(
    ("given", "expected"),
    [
        ({"request": "4h"}, {"request": "4h", "backendRequest": "4h"}),
        ({"request": "2h", "backendRequest": "90m"}, {"request": "2h", "backendRequest": "90m"}),
        ({"backendRequest": "20m"}, {"request": "1h", "backendRequest": "20m"}),
    ],
)
def test_serving_timeouts_set_the_route(stub, case, given, expected):
    xr = _with_timeouts(case, given)
    assert validation.validate_object(xr) == []
    (rule,) = _route(_compose(stub, xr))["spec"]["rules"]
    assert rule["timeouts"] == expected


def test_a_timeout_change_touches_the_route_only(stub):
    """Engines, claims and Service stay exactly as they run: nothing restarts."""
    before = _compose(stub, example("standalone"))
    after = _compose(stub, _with_timeouts("standalone", {"request": "6h"}))
    assert sorted(after["resources"]) == sorted(before["resources"])
    changed = [
        key
        for key in before["resources"]
        if before["resources"][key]["object"] != after["resources"][key]["object"]
    ]
    assert changed == [names.ROUTE_KEY]
    assert _route(after)["spec"]["rules"][0]["timeouts"]["request"] == "6h"


def test_timeouts_that_bypassed_admission_keep_every_object_and_name_the_field(stub):
    xr = example("standalone")
    first = _compose(stub, xr)
    observed = {
        key: observed_object(resource["object"], name=f"obj-{index}")
        for index, (key, resource) in enumerate(first["resources"].items())
    }
    broken = _with_timeouts("standalone", {"request": "5m", "backendRequest": "10m"})
    summary = _compose(stub, broken, observed=observed)
    assert {k: r["object"] for k, r in summary["resources"].items()} == {
        k: held(obj) for k, obj in observed.items()
    }
    accepted = {c["type"]: c for c in summary["conditions"]}["ModelAccepted"]
    assert (accepted["status"], accepted["reason"]) == ("False", "InvalidSpec")
    assert f"{FIELD}.backendRequest must not be longer than {FIELD}.request" in accepted["message"]


@pytest.mark.parametrize(
    ("timeouts", "expected"),
    [
        ({"request": "1 hour"}, f"{FIELD}.request: {FIELD}.request must be a duration such as"),
        ({"request": "86401s"}, f"{FIELD}.request: {FIELD}.request must be between 1s and 24h"),
        (
            {"request": "2h", "backendRequest": "3h"},
            f"{FIELD}: {FIELD}.backendRequest must not be longer than {FIELD}.request",
        ),
    ],
)
def test_the_replica_xrd_refuses_bad_timeouts_naming_the_field(timeouts, expected):
    xr = _with_timeouts("standalone", timeouts)
    messages = [f"{p.path}: {p.message}" for p in validation.validate_object(copy.deepcopy(xr))]
    assert len(messages) == 1, messages
    assert messages[0].startswith(expected)
