"""The fleet scheduler (spec model-deployment §4): a pure function of observed state.

Three phases, rerun in full on every reconcile:

1. retain: keep each of our observed replicas whose cluster still exists and whose pinned pools
   still match the current selectors (readiness and capacity are ignored: a replica on a
   degraded cluster stays put);
2. scale down: drop kept replicas from the most loaded cluster first;
3. fill: place the shortfall one replica at a time on the least loaded cluster where every
   engine fits, each engine on a single pool (D3), its pods packed onto the pool's nodes by
   the devices they claim (D11, ``packing``) after every other replica's.

Nothing is lost: a replica pinned to a cluster or pool whose published state cannot be read is
kept exactly as observed, and only a deleted cluster, a scale-down or a pool that no longer
satisfies the spec moves one. When the schedule falls short, each cluster's reason is
recorded and aggregated into a Kubernetes-scheduler-style message; pools that shrank under
kept replicas (their pods no longer pack) are recorded too, but nothing moves because of them.

The module is split by concern: ``inputs`` parses, ``packing`` models nodes and devices,
``fitting`` tries one replica on one cluster, ``messages`` words the outcome; the names other
modules use are re-exported here.
"""

from __future__ import annotations

import dataclasses
import datetime
from collections import Counter
from collections.abc import Callable, Iterable, Mapping

from modelplane_common import drain_annotations, tolerant
from modelplane_common.observed import is_ready

from compose_model_deployment import devices, names, packing
from compose_model_deployment.devices import Pool
from compose_model_deployment.fitting import INSUFFICIENT, SCALE_UP_HINT, ClusterView
from compose_model_deployment.inputs import (
    DEFAULT_GRACE,
    UNREADABLE,
    Claim,
    Cluster,
    Deployment,
    Engine,
    InvalidSelectorError,
    Member,
    ObservedReplica,
    Taint,
    Toleration,
    compile_selectors,
    format_duration,
    labels_match,
    parse_cluster,
    parse_deployment,
    parse_duration,
    parse_replica,
    parse_taints,
    parse_time,
    parse_tolerations,
)
from compose_model_deployment.messages import (
    MAX_MESSAGE_LENGTH,
    MAX_REASON_GROUPS,
    OVERCOMMITTED,
    _summarise,
    drain_message,
    overcommit_message,
    scheduled_message,
)
from compose_model_deployment.placements import (
    EnginePlacement,
    Overcommit,
    Placement,
    Schedule,
)

__all__ = [
    "DEFAULT_GRACE",
    "INSUFFICIENT",
    "MAX_MESSAGE_LENGTH",
    "MAX_REASON_GROUPS",
    "OVERCOMMITTED",
    "REPLACES_ANNOTATION",
    "SCALE_UP_HINT",
    "Claim",
    "Cluster",
    "Deployment",
    "Engine",
    "EnginePlacement",
    "InvalidSelectorError",
    "Member",
    "ObservedReplica",
    "Overcommit",
    "Placement",
    "Schedule",
    "Taint",
    "Toleration",
    "_summarise",
    "compile_selectors",
    "drain_message",
    "format_duration",
    "must_leave",
    "overcommit_message",
    "parse_cluster",
    "parse_deployment",
    "parse_duration",
    "parse_replica",
    "parse_taints",
    "parse_time",
    "parse_tolerations",
    "replica_must_leave",
    "schedule",
    "scheduled_message",
]


def _no_longer_fits(replica: ObservedReplica, why: str) -> Placement:
    """A running replica its cluster no longer fits: kept exactly as it runs, and drained
    make-before-break (its replacement is made first), never deleted outright."""
    return Placement(
        cluster=replica.cluster,
        index=replica.index,
        name=replica.name,
        observed=replica,
        frozen=True,
        draining=f"no longer fits: {why}",
    )


def _retain(deployment: Deployment, replica: ObservedReplica, cluster: Cluster) -> Placement | None:
    """The kept placement of one of our replicas, or None when it must be replaced (its
    engines changed shape); one its cluster no longer fits is kept and drained."""
    observed = replica.engines
    if len(observed) != len(deployment.engines):
        return None
    by_name = {e.get("name"): e for e in observed if isinstance(e.get("name"), str)}
    if set(by_name) != {e.name for e in deployment.engines}:
        return None
    engines = []
    frozen = False
    for engine in deployment.engines:
        members = tolerant.maps(by_name[engine.name], "members")
        roles = [m.get("role", "Standalone") for m in members]
        if roles != [m.role for m in engine.members]:
            return None
        pins = {
            m.get("nodePoolName") if isinstance(m.get("nodePoolName"), str) else None
            for m in members
        }
        if len(pins) != 1:
            return None
        (pin,) = pins
        if pin in cluster.unreadable_pools or cluster.pools_unknown:
            frozen = True  # cannot judge the pool now; keep the replica exactly as it is
            continue
        pool = cluster.pools.get(pin) if isinstance(pin, str) else None
        if pool is None:
            declared = cluster.declared_pools or frozenset()
            if cluster.nameless_entries or declared is UNREADABLE or pin in declared:
                # The pinned pool may be the entry whose name cannot be read, or the spec
                # still declares it and only its status entry is missing: unknown, keep it.
                frozen = True
                continue
            return _no_longer_fits(replica, f'{cluster.name} has no pool "{pin}"')
        resolved = tuple(devices.match_member(m.requests, pool) for m in engine.members)
        if any(r is None for r in resolved) or not any(resolved):
            if _fails_only_on_unreadable_devices(engine, pool):
                frozen = True  # malformed device data, not the spec, rules the pool out
                continue
            return _no_longer_fits(
                replica, f'engine {engine.name} does not match the devices of pool "{pin}"'
            )
        engines.append(EnginePlacement(pool.name, tuple(r or () for r in resolved)))
    return Placement(
        cluster=replica.cluster,
        index=replica.index,
        name=replica.name,
        engines=() if frozen else tuple(engines),
        observed=replica,
        frozen=frozen,
    )


def _fails_only_on_unreadable_devices(engine: Engine, pool: Pool) -> bool:
    """Whether the engine would fit the pool if every device whose data is unreadable or
    incomplete, and every selector that cannot be evaluated, matched: then the pool is not
    proven to fail the spec, and a replica pinned there must not move (issue 14)."""
    optimistic = [
        devices.match_member(m.requests, pool, unreadable_matches=True) for m in engine.members
    ]
    return all(r is not None for r in optimistic) and any(optimistic)


def _scale_down(kept: list[Placement], replicas: int) -> tuple[list[Placement], list[Placement]]:
    """(the replicas that stay, the victims) in the documented order: from the cluster with
    the most replicas, on a tie the one whose name sorts last, there the highest index."""
    kept = list(kept)
    victims = []
    while len(kept) > replicas:
        load = Counter(p.cluster for p in kept)
        victim = max(kept, key=lambda p: (load[p.cluster], p.cluster, p.index))
        kept.remove(victim)
        victims.append(victim)
    return kept, victims


def _retire(placement: Placement, why: str) -> Placement:
    """A going replica some route still sends traffic to: kept exactly as it runs, its
    endpoint withdrawn from routes, until no route does (make-before-break)."""
    return dataclasses.replace(
        placement, frozen=True, draining="", replaces="", stuck=False, retiring=why
    )


def must_leave(deployment: Deployment, cluster: Cluster, now: datetime.datetime | None) -> str:
    """Why a running replica of ``deployment`` must move off ``cluster`` (make-before-break),
    or "" when it may stay: an untolerated NoExecute taint, Ready False past the grace, or
    weights no longer staged there (D12)."""
    evicting = sorted(
        str(t) for t in deployment.untolerated(cluster.taints) if t.effect == "NoExecute"
    )
    if evicting:
        return f"taint {evicting[0]}"
    weights = deployment.weights_missing(cluster)
    if weights:
        return weights
    if cluster.failed_over(now):
        grace = format_duration(cluster.grace)
        return f"cluster not Ready for longer than its failover grace period {grace}"
    return ""


def replica_must_leave(deployment: Deployment, replica: ObservedReplica | None) -> str:
    """Why one replica must be replaced wherever it runs, or "": one made before D10 runs in
    the workload cluster's shared namespace, and its successor runs in the tenant's own."""
    if replica is None:
        return ""
    remote = tolerant.text(replica.body, "status", "remoteNamespace")
    if remote and remote != deployment.namespace:
        return f"moving from the shared namespace {remote} to {deployment.namespace}"
    return ""


REPLACES_ANNOTATION = drain_annotations.REPLACES


def schedule(
    deployment: Deployment,
    clusters: Iterable[Cluster],
    replicas: Iterable[ObservedReplica],
    *,
    now: datetime.datetime | None = None,
    serving: frozenset[str] = frozenset(),
    routed: Mapping[str, str] | None = None,
    others: Callable[[str], Iterable[ObservedReplica]] | None = None,
) -> Schedule:
    """Place ``deployment``. Selectors must compile (compile_selectors) first.

    ``replicas`` is every observed ModelReplica of the fleet, ours and others'. ``now`` is
    the clock failover is judged by (None: no failover); ``serving`` names our replicas that
    are Ready and routed (their endpoint Ready), which lets draining replicas go; ``routed``
    names our replicas some route may still send traffic to (with what holds each): one of
    those that is going (scale-down, or a drain whose successor serves) is retired first,
    not deleted. ``others`` gives other deployments' replicas on a cluster, read only for the
    clusters the schedule looks at; ``replicas`` may hold them too.
    """
    routed = routed or {}
    in_set = {
        c.name: c
        for c in sorted(clusters, key=lambda c: c.name)
        if c.name and labels_match(c.labels, deployment.match_labels)
    }
    observed = sorted(replicas, key=lambda r: (r.name, r.namespace))
    ours = [
        r
        for r in observed
        if r.namespace == deployment.namespace and r.deployment == deployment.name
    ]

    # Phase 1: retain. A replica being deleted is not retained (its devices are charged
    # below until it is gone).
    kept: list[Placement] = []
    identities: set[tuple[str, int]] = set()
    for replica in ours:
        cluster = in_set.get(replica.cluster)
        if cluster is None or replica.deleting or (replica.cluster, replica.index) in identities:
            continue
        placement = _retain(deployment, replica, cluster)
        if placement is not None:
            kept.append(placement)
            identities.add((replica.cluster, replica.index))

    # A replica whose cluster it must leave stays composed (and serving) until enough
    # replicas elsewhere serve: make-before-break. It does not count towards spec.replicas.
    settled: list[Placement] = []
    leaving: list[Placement] = []
    for placement in kept:
        why = placement.draining or must_leave(deployment, in_set[placement.cluster], now)
        why = why or replica_must_leave(deployment, placement.observed)
        if why:
            leaving.append(dataclasses.replace(placement, draining=why))
        else:
            settled.append(placement)

    # Capacity ledgers: every replica that holds devices (every other deployment's, ours that
    # are retained or still being deleted), packed in canonical order (packing.py), so every
    # reconcile of every deployment computes the same picture.
    ledger = packing.FleetLedger(
        in_set, yields=lambda replica: _yields(replica, now), others=others or (lambda _: ())
    )
    kept_names = {p.observed.name for p in kept if p.observed is not None}
    for replica in observed:
        is_ours = replica.namespace == deployment.namespace and (
            replica.deployment == deployment.name
        )
        if not is_ours or replica.name in kept_names or replica.deleting:
            ledger.charge(replica)

    # A race lost: reconciles made from one snapshot took the same last devices, and the
    # canonical replay (first come, first served) has no room for a replica of ours created
    # moments ago and not Ready. It yields (the replay leaves it out) and is placed again
    # below, before any scale-down is judged. Anything else left without a node is kept and
    # its pool reported over-committed (a pool that shrank, spec §5.5): nothing running moves.
    lost = _lost_races(settled, ledger, in_set)
    if lost:
        gone = {p.name for p in lost}
        settled = [p for p in settled if p.name not in gone]
        for placement in lost:
            assert placement.observed is not None  # only observed replicas can lose
            ledger.discharge(placement.observed)

    # Phase 2: scale down (draining replicas leave by themselves).
    settled, victims = _scale_down(settled, deployment.replicas)
    still_needed = max(0, deployment.replicas - sum(p.name in serving for p in settled))
    taken_over = {partner: name for name, partner in _replaces(settled).items()}
    # Keep those still serving, and whose replacement does not serve yet, first.
    leaving.sort(key=lambda p: (taken_over.get(p.name) in serving, p.name not in serving, p.name))
    leaving, released = leaving[:still_needed], leaving[still_needed:]
    # What goes while a route may still send it traffic is withdrawn first and deleted on a
    # later reconcile, once no route does; what no route reaches goes now.
    going = [(p, "scale-down") for p in victims] + [
        (p, f"replaced ({p.draining})") for p in released
    ]
    retiring = [_retire(p, f"{why}; in {routed[p.name]}") for p, why in going if p.name in routed]
    for placement, _ in going:
        if placement.name not in routed and placement.observed is not None:
            ledger.discharge(placement.observed)
    kept = settled + leaving + retiring

    # A pool that shrank under its replicas cannot pack them: say so, move nothing. Only a
    # pool where one of ours is left without a node is ours to report: one that lost a race
    # to ours is its own deployment's to place again.
    short = {
        (p.cluster, pool)
        for p in kept
        if p.observed is not None and p.cluster in in_set
        for pool in packing.observed_pods(p.observed.claims(), in_set[p.cluster].pools)
        if packing.replica_key(p.observed) in ledger.pools(p.cluster)[pool].packed.losers
    }
    overcommitted = [
        Overcommit(cluster, pool, pool_ledger.packed.demanded, pool_ledger.offered)
        for cluster, pool in sorted(short)
        for pool_ledger in (ledger.pools(cluster)[pool],)
    ]

    # Phase 3: fill.
    placements = list(kept)
    load = Counter(p.cluster for p in placements if not p.retiring)
    views: dict[str, ClusterView] = {}
    indices: dict[str, set[int]] = {}
    # A replica that lost a race is not placed again under its own name: the new one is a
    # new object, packed after everything that exists, as the API server will stamp it.
    for placement in [*placements, *lost]:
        indices.setdefault(placement.cluster, set()).add(placement.index)
    shortfall = ""
    for _ in range(deployment.replicas - len(settled)):
        tried: list[tuple[ClusterView, tuple[str, str]]] = []
        chosen = None
        for cluster in sorted(in_set.values(), key=lambda c: (load[c.name], c.name)):
            view = views.get(cluster.name)
            if view is None:
                view = views[cluster.name] = ClusterView(deployment, cluster)
            used = indices.get(cluster.name, set())
            index = next(i for i in range(len(used) + 1) if i not in used)
            key = packing.new_key(
                names.replica_name(deployment.name, cluster.name, index), deployment.namespace
            )
            if view.rejection:
                tried.append((view, key))
                continue
            trial = view.fit(ledger.pools(cluster.name), key)
            if trial.fits:
                chosen = (cluster, index, key, trial)
                break
            tried.append((view, key))
        if chosen is None:
            shortfall = _summarise(
                v.rejection or v.reason(ledger.pools(v.cluster.name), k) for v, k in tried
            )
            break
        cluster, index, key, trial = chosen
        pools = ledger.pools(cluster.name)
        for pool, pods in trial.pods.items():
            pools[pool].commit(key, pods, trial.packed[pool])
        placements.append(
            Placement(
                cluster=cluster.name,
                index=index,
                name=key[1],
                engines=trial.placed,
                observed=_same_name(ours, deployment, cluster.name, index),
            )
        )
        load[cluster.name] += 1
        indices.setdefault(cluster.name, set()).add(index)

    placements = _pair_replacements(
        placements, fresh={p.name for p in placements} - {p.name for p in kept}
    )
    placements.sort(key=lambda p: (p.cluster, p.index))
    return Schedule(
        placements=placements,
        checked=len(in_set),
        shortfall=shortfall,
        overcommitted=overcommitted,
        lost=sorted((p.name, p.cluster) for p in lost),
    )


# How long after its creation a replica that has not been Ready gives way when the replay has
# no room for it: the deployment that placed it looks again within seconds (its new
# ModelReplica is watched), so a race shows on that reconcile; the margin covers a function
# outage or a Crossplane backlog. Past it, the replica is kept and its pool reported.
RACE_WINDOW = datetime.timedelta(minutes=15)


def _yields(replica: ObservedReplica, now: datetime.datetime | None) -> bool:
    """Whether a replica gives way when the canonical replay has no room for it: it has not
    been Ready and was created within RACE_WINDOW (a race loser its deployment places again).
    Every deployment judges every replica alike, so they agree on the picture."""
    if now is None or is_ready(replica.body):
        return False
    created = parse_time(tolerant.text(replica.body, "metadata", "creationTimestamp"))
    return created is not None and now - RACE_WINDOW <= created <= now + RACE_WINDOW


def _lost_races(
    settled: Iterable[Placement], ledger: packing.FleetLedger, in_set: Mapping[str, Cluster]
) -> list[Placement]:
    """Our settled replicas that yielded in the canonical replay: placed again this pass."""
    lost = []
    for placement in settled:
        replica = placement.observed
        if replica is None or placement.frozen:
            continue
        pools = in_set[placement.cluster].pools
        key = packing.replica_key(replica)
        ledgers = ledger.pools(placement.cluster)
        if any(
            key in ledgers[pool].packed.yielded
            for pool in packing.observed_pods(replica.claims(), pools)
        ):
            lost.append(placement)
    return lost


def _replaces(placements: Iterable[Placement]) -> dict[str, str]:
    """replacement name -> the draining replica it was composed to take over from."""
    found = {}
    for p in placements:
        if p.draining or p.observed is None:
            continue
        old = tolerant.text(p.observed.body, "metadata", "annotations", REPLACES_ANNOTATION)
        if old:
            found[p.name] = old
    return found


def _pair_replacements(placements: list[Placement], fresh: set[str]) -> list[Placement]:
    """Which replica takes over from which draining one, deterministically: a replica keeps
    the pairing it was composed with while its draining partner exists; replicas placed in
    this pass are paired with the remaining draining ones in name order. A draining replica
    left without a partner is stuck: no other cluster could take its replacement."""
    draining = sorted(p.name for p in placements if p.draining)
    partner: dict[str, str] = {}  # replacement name -> draining name
    for name, old in sorted(_replaces(placements).items()):
        if old in draining and old not in partner.values():
            partner[name] = old
    free = [name for name in draining if name not in partner.values()]
    for name in sorted(fresh):
        if free and name not in partner:
            partner[name] = free.pop(0)
    taken = set(partner.values())
    return [
        dataclasses.replace(
            p, replaces=partner.get(p.name, ""), stuck=bool(p.draining) and p.name not in taken
        )
        for p in placements
    ]


def _same_name(
    ours: list[ObservedReplica], deployment: Deployment, cluster: str, index: int
) -> ObservedReplica | None:
    """A dropped replica re-placed at its own identity is updated in place (same name)."""
    name = names.replica_name(deployment.name, cluster, index)
    return next((r for r in ours if r.name == name), None)
