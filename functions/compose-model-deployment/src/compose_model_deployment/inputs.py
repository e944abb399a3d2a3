"""What the fleet scheduler reads: the deployment, the clusters and the replicas already placed
(spec model-deployment §3-4), parsed tolerantly into frozen dataclasses. Pure.

Nothing here judges capacity or placement (``packing``, ``fitting`` and ``scheduler`` do);
an input that cannot be read parses to a value that holds (keeps what runs), never to one that
would move a replica.
"""

from __future__ import annotations

import dataclasses
import datetime
import re
from collections.abc import Iterable, Iterator, Mapping
from typing import Any

from modelplane_common import dracel, tolerant
from modelplane_common.observed import condition, readiness

from compose_model_deployment import devices, names
from compose_model_deployment.devices import Pool, Request, Resolved


class InvalidSelectorError(ValueError):
    """A selector that does not compile; the message names engine, member and request."""


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
        if self.cache_labels is None or labels_match(cluster.labels, self.cache_labels):
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


def pods(member: Mapping[str, Any]) -> int:
    if member.get("role", "Standalone") != "Worker":
        return 1
    nodes = tolerant.integer(member, "worker", "nodes")
    return nodes if nodes is not None and nodes > 0 else 1


def copies(engine: Mapping[str, Any]) -> int:
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
                pods=pods(member),
                raw=member,
            )
            for member in engine.get("members") or []
        )
        engines.append(Engine(engine["name"], copies(engine), members, engine))
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


# Sorts after every RFC 3339 timestamp: a replica not created yet (placed by this reconcile)
# comes after every replica that exists, as it will once the API server stamps it.
NOT_CREATED = "~"


@dataclasses.dataclass(frozen=True)
class ObservedReplica:
    name: str
    namespace: str
    deployment: str
    cluster: str
    index: int
    body: Mapping[str, Any]
    # Known only from a capacity summary, not observed: ours being deleted or already gone
    # (the summary lags). Charged while listed, never retained (its body is a summary's).
    listed_only: bool = False

    @property
    def created(self) -> str:
        """``metadata.creationTimestamp`` as UTC ``YYYY-MM-DDTHH:MM:SS.ffffffZ`` (so strings
        sort as times, whatever offset or precision was written), or NOT_CREATED when absent
        or unreadable: the packing's canonical order is first come, first served
        (design/capacity.md, "Concurrent reconciles")."""
        moment = parse_time(tolerant.text(self.body, "metadata", "creationTimestamp"))
        if moment is None:
            return NOT_CREATED
        return moment.astimezone(datetime.UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")

    @property
    def deleting(self) -> bool:
        """Being deleted (``metadata.deletionTimestamp`` set) or listed only by a summary:
        never retained, still charged."""
        return self.listed_only or bool(tolerant.text(self.body, "metadata", "deletionTimestamp"))

    @property
    def engines(self) -> list[Mapping[str, Any]]:
        engines = (self.body.get("spec") or {}).get("engines")
        return [e for e in engines if isinstance(e, dict)] if isinstance(engines, list) else []

    def claims(self) -> Iterator[Claim]:
        """Every member that claims devices, from this replica's own spec (the shape it runs
        with, which may differ from the deployment's after an edit)."""
        for e, engine in enumerate(self.engines):
            for m, member in enumerate(tolerant.maps(engine, "members")):
                requests = devices.parse_claims(member.get("deviceRequests"))
                if requests:
                    yield Claim(
                        engine=e,
                        member=m,
                        pool=str(member.get("nodePoolName", "")),
                        copies=copies(engine),
                        pods=pods(member),
                        worker=member.get("role") == "Worker",
                        requests=requests,
                    )


@dataclasses.dataclass(frozen=True)
class Claim:
    """One member of a running replica that claims devices: ``pods`` pods per copy (one per
    node of its gang for a Worker), each taking ``requests`` on one node of ``pool``."""

    engine: int
    member: int
    pool: str
    copies: int
    pods: int
    worker: bool
    requests: tuple[Resolved, ...]


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


def labels_match(labels: Mapping[str, str], wanted: Mapping[str, str]) -> bool:
    return all(labels.get(k) == v for k, v in wanted.items())
