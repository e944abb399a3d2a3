"""Scale to zero and past ten, through real gRPC RunFunction (issue 24 item 4).

``spec.replicas: 0`` places nothing and removes every replica and endpoint on purpose, and
says so (``ScaledToZero``); the scale subresource reads 0; scaling back places again.
Scaling down removes replicas from the most loaded cluster first, highest index first, and
never below what is asked. The schema takes 0..100 and names the field outside it.
"""

from __future__ import annotations

from typing import Any

import md_fleet as f
import pytest
import yaml
from click.testing import CliRunner
from compose_model_deployment.fn import ModelDeploymentFunction
from compose_model_deployment.names import replica_name
from crossplane.function.proto.v1 import run_function_pb2 as fnv1
from modelplane.main import cli
from modelplane_common.serving import run_function
from modelplane_common.testing import (
    conditions,
    desired_resources,
    desired_status,
    fleet_required,
    make_request,
    observe,
    ready_status,
    results,
)

JSON = dict[str, Any]


def xr(spec: JSON) -> JSON:
    return {
        "apiVersion": "modelplane.ai/v1alpha1",
        "kind": "ModelDeployment",
        "metadata": {"name": "m", "namespace": f.NAMESPACE},
        "spec": spec,
    }


def call(spec: JSON, clusters: list[JSON], observed: dict[str, JSON] | None = None):
    replicas = [body for key, body in (observed or {}).items() if key.startswith("replica-")]
    required = {**fleet_required(clusters, replicas, observed), "service-routes": []}
    request = make_request(xr(spec), observed=observed or {}, required=required)
    return run_function(ModelDeploymentFunction(), request)


def endpoint(cluster: str, index: int) -> JSON:
    name = replica_name("m", cluster, index)
    return {
        "apiVersion": "modelplane.ai/v1alpha1",
        "kind": "ModelEndpoint",
        "metadata": {"name": name, "namespace": f.NAMESPACE},
        "spec": {"url": f"http://203.0.113.10/{f.NAMESPACE}/{name}/v1"},
        "status": {"routing": {"backendName": f"{name}-svc"}},
    }


def serving(deployment: JSON, *where: tuple[str, int]) -> dict[str, JSON]:
    """Observed replicas, Ready, each with its Ready endpoint."""
    observed = {}
    for cluster, index in where:
        body = f.replica(deployment, cluster, index, ready=True)
        observed[f"replica-{cluster}-{index}"] = observe(body, ready_status())
        observed[f"endpoint-{cluster}-{index}"] = observe(endpoint(cluster, index), ready_status())
    return observed


def test_zero_replicas_places_nothing_and_reads_scaled_to_zero():
    rsp = call(f.spec(0), [f.cluster("a"), f.cluster("b")])
    assert desired_resources(rsp) == {}
    assert conditions(rsp)["ReplicasScheduled"] == (
        "True",
        "ScaledToZero",
        "spec.replicas is 0: no replica is placed",
    )
    assert conditions(rsp)["ReplicasReady"] == (
        "True",
        "ScaledToZero",
        "0 of 0 ready: spec.replicas is 0",
    )
    # The scale subresource reads status.replicas.total and selects by status.selector.
    assert desired_status(rsp) == {
        "replicas": {"total": 0, "ready": 0},
        "selector": "modelplane.ai/deployment=m",
    }
    # Idle on purpose is healthy: Ready, and no warning.
    assert rsp.desired.composite.ready == fnv1.READY_TRUE
    assert results(rsp) == []


def test_scaling_to_zero_removes_every_replica_and_endpoint_and_names_them():
    deployment = f.spec(2)
    observed = serving(deployment, ("a", 0), ("b", 0))
    assert set(desired_resources(call(deployment, [f.cluster("a"), f.cluster("b")], observed))) == {
        "replica-a-0",
        "replica-b-0",
        "endpoint-a-0",
        "endpoint-b-0",
    }
    rsp = call(f.spec(0), [f.cluster("a"), f.cluster("b")], observed)
    assert desired_resources(rsp) == {}
    going = sorted([replica_name("m", "a", 0), replica_name("m", "b", 0)])
    assert conditions(rsp)["ReplicasScheduled"] == (
        "True",
        "ScaledToZero",
        f"spec.replicas is 0: no replica is placed; removing 2: {', '.join(going)}",
    )
    assert desired_status(rsp)["replicas"] == {"total": 0, "ready": 0}


def test_scaling_to_zero_also_removes_a_replica_that_was_draining():
    """A draining replica is kept only until its replacement serves; at zero none is wanted."""
    deployment = f.spec(1)
    observed = serving(deployment, ("a", 0))
    taint = {"key": "maintenance", "effect": "NoExecute"}
    clusters = [f.cluster("a", taints=[taint]), f.cluster("b")]
    draining = call(deployment, clusters, observed)
    assert {"replica-a-0", "replica-b-0"} <= set(desired_resources(draining))
    rsp = call(f.spec(0), clusters, observed)
    assert desired_resources(rsp) == {}
    assert conditions(rsp)["ReplicasScheduled"][:2] == ("True", "ScaledToZero")


def test_zero_with_no_matching_cluster_is_scaled_to_zero_not_a_warning():
    rsp = call(f.spec(0, clusterSelector={"matchLabels": {"tier": "prod"}}), [])
    assert conditions(rsp)["ReplicasScheduled"][:2] == ("True", "ScaledToZero")
    assert results(rsp) == []
    assert rsp.desired.composite.ready == fnv1.READY_TRUE


def test_scaling_back_from_zero_places_again():
    rsp = call(f.spec(1), [f.cluster("a")])
    assert set(desired_resources(rsp)) == {"replica-a-0"}
    assert conditions(rsp)["ReplicasScheduled"][:2] == ("False", "Scheduling")
    assert conditions(rsp)["ReplicasReady"] == ("False", "ModelStarting", "0 of 1 ready")
    assert desired_status(rsp)["replicas"] == {"total": 1, "ready": 0}
    assert rsp.desired.composite.ready == fnv1.READY_FALSE


# --- scale-down order (docs/model-deployment.md "Scaling down") -----------------------------


def test_scale_down_takes_the_most_loaded_cluster_first_highest_index_first():
    deployment = f.spec(3)
    clusters = [f.cluster("a"), f.cluster("b")]
    observed = serving(deployment, ("a", 0), ("a", 1), ("b", 0))
    rsp = call(f.spec(2), clusters, observed)
    # a holds two: its highest index goes; what stays keeps serving with its endpoint.
    assert set(desired_resources(rsp)) == {
        "replica-a-0",
        "endpoint-a-0",
        "replica-b-0",
        "endpoint-b-0",
    }
    assert conditions(rsp)["ReplicasReady"] == ("True", "AllReplicasReady", "2 of 2 ready")
    assert desired_status(rsp)["replicas"] == {"total": 2, "ready": 2}
    # Equal load: the cluster whose name sorts last gives its replica up.
    rsp = call(f.spec(1), clusters, serving(deployment, ("a", 0), ("b", 0)))
    assert set(desired_resources(rsp)) == {"replica-a-0", "endpoint-a-0"}


def test_scale_down_never_goes_below_what_is_asked():
    deployment = f.spec(5)
    clusters = [f.cluster("a", f.pool(nodes=3)), f.cluster("b", f.pool(nodes=3))]
    observed = serving(deployment, ("a", 0), ("a", 1), ("a", 2), ("b", 0), ("b", 1))
    for wanted in (4, 3, 2, 1):
        rsp = call(f.spec(wanted), clusters, observed)
        kept = {k for k in desired_resources(rsp) if k.startswith("replica-")}
        assert len(kept) == wanted
        assert desired_status(rsp)["replicas"] == {"total": wanted, "ready": wanted}


def test_a_hundred_replicas_are_placed_in_one_reconcile():
    clusters = [f.cluster(f"c{i:02d}", f.pool(nodes=10)) for i in range(10)]
    rsp = call(f.spec(100), clusters)
    placed = [k for k in desired_resources(rsp) if k.startswith("replica-")]
    assert len(placed) == 100
    assert desired_status(rsp)["replicas"]["total"] == 100
    # Spread evenly: every cluster takes ten.
    assert {c["metadata"]["name"]: 10 for c in clusters} == {
        name: sum(k.startswith(f"replica-{name}-") for k in placed)
        for name in (c["metadata"]["name"] for c in clusters)
    }


# --- the schema: 0..100, the field named outside it -----------------------------------------


def _validate(tmp_path, replicas: int) -> tuple[int, str]:
    body = xr(f.spec(replicas))
    path = tmp_path / "md.yaml"
    path.write_text(yaml.safe_dump(body))
    result = CliRunner().invoke(cli, ["validate", str(path)])
    return result.exit_code, result.output


@pytest.mark.parametrize("replicas", [0, 100])
def test_validate_accepts_zero_and_a_hundred(tmp_path, replicas):
    code, output = _validate(tmp_path, replicas)
    assert code == 0, output


@pytest.mark.parametrize(
    ("replicas", "message"),
    [
        (-1, "spec.replicas: Invalid value: -1: should be greater than or equal to 0"),
        (101, "spec.replicas: Invalid value: 101: should be less than or equal to 100"),
    ],
)
def test_validate_refuses_replicas_out_of_range_naming_the_field(tmp_path, replicas, message):
    code, output = _validate(tmp_path, replicas)
    assert code == 1, output
    assert message in output
