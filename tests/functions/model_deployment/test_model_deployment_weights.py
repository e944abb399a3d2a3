"""Issue 21 through RunFunction: replicas go only where their ModelCache stages (D12), a
missing cache is a condition, and a replica that must go (its cache no longer stages there,
its cluster no longer fits it, or it was made in the shared remote namespace before D10) is
drained make-before-break, never deleted before its replacement serves."""

from __future__ import annotations

import md_fleet as f
import pytest
from compose_model_deployment.fn import ModelDeploymentFunction
from compose_model_deployment.names import replica_name
from modelplane_common.serving import run_function
from modelplane_common.testing import (
    conditions,
    desired_resources,
    fleet_required,
    make_request,
    observe,
    ready_status,
)

CACHED = {"modelCacheRef": {"name": "weights"}}


def model_cache(match_labels: dict | None = None, selector_raw: object = None) -> dict:
    spec: dict = {"source": "HuggingFace", "huggingFace": {"repo": "org/m", "sizeGiB": 1}}
    if match_labels is not None:
        spec["clusterSelector"] = {"matchLabels": match_labels}
    if selector_raw is not None:
        spec["clusterSelector"] = selector_raw
    return {
        "apiVersion": "modelplane.ai/v1alpha1",
        "kind": "ModelCache",
        "metadata": {"name": "weights", "namespace": f.NAMESPACE},
        "spec": spec,
    }


def call(spec, clusters, observed=None, caches=None, routes=None):
    xr = {
        "apiVersion": "modelplane.ai/v1alpha1",
        "kind": "ModelDeployment",
        "metadata": {"name": "m", "namespace": f.NAMESPACE},
        "spec": spec,
    }
    required = {**fleet_required(clusters, [], observed), "service-routes": routes or []}
    if caches is not None:
        required["model-cache"] = caches
    return run_function(
        ModelDeploymentFunction(), make_request(xr, observed=observed or {}, required=required)
    )


def replicas(rsp) -> dict[str, dict]:
    return {k: v for k, v in desired_resources(rsp).items() if k.startswith("replica-")}


def running(spec, *where: tuple[str, int], remote_namespace: str | None = None, **kw) -> dict:
    observed = {}
    for cluster, index in where:
        body = observe(f.replica(spec, cluster, index, **kw), ready_status())
        if remote_namespace:
            body["status"]["remoteNamespace"] = remote_namespace
        observed[f"replica-{cluster}-{index}"] = body
    return observed


EAST, WEST = {"region": "east"}, {"region": "west"}


def fleet():
    return [f.cluster("a", labels=EAST), f.cluster("b", labels=WEST)]


def test_the_deployment_asks_for_its_cache_in_its_own_namespace():
    rsp = call(f.spec(1, **CACHED), fleet())
    wanted = rsp.requirements.resources["model-cache"]
    assert (wanted.kind, wanted.match_name, wanted.namespace) == (
        "ModelCache",
        "weights",
        f.NAMESPACE,
    )


@pytest.mark.parametrize(
    ("cache", "where"),
    [
        (model_cache(WEST), ["b"]),
        (model_cache(EAST), ["a"]),
        (model_cache(), ["a", "b"]),  # no selector: staged everywhere
        (model_cache({}), ["a", "b"]),
    ],
)
def test_replicas_are_placed_only_where_the_cache_stages(cache, where):
    rsp = call(f.spec(4, **CACHED), fleet(), caches=[cache])
    assert sorted({r["spec"]["clusterName"] for r in replicas(rsp).values()}) == where


def test_no_cluster_staging_the_cache_says_so_per_cluster():
    rsp = call(f.spec(1, **CACHED), fleet(), caches=[model_cache({"region": "north"})])
    assert replicas(rsp) == {}
    status, reason, message = conditions(rsp)["ReplicasScheduled"]
    assert (status, reason) == ("False", "InsufficientCapacity")
    assert "ModelCache weights does not stage here" in message


def test_a_missing_cache_is_a_condition_and_running_replicas_are_kept():
    rsp = call(f.spec(1, **CACHED), fleet(), caches=[])
    assert replicas(rsp) == {}
    status, reason, message = conditions(rsp)["ReplicasScheduled"]
    assert (status, reason) == ("False", "CacheNotFound")
    assert "ModelCache 'weights' (spec.modelCacheRef) does not exist" in message
    spec = f.spec(1, **CACHED)
    observed = running(spec, ("a", 0))
    rsp = call(spec, fleet(), observed, caches=[])
    assert set(replicas(rsp)) == {"replica-a-0"}
    assert conditions(rsp)["ReplicasScheduled"][1] == "CacheNotFound"


def test_an_unreadable_cache_selector_keeps_everything_where_it_is():
    spec = f.spec(1, **CACHED)
    observed = running(spec, ("a", 0))
    rsp = call(spec, fleet(), observed, caches=[model_cache(selector_raw={"matchLabels": 7})])
    assert set(replicas(rsp)) == {"replica-a-0"}
    assert conditions(rsp)["ReplicasScheduled"][1] == "CacheUnreadable"


def test_replicas_carry_the_cache_label_the_cache_finds_them_by():
    rsp = call(f.spec(1, **CACHED), fleet(), caches=[model_cache(WEST)])
    (replica,) = replicas(rsp).values()
    assert replica["metadata"]["labels"]["modelplane.ai/modelcache"] == "weights"


def test_a_cache_that_stops_staging_on_a_cluster_drains_its_replica_make_before_break():
    spec = f.spec(1, **CACHED)
    observed = running(spec, ("a", 0))
    rsp = call(spec, fleet(), observed, caches=[model_cache(WEST)])
    desired = replicas(rsp)
    assert set(desired) == {"replica-a-0", "replica-b-0"}
    old = replica_name("m", "a", 0)
    assert desired["replica-a-0"]["metadata"]["annotations"]["modelplane.ai/draining"] == (
        "ModelCache weights does not stage here (spec.clusterSelector)"
    )
    assert desired["replica-b-0"]["metadata"]["annotations"]["modelplane.ai/replaces"] == old


def test_a_replica_made_in_the_shared_namespace_is_replaced_make_before_break():
    spec = f.spec(1)
    observed = running(spec, ("a", 0), remote_namespace="default")
    rsp = call(spec, [f.cluster("a", f.pool("p", 2))], observed)
    desired = replicas(rsp)
    # The successor may run on the same cluster: only the remote namespace changes.
    assert set(desired) == {"replica-a-0", "replica-a-1"}
    assert desired["replica-a-0"]["metadata"]["annotations"]["modelplane.ai/draining"] == (
        f"moving from the shared namespace default to {f.NAMESPACE}"
    )
    assert desired["replica-a-1"]["metadata"]["annotations"]["modelplane.ai/replaces"] == (
        replica_name("m", "a", 0)
    )
    # One already in its own namespace stays put.
    observed = running(spec, ("a", 0), remote_namespace=f.NAMESPACE)
    assert set(replicas(call(spec, [f.cluster("a")], observed))) == {"replica-a-0"}


HOPPER = f.standalone("main", 'device.attributes["gpu.nvidia.com"].architecture == "Hopper"')


def test_a_pool_whose_devices_change_drains_the_replica_and_keeps_it_exactly_as_it_runs():
    spec = f.spec(1, HOPPER)  # unchanged: only what the cluster publishes changes
    observed = running(spec, ("a", 0))
    # "p" now publishes Ampere devices only (its Hopper entry is gone); "q" still has Hopper.
    changed = f.cluster("a", f.pool("p", 2, f.gpu(architecture="Ampere")), f.pool("q", 2))
    rsp = call(spec, [changed], observed)
    desired = replicas(rsp)
    assert set(desired) == {"replica-a-0", "replica-a-1"}
    old = desired["replica-a-0"]
    assert old["spec"] == observed["replica-a-0"]["spec"]  # untouched while it drains
    assert old["metadata"]["annotations"]["modelplane.ai/draining"] == (
        'no longer fits: engine main does not match the devices of pool "p"'
    )
    assert desired["replica-a-1"]["spec"]["engines"][0]["members"][0]["nodePoolName"] == "q"
    assert desired["replica-a-1"]["metadata"]["annotations"]["modelplane.ai/replaces"] == (
        replica_name("m", "a", 0)
    )
    _, _, message = conditions(rsp)["ReplicasScheduled"]
    assert "no longer fits" in message


def test_a_replica_its_cluster_no_longer_fits_stays_while_nothing_can_replace_it():
    spec = f.spec(1, HOPPER)
    observed = running(spec, ("a", 0))
    changed = f.cluster("a", f.pool("p", 2, f.gpu(architecture="Ampere")))
    desired = replicas(call(spec, [changed], observed))
    assert set(desired) == {"replica-a-0"}
    assert desired["replica-a-0"]["spec"] == observed["replica-a-0"]["spec"]
