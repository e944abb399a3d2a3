"""Issue 23 through real gRPC: a ModelCache reads capacity summaries, not every
InferenceCluster and ModelReplica, and without a clusterSelector stages on demand, where
replicas mounting it are placed; staged weights stay while their cluster exists, and a missing
or unreadable summary never deletes them (design/cache-staging.md)."""

from __future__ import annotations

import copy

import mc_fleet
from compose_model_cache.cache_inputs import existence_shard
from compose_model_cache.fn import EXISTENCE_SHARD_CONTEXT_KEY, ModelCacheFunction
from crossplane.function.proto.v1 import run_function_pb2 as fnv1
from mc_fleet import CACHE, NS, cache, cluster, desired, observe, replica
from modelplane_common import capacity_summary as cs
from modelplane_common.serving import run_function

GKE, EKS, ONPREM = cluster("gke-us-central"), cluster("eks-us-east", "EKS"), cluster("onprem")
FLEET = [GKE, EKS, ONPREM]


status = mc_fleet.composite_status


def staged_on_eks() -> dict[str, dict]:
    """The cache staged on eks-us-east, where a replica mounting it runs."""
    return observe(
        desired(mc_fleet.run(cache(), mc_fleet.fleet(FLEET, [replica("r0", "eks-us-east")])))
    )


def test_without_a_selector_the_first_call_asks_only_for_the_clusters_it_is_mounted_on():
    rsp = mc_fleet.run(cache(), None)
    assert dict(rsp.desired.resources) == {}
    assert set(rsp.requirements.resources) == {"clusters"}
    wanted = rsp.requirements.resources["clusters"]
    assert (wanted.api_version, wanted.kind, wanted.namespace) == (
        "v1",
        "ConfigMap",
        "modelplane-system",
    )
    assert dict(wanted.match_labels.labels) == {
        cs.cache_label(NS, CACHE): "wanted",  # clusters where it is not staged yet
        "modelplane.ai/cache-summary": "true",
    }


def test_without_a_selector_it_stages_only_where_a_replica_mounting_it_runs():
    users = [
        replica("r0", "eks-us-east"),
        # Not this cache: another cache on gke, and the same cache name in another namespace.
        replica("other", "gke-us-central", cache_name="qwen"),
        replica("theirs", "onprem", ns="team-b"),
    ]
    rsp = mc_fleet.run(cache(), mc_fleet.fleet(FLEET, users))
    assert sorted(desired(rsp)) == ["hydrate-eks-us-east", "pvc-eks-us-east"]
    pvc = desired(rsp)["pvc-eks-us-east"]["spec"]["forProvider"]["manifest"]
    # The cluster's storage class comes from its summary (EKS: EFS).
    assert pvc["spec"]["storageClassName"] == "modelplane-rwx-efs"
    assert desired(rsp)["pvc-eks-us-east"]["spec"]["providerConfigRef"]["name"] == "eks-us-east-pc"
    assert status(rsp) == {
        "summary": {"ready": "0/1"},
        "clusters": [{"name": "eks-us-east", "phase": "Pending"}],
    }
    # Not one InferenceCluster or ModelReplica is read.
    assert {r.kind for r in rsp.requirements.resources.values()} == {"ConfigMap"}


def test_without_a_selector_and_no_replica_placed_nothing_is_staged_and_it_says_why():
    rsp = mc_fleet.run(cache(), mc_fleet.fleet(FLEET, [replica("x", "onprem", cache_name="q")]))
    assert desired(rsp) == {}
    (artifact,) = [c for c in rsp.conditions if c.type == "ArtifactReady"]
    assert artifact.reason == "NoClusters"
    assert "without spec.clusterSelector it is staged where they are placed" in artifact.message
    assert rsp.desired.composite.ready == fnv1.READY_FALSE


def test_a_staged_cluster_keeps_its_weights_after_its_replicas_leave_while_it_exists():
    observed = staged_on_eks()
    # The replica moved to onprem: onprem is staged too, eks keeps its PVC (not its Job).
    rsp = mc_fleet.run(cache(), mc_fleet.fleet(FLEET, [replica("r1", "onprem")]), observed)
    objects = desired(rsp)
    assert objects["pvc-eks-us-east"]["spec"] == observed["pvc-eks-us-east"]["spec"]
    assert {"pvc-onprem", "hydrate-onprem"} <= set(objects)
    assert not any(k.endswith("gke-us-central") for k in objects)
    # Not its summary but its provider config was read by name: the cluster still exists.
    wanted = rsp.requirements.resources["provider.eks-us-east"]
    assert (wanted.kind, wanted.match_name) == ("ClusterProviderConfig", "eks-us-east-pc")
    assert "staged.eks-us-east" not in rsp.requirements.resources
    assert [c["name"] for c in status(rsp)["clusters"]] == ["eks-us-east", "onprem"]


def test_a_staged_clusters_summary_is_not_read_while_its_provider_config_exists():
    # Published again once the cache is staged there: eks no longer "wants" the cache.
    observed = mc_fleet.observe(staged_on_eks(), complete=True)
    users = [replica("r0", "eks-us-east")]
    fleet = mc_fleet.fleet(FLEET, users, staged=["eks-us-east"])
    rsp = mc_fleet.run(cache(), fleet, observed)
    assert set(rsp.requirements.resources) == {"clusters", "provider.eks-us-east"}
    objects = desired(rsp)
    assert set(objects) == {"pvc-eks-us-east"}  # staged: its Job done and dropped
    assert objects["pvc-eks-us-east"]["spec"] == observed["pvc-eks-us-east"]["spec"]
    assert status(rsp)["clusters"] == [{"name": "eks-us-east", "phase": "Ready"}]
    # Its provider config being deleted (its InferenceCluster was): the summary and the
    # cluster are read by name, and a deleted cluster's objects go.
    going = [GKE, ONPREM, mc_fleet.provider_config(EKS, deleting=True)]
    rsp = mc_fleet.run(cache(), mc_fleet.fleet(going), observed)
    assert {"staged.eks-us-east", "cluster.eks-us-east"} <= set(rsp.requirements.resources)
    assert desired(rsp) == {}
    # ... while a cluster that still exists keeps them, whatever its config: its summary is
    # read by name, and says so.
    fleet = mc_fleet.fleet(FLEET, users, staged=["eks-us-east"], deleting=["eks-us-east"])
    rsp = mc_fleet.run(cache(), fleet, observed)
    assert "staged.eks-us-east" in rsp.requirements.resources
    assert set(desired(rsp)) == {"pvc-eks-us-east"}
    # Its summary missing too, the InferenceCluster is read: it exists, so all is held.
    fleet = mc_fleet.fleet(FLEET, users, unsummarised=["eks-us-east"], deleting=["eks-us-east"])
    rsp = mc_fleet.run(cache(), fleet, observed)
    assert "cluster.eks-us-east" in rsp.requirements.resources
    assert desired(rsp)["pvc-eks-us-east"]["spec"] == observed["pvc-eks-us-east"]["spec"]
    (entry,) = status(rsp)["clusters"]
    assert "caches-eks-us-east is missing" in entry["message"]


def test_a_deleted_staged_cluster_loses_its_objects():
    observed = staged_on_eks()
    gone = [GKE, ONPREM]  # eks-us-east and (with it) its summary are deleted
    rsp = mc_fleet.run(cache(), mc_fleet.fleet(gone), observed)
    assert desired(rsp) == {}
    # The InferenceCluster was asked for by name because the summary was missing.
    wanted = rsp.requirements.resources["cluster.eks-us-east"]
    assert (wanted.kind, wanted.match_name) == ("InferenceCluster", "eks-us-east")


def test_a_staged_cluster_whose_summary_is_missing_or_unreadable_is_held():
    observed = staged_on_eks()
    for broken in ({"unsummarised": ["eks-us-east"]}, {"unreadable": ["eks-us-east"]}):
        for xr in (cache(), cache(selector={"modelplane.ai/tier": "frontier"})):
            rsp = mc_fleet.run(xr, mc_fleet.fleet(FLEET, **broken), observed)
            objects = desired(rsp)
            # eks's PVC and Job are kept exactly as observed (with the selector, the other
            # frontier clusters are staged besides).
            for key, body in observed.items():
                assert objects[key]["spec"] == body["spec"], (broken, xr["spec"])
            (entry,) = [c for c in status(rsp)["clusters"] if c["name"] == "eks-us-east"]
            if "clusterSelector" in xr["spec"]:
                assert "caches-eks-us-east" in entry["message"]
                assert "kept as they are" in entry["message"]
                assert entry["phase"] == "Ready"  # its replicas' pods may still start there
            else:  # its summary is not read at all: its provider config says it exists
                assert entry == {"name": "eks-us-east", "phase": "Hydrating"}  # as observed


def test_malformed_cache_users_in_a_summary_hold_an_unmatched_clusters_pvc():
    observed = staged_on_eks()
    objects = mc_fleet.fleet(FLEET)
    for body in objects:
        if body["kind"] == "ConfigMap" and body["metadata"]["name"] == "caches-eks-us-east":
            body["data"][cs.DATA_KEY] = body["data"][cs.DATA_KEY].replace(
                '"caches":{}', f'"caches":{{"{NS}/{CACHE}":"oops"}}'
            )
    # A selector that no longer matches eks: its PVC stays only while replicas mount it,
    # and the summary cannot say whether they do.
    rsp = mc_fleet.run(cache(selector={"zone": "nowhere"}), objects, observed)
    assert desired(rsp)["pvc-eks-us-east"]["spec"] == observed["pvc-eks-us-east"]["spec"]
    # Readable and empty: the weights go (the selector's intent).
    rsp = mc_fleet.run(cache(selector={"zone": "nowhere"}), mc_fleet.fleet(FLEET), observed)
    assert desired(rsp) == {}


def test_a_staged_clusters_summary_not_resolved_yet_holds_everything():
    observed = staged_on_eks()
    req = mc_fleet.request(cache(), observed)
    # Crossplane resolved "clusters" (nothing carries the label any more) but not yet the
    # staged cluster's provider config by name.
    req.required_resources["clusters"].SetInParent()
    rsp = mc_fleet.call(req)
    assert set(desired(rsp)) == set(observed)
    assert rsp.requirements.resources["provider.eks-us-east"].match_name == "eks-us-east-pc"
    # Its config is gone (the cluster may be): its summary is asked for, and until it comes
    # everything is still held.
    req.required_resources["provider.eks-us-east"].SetInParent()
    rsp = mc_fleet.call(req)
    assert set(desired(rsp)) == set(observed)
    assert "staged.eks-us-east" in rsp.requirements.resources
    # Nothing resolved at all: the same.
    assert set(desired(mc_fleet.run(cache(), None, observed))) == set(observed)


def test_staged_clusters_existence_is_looked_up_a_shard_a_minute_and_unhealthy_ones_always():
    names = [f"c-{i}" for i in range(40)]
    clusters = [cluster(n) for n in names]
    users = [replica(f"r-{n}", n) for n in names]
    first = mc_fleet.run(cache(), mc_fleet.fleet(clusters, users))
    observed = mc_fleet.observe(desired(first), complete=True)
    staged = mc_fleet.fleet(clusters, users, staged=names)
    by_shard: dict[int, list[str]] = {}
    for n in names:
        by_shard.setdefault(existence_shard(n), []).append(n)
    shard, in_turn = next(iter(sorted(by_shard.items())))
    other = next(n for n in names if existence_shard(n) != shard)
    # Its Object fails to sync (its cluster's kubeconfig is gone): looked up every minute.
    observed[f"pvc-{other}"]["status"]["conditions"].append({"type": "Synced", "status": "False"})
    rsp = mc_fleet.run(cache(), staged, observed, minute=shard)
    looked_up = {k for k in rsp.requirements.resources if k.startswith("provider.")}
    assert looked_up == {f"provider.{n}" for n in [*in_turn, other]}
    assert set(desired(rsp)) == {f"pvc-{n}" for n in names}
    # A deleted cluster whose Object stays healthy (an Existing cluster's kubeconfig is the
    # user's) is kept until its shard's minute comes, then its PVC goes.
    gone = in_turn[0]
    without = mc_fleet.fleet([c for c in clusters if c["metadata"]["name"] != gone], users,
                             staged=names)  # fmt: skip
    later = mc_fleet.run(cache(), without, observed, minute=shard + 1)
    assert f"pvc-{gone}" in desired(later)
    now = mc_fleet.run(cache(), without, observed, minute=shard + 16)
    assert set(desired(now)) == {f"pvc-{n}" for n in names if n != gone}


def test_a_deleted_staged_cluster_is_found_within_the_calls_crossplane_allows():
    # Crossplane calls a function at most six times while its requirements change.
    observed = mc_fleet.observe(staged_on_eks(), complete=True)
    gone = [GKE, ONPREM]
    calls = []
    req = mc_fleet.request(cache(), observed)
    pool = mc_fleet.ResourcePool(mc_fleet.fleet(gone))

    def counted(r):
        calls.append(set(r.required_resources))
        return mc_fleet.call(r)

    rsp = mc_fleet.run_with_requirements(counted, req, pool)
    assert desired(rsp) == {}
    # clusters and the config; the summary; the InferenceCluster; settled.
    assert len(calls) == 4
    assert calls[1] == {"clusters", "provider.eks-us-east"}


def test_a_reconcile_looks_up_one_shard_even_when_the_minute_changes_between_calls():
    names = [f"c-{i}" for i in range(40)]
    clusters = [cluster(n) for n in names]
    users = [replica(f"r-{n}", n) for n in names]
    first = desired(mc_fleet.run(cache(), mc_fleet.fleet(clusters, users)))
    observed = mc_fleet.observe(first, complete=True)
    pool = mc_fleet.ResourcePool(mc_fleet.fleet(clusters, users, staged=names))
    function = ModelCacheFunction()
    minutes = iter(range(100))
    function.clock = lambda: next(minutes) * 60.0  # a minute passes between any two calls
    calls = []

    def call(req):
        calls.append(req)
        return run_function(function, req)

    rsp = mc_fleet.run_with_requirements(call, mc_fleet.request(cache(), observed), pool)
    looked_up = {k.removeprefix("provider.") for k in rsp.requirements.resources}
    assert looked_up - {"clusters"} == {n for n in names if existence_shard(n) == 0}
    assert rsp.context[EXISTENCE_SHARD_CONTEXT_KEY] == 0  # pinned by the first call
    assert len(calls) <= 3
    assert set(desired(rsp)) == {f"pvc-{n}" for n in names}


def test_a_cluster_still_holding_a_pvc_from_before_d10_is_read_by_name():
    # The PVC in the shared namespace, from before D10: who mounts it and the class of the one
    # replacing it are in the summary, so the cache does not take the cluster as it is.
    staged = staged_on_eks()
    legacy = {}
    for key, body in staged.items():
        old = copy.deepcopy(body)
        old["spec"]["forProvider"]["manifest"]["metadata"]["namespace"] = "default"
        old["status"]["atProvider"]["manifest"]["metadata"]["namespace"] = "default"
        legacy[key] = old
    users = [replica("r0", "eks-us-east")]
    fleet = mc_fleet.fleet(FLEET, users, staged=["eks-us-east"])
    rsp = mc_fleet.run(cache(), fleet, legacy)
    assert "staged.eks-us-east" in rsp.requirements.resources
    assert "provider.eks-us-east" not in rsp.requirements.resources
    objects = desired(rsp)
    # The replacement, in the tenant's namespace, on EKS's class; the old one goes: the
    # summary says its only replica runs in the tenant's namespace.
    manifest = objects["ns-pvc-eks-us-east"]["spec"]["forProvider"]["manifest"]
    assert manifest["spec"]["storageClassName"] == "modelplane-rwx-efs"
    assert "pvc-eks-us-east" not in objects
