"""compose-model-deployment: the Crossplane glue around the fleet scheduler.

Reads three required-resource sets (``clusters``, ``all-replicas``, and the HTTPRoutes of its
namespace, ``service-routes``), runs the scheduler, and
composes one ModelReplica per placed replica plus one ModelEndpoint per replica that is Ready
on a cluster that can serve (Ready, with a gateway address). Whenever the schedule cannot be
computed (requirements not resolved yet, an invalid selector, a spec the schema would reject)
the observed replicas and endpoints are re-emitted unchanged: leaving them out would delete
serving replicas.
"""

from __future__ import annotations

import dataclasses
import datetime
from collections.abc import Iterable, Mapping
from typing import Any

import pydantic
from modelplane_common import drain_annotations, engines, route_timeouts, tolerant
from modelplane_common.cache_naming import CACHE_LABEL
from modelplane_common.function import (
    SETTLING_TTL,
    CompositionFunction,
    Outcome,
    Request,
    Selector,
    injected_now,
    validation_summary,
)
from modelplane_common.observed import condition, held, is_ready, readiness
from modelplane_schemas.generated.modelplane_ai.v1alpha1.modeldeployment import Spec

from compose_model_deployment import fleet_inputs, messages, names, scheduler, traffic
from compose_model_deployment.scheduler import Cluster, Deployment, Placement, Schedule

API_VERSION = "modelplane.ai/v1alpha1"
ROUTE_API_VERSION = "gateway.networking.k8s.io/v1"
SERVICE_ROUTES = traffic.SERVICE_ROUTES
MODEL_CACHE = "model-cache"
SCHEDULED = "ReplicasScheduled"
READY = "ReplicasReady"
# spec.replicas is 0: nothing placed, on purpose (docs/model-deployment.md).
SCALED_TO_ZERO = "ScaledToZero"
# True while an endpoint is kept because what decides it cannot be read (issue 14); set only
# once that happens, and turned False when it ends.
ENDPOINTS_HELD = "EndpointsHeld"
_REPLICA_PREFIX = traffic.REPLICA_PREFIX
_ENDPOINT_PREFIX = traffic.ENDPOINT_PREFIX

JSON = dict[str, Any]


def requirements(
    spec: Mapping[str, Any], namespace: str | None, own: Iterable[str], scope: fleet_inputs.Scope
) -> dict[str, Selector]:
    """What the deployment reads: the classes, the clusters it runs on and a scope of
    candidate clusters' capacity summaries (fleet_inputs), its namespace's routes, its cache."""
    match_labels = ((spec.get("clusterSelector") or {}).get("matchLabels")) or {}
    wanted = fleet_inputs.requirements(dict(match_labels), own, scope)
    # The routes ModelServices compose (in their own, hence our, namespace): a draining
    # replica goes only once every route to this deployment sends traffic to its successor.
    wanted[SERVICE_ROUTES] = Selector(ROUTE_API_VERSION, "HTTPRoute", namespace=namespace)
    cache = tolerant.text(spec, "modelCacheRef", "name")
    if cache:
        # Replicas go only where the cache stages (D12): its clusterSelector decides.
        wanted[MODEL_CACHE] = Selector(
            API_VERSION, "ModelCache", match_name=cache, namespace=namespace
        )
    return wanted


def _previous(composite: Mapping[str, Any], kind: str, field: str) -> str:
    return str((condition(composite, kind) or {}).get(field, ""))


def _previous_reason(composite: Mapping[str, Any]) -> str:
    return _previous(composite, SCHEDULED, "reason")


def now(context: Mapping[str, Any]) -> datetime.datetime:
    """The injected clock (``modelplane.ai/now``, RFC 3339) when set, else the wall clock."""
    return injected_now(context) or datetime.datetime.now(datetime.UTC)


def selector(deployment: str) -> str:
    """``status.selector`` for the scale subresource: the deployment's ModelReplicas."""
    return f"{names.DEPLOYMENT_LABEL}={deployment}"


def _drain_annotations(placement: Placement, shortfall: str) -> dict[str, str]:
    """The replacement relation and a drain's state, readable by the InferenceCluster."""
    annotations = {}
    if placement.draining:
        annotations[drain_annotations.DRAINING] = placement.draining
    if placement.stuck:
        annotations[drain_annotations.BLOCKED] = shortfall or "no other cluster fits"
    if placement.replaces:
        annotations[drain_annotations.REPLACES] = placement.replaces
    return annotations


def replica_manifest(deployment: Deployment, placement: Placement, shortfall: str = "") -> JSON:
    spec: JSON = {"clusterName": placement.cluster}
    cache = deployment.spec.get("modelCacheRef")
    if cache:
        spec["modelCacheRef"] = {"name": cache["name"]}
    serving = deployment.spec.get("serving")
    if serving:
        spec["serving"] = {"mode": serving.get("mode", "Unified")}
        if serving.get("timeouts"):
            # Only the replica's HTTPRoute reads it: the replica is updated in place, and the
            # scheduler's retention (engine shapes) never sees it.
            spec["serving"]["timeouts"] = dict(serving["timeouts"])
    engines = []
    for engine, placed in zip(deployment.engines, placement.engines, strict=True):
        composed: JSON = {"name": engine.name, "copies": engine.copies}
        if engine.raw.get("phase"):
            composed["phase"] = engine.raw["phase"]
        members = []
        for member, resolved in zip(engine.members, placed.resolved, strict=True):
            out: JSON = {"role": member.role, "nodePoolName": placed.pool}
            if resolved:
                out["deviceRequests"] = [r.manifest() for r in resolved]
            if member.raw.get("worker"):
                out["worker"] = member.raw["worker"]
            out["template"] = member.raw["template"]
            members.append(out)
        composed["members"] = members
        engines.append(composed)
    spec["engines"] = engines
    labels = names.labels(deployment.name, placement.cluster, placement.index)
    if deployment.cache:
        # The ModelCache finds the replicas mounting it by this label, and keeps their PVC.
        labels[CACHE_LABEL] = deployment.cache
    metadata: JSON = {
        "name": placement.name,
        "namespace": deployment.namespace,
        "labels": labels,
    }
    annotations = _drain_annotations(placement, shortfall)
    if annotations:
        metadata["annotations"] = annotations
    return {"apiVersion": API_VERSION, "kind": "ModelReplica", "metadata": metadata, "spec": spec}


def endpoint_manifest(deployment: Deployment, placement: Placement, address: str) -> JSON:
    path = f"/{deployment.namespace}/{placement.name}/"
    return {
        "apiVersion": API_VERSION,
        "kind": "ModelEndpoint",
        "metadata": {
            "name": placement.name,
            "namespace": deployment.namespace,
            "labels": names.labels(deployment.name, placement.cluster, placement.index),
        },
        "spec": {"url": f"http://{address}{path}v1", "rewritePath": path},
    }


def _observed_ours(request: Request) -> dict[str, JSON]:
    return {
        key: body
        for key, body in request.observed.items()
        if key.startswith((_REPLICA_PREFIX, _ENDPOINT_PREFIX))
    }


def _hold(
    request: Request,
    outcome: Outcome,
    wanted: int,
    reason: str,
    message: str,
    *,
    clusters: Iterable[Cluster],
) -> Outcome:
    """Scheduling cannot run: keep every observed replica and endpoint exactly as it is."""
    observed = _observed_ours(request)
    by_name = {c.name: c for c in clusters}
    total = ready = 0
    degraded: dict[str, str] = {}
    for key, body in sorted(observed.items()):
        outcome.compose(key, held(body), ready=is_ready(body))
        if key.startswith(_REPLICA_PREFIX):
            total += 1
            cluster_name = tolerant.text(body, "spec", "clusterName")
            serves, why = traffic.serves(body, by_name.get(str(cluster_name)))
            ready += serves
            if why:
                degraded[str(cluster_name)] = why
    outcome.composite_status = {
        "replicas": {"total": total, "ready": min(ready, wanted)},
        "selector": selector(request.name),
    }
    outcome.condition(SCHEDULED, False, reason, message)
    _readiness(outcome, total, ready, wanted, degraded=degraded)
    outcome.composite_ready = False
    if _previous_reason(request.composite) != reason:
        outcome.event("Warning", message, reason=reason)
    return outcome


def _readiness(
    outcome: Outcome,
    placed: int,
    ready: int,
    wanted: int,
    *,
    degraded: Mapping[str, str] | None = None,
    overcommitted: str = "",
) -> None:
    """``ReplicasReady`` is judged against spec.replicas, not against what was placed (D6).

    ``degraded`` (cluster -> why it cannot serve) names the clusters whose replicas are kept
    but withheld from traffic, so the message says why they do not count. ``overcommitted``
    names pools that shrank under kept replicas (why pods may be Pending); it changes no status.
    """
    suffix = f"; {overcommitted}" if overcommitted else ""
    # Replicas beyond spec.replicas (a drain's old and new, a held scale-down) never read as
    # "2 of 1 ready".
    ready = min(ready, wanted)
    if wanted == 0 and placed == 0:
        outcome.condition(READY, True, SCALED_TO_ZERO, "0 of 0 ready: spec.replicas is 0")
    elif placed == 0:
        outcome.condition(READY, False, "NoReplicasScheduled")
    elif ready >= wanted:
        message = f"{ready} of {wanted} ready{suffix}"
        outcome.condition(READY, True, "AllReplicasReady", message)
    else:
        message = f"{ready} of {wanted} ready"
        if degraded:
            where = ", ".join(f"{name} ({why})" for name, why in sorted(degraded.items()))
            message += f"; withheld from traffic: {where}"
        outcome.condition(READY, False, "ModelStarting", message + suffix)


def _withdrawn(cluster: Cluster, replica: JSON | None) -> bool:
    """Whether a definite signal withdraws a replica's endpoint: its cluster or the replica
    reports ``Ready=False`` (routing withdrawal, issue 14). A missing or malformed condition
    or gateway address is unknown: an endpoint already composed is kept as it is."""
    return cluster.readiness is False or readiness(replica) is False


def _note_unknown(
    unknowns: tolerant.Unknowns, cluster: Cluster, replica: str, body: JSON | None
) -> None:
    """Name the object and field whose unknown value keeps an endpoint held."""
    what = f"InferenceCluster {cluster.name}"
    if cluster.readiness is None:
        unknowns.note(what, "Ready condition", "not known")
    elif not cluster.gateway:
        unknowns.note(what, "status.gateway.address")
    if readiness(body) is None:
        unknowns.note(f"ModelReplica {replica}", "Ready condition", "not known")


def _observed_replicas(request: Request, fleet: list[JSON]) -> list[scheduler.ObservedReplica]:
    """Our composed replicas, then ours that only a capacity summary lists (the summary lags
    a deletion, or the replica is being deleted): charged, never retained."""
    replicas = []
    for key, body in sorted(request.observed.items()):
        if not key.startswith(_REPLICA_PREFIX):
            continue
        replica = scheduler.parse_replica(body)
        if replica is None:
            continue
        # Composed by this deployment, so ours even if its labels were tampered with: an
        # unreadable index label falls back to the index its composition key carries, or the
        # replica would be re-keyed (deleted and made again) under index 0.
        index = replica.index
        label = tolerant.text(body, "metadata", "labels", names.INDEX_LABEL)
        suffix = key.rsplit("-", 1)[-1]
        if not (label and label.isdigit()) and suffix.isdigit():
            index = int(suffix)
        replicas.append(
            scheduler.ObservedReplica(
                replica.name,
                replica.namespace or (request.namespace or ""),
                request.name,
                replica.cluster,
                index,
                body,
            )
        )
    seen = {(r.namespace, r.name) for r in replicas}
    listed = [
        dataclasses.replace(r, listed_only=True)
        for r in map(scheduler.parse_replica, fleet)
        if r is not None and (r.namespace, r.name) not in seen
    ]
    return replicas + listed


def own_clusters(request: Request) -> set[str]:
    """The clusters our observed replicas are on."""
    return {
        cluster
        for key, body in request.observed.items()
        if key.startswith(_REPLICA_PREFIX)
        and (cluster := tolerant.text(body, "spec", "clusterName"))
    }


# Candidate clusters parsed once per summary view (fleet_inputs keeps one view per distinct
# summary): a Cluster is immutable, so it is shared between reconciles like its view.
_parsed_views: dict[int, tuple[fleet_inputs.SummaryView, Cluster]] = {}


def _parse_cluster(obj: Mapping[str, Any]) -> Cluster:
    if not isinstance(obj, fleet_inputs.SummaryView):
        return scheduler.parse_cluster(obj)
    seen = _parsed_views.get(id(obj))
    if seen is not None and seen[0] is obj:
        return seen[1]
    parsed = scheduler.parse_cluster(obj)
    if len(_parsed_views) >= fleet_inputs.MAX_MEMO:
        _parsed_views.clear()
    # Holding the view keeps its id from being reused, so an identity hit is genuine.
    _parsed_views[id(obj)] = (obj, parsed)
    return parsed


def compose(request: Request) -> Outcome:
    spec = request.spec
    wanted = spec.get("replicas", 1) if isinstance(spec.get("replicas"), int) else 1
    own = own_clusters(request)
    first = fleet_inputs.first_shard(request.namespace or "", request.name)
    # Read straight from protobuf: decoding the fleet into dicts would cost more than the
    # schedule itself (see wire.py).
    fleet = fleet_inputs.read(request.proto, own, first, request.namespace or "", request.name)
    outcome = Outcome(
        requirements=requirements(
            spec, request.namespace, own, fleet_inputs.next_scope(fleet, first, short=False)
        )
    )
    if fleet is None:
        # First pass of a reconcile: Crossplane fetches the requirements and calls again,
        # applying only that final response. Keep what exists; decide nothing yet.
        for key, body in sorted(_observed_ours(request).items()):
            outcome.compose(key, held(body), ready=is_ready(body))
        return outcome
    fleet_clusters = fleet.clusters

    clusters = [
        dataclasses.replace(cluster, pools_unknown=fleet.unsummarised[cluster.name])
        if cluster.name in fleet.unsummarised
        else cluster
        for cluster in map(_parse_cluster, fleet_clusters)
    ]
    try:
        Spec.model_validate(spec)
    except pydantic.ValidationError as err:
        message = f"invalid ModelDeployment: {validation_summary(err, 'spec')}"
        return _hold(request, outcome, wanted, "InvalidSpec", message, clusters=clusters)
    timeouts = tolerant.mapping(spec, "serving", "timeouts") or {}
    wrong = route_timeouts.problems(
        timeouts.get("request"), timeouts.get("backendRequest"), "spec.serving.timeouts"
    )
    if wrong:
        # The XRD's CEL refuses these; one that got past it must not reach the replicas.
        message = f"invalid ModelDeployment: {'; '.join(wrong)}"
        return _hold(request, outcome, wanted, "InvalidSpec", message, clusters=clusters)
    cannot_run, _ = engines.engine_problems(spec)
    if cannot_run:
        # Every replica would refuse these pods (compose-model-replica checks the same); place
        # none, and keep the replicas that run until the engines are fixed.
        message = f"engines cannot run: {'; '.join(cannot_run)}"
        return _hold(request, outcome, wanted, "InvalidEngine", message, clusters=clusters)
    deployment = scheduler.parse_deployment(request.name, request.namespace or "", spec)
    if deployment.cache:
        found = _cache_labels(request, deployment.cache)
        if isinstance(found, tuple):
            reason, message = found
            if not reason:  # not resolved yet: Crossplane fetches it and calls again
                for key, body in sorted(_observed_ours(request).items()):
                    outcome.compose(key, held(body), ready=is_ready(body))
                return outcome
            return _hold(request, outcome, wanted, reason, message, clusters=clusters)
        deployment = dataclasses.replace(deployment, cache_labels=found)
    try:
        scheduler.compile_selectors(deployment)
    except scheduler.InvalidSelectorError as err:
        message = f"Invalid nodeSelector CEL expression: {err}"
        return _hold(request, outcome, wanted, "InvalidNodeSelector", message, clusters=clusters)

    result = scheduler.schedule(
        deployment,
        clusters,
        _observed_replicas(request, fleet.ours),
        now=now(request.context),
        serving=traffic.serving(request, clusters),
        routed=traffic.routed(request),
        others=lambda cluster: _parsed(fleet.others(cluster)),
    )
    # Too few candidates, or a replica found no place among them: read more next round.
    short = len(result.staying) < deployment.replicas
    outcome.requirements = requirements(
        spec, request.namespace, own, fleet_inputs.next_scope(fleet, first, short=short)
    )
    return _outcome(request, outcome, deployment, clusters, result)


def _parsed(replicas: list[JSON]) -> list[scheduler.ObservedReplica]:
    return [r for r in map(scheduler.parse_replica, replicas) if r is not None]


def _cache_labels(request: Request, cache: str) -> Mapping[str, str] | tuple[str, str]:
    """The labels a cluster needs for the deployment's ModelCache to stage there (D12), or
    (reason, message) when they cannot be known: ("", "") while not resolved yet."""
    caches = request.required(MODEL_CACHE)
    if caches is None:
        return "", ""
    namespace = request.namespace or "default"
    if not caches:
        return "CacheNotFound", (
            f"ModelCache {cache!r} (spec.modelCacheRef) does not exist in namespace "
            f"{namespace}; replicas are placed only where their weights are staged, and "
            "running ones are kept"
        )
    selector = tolerant.at(caches[0], "spec", "clusterSelector")
    labels = tolerant.mapping(caches[0], "spec", "clusterSelector", "matchLabels")
    if selector is None or (isinstance(selector, Mapping) and "matchLabels" not in selector):
        return {}  # no selector: the cache stages on every cluster
    if labels is None or not all(isinstance(v, str) for v in labels.values()):
        return "CacheUnreadable", (
            f"ModelCache {cache!r}: spec.clusterSelector cannot be read; replicas are kept "
            "where they are until it can"
        )
    return {str(k): v for k, v in labels.items()}


def _outcome(
    request: Request,
    outcome: Outcome,
    deployment: Deployment,
    clusters: list[Cluster],
    result: Schedule,
) -> Outcome:
    by_name = {c.name: c for c in clusters}
    wanted = deployment.replicas
    placed = len(result.staying)  # draining replicas are on their way out
    ready = 0
    observed_any = False
    degraded: dict[str, str] = {}
    unknowns = tolerant.Unknowns()
    for placement in result.placements:
        key = names.replica_key(placement.cluster, placement.index)
        observed = request.observed.get(key)
        observed_any = observed_any or observed is not None
        if observed is None and placement.observed is not None:
            observed = dict(placement.observed.body)
        if placement.frozen and placement.observed is not None:
            body = held(placement.observed.body)
            if placement.draining:
                annotations = body.setdefault("metadata", {}).setdefault("annotations", {})
                annotations.update(_drain_annotations(placement, result.shortfall))
        else:
            body = replica_manifest(deployment, placement, result.shortfall)
        replica_ready = observed is not None and is_ready(observed)
        outcome.compose(key, body, ready=replica_ready)
        cluster = by_name[placement.cluster]
        endpoint = names.endpoint_key(placement.cluster, placement.index)
        observed_endpoint = request.observed.get(endpoint)
        if placement.retiring:
            _compose_retiring(outcome, endpoint, observed_endpoint)
            continue
        serves, why = traffic.serves(observed, cluster)
        if why:
            # Kept where it is (retention ignores readiness), but no new traffic goes there and
            # it does not count as ready: its Ready only says its workload once applied.
            degraded[cluster.name] = why
        else:
            ready += serves
        if not why and replica_ready:
            outcome.compose(
                endpoint,
                endpoint_manifest(deployment, placement, cluster.gateway),
                ready=is_ready(observed_endpoint),
            )
        elif observed_endpoint is not None and not _withdrawn(cluster, observed):
            kept = held(observed_endpoint)
            # Wanted again after retiring: unknown readiness never withdraws traffic.
            (kept.get("metadata") or {}).get("labels", {}).pop(drain_annotations.RETIRING, None)
            outcome.compose(endpoint, kept, ready=is_ready(observed_endpoint))
            _note_unknown(unknowns, cluster, placement.name, observed)

    outcome.composite_status = {
        # Retiring replicas are out of every route already: the scale subresource and an
        # autoscaler see what was asked for, not what is still being taken down.
        "replicas": {
            "total": len(result.placements) - len(result.retiring),
            "ready": min(ready, wanted),
        },
        "selector": selector(deployment.name),
    }
    if unknowns:
        message = f"endpoints kept as they are: {unknowns.message()}"
        outcome.condition(ENDPOINTS_HELD, True, "InputUnknown", message)
    elif _previous(request.composite, ENDPOINTS_HELD, "status") == "True":
        outcome.condition(ENDPOINTS_HELD, False, "InputsKnown", normal=True)
    previous = _previous_reason(request.composite)
    if wanted == 0:
        outcome.condition(SCHEDULED, True, SCALED_TO_ZERO, _scaled_to_zero(request))
    elif result.checked == 0:
        outcome.condition(SCHEDULED, False, "NoClusters")
        if previous != "NoClusters":
            outcome.event("Warning", "No InferenceClusters found", reason="NoClusters")
    elif placed < wanted:
        message = scheduler.scheduled_message(result, wanted)
        outcome.condition(SCHEDULED, False, "InsufficientCapacity", message)
        if previous != "InsufficientCapacity":
            outcome.event("Warning", message, reason="InsufficientCapacity")
    elif not observed_any:
        outcome.condition(SCHEDULED, False, "Scheduling")
    else:
        message = messages.bounded(
            f"Scheduled {placed} of {wanted} replicas"
            + scheduler.drain_message(result, prefix="; ")
        )
        outcome.condition(SCHEDULED, True, "ReplicasCreated", message)
    for placement in result.placements:
        if (
            placement.replaces
            and names.replica_key(placement.cluster, placement.index) not in request.observed
        ):
            old = next(p for p in result.draining if p.name == placement.replaces)
            outcome.event(
                "Normal",
                f"Replacing {old.name} on {old.cluster} ({old.draining}) with {placement.name} "
                f"on {placement.cluster}; {old.name} serves until {placement.name} does",
                reason="Draining",
            )
    for name, cluster in result.lost:
        if not any(tolerant.name_of(body) == name for body in request.observed.values()):
            continue  # dropped on an earlier reconcile, still listed while it is deleted
        outcome.event(
            "Warning",
            f"{name} lost the last free devices on {cluster} to replicas created before it "
            "(placed from the same view of the fleet) and cannot start there; placing it again",
            reason="LostCapacityRace",
        )
    if placed and not observed_any:
        where = sorted({p.cluster for p in result.placements})
        outcome.event(
            "Normal",
            f"Scheduled {placed} replicas across {len(where)} clusters: {', '.join(where)}",
            reason="Scheduled",
        )
    overcommitted = scheduler.overcommit_message(result)
    _readiness(outcome, placed, ready, wanted, degraded=degraded, overcommitted=overcommitted)
    was_overcommitted = scheduler.OVERCOMMITTED in _previous(request.composite, READY, "message")
    if overcommitted and not was_overcommitted:
        # Only on the transition, like the capacity Warning: the condition carries the rest.
        outcome.event("Warning", overcommitted, reason="CapacityOvercommitted")
    if wanted == 0:
        # Asked for none and none run: an idle model is healthy, not degraded.
        outcome.composite_ready = True
    elif placed == 0 or ready < wanted:
        # With nothing composed Crossplane would call the deployment trivially ready.
        outcome.composite_ready = False
    if result.draining or result.retiring:
        # What lets a draining or retiring replica go (its successor in every route) is read through
        # requirements, which Crossplane does not watch: look again soon, not after the TTL.
        outcome.ttl = SETTLING_TTL
    return outcome


def _compose_retiring(outcome: Outcome, key: str, observed: Mapping[str, Any] | None) -> None:
    """A retiring replica's endpoint, labelled so ModelServices take it out of their routes;
    it goes with its replica once no route sends it traffic."""
    if observed is None:
        return
    body = held(observed)
    labels = body.setdefault("metadata", {}).setdefault("labels", {})
    labels[drain_annotations.RETIRING] = "true"
    outcome.compose(key, body, ready=is_ready(observed))


def _scaled_to_zero(request: Request) -> str:
    """The ScaledToZero message: which replicas this response removes, if any."""
    going = sorted(
        tolerant.name_of(body) or key
        for key, body in request.observed.items()
        if key.startswith(_REPLICA_PREFIX)
    )
    message = "spec.replicas is 0: no replica is placed"
    if going:
        # Up to 100 replicas: name a few, count the rest, so the condition stays short.
        shown = ", ".join(going[:5]) + (f" and {len(going) - 5} more" if len(going) > 5 else "")
        message += f"; removing {len(going)}: {shown}"
    return message


class ModelDeploymentFunction(CompositionFunction):
    name = "compose-model-deployment"
    request_growth = "It grows with this deployment's replicas, pod templates included. "

    def compose(self, request: Request) -> Outcome:
        return compose(request)
