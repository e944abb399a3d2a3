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
from modelplane_common.serving import run_function
from modelplane_common.testing import make_request


def summary_configmap(cluster: dict, replicas: Iterable[dict] = ()) -> dict:
    """The cache summary ConfigMap compose-inference-cluster composes for ``cluster`` (plan.
    _compose_capacity_summary), from the status the cluster reports and its replicas."""
    name = cluster["metadata"]["name"]
    status = cluster.get("status") if isinstance(cluster.get("status"), dict) else {}
    on_it = [r for r in replicas if (r.get("spec") or {}).get("clusterName") == name]
    content = cs.summary(cluster, status, on_it)
    return cs.cache_configmap(name, cluster["metadata"].get("labels") or {}, content)


def fleet(
    clusters: Iterable[dict],
    replicas: Iterable[dict] = (),
    *,
    unsummarised: Iterable[str] = (),
    unreadable: Iterable[str] = (),
) -> list[dict]:
    """The clusters and their summaries; ``unsummarised`` clusters have none (not composed
    yet), ``unreadable`` ones a summary whose data is not a summary."""
    replicas, skip, broken = list(replicas), set(unsummarised), set(unreadable)
    objects = []
    for cluster in clusters:
        objects.append(cluster)
        name = cluster["metadata"]["name"]
        if name in skip:
            continue
        configmap = summary_configmap(cluster, replicas)
        if name in broken:
            configmap = copy.deepcopy(configmap)
            configmap["data"][cs.DATA_KEY] = '{"version": 99}'
        objects.append(configmap)
    return objects


def request(xr: dict, observed: dict | None = None) -> fnv1.RunFunctionRequest:
    return make_request(xr, observed)


def call(req: fnv1.RunFunctionRequest) -> fnv1.RunFunctionResponse:
    """One call over real gRPC."""
    return run_function(ModelCacheFunction(), req)


def run(xr: dict, objects: list[dict] | None, observed: dict | None = None):
    """The response Crossplane keeps: the function is called until its requirements are
    stable, each round with them resolved from ``objects`` (None: nothing resolved, the first
    call)."""
    req = request(xr, observed)
    if objects is None:
        return call(req)
    return run_with_requirements(call, req, ResourcePool(copy.deepcopy(objects)))
