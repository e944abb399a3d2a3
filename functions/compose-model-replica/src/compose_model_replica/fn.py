"""compose-model-replica: a ModelReplica's engines, claims and routing on its pinned cluster.

Thin glue over the pure modules: resolve the pinned InferenceCluster, plan the remote
manifests, wrap each in a provider-kubernetes Object and report status. Whenever the function
cannot build its normal desired state (an invalid replica, an unresolved cluster, a cluster
without a provider config) it re-emits every observed composed resource unchanged and says why,
because leaving one out would delete it on the workload cluster.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import pydantic
from google.protobuf import struct_pb2
from modelplane_common import tenancy, tolerant
from modelplane_common.function import (
    CompositionFunction,
    Outcome,
    Request,
    Selector,
    Severity,
    validation_summary,
)
from modelplane_common.observed import held
from modelplane_schemas.generated.modelplane_ai.v1alpha1.modelreplica import ModelReplica

from compose_model_replica import names, status
from compose_model_replica.plan import plan_replica, shape_problems, wrap

CLUSTER_REQUIREMENT = "cluster"
CACHE_REQUIREMENT = "model-cache"
CLUSTER_API_VERSION = "modelplane.ai/v1alpha1"
CLUSTER_KIND = "InferenceCluster"


def _provider_config(cluster: Mapping[str, Any]) -> str:
    return tolerant.text(cluster, "status", "providerConfigRef", "name") or ""


def _hold(outcome: Outcome, request: Request, why: str) -> None:
    """Keep every observed composed resource exactly as it is (IC-3, platform C4)."""
    for key, obj in request.observed.items():
        ready = status.composed_ready(obj, names.is_workload_key(key))
        outcome.compose(key, held(obj), ready=ready)
    if request.observed:
        kept = len(request.observed)
        outcome.event("Warning", f"{why}; keeping {kept} composed object(s) unchanged", "Holding")
    else:
        # Crossplane calls an XR without composed resources Ready; nothing runs yet, so say so.
        outcome.composite_ready = False


def _waiting(
    outcome: Outcome,
    request: Request,
    reason: str,
    message: str,
    *,
    ready_reason: str = "WaitingForModel",
    severity: Severity = "Normal",
) -> Outcome:
    _hold(outcome, request, message)
    outcome.condition(status.ACCEPTED, False, reason, message)
    outcome.condition(status.READY, False, ready_reason, message)
    outcome.event(severity, message, reason)
    return outcome


def _manifest_namespace(obj: Mapping[str, Any]) -> str | None:
    return tolerant.text(obj, "spec", "forProvider", "manifest", "metadata", "namespace")


def legacy_namespace(observed: Mapping[str, Any], namespace: str) -> str:
    """The shared remote namespace this replica's objects were made in before D10, or "".

    Such a replica is kept exactly as it runs: moving its objects in place would orphan the
    old ones (provider-kubernetes does not delete what a changed manifest no longer names).
    Its ModelDeployment replaces it with a replica in the tenant's namespace instead."""
    found = {_manifest_namespace(obj) for obj in observed.values()} - {None, namespace}
    return sorted(str(n) for n in found)[0] if found else ""


def _cache_gate(request: Request, replica: ModelReplica, cluster: str) -> tuple[str, str]:
    """(reason, message) while the replica's ModelCache is not staged on its cluster, else
    ("", ""): pods that would mount an unstaged (or missing) PVC never start (D12)."""
    ref = replica.spec.modelCacheRef
    if ref is None:
        return "", ""
    found = request.proto.required_resources
    if CACHE_REQUIREMENT not in found:
        return "WaitingForCache", f"Resolving ModelCache {ref.name!r}"
    caches = found[CACHE_REQUIREMENT].items
    if not caches:
        return "CacheNotFound", (
            f"ModelCache {ref.name!r} (spec.modelCacheRef) does not exist in namespace "
            f"{request.namespace or 'default'}"
        )
    phase = _staged_phase(caches[0].resource, cluster)
    if phase == "Ready":
        return "", ""
    where = f"phase {phase}" if phase else "not staging there yet"
    return "WaitingForCache", (
        f"ModelCache {ref.name!r} is not staged on cluster {cluster} ({where}); pods start "
        "once it is"
    )


def _staged_phase(cache: struct_pb2.Struct, cluster: str) -> str | None:
    """The phase the ModelCache reports for ``cluster`` (``status.clusters[]``), or None when
    it lists none readable. Read straight from protobuf: the list names every cluster the
    cache stages on (hundreds), and only one entry matters here."""
    status = cache.fields.get("status")
    if status is None or status.WhichOneof("kind") != "struct_value":
        return None
    clusters = status.struct_value.fields.get("clusters")
    if clusters is None or clusters.WhichOneof("kind") != "list_value":
        return None
    for entry in clusters.list_value.values:
        if entry.WhichOneof("kind") != "struct_value":
            continue
        fields = entry.struct_value.fields
        name = fields.get("name")
        if name is None or name.WhichOneof("kind") != "string_value":
            continue
        if name.string_value == cluster:
            phase = fields.get("phase")
            if phase is None or phase.WhichOneof("kind") != "string_value":
                return None
            return phase.string_value
    return None


def _invalid(outcome: Outcome, request: Request, problems: str) -> Outcome:
    message = f"invalid ModelReplica: {problems}"
    _hold(outcome, request, message)
    outcome.condition(status.ACCEPTED, False, "InvalidSpec", message)
    outcome.condition(status.READY, False, "WaitingForModel", message)
    outcome.event("Warning", message, "InvalidSpec")
    return outcome


def compose_replica(request: Request) -> Outcome:
    """The outcome for one observed ModelReplica."""
    outcome = Outcome()
    namespace = request.namespace or "default"
    cluster_name = request.spec.get("clusterName")
    if isinstance(cluster_name, str) and cluster_name:
        outcome.requirements[CLUSTER_REQUIREMENT] = Selector(
            CLUSTER_API_VERSION, CLUSTER_KIND, match_name=cluster_name
        )
    cache_ref = tolerant.text(request.spec, "modelCacheRef", "name")
    if cache_ref:
        outcome.requirements[CACHE_REQUIREMENT] = Selector(
            CLUSTER_API_VERSION, "ModelCache", match_name=cache_ref, namespace=namespace
        )
    reserved = tenancy.reserved_reason(namespace)
    if reserved:
        return _waiting(
            outcome,
            request,
            "ReservedNamespace",
            f"{reserved}; create the ModelDeployment in a namespace of its own",
            ready_reason="ReservedNamespace",
            severity="Warning",
        )
    try:
        # Only spec is the replica's contract; status and metadata belong to Crossplane.
        replica = ModelReplica.model_validate({"spec": request.spec})
    except pydantic.ValidationError as err:
        return _invalid(outcome, request, validation_summary(err))
    problems = shape_problems(replica)
    if problems:
        return _invalid(outcome, request, "; ".join(problems))
    cluster_name = replica.spec.clusterName

    clusters = request.required(CLUSTER_REQUIREMENT)
    if clusters is None:
        return _waiting(outcome, request, "WaitingForCluster", "Waiting for cluster to be resolved")
    if not clusters:
        return _waiting(
            outcome,
            request,
            "WaitingForCluster",
            f"Waiting for cluster to be resolved: InferenceCluster {cluster_name!r} not found",
        )
    provider_config = _provider_config(clusters[0])
    if not provider_config:
        return _waiting(
            outcome,
            request,
            "WaitingForCluster",
            f"Waiting for cluster providerConfigRef: InferenceCluster {cluster_name!r} has no "
            "status.providerConfigRef.name yet",
        )

    name = request.name
    plan = plan_replica(replica, name, namespace)
    states = [status.workload_state(k, request.observed.get(k)) for k in plan.workload_keys]
    legacy = legacy_namespace(request.observed, namespace)
    if legacy:
        _hold(outcome, request, f"objects in the shared namespace {legacy!r}")
        outcome.conditions.extend(status.replica_conditions(states))
        outcome.composite_status = {"remoteNamespace": legacy}
        return outcome
    outcome.composite_status = {"remoteNamespace": namespace}
    if not any(k in request.observed for k in plan.workload_keys):
        reason, message = _cache_gate(request, replica, cluster_name)
        if reason:
            severity: Severity = "Warning" if reason == "CacheNotFound" else "Normal"
            return _waiting(
                outcome, request, reason, message, ready_reason=reason, severity=severity
            )
    workloads = set(plan.workload_keys)
    for key, manifest in plan.manifests.items():
        observed = request.observed.get(key)
        outcome.compose(
            key,
            wrap(manifest, provider_config, cluster_name),
            ready=status.composed_ready(observed, key in workloads),
        )

    outcome.conditions.extend(status.replica_conditions(states))
    for notice in plan.warnings:
        outcome.event("Warning", notice.message, notice.reason)
    for key in plan.manifests:
        error = status.sync_error(request.observed.get(key))
        if error:
            outcome.event(
                "Warning", f"{key}: cannot apply on {cluster_name}: {error}", "ApplyFailed"
            )
    if not any(k in request.observed for k in plan.workload_keys):
        (first,) = replica.spec.engines[0].members[0].template.spec.containers
        outcome.event("Normal", f"Composing {first.image} on {cluster_name}", "Composing")
    return outcome


class ModelReplicaFunction(CompositionFunction):
    name = "compose-model-replica"

    def compose(self, request: Request) -> Outcome:
        return compose_replica(request)
