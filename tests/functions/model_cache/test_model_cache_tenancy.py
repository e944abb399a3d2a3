"""Issue 21 through RunFunction: a cache stages into the tenant's own namespace (D10), moves
out of the shared one make-before-break, keeps weights replicas still mount (D12), and
refuses reserved namespaces."""

from __future__ import annotations

import copy

import mc_fleet
import pytest
from mc_fleet import FRONTIER, NS, cluster, replica


def cache(ns: str = NS, selector: dict | None = FRONTIER, status: dict | None = None) -> dict:
    return mc_fleet.cache(selector, ns=ns, status=status)


GKE, EKS = cluster("gke-us-central"), cluster("eks-us-east")


def _run(xr, clusters, observed=None, replicas=(), unsummarised=()):
    """Through real gRPC, requirements resolved from the clusters' summaries as Crossplane
    resolves them; ``unsummarised`` clusters have no summary (who mounts the cache there is
    unknown)."""
    objects = mc_fleet.fleet(clusters, replicas, unsummarised=unsummarised)
    return mc_fleet.run(xr, objects, observed)


def _legacy(observed: dict[str, dict]) -> dict[str, dict]:
    """The same objects as made before D10: in the workload cluster's shared namespace."""
    moved = copy.deepcopy(observed)
    for body in moved.values():
        body["spec"]["forProvider"]["manifest"]["metadata"]["namespace"] = "default"
        body["status"]["atProvider"]["manifest"]["metadata"]["namespace"] = "default"
    return moved


def test_the_cache_learns_who_mounts_it_from_the_summaries_of_its_staged_clusters():
    staged = mc_fleet.observe(mc_fleet.desired(_run(cache(), [GKE])))
    # Still selected: its summary arrives once, with the selected ones, never again by name.
    rsp = _run(cache(), [GKE], staged)
    assert set(rsp.requirements.resources) == {"clusters"}
    # No longer selected: the staged cluster's summary is read by name, so the replicas
    # mounting the weights there are still known (and the weights stay while they run).
    users = [replica("r-0", "gke-us-central", NS)]
    rsp = _run(cache(selector={"modelplane.ai/tier": "other"}), [GKE], staged, users)
    wanted = rsp.requirements.resources["staged.gke-us-central"]
    assert (wanted.kind, wanted.namespace, wanted.match_name) == (
        "ConfigMap",
        "modelplane-system",
        "caches-gke-us-central",
    )
    # No ModelReplica is read: they are counted by the cluster that runs them.
    assert {r.kind for r in rsp.requirements.resources.values()} == {"ConfigMap"}
    assert "pvc-gke-us-central" in mc_fleet.desired(rsp)


@pytest.mark.parametrize("namespace", ["kube-system", "modelplane-system", "cert-manager"])
def test_a_reserved_namespace_is_refused_and_nothing_is_dropped(namespace):
    xr = cache(ns=namespace)
    rsp = _run(xr, [GKE])
    assert mc_fleet.desired(rsp) == {}
    (artifact,) = [c for c in rsp.conditions if c.type == "ArtifactReady"]
    assert artifact.reason == "ReservedNamespace" and repr(namespace) in artifact.message
    observed = mc_fleet.observe(mc_fleet.desired(_run(cache(), [GKE])))
    assert set(mc_fleet.desired(_run(xr, [GKE], observed))) == set(observed)


def test_a_cache_made_in_the_shared_namespace_stages_again_beside_it_then_lets_it_go():
    staged = mc_fleet.observe(mc_fleet.desired(_run(cache(), [GKE])))
    legacy = _legacy({k: v for k, v in staged.items() if k.startswith("pvc-")})
    xr = cache(status={"clusters": [{"name": "gke-us-central", "phase": "Ready"}]})

    # A replica from before D10 still mounts the shared PVC: both PVCs are composed.
    users = [replica("old", "gke-us-central", "default")]
    rsp = _run(xr, [GKE], legacy, users)
    desired = mc_fleet.desired(rsp)
    assert (
        desired["pvc-gke-us-central"]
        == legacy["pvc-gke-us-central"] | {"status": desired["pvc-gke-us-central"].get("status")}
        or desired["pvc-gke-us-central"]["spec"] == legacy["pvc-gke-us-central"]["spec"]
    )
    new_pvc = desired["ns-pvc-gke-us-central"]["spec"]["forProvider"]["manifest"]
    assert new_pvc["metadata"]["namespace"] == NS
    assert "ns-hydrate-gke-us-central" in desired  # hydrated afresh in the tenant's namespace
    entry = mc_fleet.composite_status(rsp)["clusters"][0]
    assert entry["phase"] == "Pending"  # the new PVC's phase: new replicas wait for it
    assert "stays while it is mounted (old)" in entry["message"]

    # Unknown replicas (no summary of the cluster) keep it too; once every replica runs in the
    # tenant's namespace, it goes.
    unknown = mc_fleet.desired(_run(xr, [GKE], legacy, unsummarised=["gke-us-central"]))
    assert unknown["pvc-gke-us-central"]["spec"] == legacy["pvc-gke-us-central"]["spec"]
    now = {**legacy, **mc_fleet.observe({k: v for k, v in desired.items() if k.startswith("ns-")})}
    done = mc_fleet.desired(_run(xr, [GKE], now, [replica("new", "gke-us-central", NS)]))
    assert "pvc-gke-us-central" not in done
    assert "ns-pvc-gke-us-central" in done  # and keeps its key from now on


def test_a_cluster_the_selector_no_longer_matches_keeps_its_pvc_while_replicas_mount_it():
    both = [GKE, EKS]
    observed = mc_fleet.observe(mc_fleet.desired(_run(cache(), both)))
    narrowed = cache(selector={"modelplane.ai/tier": "frontier", "zone": "us"})
    gke = copy.deepcopy(GKE)
    gke["metadata"]["labels"]["zone"] = "us"
    users = [replica("r", "eks-us-east", NS)]
    rsp = _run(narrowed, [gke, EKS], observed, users)
    desired = mc_fleet.desired(rsp)
    assert desired["pvc-eks-us-east"]["spec"] == observed["pvc-eks-us-east"]["spec"]
    entries = {e["name"]: e for e in mc_fleet.composite_status(rsp)["clusters"]}
    assert "replicas still mount it (r)" in entries["eks-us-east"]["message"]
    # Once nothing runs there, the weights go (the selector's intent).
    gone = mc_fleet.desired(_run(narrowed, [gke, EKS], observed, []))
    assert not any(k.endswith("eks-us-east") for k in gone)
