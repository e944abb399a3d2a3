"""Whether, and where, one replica of a deployment fits on one cluster (spec §4.5, D3, D11).

Each engine goes whole onto one pool (D3): the first of its candidate pools, in published
order, where its pods pack (``packing``) after everything on the pool, this replica's
earlier engines included. When no cluster fits, each says why, counting devices. Pure;
selectors must have been compiled.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping

from compose_model_deployment import devices, explain, packing
from compose_model_deployment.devices import Resolved
from compose_model_deployment.inputs import Cluster, Deployment, Engine, Member
from compose_model_deployment.packing import Key, Packed, Pod, PoolLedger
from compose_model_deployment.placements import EnginePlacement

SCALE_UP_HINT = "fits after it scales up"
INSUFFICIENT = "insufficient free devices"


@dataclasses.dataclass(frozen=True)
class _Candidate:
    pool: str
    pods: tuple[Pod, ...]  # the engine's claiming pods on this pool, in canonical order
    resolved: tuple[tuple[Resolved, ...], ...]


def _engine_candidates(
    index: int, engine: Engine, cluster: Cluster
) -> tuple[list[_Candidate], str]:
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
        pool = cluster.pools[pool_name]
        pods: list[Pod] = []
        for copy in range(engine.copies):
            for m, (member, match) in enumerate(zip(engine.members, matches, strict=True)):
                if match:
                    demand = devices.member_demand(member.requests, pool) or ()
                    worker = member.role == "Worker"
                    pods.extend(
                        packing.member_pods((index, copy, m), demand, member.pods, worker=worker)
                    )
        candidates.append(_Candidate(pool_name, tuple(pods), tuple(m or () for m in matches)))
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


@dataclasses.dataclass
class Fit:
    """One replica's trial on a cluster: the engines placed, and on failure what failed."""

    placed: tuple[EnginePlacement, ...]
    pods: dict[str, list[Pod]]  # this replica's pods per pool
    packed: dict[str, Packed] = dataclasses.field(default_factory=dict)  # accepted packings
    engine: int | None = None  # the first engine no candidate pool took
    fragmented: str = ""  # a pool where only the canonical replay failed

    @property
    def fits(self) -> bool:
        return self.engine is None and not self.fragmented


class ClusterView:
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
        for index, engine in enumerate(deployment.engines):
            candidates, reason = _engine_candidates(index, engine, cluster)
            if reason:
                # A no-pool reason already says, pool by pool, what could not be read.
                explained = reason.startswith(explain.NO_POOL)
                self.rejection = reason + ("" if explained else _unreadable_note(cluster))
                return
            self.candidates.append(candidates)

    def fit(self, ledgers: Mapping[str, PoolLedger], key: Key) -> Fit:
        """Co-schedule every engine on this (not rejected) cluster, ``key`` naming the new
        replica: its place in the canonical order."""
        return self._fill(ledgers, key)

    def _fill(self, ledgers: Mapping[str, PoolLedger], key: Key) -> Fit:
        trial = Fit(placed=(), pods={})
        placed = []
        for index, candidates in enumerate(self.candidates):
            chosen = None
            for candidate in candidates:
                pods = [*trial.pods.get(candidate.pool, []), *candidate.pods]
                if ledgers[candidate.pool].appended(pods) is None:
                    chosen = candidate
                    break
            if chosen is None:
                trial.placed, trial.engine = tuple(placed), index
                return trial
            trial.pods.setdefault(chosen.pool, []).extend(chosen.pods)
            placed.append(EnginePlacement(chosen.pool, chosen.resolved))
        trial.placed = tuple(placed)
        for pool, pods in sorted(trial.pods.items()):
            packed = ledgers[pool].canonical(key, pods)
            if packed is None:
                trial.fragmented = pool
                return trial
            trial.packed[pool] = packed
        return trial

    def reason(self, ledgers: Mapping[str, PoolLedger], key: Key) -> str:
        """Why ``fit`` found no room (worked out only when no cluster fits at all)."""
        if self.rejection:
            return self.rejection
        trial = self._fill(ledgers, key)
        if trial.fragmented:
            name = trial.fragmented
            reason = (
                f'{INSUFFICIENT} (pool "{name}" has the devices free only if the replicas '
                "already on it were packed differently"
            )
        else:
            reason = f"{INSUFFICIENT} ({self._closest(ledgers, trial)}"
        scaled = {name: ledger.scaled() for name, ledger in ledgers.items()}
        grows = any(scaled[n].nodes > ledgers[n].nodes for n in ledgers)
        if grows and self._fill(scaled, key).fits:
            reason += f"; {SCALE_UP_HINT}"
        return reason + ")"

    def _closest(self, ledgers: Mapping[str, PoolLedger], trial: Fit) -> str:
        """The failing engine's explanation on the pool closest to fitting: the one that
        packs the most of its pods (published order on a tie)."""
        assert trial.engine is not None
        best: tuple[int, str] | None = None
        for candidate in self.candidates[trial.engine]:
            ledger = ledgers[candidate.pool]
            earlier = trial.pods.get(candidate.pool, [])
            failed = ledger.appended([*earlier, *candidate.pods])
            placed = -1 if ledger.packed.overflow else (failed or 0) - len(earlier)
            if best is None or placed > best[0]:
                at = max((failed or 0) - len(earlier), 0)
                best = (placed, packing.explain(ledger, earlier, candidate.pods, at))
        assert best is not None
        return best[1]
