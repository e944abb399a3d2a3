"""spec.serving.timeouts reaches every replica (issue 22), and changing it updates the running
replicas in place: same names, same clusters, nothing drained or re-placed."""

from __future__ import annotations

import copy
from pathlib import Path

import md_fleet as f
import pytest
import yaml
from compose_model_deployment.fn import ModelDeploymentFunction
from compose_model_deployment.names import replica_name
from modelplane import validation
from modelplane_common.serving import run_function
from modelplane_common.testing import (
    conditions,
    desired_resources,
    fleet_required,
    make_request,
    observe,
    ready_status,
)
from modelplane_schemas.generated.modelplane_ai.v1alpha1.modelreplica import ModelReplica

FIELD = "spec.serving.timeouts"


def xr(spec: dict) -> dict:
    return {
        "apiVersion": "modelplane.ai/v1alpha1",
        "kind": "ModelDeployment",
        "metadata": {"name": "m", "namespace": f.NAMESPACE},
        "spec": spec,
    }


def call(spec: dict, clusters: list[dict], replicas: list[dict], observed: dict):
    required = {**fleet_required(clusters, replicas, observed), "service-routes": []}
    request = make_request(xr(spec), observed=observed, required=required)
    return run_function(ModelDeploymentFunction(), request)


def running(deployment: dict) -> tuple[list[dict], list[dict], dict]:
    """Ready replicas on clusters a and b, exactly as the previous reconcile composed them."""
    clusters = [f.cluster("a"), f.cluster("b")]
    composed = desired_resources(call(deployment, clusters, [], {}))
    observed = {key: observe(body, ready_status()) for key, body in composed.items()}
    return clusters, list(observed.values()), observed


def test_replicas_carry_the_deployments_timeouts():
    deployment = f.spec(
        2, serving={"mode": "Unified", "timeouts": {"request": "2h", "backendRequest": "90m"}}
    )
    assert validation.validate_object(xr(deployment)) == []
    rsp = call(deployment, [f.cluster("a"), f.cluster("b")], [], {})
    desired = desired_resources(rsp)
    assert set(desired) == {"replica-a-0", "replica-b-0"}
    for replica in desired.values():
        ModelReplica.model_validate(replica)
        assert replica["spec"]["serving"] == {
            "mode": "Unified",
            "timeouts": {"request": "2h", "backendRequest": "90m"},
        }


def test_without_timeouts_the_replica_spec_is_as_before():
    """The default lives in the replica's route; replicas of deployments that never set
    timeouts are not rewritten."""
    rsp = call(f.spec(1, serving={"mode": "Unified"}), [f.cluster("a")], [], {})
    assert desired_resources(rsp)["replica-a-0"]["spec"]["serving"] == {"mode": "Unified"}


def test_changing_the_timeouts_updates_the_running_replicas_in_place():
    before = f.spec(2, serving={"mode": "Unified"})
    clusters, fleet, observed = running(before)
    after = copy.deepcopy(before)
    after["serving"]["timeouts"] = {"request": "3h"}
    rsp = call(after, clusters, fleet, observed)
    desired = desired_resources(rsp)
    assert {k for k in desired if k.startswith("replica-")} == {"replica-a-0", "replica-b-0"}
    for cluster in "ab":
        replica = desired[f"replica-{cluster}-0"]
        assert replica["metadata"]["name"] == replica_name("m", cluster, 0)
        assert replica["spec"]["clusterName"] == cluster
        # Nothing replaces it and nothing drains it.
        assert "annotations" not in replica["metadata"]
        assert replica["spec"]["serving"]["timeouts"] == {"request": "3h"}
        unchanged = copy.deepcopy(replica["spec"])
        unchanged["serving"].pop("timeouts")
        assert unchanged == observed[f"replica-{cluster}-0"]["spec"]
    assert conditions(rsp)["ReplicasScheduled"][0] == "True"


def test_timeouts_that_bypassed_admission_keep_the_replicas_as_they_are():
    before = f.spec(2, serving={"mode": "Unified"})
    clusters, fleet, observed = running(before)
    after = copy.deepcopy(before)
    after["serving"]["timeouts"] = {"request": "10m", "backendRequest": "20m"}
    rsp = call(after, clusters, fleet, observed)
    desired = desired_resources(rsp)
    assert set(desired) == {"replica-a-0", "replica-b-0"}
    for key, body in desired.items():
        assert body["spec"] == observed[key]["spec"]
    status, reason, message = conditions(rsp)["ReplicasScheduled"]
    assert (status, reason) == ("False", "InvalidSpec")
    assert f"{FIELD}.backendRequest must not be longer than {FIELD}.request" in message


EXAMPLE = Path(__file__).resolve().parents[3] / "examples" / "quickstart" / "deployment.yaml"


def _messages(timeouts: dict) -> list[str]:
    body = yaml.safe_load(EXAMPLE.read_text())
    body["spec"]["serving"] = {"mode": "Unified", "timeouts": timeouts}
    return [f"{p.path}: {p.message}" for p in validation.validate_object(body)]


def test_the_example_is_valid():
    assert _messages({"request": "2h", "backendRequest": "1h30m"}) == []


@pytest.mark.parametrize(
    ("timeouts", "expected"),
    [
        (
            {"request": "an hour"},
            f"{FIELD}.request: {FIELD}.request must be a duration such as 300s, 30m or 1h",
        ),
        ({"request": "48h"}, f"{FIELD}.request: {FIELD}.request must be between 1s and 24h"),
        (
            {"backendRequest": "0s"},
            f"{FIELD}.backendRequest: {FIELD}.backendRequest must be between 1s and 24h",
        ),
        (
            {"request": "30m", "backendRequest": "1h"},
            f"{FIELD}: {FIELD}.backendRequest must not be longer than {FIELD}.request",
        ),
        (
            {"backendRequest": "2h"},
            f"{FIELD}: {FIELD}.backendRequest must not be longer than {FIELD}.request",
        ),
    ],
)
def test_the_xrd_refuses_bad_timeouts_naming_the_field(timeouts, expected):
    messages = _messages(timeouts)
    assert len(messages) == 1, messages
    assert messages[0].startswith(expected)
