"""What compose-model-deployment reads of a fleet (issue 23 item 2), through real gRPC with its
requirements resolved round by round as Crossplane resolves them.

It reads the InferenceClasses, the clusters it runs on and their capacity summaries by name,
and candidates' summaries: all of them when they are small, else shards widened while too few
clusters were read or a replica found no place, within a byte budget.
"""

from __future__ import annotations

import json

import md_fleet as f
import pytest
from compose_model_deployment import fleet_inputs
from compose_model_deployment.fn import ModelDeploymentFunction
from crossplane.function.proto.v1 import run_function_pb2 as fnv1
from hypothesis import given, settings
from hypothesis import strategies as st
from modelplane.pipeline import ResourcePool, run_with_requirements
from modelplane_common import capacity_summary as cs
from modelplane_common.plain import JSON
from modelplane_common.serving import run_function
from modelplane_common.testing import (
    conditions,
    desired_resources,
    fleet_required,
    make_request,
    observe,
)

NAME = "m"


def _xr(spec: JSON) -> JSON:
    return {
        "apiVersion": "modelplane.ai/v1alpha1",
        "kind": "ModelDeployment",
        "metadata": {"name": NAME, "namespace": f.NAMESPACE},
        "spec": spec,
    }


def fleet_objects(clusters: list[JSON], replicas: list[JSON] = ()) -> list[JSON]:
    """Everything a control plane with these clusters holds that the deployment may read."""
    required = fleet_required(clusters, list(replicas))
    return [*required["inference-classes"], *clusters, *required["capacity-all"]]


class Rounds:
    """Calls the function as Crossplane's requirement loop does, recording each request."""

    def __init__(self) -> None:
        self.requests: list[fnv1.RunFunctionRequest] = []

    def __call__(self, request: fnv1.RunFunctionRequest) -> fnv1.RunFunctionResponse:
        copied = fnv1.RunFunctionRequest()
        copied.CopyFrom(request)
        self.requests.append(copied)
        return run_function(ModelDeploymentFunction(), request)


def reconcile(
    spec: JSON, objects: list[JSON], observed: dict[str, JSON] | None = None
) -> tuple[fnv1.RunFunctionResponse, Rounds]:
    rounds = Rounds()
    request = make_request(_xr(spec), observed)
    rsp = run_with_requirements(rounds, request, ResourcePool(objects))
    return rsp, rounds


def placed(rsp: fnv1.RunFunctionResponse) -> dict[str, str]:
    return {
        body["metadata"]["name"]: body["spec"]["clusterName"]
        for key, body in desired_resources(rsp).items()
        if key.startswith("replica-")
    }


def summary_keys(request: fnv1.RunFunctionRequest) -> list[str]:
    return sorted(k for k in request.required_resources if k.startswith("capacity-"))


def test_a_small_fleet_is_read_whole_in_three_rounds():
    clusters = [f.cluster(f"c{i}") for i in range(5)]
    rsp, rounds = reconcile(f.spec(2), fleet_objects(clusters))
    # One shard first; its size says the whole fleet's summaries are small: read them all.
    assert len(rounds.requests) == 3
    assert summary_keys(rounds.requests[0]) == []
    first = fleet_inputs.first_shard(f.NAMESPACE, NAME)
    assert summary_keys(rounds.requests[1]) == [f"capacity-shard-{first:02d}"]
    assert summary_keys(rounds.requests[2]) == ["capacity-all"]
    assert len(rounds.requests[2].required_resources["capacity-all"].items) == 5
    assert sorted(placed(rsp).values()) == ["c0", "c1"]


@pytest.fixture
def small_budget(monkeypatch):
    """A fleet too large to read whole: 64 shards' summaries exceed the byte budget."""
    monkeypatch.setattr(fleet_inputs, "BYTE_BUDGET", 200_000)
    monkeypatch.setattr(fleet_inputs, "MIN_CANDIDATES", 8)


def _spread_fleet(count: int, full: set[str] = frozenset()) -> list[JSON]:
    """``count`` clusters; those named in ``full`` have no free GPU."""
    return [
        f.cluster(f"c{i:03}", f.pool("p", 0 if f"c{i:03}" in full else 2)) for i in range(count)
    ]


def test_a_large_fleet_widens_shard_by_shard_until_enough_clusters_are_read(small_budget):
    clusters = _spread_fleet(200)
    rsp, rounds = reconcile(f.spec(1), fleet_objects(clusters))
    final = rounds.requests[-1]
    keys = summary_keys(final)
    assert "capacity-all" not in keys
    read = sum(len(final.required_resources[k].items) for k in keys)
    # Four shards or more (fourfold widening from one), at least MIN_CANDIDATES clusters, and
    # never everything: about 200 / 64 per shard.
    assert len(keys) >= 4 and read >= 8 and read < 200
    assert len(rounds.requests) <= 6  # Crossplane gives up after five requirement rounds
    assert len(placed(rsp)) == 1
    # Stable: the last response asks for exactly what the last request carried.
    assert sorted(k for k in rsp.requirements.resources if k.startswith("capacity-")) == keys


def test_a_replica_with_no_room_among_the_clusters_read_widens_the_search(small_budget):
    first = fleet_inputs.first_shard(f.NAMESPACE, NAME)
    names = [f"c{i:03}" for i in range(200)]
    near = {fleet_inputs.shard_key((first + i) % cs.SHARDS)[-2:] for i in range(4)}
    # Every cluster in the first four shards is full; only farther ones have room.
    full = {n for n in names if cs.shard_value(cs.shard_of(n)) in near}
    rsp, rounds = reconcile(f.spec(1), fleet_objects(_spread_fleet(200, full)))
    assert len(summary_keys(rounds.requests[-1])) > 4
    (where,) = placed(rsp).values()
    assert where not in full


def test_a_cluster_without_a_summary_holds_its_replicas_and_takes_nothing_new():
    clusters = [f.cluster("a"), f.cluster("b")]
    running = observe(f.replica(f.spec(2), "a", 0), {"conditions": []})
    objects = [o for o in fleet_objects(clusters) if o["metadata"]["name"] != "capacity-a"]
    rsp, _ = reconcile(f.spec(3), objects, {"replica-a-0": running})
    # a's replica stays; the new ones go to b only (a's usage by others is not known).
    assert sorted(placed(rsp).values()) == ["a", "b", "b"]


def test_a_deleted_clusters_stale_summary_is_not_a_place_to_go():
    clusters = [f.cluster("a"), f.cluster("b")]
    running = observe(f.replica(f.spec(1), "a", 0), {"conditions": []})
    # InferenceCluster a is gone; its summary has not been garbage-collected yet.
    objects = [o for o in fleet_objects(clusters) if o is not clusters[0]]
    rsp, _ = reconcile(f.spec(1), objects, {"replica-a-0": running})
    assert list(placed(rsp).values()) == ["b"]


def test_an_unreadable_summary_is_named_and_holds():
    clusters = [f.cluster("a")]
    running = observe(f.replica(f.spec(1), "a", 0), {"conditions": []})
    objects = fleet_objects(clusters)
    for obj in objects:
        if obj["kind"] == "ConfigMap":
            obj["data"][cs.DATA_KEY] = "{not json"
    rsp, _ = reconcile(f.spec(2), objects, {"replica-a-0": running})
    assert list(placed(rsp).values()) == ["a"]
    status, _, message = conditions(rsp)["ReplicasScheduled"]
    assert status == "False"
    assert "capacity summary ConfigMap modelplane-system/capacity-a unreadable" in message


@settings(max_examples=300, deadline=None)
@given(
    sizes=st.lists(st.integers(0, 200_000), min_size=cs.SHARDS, max_size=cs.SHARDS),
    counts=st.lists(st.integers(0, 300), min_size=cs.SHARDS, max_size=cs.SHARDS),
    # Whether a replica finds no place depends on what was read: one answer per scope.
    short=st.fixed_dictionaries({n: st.booleans() for n in fleet_inputs.WIDENING}),
    first=st.integers(0, cs.SHARDS - 1),
)
def test_requirement_rounds_settle_within_crossplanes_limit(sizes, counts, short, first):
    """Whatever the shards hold and whether replicas fit, the scope read settles (the same twice)
    by the sixth call, as Crossplane's requirement loop demands, and only ever widens."""
    scope = fleet_inputs.next_scope(None, first, short=False)
    scopes = [scope]
    for _ in range(5):
        shards = [(first + i) % cs.SHARDS for i in range(scope.shards)]
        fleet = fleet_inputs.Fleet(
            scope,
            [],
            [],
            candidates=sum(counts[s] for s in shards),
            candidate_bytes=sum(sizes[s] for s in shards),
        )
        scope = fleet_inputs.next_scope(fleet, first, short=short[scope.shards])
        scopes.append(scope)
    assert scopes[-1] == scopes[-2]
    assert [s.shards for s in scopes] == sorted(s.shards for s in scopes)
    assert len({s.shards for s in scopes}) <= 4


def test_a_replica_of_ours_only_a_lagging_summary_lists_is_charged_never_composed():
    """Deleted last reconcile, still in its cluster's summary: its devices count until the
    summary catches up, but its summary entry is never composed back as a ModelReplica."""
    gone = f.replica(f.spec(1), "c", 0, ready=True)
    objects = fleet_objects([f.cluster("c", f.pool("p", 1))], [gone])
    for obj in objects:  # c's pool names a class that does not exist: pins there are frozen
        if obj["kind"] == "ConfigMap":
            content = cs.parse(obj)
            content["status"]["gpuPools"][0]["className"] = "gone"
            obj["data"][cs.DATA_KEY] = json.dumps(content)
    rsp, _ = reconcile(f.spec(1), objects, {})
    assert desired_resources(rsp) == {}
    # With its class readable, the one node's GPU is still charged to it: nothing fits yet.
    rsp, _ = reconcile(f.spec(1), fleet_objects([f.cluster("c", f.pool("p", 1))], [gone]), {})
    assert placed(rsp) == {}
    assert conditions(rsp)["ReplicasScheduled"][0] == "False"
