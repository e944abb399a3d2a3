"""Device-level capacity (decision D11): pods packed onto the nodes of a pool by the devices
they claim. Pure.

A pool offers ``nodes`` identical nodes, each with the devices it publishes
(``Pool.per_node``: claimable devices only). A pod takes its ``Demand`` (count per device of
the pool) on ONE node. The packing rule, the same for replicas already running and for new
ones:

* **Canonical order.** First come, first served: replicas in (creationTimestamp, name,
  namespace) order, a replica not created yet (or whose timestamp is unknown) after every
  one that is; within a replica, engines in order, then each copy, then members in order,
  then the member's pods. Every reconcile of every deployment computes the same order, so
  when two reconciles made from one snapshot both took a pool's last free devices, all of
  them agree which replica lost (the one created later) and its deployment re-places it.
* **First fit.** A pod goes to the lowest-numbered node with enough free devices of every
  device it claims. The pods of one Worker member of one engine copy (one per node of a
  gang) go to distinct nodes. A claimless pod costs nothing and is not packed.
* **Never overcommit.** A new replica is accepted on a pool only if (a) its pods fit, first
  fit, after everything already packed, and (b) replaying every replica of the pool in
  canonical order with it included leaves no pod without a node. (b) is what the next
  reconcile computes, so a placement made now is never reported over-committed later.

A running replica is never moved by packing. A pod of one that fits on no node (its pool
shrank) is charged to the allowed node with the most of what it needs free, driving that
node negative, and is counted as overflow: the pool takes nothing new and is reported
over-committed when it hosts one of our replicas.

Node numbers are the model's, not the workload cluster's: its own scheduler binds the pods
(design/capacity.md, "Counting in devices").
"""

from __future__ import annotations

import bisect
import dataclasses
import json
from collections.abc import Callable, Iterable, Mapping, Sequence

from compose_model_deployment import devices
from compose_model_deployment.devices import Demand, Pool
from compose_model_deployment.inputs import NOT_CREATED, Claim, Cluster, ObservedReplica

# A pod's gang: pods with the same (engine, copy, member) of one replica go to distinct nodes.
Gang = tuple[int, int, int]
# (creationTimestamp or NOT_CREATED, replica name, namespace): the canonical order.
Key = tuple[str, str, str]


def new_key(name: str, namespace: str) -> Key:
    """The key of a replica this reconcile places (not created yet)."""
    return (NOT_CREATED, name, namespace)


def replica_key(replica: ObservedReplica) -> Key:
    return (replica.created, replica.name, replica.namespace)


@dataclasses.dataclass(frozen=True)
class Pod:
    demand: Demand
    gang: Gang | None = None  # None: may share a node with any pod


def member_pods(where: Gang, demand: Demand, pods: int, *, worker: bool) -> tuple[Pod, ...]:
    """The pods one member of one engine copy, ``where`` = (engine, copy, member), puts on
    its pool; none when it claims nothing."""
    if not demand:
        return ()
    return (Pod(demand, where if worker and pods > 1 else None),) * pods


def observed_pods(claims: Iterable[Claim], pools: Mapping[str, Pool]) -> dict[str, list[Pod]]:
    """A running replica's pods per pool, in canonical order, from the deviceRequests it runs
    with. A pool that is not published charges nothing (spec S16)."""
    by_engine: dict[int, list[Claim]] = {}
    for claim in claims:
        by_engine.setdefault(claim.engine, []).append(claim)
    out: dict[str, list[Pod]] = {}
    for engine in sorted(by_engine):
        members = by_engine[engine]
        for copy in range(max(c.copies for c in members)):
            for claim in members:
                pool = pools.get(claim.pool)
                if pool is None or copy >= claim.copies:
                    continue
                demand = devices.claimed_demand(claim.requests, pool)
                where = (engine, copy, claim.member)
                pods = member_pods(where, demand, claim.pods, worker=claim.worker)
                if pods:
                    out.setdefault(claim.pool, []).extend(pods)
    return out


@dataclasses.dataclass
class Packed:
    """Every pod of a pool placed in canonical order: what is left free on each node."""

    free: list[list[int]]
    overflow: int = 0  # pods that fit on no node
    demanded: int = 0  # devices claimed by every pod
    # Replicas with a pod that fit on no node, charged anyway (they run or stay): the pool is
    # over-committed for them.
    losers: set[Key] = dataclasses.field(default_factory=set)
    # Replicas that yield (a race loser its deployment places again): they did not fit whole
    # after the replicas before them and are not charged at all.
    yielded: set[Key] = dataclasses.field(default_factory=set)


def _fits(row: Sequence[int], demand: Demand) -> bool:
    return all(row[i] >= n for i, n in demand)


def _take(row: list[int], demand: Demand) -> None:
    for i, n in demand:
        row[i] -= n


def _first_fit(free: list[list[int]], pod: Pod, avoid: set[int]) -> int | None:
    for node, row in enumerate(free):
        if node not in avoid and _fits(row, pod.demand):
            return node
    return None


def _pack_group(
    packed: Packed, pods: Iterable[Pod], strict: bool, key: Key | None = None
) -> int | None:
    """Place one replica's pods first fit; returns the position of the first pod that fits
    nowhere (``strict``: stop there, leaving ``packed`` partly charged) or None."""
    gangs: dict[Gang, set[int]] = {}
    for position, pod in enumerate(pods):
        taken = gangs.setdefault(pod.gang, set()) if pod.gang is not None else set()
        packed.demanded += sum(n for _, n in pod.demand)
        node = _first_fit(packed.free, pod, taken)
        if node is None:
            if strict:
                return position
            packed.overflow += 1
            if key is not None:
                packed.losers.add(key)
            node = _overflow_node(packed.free, pod, taken)
            if node is None:
                continue
        _take(packed.free[node], pod.demand)
        taken.add(node)
    return None


def _overflow_node(free: list[list[int]], pod: Pod, taken: set[int]) -> int | None:
    """Where a running pod that fits nowhere is charged: the allowed node (any, when its gang
    has every node) with the most of what it needs free, the lowest on a tie."""
    allowed = [n for n in range(len(free)) if n not in taken] or list(range(len(free)))
    if not allowed:
        return None
    return max(allowed, key=lambda n: (sum(free[n][i] for i, _ in pod.demand), -n))


def replay(
    per_node: tuple[int, ...], nodes: int, groups: Iterable[tuple[Key, Sequence[Pod], bool]]
) -> Packed:
    """Pack groups (replicas by key, already in canonical order, and whether each yields)
    onto fresh nodes. A yielding replica that does not fit whole takes nothing, so the
    replicas after it are judged as its own deployment will leave the pool: without it."""
    packed = Packed([list(per_node) for _ in range(nodes)])
    for key, pods, yields in groups:
        if not yields:
            _pack_group(packed, pods, strict=False, key=key)
            continue
        trial = Packed([list(row) for row in packed.free])
        if _pack_group(trial, pods, strict=True) is None:
            packed.free = trial.free
            packed.demanded += trial.demanded
        else:
            packed.yielded.add(key)
    return packed


class PoolLedger:
    """One pool's replicas (canonical order) and, lazily, their packing."""

    def __init__(self, pool: Pool, nodes: int | None = None) -> None:
        self.pool = pool
        self.nodes = pool.nodes if nodes is None else nodes
        self.per_node = pool.per_node
        self.keys: list[Key] = []
        self.groups: list[tuple[Pod, ...]] = []
        self.yielding: list[bool] = []
        self._packed: Packed | None = None

    @property
    def offered(self) -> int:
        return self.nodes * sum(self.per_node)

    def add(self, key: Key, pods: Sequence[Pod], yields: bool = False) -> None:
        at = bisect.bisect(self.keys, key)
        self.keys.insert(at, key)
        self.groups.insert(at, tuple(pods))
        self.yielding.insert(at, yields)
        self._packed = None

    @property
    def packed(self) -> Packed:
        if self._packed is None:
            self._packed = replay(
                self.per_node,
                self.nodes,
                zip(self.keys, self.groups, self.yielding, strict=True),
            )
        return self._packed

    def scaled(self) -> PoolLedger:
        """The same replicas with the pool at its autoscaling bound (D5: headroom only)."""
        bigger = PoolLedger(self.pool, max(self.nodes, self.pool.max_nodes or 0))
        bigger.keys, bigger.groups = list(self.keys), list(self.groups)
        bigger.yielding = list(self.yielding)
        return bigger

    def appended(self, pods: Sequence[Pod]) -> int | None:
        """Whether ``pods`` (one new replica's, on this pool) fit first fit after everything
        packed: None when they do, else the position of the first that does not (0 when the
        pool is already over-committed)."""
        packed = self.packed
        if packed.overflow:
            return 0
        trial = Packed([list(row) for row in packed.free])
        return _pack_group(trial, pods, strict=True)

    def canonical(self, key: Key, pods: Sequence[Pod]) -> Packed | None:
        """The packing with the new replica in its canonical place, or None when some pod
        (its own or one already running) would then fit on no node."""
        at = bisect.bisect(self.keys, key)
        if at == len(self.keys):
            # Last in canonical order: the replay is the packing so far plus its pods.
            trial = Packed(
                [list(row) for row in self.packed.free],
                demanded=self.packed.demanded,
                losers=set(self.packed.losers),
                yielded=set(self.packed.yielded),
            )
            failed = self.packed.overflow or _pack_group(trial, pods, strict=True) is not None
            return None if failed else trial
        keys = [*self.keys[:at], key, *self.keys[at:]]
        groups = [*self.groups[:at], tuple(pods), *self.groups[at:]]
        yielding = [*self.yielding[:at], False, *self.yielding[at:]]
        packed = replay(self.per_node, self.nodes, zip(keys, groups, yielding, strict=True))
        return None if packed.overflow else packed

    def commit(self, key: Key, pods: Sequence[Pod], packed: Packed) -> None:
        self.add(key, pods)
        self._packed = packed


class FleetLedger:
    """Every in-set cluster's pool ledgers, each built (and its replicas packed) only when the
    schedule first looks at that cluster: a large fleet is mostly never looked at."""

    def __init__(
        self,
        clusters: Mapping[str, Cluster],
        yields: Callable[[ObservedReplica], bool] = lambda replica: False,
        others: Callable[[str], Iterable[ObservedReplica]] = lambda cluster: (),
    ) -> None:
        self._clusters = clusters
        self._yields = yields
        # Other deployments' replicas on a cluster, read when the cluster is first looked at.
        self._others = others
        self._running: dict[str, list[ObservedReplica]] = {}
        self._built: dict[str, dict[str, PoolLedger]] = {}

    def charge(self, replica: ObservedReplica) -> None:
        """A replica that runs (or stays) on an in-set cluster uses its devices there."""
        if replica.cluster in self._clusters:
            self._running.setdefault(replica.cluster, []).append(replica)
            self._built.pop(replica.cluster, None)

    def discharge(self, replica: ObservedReplica) -> None:
        """A replica that will not stay (lost a race, or goes now): its devices are free again
        for what this reconcile places."""
        running = self._running.get(replica.cluster, [])
        if replica in running:
            running.remove(replica)
            self._built.pop(replica.cluster, None)

    def pools(self, cluster: str) -> dict[str, PoolLedger]:
        built = self._built.get(cluster)
        if built is None:
            published = self._clusters[cluster].pools
            built = {name: PoolLedger(pool) for name, pool in published.items()}
            # Replicas of one shape share their engines (a capacity summary stores each shape
            # once): their pods are computed once. Keyed by identity, valid while they live.
            shapes: dict[int, dict[str, list[Pod]]] = {}
            for replica in [*self._running.get(cluster, ()), *self._others(cluster)]:
                key, yields = replica_key(replica), self._yields(replica)
                engines = (replica.body.get("spec") or {}).get("engines")
                pods_by_pool = shapes.get(id(engines))
                if pods_by_pool is None:
                    pods_by_pool = observed_pods(replica.claims(), published)
                    if isinstance(engines, list):
                        shapes[id(engines)] = pods_by_pool
                for pool, pods in pods_by_pool.items():
                    built[pool].add(key, pods, yields)
            self._built[cluster] = built
        return built


# --- explanations (D11: they count devices) -------------------------------------------------

_ACRONYMS = {"gpu", "tpu", "npu", "hpu", "ipu", "nic", "fpga"}


def _noun(pool: Pool, index: int, count: int) -> str:
    """``2 GPUs``, ``1 "fabric" device``: what a pool's device is called in explanations."""
    name = pool.devices[index].name
    plural = "" if count == 1 else "s"
    if name.lower() in _ACRONYMS:
        return f"{count} {name.upper()}{plural}"
    if name:
        return f"{count} {json.dumps(name)} device{plural}"
    return f"{count} device{plural}"


def _described(pool: Pool, demand: Demand) -> str:
    return " and ".join(_noun(pool, i, n) for i, n in demand)


def explain(ledger: PoolLedger, earlier: Sequence[Pod], pods: Sequence[Pod], failed: int) -> str:
    """Why ``pods`` (one engine's, after this replica's ``earlier`` pods on the pool) do not
    fit, ``failed`` being the first that does not: counted in devices, e.g. ``needs 2 GPUs
    on one node; pool "h100" has at most 1 free on any node``."""
    name = json.dumps(ledger.pool.name)
    if ledger.packed.overflow:
        return f"pool {name} is over-committed by the replicas already on it"
    pod = pods[failed]
    # The failing pod's whole gang, judged from the state before its first pod.
    start = failed
    while pod.gang is not None and start > 0 and pods[start - 1] == pod:
        start -= 1
    size = 1
    if pod.gang is not None:
        size = sum(1 for p in pods[start:] if p == pod)
    state = Packed([list(row) for row in ledger.packed.free])
    _pack_group(state, [*earlier, *pods[:start]], strict=False)
    after = " after the replica's other pods" if earlier or start else ""
    if size == 1:
        if ledger.nodes == 0:
            return (
                f"needs {_described(ledger.pool, pod.demand)} on one node; pool {name} has no nodes"
            )
        for i, n in pod.demand:
            most = max(row[i] for row in state.free)
            if most < n:
                has = f"at most {most} free" if most > 0 else "none free"
                return (
                    f"needs {_noun(ledger.pool, i, n)} on one node; pool {name} has {has} on "
                    f"any node{after}"
                )
        return (
            f"needs {_described(ledger.pool, pod.demand)} on one node; pool {name} has no node "
            f"with all of them free{after}"
        )
    needs = f"needs {_described(ledger.pool, pod.demand)} on each of {size} nodes"
    if size > ledger.nodes:
        return f"{needs}; pool {name} has {ledger.nodes} node{'' if ledger.nodes == 1 else 's'}"
    enough = sum(1 for row in state.free if _fits(row, pod.demand))
    nodes = f"{enough} node{'' if enough == 1 else 's'}" if enough else "no node"
    return f"{needs}; pool {name} has {nodes} with that many free{after}"
