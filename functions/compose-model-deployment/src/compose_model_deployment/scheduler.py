"""The fleet scheduler (spec model-deployment §4): a pure function of observed state.

Three phases, rerun in full on every reconcile:

1. retain: keep each of our observed replicas whose cluster still exists and whose pinned pools
   still match the current selectors (readiness and capacity are ignored: a replica on a
   degraded cluster stays put);
2. scale down: drop kept replicas from the most loaded cluster first;
3. fill: place the shortfall one replica at a time on the least loaded cluster where every
   engine fits, each engine on a single pool (D3), against a ledger charged with every other
   replica's nodes.

Nothing is lost: a replica pinned to a cluster or pool whose published state cannot be read is
kept exactly as observed, and only a deleted cluster, a scale-down or a pool that no longer
satisfies the spec moves one. When the schedule falls short, each cluster's reason is
recorded and aggregated into a Kubernetes-scheduler-style message; pools that shrank under
kept replicas (ledger negative) are recorded too, but nothing moves because of them.
"""

from __future__ import annotations

import dataclasses
import datetime
import re
from collections import Counter
from collections.abc import Iterable, Mapping
from typing import Any

from modelplane_common import dracel, drain_annotations, tolerant
from modelplane_common.observed import condition, readiness

from compose_model_deployment import devices, explain, names
from compose_model_deployment.devices import Pool, Request, Resolved

MAX_MESSAGE_LENGTH = 1024
MAX_REASON_GROUPS = 6
OVERCOMMITTED = "over-committed"
SCALE_UP_HINT = "fits after it scales up"


class InvalidSelectorError(ValueError):
    """A selector that does not compile; the message names engine, member and request."""


# --- inputs --------------------------------------------------------------------------------


@dataclasses.dataclass(frozen=True)
class Member:
    role: str
    requests: tuple[Request, ...] | None
    pods: int
    raw: Mapping[str, Any]


@dataclasses.dataclass(frozen=True)
class Engine:
    name: str
    copies: int
    members: tuple[Member, ...]
    raw: Mapping[str, Any]


@dataclasses.dataclass(frozen=True)
class Deployment:
    name: str
    namespace: str
    replicas: int
    engines: tuple[Engine, ...]
    spec: Mapping[str, Any]

    tolerations: tuple[Toleration, ...] = ()
    # D12: with spec.modelCacheRef, the labels a cluster needs for the cache to stage there
    # (its clusterSelector; empty: every cluster). None: no cache, any cluster will do.
    cache_labels: Mapping[str, str] | None = None

    @property
    def cache(self) -> str:
        return str((self.spec.get("modelCacheRef") or {}).get("name") or "")

    def weights_missing(self, cluster: Cluster) -> str:
        """Why the deployment's weights are not on ``cluster`` (D12), or ""."""
        if self.cache_labels is None or _labels_match(cluster.labels, self.cache_labels):
            return ""
        return f"ModelCache {self.cache} does not stage here (spec.clusterSelector)"

    @property
    def match_labels(self) -> dict[str, str]:
        return dict((self.spec.get("clusterSelector") or {}).get("matchLabels") or {})

    def untolerated(self, taints: Iterable[Taint]) -> list[Taint]:
        return [t for t in taints if not any(tol.tolerates(t) for tol in self.tolerations)]


@dataclasses.dataclass(frozen=True)
class Taint:
    key: str
    value: str
    effect: str  # NoSchedule | NoExecute

    def __str__(self) -> str:
        value = f"={self.value}" if self.value else ""
        return f"{self.key}{value}:{self.effect}"


@dataclasses.dataclass(frozen=True)
class Toleration:
    """The Kubernetes toleration model (``ToleratesTaint``)."""

    key: str = ""
    operator: str = "Equal"
    value: str = ""
    effect: str = ""  # empty matches every effect

    def tolerates(self, taint: Taint) -> bool:
        if self.effect and self.effect != taint.effect:
            return False
        if self.key and self.key != taint.key:
            return False
        # An empty key with Exists tolerates every taint; Equal compares values.
        return self.operator == "Exists" or self.value == taint.value


def parse_tolerations(raw: Any) -> tuple[Toleration, ...]:
    if not isinstance(raw, list):
        return ()
    return tuple(
        Toleration(
            key=tolerant.text(t, "key") or "",
            operator=tolerant.text(t, "operator") or "Equal",
            value=tolerant.text(t, "value") or "",
            effect=tolerant.text(t, "effect") or "",
        )
        for t in raw
        if isinstance(t, dict)
    )


def parse_taints(raw: Any) -> tuple[Taint, ...]:
    """Taints as published in ``spec.taints``; an entry without a key or a known effect is
    skipped (the XRD rejects it, so it can only come from a schema-less source)."""
    if not isinstance(raw, list):
        return ()
    return tuple(
        Taint(
            tolerant.text(t, "key") or "",
            tolerant.text(t, "value") or "",
            tolerant.text(t, "effect") or "",
        )
        for t in raw
        if isinstance(t, dict)
        and tolerant.text(t, "key")
        and t.get("effect") in ("NoSchedule", "NoExecute")
    )


DEFAULT_GRACE = datetime.timedelta(minutes=10)
_DURATION = re.compile(r"([0-9]+)(h|m|s)")
_UNITS = {"h": 3600, "m": 60, "s": 1}


def parse_duration(value: Any) -> datetime.timedelta:
    """``1h30m`` as the XRD admits it; anything unreadable is the default (10 minutes)."""
    if not isinstance(value, str) or not re.fullmatch(r"([0-9]+(h|m|s))+", value):
        return DEFAULT_GRACE
    return datetime.timedelta(seconds=sum(int(n) * _UNITS[u] for n, u in _DURATION.findall(value)))


def parse_time(value: Any) -> datetime.datetime | None:
    """An RFC 3339 timestamp (``2026-01-01T00:00:00Z``), or None."""
    if not isinstance(value, str) or not value:
        return None
    try:
        moment = datetime.datetime.fromisoformat(value.replace("Z", "+00:00"))
    except ValueError:
        return None
    return moment if moment.tzinfo else moment.replace(tzinfo=datetime.UTC)


def format_duration(delta: datetime.timedelta) -> str:
    seconds = int(delta.total_seconds())
    hours, rest = divmod(seconds, 3600)
    minutes, seconds = divmod(rest, 60)
    parts = [f"{n}{u}" for n, u in ((hours, "h"), (minutes, "m"), (seconds, "s")) if n]
    return "".join(parts) or "0s"


def _pods(member: Mapping[str, Any]) -> int:
    if member.get("role", "Standalone") != "Worker":
        return 1
    nodes = tolerant.integer(member, "worker", "nodes")
    return nodes if nodes is not None and nodes > 0 else 1


def _copies(engine: Mapping[str, Any]) -> int:
    copies = engine.get("copies", 1)
    return copies if isinstance(copies, int) and copies > 0 else 1


def parse_deployment(name: str, namespace: str, spec: Mapping[str, Any]) -> Deployment:
    """The deployment's shape; its spec is expected to have passed the XRD schema."""
    engines = []
    for engine in spec.get("engines") or []:
        members = tuple(
            Member(
                role=member.get("role", "Standalone"),
                requests=devices.requests_of(member.get("nodeSelector")),
                pods=_pods(member),
                raw=member,
            )
            for member in engine.get("members") or []
        )
        engines.append(Engine(engine["name"], _copies(engine), members, engine))
    replicas = spec.get("replicas", 1)
    return Deployment(
        name,
        namespace,
        replicas,
        tuple(engines),
        spec,
        tolerations=parse_tolerations(spec.get("tolerations")),
    )


def compile_selectors(deployment: Deployment) -> None:
    """Compile every selector once; raises InvalidSelectorError naming the first failure."""
    for e, engine in enumerate(deployment.engines):
        for m, member in enumerate(engine.members):
            for request, index, error in devices.compile_requests(member.requests):
                raise InvalidSelectorError(f"{dracel.selector_path(e, m, request, index)}: {error}")


@dataclasses.dataclass(frozen=True)
class Cluster:
    name: str
    labels: Mapping[str, str]
    ready: bool
    gateway: str
    provider_config: str
    pools: Mapping[str, Pool]  # readable pools, in published order
    unreadable_pools: frozenset[str]  # published names whose entries cannot be read
    pools_unknown: str  # non-empty when status.gpuPools as a whole cannot be used: why
    # A malformed entry without a readable name: any pin missing from ``pools`` may be it.
    nameless_entries: bool = False
    # The Ready condition: True, False (a definite signal: withdraw its endpoints) or None
    # when it cannot be read (unknown: endpoints already composed there are kept).
    readiness: bool | None = None
    # Pools the spec declares (spec.nodePools[].name); None when the spec says nothing about
    # them, UNREADABLE when it does but cannot be read.
    declared_pools: frozenset[str] | None = None
    taints: tuple[Taint, ...] = ()
    grace: datetime.timedelta = DEFAULT_GRACE  # spec.failoverGracePeriod
    not_ready_since: datetime.datetime | None = None  # Ready=False's lastTransitionTime

    def failed_over(self, now: datetime.datetime | None) -> bool:
        """Ready has been False for longer than the grace period: treated as NoExecute."""
        if self.ready or self.not_ready_since is None or now is None:
            return False
        return now - self.not_ready_since > self.grace

    def ineligibility(self) -> str | None:
        """Why no new replica may be placed here, or None."""
        if not self.ready:
            return "not Ready"
        if not self.gateway:
            return "no gateway address"
        if not self.provider_config:
            return "no provider config"
        if self.pools_unknown:
            return self.pools_unknown
        return None


def parse_cluster(obj: Mapping[str, Any]) -> Cluster:
    status = tolerant.status(obj)
    gateway = tolerant.text(status, "gateway", "address") or ""
    provider_config = tolerant.text(status, "providerConfigRef", "name") or ""
    pools: dict[str, Pool] = {}
    unreadable: set[str] = set()
    unknown = ""
    nameless = False
    raw_pools = status.get("gpuPools")
    if raw_pools is None:
        # Not published yet (or withheld while a class resolves): nothing pinned here may move.
        unknown = "no status.gpuPools published"
    elif not isinstance(raw_pools, list):
        unknown = "status.gpuPools is not a list"
    else:
        for raw in raw_pools:
            try:
                pool = devices.parse_pool(raw)
            except devices.MalformedPoolError:
                name = raw.get("name") if isinstance(raw, dict) else None
                if isinstance(name, str) and name:
                    unreadable.add(name)
                else:
                    nameless = True
                continue
            pools.setdefault(pool.name, pool)
    spec = tolerant.mapping(obj, "spec") or {}
    # Only a definite Ready=False starts the failover clock: Ready=False while the cluster says
    # its composed resources' readiness is not known (ReadinessKnown=False) is unknown.
    state = readiness(obj)
    since = None
    if state is False:
        since = parse_time((condition(obj, "Ready") or {}).get("lastTransitionTime"))
    return Cluster(
        taints=parse_taints(spec.get("taints")),
        grace=parse_duration(spec.get("failoverGracePeriod")),
        not_ready_since=since,
        name=tolerant.name_of(obj),
        labels=tolerant.mapping(obj, "metadata", "labels") or {},
        ready=state is True,
        gateway=gateway,
        provider_config=provider_config,
        pools=pools,
        unreadable_pools=frozenset(unreadable - pools.keys()),
        pools_unknown=unknown,
        nameless_entries=nameless,
        readiness=state,
        declared_pools=_declared_pools(obj),
    )


UNREADABLE: frozenset[str] = frozenset({"\0unreadable"})


def _declared_pools(obj: Mapping[str, Any]) -> frozenset[str] | None:
    spec = obj.get("spec")
    if spec is None or (isinstance(spec, Mapping) and "nodePools" not in spec):
        return None
    pools = tolerant.listing(spec, "nodePools")
    found = [tolerant.text(pool, "name") for pool in pools or []]
    if pools is None or None in found:
        return UNREADABLE
    return frozenset(name for name in found if name)


@dataclasses.dataclass(frozen=True)
class ObservedReplica:
    name: str
    namespace: str
    deployment: str
    cluster: str
    index: int
    body: Mapping[str, Any]

    @property
    def engines(self) -> list[Mapping[str, Any]]:
        engines = (self.body.get("spec") or {}).get("engines")
        return [e for e in engines if isinstance(e, dict)] if isinstance(engines, list) else []

    def charges(self) -> Iterable[tuple[str, int]]:
        """(pool, nodes) for every member that claims devices, from this replica's own spec."""
        for engine in self.engines:
            copies = _copies(engine)
            for member in tolerant.maps(engine, "members"):
                if member.get("deviceRequests"):
                    yield str(member.get("nodePoolName", "")), _pods(member) * copies


def _index(value: Any) -> int:
    return int(value) if isinstance(value, str) and value.isdigit() else 0


def parse_replica(obj: Mapping[str, Any]) -> ObservedReplica | None:
    labels = tolerant.mapping(obj, "metadata", "labels") or {}
    name = tolerant.name_of(obj)
    if not name:
        return None
    return ObservedReplica(
        name=name,
        namespace=tolerant.text(obj, "metadata", "namespace") or "",
        deployment=str(labels.get(names.DEPLOYMENT_LABEL, "")),
        cluster=tolerant.text(obj, "spec", "clusterName") or "",
        index=_index(labels.get(names.INDEX_LABEL)),
        body=obj,
    )


# --- outputs -------------------------------------------------------------------------------


@dataclasses.dataclass(frozen=True)
class EnginePlacement:
    pool: str
    resolved: tuple[tuple[Resolved, ...], ...]  # per member; empty for a claimless member


@dataclasses.dataclass(frozen=True)
class Placement:
    """One desired replica. ``frozen`` replicas are re-emitted exactly as observed."""

    cluster: str
    index: int
    name: str
    engines: tuple[EnginePlacement, ...] = ()
    observed: ObservedReplica | None = None
    frozen: bool = False
    # Make-before-break (NoExecute taint or failover): why this replica must leave its
    # cluster; it keeps serving until enough replicas elsewhere serve.
    draining: str = ""
    replaces: str = ""  # the name of the draining replica this one takes over from
    stuck: bool = False  # draining, but no other cluster can take its replacement


@dataclasses.dataclass(frozen=True)
class Overcommit:
    """A pool whose retained replicas (ours and others') need more nodes than it publishes."""

    cluster: str
    pool: str
    needs: int
    has: int

    def __str__(self) -> str:
        return f'{self.cluster} pool "{self.pool}" needs {self.needs} nodes, has {self.has}'


@dataclasses.dataclass
class Schedule:
    placements: list[Placement]
    checked: int  # clusters in the set
    shortfall: str = ""  # per-cluster reasons for replicas that could not be placed
    # Pools hosting our kept replicas that are charged beyond their size (spec §5.5 item 5);
    # reported only: retention ignores capacity, so nothing moves. Sorted by cluster, pool.
    overcommitted: list[Overcommit] = dataclasses.field(default_factory=list)

    @property
    def staying(self) -> list[Placement]:
        """The replicas that count towards spec.replicas (draining ones are on their way out)."""
        return [p for p in self.placements if not p.draining]

    @property
    def draining(self) -> list[Placement]:
        return [p for p in self.placements if p.draining]


# --- matching a deployment against one cluster ---------------------------------------------


@dataclasses.dataclass(frozen=True)
class _Candidate:
    pool: str
    cost: int
    resolved: tuple[tuple[Resolved, ...], ...]


def _engine_candidates(engine: Engine, cluster: Cluster) -> tuple[list[_Candidate], str]:
    """Pools that can host the whole engine (capacity aside), in published order, or why none."""
    per_pool = {
        pool.name: [devices.match_member(m.requests, pool) for m in engine.members]
        for pool in cluster.pools.values()
    }
    claimable = [
        any(matches[i] for matches in per_pool.values()) for i in range(len(engine.members))
    ]
    for i, member in enumerate(engine.members):
        if all(matches[i] is None for matches in per_pool.values()):
            return [], _no_pool(engine, member) + explain.member(
                member.requests, cluster.pools.values()
            )
    if not any(claimable):
        return [], f'only Synthetic devices match engine "{engine.name}"'
    candidates = []
    for pool_name, matches in per_pool.items():
        if any(m is None for m in matches):
            continue
        # A member that can claim a real device somewhere is never stranded on a
        # synthetic-only match; members that never can ride along claimless.
        if any(claimable[i] and not matches[i] for i in range(len(matches))):
            continue
        cost = sum(
            member.pods * engine.copies
            for member, match in zip(engine.members, matches, strict=True)
            if match
        )
        candidates.append(_Candidate(pool_name, cost, tuple(m or () for m in matches)))
    if not candidates:
        return [], f'engine "{engine.name}" would have to be split across pools'
    return candidates, ""


def _unreadable_note(cluster: Cluster) -> str:
    """Pools whose device data cannot be read match nothing: say so, never skip them silently."""
    problems = [
        f'pool "{pool.name}" device attributes cannot be read ({"; ".join(pool.unreadable())})'
        for pool in cluster.pools.values()
        if pool.unreadable()
    ]
    return f"; {', '.join(problems)}" if problems else ""


def _no_pool(engine: Engine, member: Member) -> str:
    if len(engine.members) == 1:
        return f'no pool matches engine "{engine.name}"'
    return f'no pool matches engine "{engine.name}" member {member.role}'


class _ClusterView:
    """Per-cluster matching results, computed once per schedule."""

    def __init__(self, deployment: Deployment, cluster: Cluster) -> None:
        self.cluster = cluster
        self.candidates: list[list[_Candidate]] = []
        untolerated = deployment.untolerated(cluster.taints)
        # Both effects keep new replicas off; the first key names the group in messages.
        taint = min((t.key for t in untolerated), default="")
        self.rejection = f"untolerated taint {taint}" if taint else ""
        self.rejection = self.rejection or deployment.weights_missing(cluster)
        self.rejection = self.rejection or cluster.ineligibility() or ""
        if self.rejection:
            return
        for engine in deployment.engines:
            candidates, reason = _engine_candidates(engine, cluster)
            if reason:
                # A no-pool reason already says, pool by pool, what could not be read.
                explained = reason.startswith(explain.NO_POOL)
                self.rejection = reason + ("" if explained else _unreadable_note(cluster))
                return
            self.candidates.append(candidates)

    def fit(self, free: Mapping[str, int]) -> tuple[EnginePlacement, ...] | None:
        """Co-schedule every engine on this cluster against a scratch copy of the ledger."""
        if self.rejection:
            return None
        placed, failed, _ = self._fill(free)
        return placed if failed is None else None

    def reason(self, free: Mapping[str, int]) -> str:
        """Why ``fit`` found no room (worked out only when no cluster fits at all)."""
        if self.rejection:
            return self.rejection
        _, failed, trial = self._fill(free)
        return self._insufficient(failed or [], trial, free)

    def _fill(
        self, free: Mapping[str, int]
    ) -> tuple[tuple[EnginePlacement, ...], list[_Candidate] | None, dict[str, int]]:
        """Engines in order on a scratch ledger; the candidates of the first that fails."""
        trial = dict(free)
        placed = []
        for candidates in self.candidates:
            chosen = next((c for c in candidates if trial[c.pool] >= c.cost), None)
            if chosen is None:
                return tuple(placed), candidates, trial
            trial[chosen.pool] -= chosen.cost
            placed.append(EnginePlacement(chosen.pool, chosen.resolved))
        return tuple(placed), None, trial

    def _insufficient(
        self, candidates: list[_Candidate], trial: Mapping[str, int], free: Mapping[str, int]
    ) -> str:
        """Name the pool closest to fitting; hint at scaling up only when the whole replica,
        every engine, would fit with each pool at its maximum size (D5)."""
        best = max(candidates, key=lambda c: trial[c.pool] - c.cost)
        has = max(trial[best.pool], 0)
        reason = f'insufficient free nodes (need {best.cost}, pool "{best.pool}" has {has}'
        scaled = {
            name: max(left, 0) + max((pool.max_nodes or pool.nodes) - pool.nodes, 0)
            for name, left in free.items()
            for pool in (self.cluster.pools[name],)
        }
        if scaled != {name: max(left, 0) for name, left in free.items()}:
            _, failed, _ = self._fill(scaled)
            if failed is None:
                reason += f"; {SCALE_UP_HINT}"
        return reason + ")"


# --- the three phases ----------------------------------------------------------------------


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


def _scale_down(kept: list[Placement], replicas: int) -> list[Placement]:
    kept = list(kept)
    while len(kept) > replicas:
        load = Counter(p.cluster for p in kept)
        victim = max(kept, key=lambda p: (load[p.cluster], p.cluster, p.index))
        kept.remove(victim)
    return kept


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
) -> Schedule:
    """Place ``deployment``. Selectors must compile (compile_selectors) first.

    ``replicas`` is every observed ModelReplica of the fleet, ours and others'. ``now`` is
    the clock failover is judged by (None: no failover); ``serving`` names our replicas that
    are Ready and routed (their endpoint Ready), which lets draining replicas go.
    """
    in_set = {
        c.name: c
        for c in sorted(clusters, key=lambda c: c.name)
        if c.name and _labels_match(c.labels, deployment.match_labels)
    }
    observed = sorted(replicas, key=lambda r: (r.name, r.namespace))
    ours = [
        r
        for r in observed
        if r.namespace == deployment.namespace and r.deployment == deployment.name
    ]

    # Phase 1: retain.
    kept: list[Placement] = []
    identities: set[tuple[str, int]] = set()
    for replica in ours:
        cluster = in_set.get(replica.cluster)
        if cluster is None or (replica.cluster, replica.index) in identities:
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

    # Phase 2: scale down (draining replicas leave by themselves).
    settled = _scale_down(settled, deployment.replicas)
    still_needed = max(0, deployment.replicas - sum(p.name in serving for p in settled))
    taken_over = {partner: name for name, partner in _replaces(settled).items()}
    # Keep those still serving, and whose replacement does not serve yet, first.
    leaving.sort(key=lambda p: (taken_over.get(p.name) in serving, p.name not in serving, p.name))
    leaving = leaving[:still_needed]
    kept = settled + leaving

    # Capacity ledger: every other replica, and our kept ones, at their observed cost.
    free = {(c.name, p.name): p.nodes for c in in_set.values() for p in c.pools.values()}
    kept_names = {p.observed.name for p in kept if p.observed is not None}
    for replica in observed:
        is_ours = replica.namespace == deployment.namespace and (
            replica.deployment == deployment.name
        )
        if is_ours and replica.name not in kept_names:
            continue
        for pool, nodes in replica.charges():
            key = (replica.cluster, pool)
            if key in free:
                free[key] -= nodes

    # A pool that shrank under its replicas leaves the ledger negative: say so, move nothing.
    our_pools = {
        (p.cluster, pool)
        for p in kept
        if p.observed is not None
        for pool, _ in p.observed.charges()
    }
    overcommitted = [
        Overcommit(
            cluster,
            pool,
            in_set[cluster].pools[pool].nodes - left,
            in_set[cluster].pools[pool].nodes,
        )
        for (cluster, pool), left in sorted(free.items())
        if left < 0 and (cluster, pool) in our_pools
    ]

    # Phase 3: fill.
    placements = list(kept)
    load = Counter(p.cluster for p in placements)
    views: dict[str, _ClusterView] = {}
    shortfall = ""
    for _ in range(deployment.replicas - len(settled)):
        tried: list[tuple[_ClusterView, dict[str, int]]] = []
        chosen = None
        for cluster in sorted(in_set.values(), key=lambda c: (load[c.name], c.name)):
            view = views.get(cluster.name)
            if view is None:
                view = views[cluster.name] = _ClusterView(deployment, cluster)
            pools_free = {name: free[(cluster.name, name)] for name in cluster.pools}
            engines = view.fit(pools_free)
            if engines is not None:
                chosen = (cluster, engines)
                break
            tried.append((view, pools_free))
        if chosen is None:
            shortfall = _summarise(view.reason(pools) for view, pools in tried)
            break
        cluster, engines = chosen
        used = {p.index for p in placements if p.cluster == cluster.name}
        index = next(i for i in range(len(used) + 1) if i not in used)
        for engine, placement in zip(deployment.engines, engines, strict=True):
            for member, resolved in zip(engine.members, placement.resolved, strict=True):
                if resolved:
                    free[(cluster.name, placement.pool)] -= member.pods * engine.copies
        placements.append(
            Placement(
                cluster=cluster.name,
                index=index,
                name=names.replica_name(deployment.name, cluster.name, index),
                engines=engines,
                observed=_same_name(ours, deployment, cluster.name, index),
            )
        )
        load[cluster.name] += 1

    placements = _pair_replacements(
        placements, fresh={p.name for p in placements} - {p.name for p in kept}
    )
    placements.sort(key=lambda p: (p.cluster, p.index))
    return Schedule(
        placements=placements,
        checked=len(in_set),
        shortfall=shortfall,
        overcommitted=overcommitted,
    )


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


def _labels_match(labels: Mapping[str, str], wanted: Mapping[str, str]) -> bool:
    return all(labels.get(k) == v for k, v in wanted.items())


def _kind(reason: str) -> tuple[str, str]:
    """``insufficient free nodes (need 2, pool "p" has 1)`` -> (kind, details)."""
    kind, sep, details = reason.partition(" (")
    if sep and details.endswith(")"):
        return kind, details[:-1]
    return reason, ""


def _summarise(reasons: Iterable[str]) -> str:
    """``6 insufficient free nodes, 2 not Ready``: clusters counted by kind of reason, as the
    Kubernetes scheduler does; most common first, bounded. Reasons that differ only in details
    (which pool, how many nodes) are one group, and the details are shown only when every
    cluster of the group shares them."""
    counts: Counter[str] = Counter()
    details: dict[str, Counter[str]] = {}
    for reason in reasons:
        kind, detail = _kind(reason)
        counts[kind] += 1
        details.setdefault(kind, Counter())[detail] += 1
    groups = sorted(counts.items(), key=lambda item: (-item[1], item[0]))
    shown = []
    for kind, count in groups[:MAX_REASON_GROUPS]:
        (only,) = details[kind] if len(details[kind]) == 1 else ("",)
        if not only:
            # Differing details are dropped, but scaling up is the actionable one: count it.
            scalable = sum(n for d, n in details[kind].items() if d.endswith(SCALE_UP_HINT))
            only = f"{scalable} {SCALE_UP_HINT}" if scalable and len(details[kind]) > 1 else ""
            only = only or explain.merged(kind, details[kind])
        shown.append(f"{count} {kind} ({only})" if only else f"{count} {kind}")
    rest = sum(count for _, count in groups[MAX_REASON_GROUPS:])
    if rest:
        shown.append(f"{rest} for other reasons")
    return ", ".join(shown)


def scheduled_message(schedule_: Schedule, wanted: int) -> str:
    """The ``ReplicasScheduled`` message of a shortfall (D6, issue item 1)."""
    placed = len(schedule_.staying)
    total = schedule_.checked
    if placed == 0:
        head = f"0 of {wanted} replicas scheduled (checked {total} clusters)"
        tail = f"; 0/{total} clusters available"
    else:
        head = f"{placed} of {wanted} replicas scheduled"
        tail = f"; 0/{total} clusters available for the rest"
    message = head + (f"{tail}: {schedule_.shortfall}" if schedule_.shortfall else "")
    return _bounded(message + drain_message(schedule_, prefix="; "))


def drain_message(schedule_: Schedule, prefix: str = "") -> str:
    """What a drain is doing: which replicas leave which cluster and why, and whether each has
    a replacement or keeps serving because no other cluster fits (the shortfall says why)."""
    moving = [p for p in schedule_.draining if not p.stuck]
    stuck = [p for p in schedule_.draining if p.stuck]
    replacement = {p.replaces: p.name for p in schedule_.placements if p.replaces}
    parts = []
    if moving:
        listed = ", ".join(
            f"{p.name} on {p.cluster} ({p.draining}) until {replacement[p.name]} serves"
            for p in moving[:MAX_REASON_GROUPS]
        )
        parts.append(f"draining: {listed}")
    if stuck:
        listed = ", ".join(f"{p.name} on {p.cluster} ({p.draining})" for p in stuck)
        parts.append(f"kept serving, no other cluster fits: {listed}")
    return prefix + "; ".join(parts) if parts else ""


def _bounded(message: str) -> str:
    if len(message) > MAX_MESSAGE_LENGTH:
        message = message[: MAX_MESSAGE_LENGTH - 3] + "..."
    return message


def overcommit_message(schedule_: Schedule) -> str:
    """``over-committed: a pool "p" needs 4 nodes, has 2``, or "" when every pool fits."""
    found = schedule_.overcommitted
    if not found:
        return ""
    shown = [str(o) for o in found[:MAX_REASON_GROUPS]]
    if len(found) > MAX_REASON_GROUPS:
        shown.append(f"{len(found) - MAX_REASON_GROUPS} more pools")
    message = f"{OVERCOMMITTED}: " + ", ".join(shown)
    if len(message) > MAX_MESSAGE_LENGTH:
        message = message[: MAX_MESSAGE_LENGTH - 3] + "..."
    return message
