"""Everything a replica puts on its workload cluster, before wrapping (model-replica.md §3-§10).

Pure: a validated replica in, remote manifests by desired-resource key out. Each engine's
objects depend only on that engine (and the replica's name, namespace and cache), so editing
one engine changes only its own objects.
"""

from __future__ import annotations

import dataclasses
from typing import Any

from modelplane_common import route_timeouts
from modelplane_common.cache_naming import CACHE_MOUNT_PATH, cache_pvc_name
from modelplane_common.naming import CLUSTER_LABEL
from modelplane_schemas.generated.modelplane_ai.v1alpha1.modelreplica import ModelReplica

from compose_model_replica import engine_plumbing, routing
from compose_model_replica.backends import (
    DEPLOYMENT_KIND,
    LWS_KIND,
    build_engine,
    serving_member,
)
from compose_model_replica.pods import mentions_cache

JSON = dict[str, Any]

OBJECT_API_VERSION = "kubernetes.m.crossplane.io/v1alpha1"
# Workloads publish Available, never Ready; the has() guard keeps the query false until the
# remote object has a status at all.
AVAILABLE_QUERY = (
    "has(object.status.conditions) && "
    'object.status.conditions.exists(c, c.type == "Available" && c.status == "True")'
)


@dataclasses.dataclass(frozen=True)
class Notice:
    reason: str
    message: str


@dataclasses.dataclass
class Plan:
    """Remote manifests by key (engines first, in order), and what the user should know."""

    manifests: dict[str, JSON]
    workload_keys: list[str]  # model-serving-<engine>, in engine order
    warnings: list[Notice]


def serving_mode(replica: ModelReplica) -> str:
    return replica.spec.serving.mode if replica.spec.serving is not None else "Unified"


def _timeouts(replica: ModelReplica) -> tuple[str | None, str | None]:
    serving = replica.spec.serving
    given = serving.timeouts if serving is not None else None
    return (given.request, given.backendRequest) if given is not None else (None, None)


def shape_problems(replica: ModelReplica) -> list[str]:
    """The XRD's CEL rules the planner relies on, re-checked so a replica that bypassed
    admission is reported by field instead of failing half-way through planning."""
    problems: list[str] = []
    engines = replica.spec.engines
    for index, engine in enumerate(engines):
        roles = sorted(m.role or "Standalone" for m in engine.members)
        if roles not in (["Standalone"], ["Leader", "Worker"]):
            problems.append(
                f"spec.engines[{index}].members: an engine must be either a single Standalone "
                "member or one Leader and one Worker member"
            )
        if len({m.nodePoolName for m in engine.members}) > 1:
            problems.append(
                f"spec.engines[{index}].members: all members of an engine must be pinned to the "
                "same node pool"
            )
    phases = sorted(e.phase for e in engines if e.phase is not None)
    if serving_mode(replica) == "PrefillDecode":
        if len(engines) != 2 or phases != ["Decode", "Prefill"]:
            problems.append(
                "spec.engines: PrefillDecode serving requires exactly two engines "
                "(one Prefill, one Decode)"
            )
    elif phases:
        problems.append(
            "spec.engines: engine phase may only be set when serving.mode is PrefillDecode"
        )
    problems.extend(route_timeouts.problems(*_timeouts(replica), "spec.serving.timeouts"))
    if not problems:
        # Only a well-shaped replica has phase engines and members to check.
        problems.extend(engine_plumbing.problems(replica))
    return problems


def plan_replica(replica: ModelReplica, name: str, namespace: str) -> Plan:
    """All remote manifests of replica ``namespace/name``."""
    spec = replica.spec
    cache_claim = cache_pvc_name(namespace, spec.modelCacheRef.name) if spec.modelCacheRef else None
    engines = [build_engine(name, namespace, engine, cache_claim) for engine in spec.engines]
    warnings: list[Notice] = []
    if cache_claim is not None:
        for engine in spec.engines:
            (container,) = serving_member(engine).template.spec.containers
            if not mentions_cache(container):
                warnings.append(
                    Notice(
                        "CacheNotReferenced",
                        f"engine {engine.name!r} mounts ModelCache {spec.modelCacheRef.name!r} "
                        f"at {CACHE_MOUNT_PATH}, but its serving container's command and args "
                        f"never mention {CACHE_MOUNT_PATH}; point the engine at it (e.g. "
                        f"--model={CACHE_MOUNT_PATH}) or it fetches weights on its own",
                    )
                )

    routed: dict[str, JSON]
    timeouts = route_timeouts.rule_timeouts(*_timeouts(replica))
    if serving_mode(replica) == "PrefillDecode":
        ports = engine_plumbing.phase_ports(replica)
        routed = routing.prefill_decode(name, namespace, engines, ports, timeouts)
        warnings.extend(Notice("UnrecognisedEngine", m) for m in engine_plumbing.warnings(replica))
    else:
        routed = routing.unified(name, namespace, timeouts)

    manifests: dict[str, JSON] = {}
    for built in engines:
        manifests[built.workload_key] = built.workload
        manifests.update(built.claims)
    manifests.update(routed)
    return Plan(manifests, [e.workload_key for e in engines], warnings)


def is_available_gated(manifest: JSON) -> bool:
    """Engine and picker workloads are ready when Available; everything else once created."""
    return manifest.get("apiVersion") in (
        "apps/v1",
        "leaderworkerset.x-k8s.io/v1",
    ) and manifest.get("kind") in (DEPLOYMENT_KIND, LWS_KIND)


def wrap(manifest: JSON, provider_config: str, cluster: str) -> JSON:
    """A provider-kubernetes ``Object`` creating ``manifest`` through ``provider_config``.

    Crossplane names the Object in the replica's namespace. The cluster label lets the
    InferenceCluster stay (and keep the CRDs its stack installs) until every Object is gone,
    not just the replica: deleting a replica deletes its Objects in the background.
    """
    spec: JSON = {
        "providerConfigRef": {"kind": "ClusterProviderConfig", "name": provider_config},
        "readiness": {"policy": "SuccessfulCreate"},
        "forProvider": {"manifest": manifest},
    }
    if is_available_gated(manifest):
        spec["readiness"] = {"policy": "DeriveFromCelQuery", "celQuery": AVAILABLE_QUERY}
        # Watched, not polled: provider-kubernetes re-reads an unready Object only every 30 s,
        # which a replica's time to serving (and a drain) would otherwise pay each time.
        spec["watch"] = True
    return {
        "apiVersion": OBJECT_API_VERSION,
        "kind": "Object",
        "metadata": {"labels": {CLUSTER_LABEL: cluster}},
        "spec": spec,
    }
