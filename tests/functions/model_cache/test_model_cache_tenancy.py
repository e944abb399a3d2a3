"""Issue 21 through RunFunction: a cache stages into the tenant's own namespace (D10), moves
out of the shared one make-before-break, keeps weights replicas still mount (D12), and
refuses reserved namespaces."""

from __future__ import annotations

import copy

import mc_fleet
import pytest
from modelplane_common.plain import to_plain

NS = "ml-team"
FRONTIER = {"modelplane.ai/tier": "frontier"}


def cache(ns: str = NS, selector: dict | None = FRONTIER, status: dict | None = None) -> dict:
    spec: dict = {"source": "HuggingFace", "huggingFace": {"repo": "org/llama", "sizeGiB": 160}}
    if selector is not None:
        spec["clusterSelector"] = {"matchLabels": selector}
    xr = {
        "apiVersion": "modelplane.ai/v1alpha1",
        "kind": "ModelCache",
        "metadata": {"name": "llama-70b", "namespace": ns},
        "spec": spec,
    }
    if status:
        xr["status"] = status
    return xr


def cluster(name: str) -> dict:
    return {
        "apiVersion": "modelplane.ai/v1alpha1",
        "kind": "InferenceCluster",
        "metadata": {"name": name, "labels": {"modelplane.ai/tier": "frontier"}},
        "spec": {"cluster": {"source": "Existing", "existing": {"secretRef": {"name": "k"}}}},
        "status": {"providerConfigRef": {"name": f"{name}-pc"}},
    }


GKE, EKS = cluster("gke-us-central"), cluster("eks-us-east")


def _run(xr, clusters, observed=None, replicas=(), unsummarised=()):
    """Through real gRPC, requirements resolved from the clusters' summaries as Crossplane
    resolves them; ``unsummarised`` clusters have no summary (who mounts the cache there is
    unknown)."""
    objects = mc_fleet.fleet(clusters, replicas, unsummarised=unsummarised)
    return mc_fleet.run(xr, objects, observed)


def _desired(rsp) -> dict[str, dict]:
    return {k: to_plain(r.resource) for k, r in rsp.desired.resources.items()}


def _observe(desired: dict[str, dict], *, bound: bool = True) -> dict[str, dict]:
    observed = {}
    for key, body in desired.items():
        seen = copy.deepcopy(body)
        remote = copy.deepcopy(body["spec"]["forProvider"]["manifest"])
        if key.startswith(("pvc-", "ns-pvc-")) and bound:
            remote["status"] = {"phase": "Bound"}
        seen["status"] = {
            "atProvider": {"manifest": remote},
            "conditions": [{"type": "Ready", "status": "True" if bound else "False"}],
        }
        observed[key] = seen
    return observed


def _legacy(observed: dict[str, dict]) -> dict[str, dict]:
    """The same objects as made before D10: in the workload cluster's shared namespace."""
    moved = copy.deepcopy(observed)
    for body in moved.values():
        body["spec"]["forProvider"]["manifest"]["metadata"]["namespace"] = "default"
        body["status"]["atProvider"]["manifest"]["metadata"]["namespace"] = "default"
    return moved


def replica(name: str, cluster_name: str, remote_namespace: str | None) -> dict:
    body = {
        "apiVersion": "modelplane.ai/v1alpha1",
        "kind": "ModelReplica",
        "metadata": {
            "name": name,
            "namespace": NS,
            "labels": {"modelplane.ai/modelcache": "llama-70b"},
        },
        "spec": {"clusterName": cluster_name},
    }
    if remote_namespace:
        body["status"] = {"remoteNamespace": remote_namespace}
    return body


def test_the_cache_learns_who_mounts_it_from_the_summaries_of_its_staged_clusters():
    staged = _observe(_desired(_run(cache(), [GKE])))
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
    assert "pvc-gke-us-central" in _desired(rsp)


@pytest.mark.parametrize("namespace", ["kube-system", "modelplane-system", "cert-manager"])
def test_a_reserved_namespace_is_refused_and_nothing_is_dropped(namespace):
    xr = cache(ns=namespace)
    rsp = _run(xr, [GKE])
    assert _desired(rsp) == {}
    (artifact,) = [c for c in rsp.conditions if c.type == "ArtifactReady"]
    assert artifact.reason == "ReservedNamespace" and repr(namespace) in artifact.message
    observed = _observe(_desired(_run(cache(), [GKE])))
    assert set(_desired(_run(xr, [GKE], observed))) == set(observed)


def test_a_cache_made_in_the_shared_namespace_stages_again_beside_it_then_lets_it_go():
    staged = _observe(_desired(_run(cache(), [GKE])))
    legacy = _legacy({k: v for k, v in staged.items() if k.startswith("pvc-")})
    xr = cache(status={"clusters": [{"name": "gke-us-central", "phase": "Ready"}]})

    # A replica from before D10 still mounts the shared PVC: both PVCs are composed.
    users = [replica("old", "gke-us-central", "default")]
    rsp = _run(xr, [GKE], legacy, users)
    desired = _desired(rsp)
    assert (
        desired["pvc-gke-us-central"]
        == legacy["pvc-gke-us-central"] | {"status": desired["pvc-gke-us-central"].get("status")}
        or desired["pvc-gke-us-central"]["spec"] == legacy["pvc-gke-us-central"]["spec"]
    )
    new_pvc = desired["ns-pvc-gke-us-central"]["spec"]["forProvider"]["manifest"]
    assert new_pvc["metadata"]["namespace"] == NS
    assert "ns-hydrate-gke-us-central" in desired  # hydrated afresh in the tenant's namespace
    entry = to_plain(rsp.desired.composite.resource)["status"]["clusters"][0]
    assert entry["phase"] == "Pending"  # the new PVC's phase: new replicas wait for it
    assert "stays while it is mounted (old)" in entry["message"]

    # Unknown replicas (no summary of the cluster) keep it too; once every replica runs in the
    # tenant's namespace, it goes.
    unknown = _desired(_run(xr, [GKE], legacy, unsummarised=["gke-us-central"]))
    assert unknown["pvc-gke-us-central"]["spec"] == legacy["pvc-gke-us-central"]["spec"]
    now = {**legacy, **_observe({k: v for k, v in desired.items() if k.startswith("ns-")})}
    done = _desired(_run(xr, [GKE], now, [replica("new", "gke-us-central", NS)]))
    assert "pvc-gke-us-central" not in done
    assert "ns-pvc-gke-us-central" in done  # and keeps its key from now on


def test_a_cluster_the_selector_no_longer_matches_keeps_its_pvc_while_replicas_mount_it():
    both = [GKE, EKS]
    observed = _observe(_desired(_run(cache(), both)))
    narrowed = cache(selector={"modelplane.ai/tier": "frontier", "zone": "us"})
    gke = copy.deepcopy(GKE)
    gke["metadata"]["labels"]["zone"] = "us"
    users = [replica("r", "eks-us-east", NS)]
    rsp = _run(narrowed, [gke, EKS], observed, users)
    desired = _desired(rsp)
    assert desired["pvc-eks-us-east"]["spec"] == observed["pvc-eks-us-east"]["spec"]
    entries = {e["name"]: e for e in to_plain(rsp.desired.composite.resource)["status"]["clusters"]}
    assert "replicas still mount it (r)" in entries["eks-us-east"]["message"]
    # Once nothing runs there, the weights go (the selector's intent).
    gone = _desired(_run(narrowed, [gke, EKS], observed, []))
    assert not any(k.endswith("eks-us-east") for k in gone)
