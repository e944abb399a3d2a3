"""A ModelDeployment whose engines could never run says so before it places anything (issue
22): the same checks compose-model-replica refuses with, reported on the deployment, naming the
field, the engine and the port. Replicas that already run are kept exactly as they are."""

from __future__ import annotations

import copy

import md_fleet as f
from compose_model_deployment.fn import ModelDeploymentFunction
from modelplane_common.serving import run_function
from modelplane_common.testing import (
    conditions,
    desired_resources,
    fleet_required,
    make_request,
    observe,
    ready_status,
)


def _xr(spec: dict) -> dict:
    return {
        "apiVersion": "modelplane.ai/v1alpha1",
        "kind": "ModelDeployment",
        "metadata": {"name": "m", "namespace": f.NAMESPACE},
        "spec": spec,
    }


def _call(spec: dict, clusters: list[dict], replicas: list[dict], observed: dict):
    required = {**fleet_required(clusters, replicas, observed), "service-routes": []}
    request = make_request(_xr(spec), observed=observed, required=required)
    return run_function(ModelDeploymentFunction(), request)


def _engine(name: str, phase: str, args: list[str]) -> dict:
    engine = f.standalone(name)
    engine["phase"] = phase
    engine["members"][0]["template"]["spec"]["containers"][0].update(
        image="vllm/vllm-openai:v0.11.0", args=args
    )
    return engine


def _prefill_decode(decode_args: list[str]) -> dict:
    return f.spec(
        2,
        _engine("prefill", "Prefill", ["--model=m"]),
        _engine("decode", "Decode", decode_args),
        serving={"mode": "PrefillDecode"},
    )


CLUSTERS = [f.cluster("a", f.pool("p", 4, f.gpu(8))), f.cluster("b", f.pool("p", 4, f.gpu(8)))]


def test_a_decode_engine_on_the_sidecars_port_is_refused_before_anything_is_placed():
    rsp = _call(_prefill_decode(["--model=m"]), CLUSTERS, [], {})
    assert desired_resources(rsp) == {}
    status, reason, message = conditions(rsp)["ReplicasScheduled"]
    assert (status, reason) == ("False", "InvalidEngine")
    assert "spec.engines[1].members[0].template.spec.containers[0].args" in message
    assert "decode engine 'decode' (vLLM) listens on port 8000 (vLLM's default)" in message


def test_a_well_ported_prefill_decode_deployment_is_placed():
    rsp = _call(_prefill_decode(["--model=m", "--port=8001"]), CLUSTERS, [], {})
    assert len([k for k in desired_resources(rsp) if k.startswith("replica-")]) == 2
    assert conditions(rsp)["ReplicasScheduled"][1] == "Scheduling"


def test_breaking_the_engines_of_a_running_deployment_keeps_its_replicas():
    good = _prefill_decode(["--model=m", "--port=8001"])
    composed = desired_resources(_call(good, CLUSTERS, [], {}))
    observed = {key: observe(body, ready_status()) for key, body in composed.items()}
    broken = copy.deepcopy(good)
    broken["engines"][1]["members"][0]["template"]["spec"]["containers"][0]["args"] = ["--m"]
    rsp = _call(broken, CLUSTERS, list(observed.values()), observed)
    desired = desired_resources(rsp)
    assert set(desired) == set(observed)
    for key, body in desired.items():
        assert body["spec"] == observed[key]["spec"]
    assert conditions(rsp)["ReplicasScheduled"][1] == "InvalidEngine"


def test_an_extended_resource_without_a_limit_is_refused_naming_the_field():
    spec = f.spec(1)
    container = spec["engines"][0]["members"][0]["template"]["spec"]["containers"][0]
    container["resources"] = {"requests": {"rdma/ib": 1}}
    rsp = _call(spec, CLUSTERS, [], {})
    status, reason, message = conditions(rsp)["ReplicasScheduled"]
    assert (status, reason) == ("False", "InvalidEngine")
    assert "spec.engines[0].members[0].template.spec.containers[0].resources.limits" in message
