"""The fleet a ModelCache reads, as a control plane holds it: InferenceClusters, and the
cache summary ConfigMaps compose-inference-cluster composes from them and the ModelReplicas
pinned to them; requirements resolved from it as Crossplane resolves them, round by round."""

from __future__ import annotations

import copy
from collections.abc import Iterable

from compose_model_cache.fn import ModelCacheFunction
from crossplane.function.proto.v1 import run_function_pb2 as fnv1
from modelplane.pipeline import ResourcePool, run_with_requirements
from modelplane_common import capacity_summary as cs
from modelplane_common.plain import to_plain
from modelplane_common.serving import run_function
from modelplane_common.testing import make_request

NS = "ml-team"
CACHE = "llama-70b"
FRONTIER = {"modelplane.ai/tier": "frontier"}


def cache(selector: dict | None = None, *, ns: str = NS, status: dict | None = None) -> dict:
    """ModelCache ``CACHE`` in ``ns``; ``selector``: its clusterSelector's matchLabels (None:
    no selector, staged on demand)."""
    spec: dict = {"source": "HuggingFace", "huggingFace": {"repo": "org/llama", "sizeGiB": 160}}
    if selector is not None:
        spec["clusterSelector"] = {"matchLabels": selector}
    xr = {
        "apiVersion": "modelplane.ai/v1alpha1",
        "kind": "ModelCache",
        "metadata": {"name": CACHE, "namespace": ns},
        "spec": spec,
    }
    if status:
        xr["status"] = status
    return xr


def cluster(name: str, source: str = "Existing") -> dict:
    """A provisioned InferenceCluster labelled ``FRONTIER``."""
    block = {"Existing": {"secretRef": {"name": "k"}}, "EKS": {"region": "us-east-1"}}[source]
    return {
        "apiVersion": "modelplane.ai/v1alpha1",
        "kind": "InferenceCluster",
        "metadata": {"name": name, "labels": dict(FRONTIER)},
        "spec": {"cluster": {"source": source, source.lower(): block}},
        "status": {"providerConfigRef": {"name": f"{name}-pc"}},
    }


def replica(
    name: str,
    on: str,
    remote_namespace: str | None = None,
    *,
    cache_name: str = CACHE,
    ns: str = NS,
) -> dict:
    """A ModelReplica mounting ``cache_name`` placed on cluster ``on``, serving in
    ``remote_namespace`` there (None: its own namespace's name, as under D10)."""
    return {
        "apiVersion": "modelplane.ai/v1alpha1",
        "kind": "ModelReplica",
        "metadata": {
            "name": name,
            "namespace": ns,
            "labels": {"modelplane.ai/modelcache": cache_name},
        },
        "spec": {"clusterName": on},
        "status": {"remoteNamespace": remote_namespace or ns},
    }


def desired(rsp: fnv1.RunFunctionResponse) -> dict[str, dict]:
    return {k: to_plain(r.resource) for k, r in rsp.desired.resources.items()}


def composite_status(rsp: fnv1.RunFunctionResponse) -> dict:
    return to_plain(rsp.desired.composite.resource)["status"]


def observe(
    objects: dict[str, dict], *, bound: bool = True, complete: bool = False
) -> dict[str, dict]:
    """The Objects as provider-kubernetes reports them: PVCs Bound (``bound``) and Ready,
    Jobs running or, with ``complete``, done."""
    seen = {}
    for key, composed in objects.items():
        body = copy.deepcopy(composed)
        remote = copy.deepcopy(body["spec"]["forProvider"]["manifest"])
        if key.startswith(("pvc-", "ns-pvc-")) and bound:
            remote["status"] = {"phase": "Bound"}
        elif "hydrate-" in key and complete:
            remote["status"] = {"conditions": [{"type": "Complete", "status": "True"}]}
        body["status"] = {
            "atProvider": {"manifest": remote},
            "conditions": [{"type": "Ready", "status": "True" if bound else "False"}],
        }
        seen[key] = body
    return seen


def summary_configmap(
    cluster: dict, replicas: Iterable[dict] = (), staged: Iterable[str] = ()
) -> dict:
    """The cache summary ConfigMap compose-inference-cluster composes for ``cluster`` (plan.
    _compose_capacity_summary), from the status the cluster reports, its replicas and the
    caches (``<namespace>/<name>``) with Objects on it."""
    name = cluster["metadata"]["name"]
    status = cluster.get("status") if isinstance(cluster.get("status"), dict) else {}
    on_it = [r for r in replicas if (r.get("spec") or {}).get("clusterName") == name]
    content = cs.summary(cluster, status, on_it, staged=staged)
    return cs.cache_configmap(name, cluster["metadata"].get("labels") or {}, content)


def provider_config(cluster: dict, *, deleting: bool = False) -> dict:
    """The ClusterProviderConfig compose-inference-cluster composes for ``cluster``, named as
    its status publishes it; ``deleting``: deleted while Objects still use it."""
    metadata: dict = {"name": cluster["status"]["providerConfigRef"]["name"]}
    if deleting:
        metadata["deletionTimestamp"] = "2026-01-01T00:00:00Z"
        metadata["finalizers"] = ["in-use.crossplane.io"]
    return {"apiVersion": "kubernetes.m.crossplane.io/v1alpha1",
            "kind": "ClusterProviderConfig", "metadata": metadata,
            "spec": {"credentials": {"source": "Secret"}}}  # fmt: skip


def fleet(
    clusters: Iterable[dict],
    replicas: Iterable[dict] = (),
    *,
    unsummarised: Iterable[str] = (),
    unreadable: Iterable[str] = (),
    staged: Iterable[str] = (),
    deleting: Iterable[str] = (),
) -> list[dict]:
    """The clusters, their provider configs and their summaries; ``unsummarised`` clusters
    have none (not composed yet), ``unreadable`` ones a summary whose data is not a summary.
    ``staged``: clusters where the cache (``NS/CACHE``) has Objects, as their summaries say
    once published again; ``deleting``: clusters whose provider config is being deleted."""
    replicas, skip, broken = list(replicas), set(unsummarised), set(unreadable)
    objects = []
    for cluster in clusters:
        objects.append(cluster)
        name = cluster["metadata"]["name"]
        if (cluster.get("status") or {}).get("providerConfigRef"):
            objects.append(provider_config(cluster, deleting=name in set(deleting)))
        if name in skip:
            continue
        on_it = [f"{NS}/{CACHE}"] if name in set(staged) else []
        configmap = summary_configmap(cluster, replicas, on_it)
        if name in broken:
            configmap = copy.deepcopy(configmap)
            configmap["data"][cs.DATA_KEY] = '{"version": 99}'
        objects.append(configmap)
    return objects


def request(xr: dict, observed: dict | None = None) -> fnv1.RunFunctionRequest:
    return make_request(xr, observed)


def call(req: fnv1.RunFunctionRequest, *, minute: int | None = None) -> fnv1.RunFunctionResponse:
    """One call over real gRPC, at ``minute`` (None: every staged cluster's existence is
    looked up, not one shard a minute)."""
    function = ModelCacheFunction()
    if minute is None:
        function.check_all_staged = True
    else:
        function.clock = lambda: minute * 60.0
    return run_function(function, req)


def run(
    xr: dict, objects: list[dict] | None, observed: dict | None = None, *, minute: int | None = None
):
    """The response Crossplane keeps: the function is called until its requirements are
    stable, each round with them resolved from ``objects`` (None: nothing resolved, the first
    call)."""
    req = request(xr, observed)
    if objects is None:
        return call(req, minute=minute)
    pool = ResourcePool(copy.deepcopy(objects))
    return run_with_requirements(lambda r: call(r, minute=minute), req, pool)
