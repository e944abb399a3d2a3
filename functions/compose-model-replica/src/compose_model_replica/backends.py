"""Workload backends: one workload per engine plus its members' claim templates (§6, §7).

An engine with a Standalone member becomes an ``apps/v1`` Deployment; a Leader + Worker engine
becomes a LeaderWorkerSet. Backends build no routing: the routing layer decorates their serving
pod templates afterwards (§9, §10).
"""

from __future__ import annotations

import dataclasses
from typing import Any

from modelplane_schemas.generated.modelplane_ai.v1alpha1.modelreplica import Engine, Member

from compose_model_replica import names
from compose_model_replica.dra import claim_template
from compose_model_replica.pods import (
    LWS_ROLE_LABEL,
    SERVING_LABEL,
    WORKLOAD_LABEL,
    PodOptions,
    pod_template,
)

JSON = dict[str, Any]

DEPLOYMENT_KIND = "Deployment"
LWS_KIND = "LeaderWorkerSet"
# Never surge: the scheduler fills pools to the last node, so a surge pod would wait for a GPU
# node that does not exist (design/engines.md). A Deployment recreates its pods: a RollingUpdate
# without surge needs maxUnavailable >= 1, which makes its Available condition (the replica's
# readiness) true with a single copy down. An LWS's Available always needs every group ready.
RECREATE = {"type": "Recreate"}
NO_SURGE = {"maxSurge": 0, "maxUnavailable": 1}


@dataclasses.dataclass
class EngineObjects:
    """Everything one engine contributes, by desired-resource key."""

    engine: Engine
    workload_key: str
    workload: JSON
    claims: dict[str, JSON]


def _role(member: Member) -> str:
    return member.role or "Standalone"


def _claims(replica: str, namespace: str, engine: Engine) -> tuple[dict[str, str], dict[str, JSON]]:
    """Template name per claiming role, and the templates by key."""
    names_by_role: dict[str, str] = {}
    templates: dict[str, JSON] = {}
    for member in engine.members:
        if not member.deviceRequests:
            continue  # a claimless member (e.g. a coordinator) gets no claim at all
        role = _role(member)
        name = names.claim_template_name(replica, engine.name, role)
        names_by_role[role] = name
        templates[names.claim_key(engine.name, role)] = claim_template(
            name, namespace, member.deviceRequests
        )
    return names_by_role, templates


def native_deployment(
    replica: str,
    namespace: str,
    engine: Engine,
    member: Member,
    *,
    claim: str | None,
    cache_claim: str | None,
) -> JSON:
    """One Deployment for a Standalone engine; ``replicas`` is the engine's copies."""
    workload = names.workload_name(replica, engine.name)
    # Select on the per-workload label only: every engine of the replica shares the serving
    # label, so selecting on it would overlap the Deployments' selectors.
    options = PodOptions(
        labels={SERVING_LABEL: replica, WORKLOAD_LABEL: workload},
        serving=True,
        gang=False,
        claim_template=claim,
        cache_claim=cache_claim,
    )
    return {
        "apiVersion": "apps/v1",
        "kind": DEPLOYMENT_KIND,
        "metadata": {"name": workload, "namespace": namespace},
        "spec": {
            "replicas": engine.copies or 1,
            "selector": {"matchLabels": {WORKLOAD_LABEL: workload}},
            "strategy": dict(RECREATE),
            "template": pod_template(member, options),
        },
    }


def leader_worker_set(
    replica: str,
    namespace: str,
    engine: Engine,
    leader: Member,
    worker: Member,
    *,
    claims: dict[str, str],
    cache_claim: str | None,
) -> JSON:
    """One LeaderWorkerSet for a Leader + Worker engine; ``replicas`` counts gangs."""
    leader_options = PodOptions(
        labels={SERVING_LABEL: replica, LWS_ROLE_LABEL: "leader"},
        serving=True,
        gang=True,
        claim_template=claims.get("Leader"),
        cache_claim=cache_claim,
    )
    # Followers never serve, so they carry no Modelplane label at all.
    worker_options = PodOptions(
        labels={},
        serving=False,
        gang=True,
        claim_template=claims.get("Worker"),
        cache_claim=cache_claim,
    )
    followers = worker.worker.nodes if worker.worker is not None else 1
    return {
        "apiVersion": "leaderworkerset.x-k8s.io/v1",
        "kind": LWS_KIND,
        "metadata": {
            "name": names.workload_name(replica, engine.name),
            "namespace": namespace,
        },
        "spec": {
            "replicas": engine.copies or 1,
            "rolloutStrategy": {
                "type": "RollingUpdate",
                "rollingUpdateConfiguration": dict(NO_SURGE),
            },
            "leaderWorkerTemplate": {
                "size": 1 + followers,
                "leaderTemplate": pod_template(leader, leader_options),
                "workerTemplate": pod_template(worker, worker_options),
            },
        },
    }


def build_engine(
    replica: str, namespace: str, engine: Engine, cache_claim: str | None
) -> EngineObjects:
    """The workload and claim templates of one engine (in the replica's remote ``namespace``),
    chosen by its members' roles."""
    claim_names, templates = _claims(replica, namespace, engine)
    by_role = {_role(m): m for m in engine.members}
    if "Standalone" in by_role:
        workload = native_deployment(
            replica,
            namespace,
            engine,
            by_role["Standalone"],
            claim=claim_names.get("Standalone"),
            cache_claim=cache_claim,
        )
    else:
        # The XRD admits exactly [Leader, Worker] (either order) otherwise.
        workload = leader_worker_set(
            replica,
            namespace,
            engine,
            by_role["Leader"],
            by_role["Worker"],
            claims=claim_names,
            cache_claim=cache_claim,
        )
    return EngineObjects(engine, names.workload_key(engine.name), workload, templates)


def serving_template(workload: JSON) -> JSON:
    """The serving pod template of a workload: a Deployment's, or an LWS's leader template."""
    if workload["kind"] == LWS_KIND:
        return workload["spec"]["leaderWorkerTemplate"]["leaderTemplate"]
    return workload["spec"]["template"]


def serving_member(engine: Engine) -> Member:
    """The member whose pods serve: the Standalone member or the Leader."""
    return next(m for m in engine.members if _role(m) in ("Standalone", "Leader"))
