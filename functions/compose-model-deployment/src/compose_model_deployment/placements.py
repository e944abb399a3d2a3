"""What the fleet scheduler decides: desired replicas, over-committed pools, the schedule."""

from __future__ import annotations

import dataclasses

from compose_model_deployment.devices import Resolved
from compose_model_deployment.inputs import ObservedReplica


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
    # Going (a scale-down victim, or a drained replica whose successor serves) while a route
    # still sends it traffic: withdrawn from routes first, deleted once none does.
    retiring: str = ""


@dataclasses.dataclass(frozen=True)
class Overcommit:
    """A pool whose retained replicas (ours and others') cannot all be packed onto its nodes
    (D11): ``needs`` devices claimed in all, ``has`` devices offered in all. A pool can be
    over-committed with ``needs <= has`` when no node has room for a whole pod."""

    cluster: str
    pool: str
    needs: int
    has: int

    def __str__(self) -> str:
        where = f'{self.cluster} pool "{self.pool}"'
        needs = f"needs {self.needs} device{'' if self.needs == 1 else 's'}, has {self.has}"
        if self.needs > self.has:
            return f"{where} {needs}"
        return f"{where} {needs} but not on the same nodes"


@dataclasses.dataclass
class Schedule:
    placements: list[Placement]
    checked: int  # clusters in the set
    shortfall: str = ""  # per-cluster reasons for replicas that could not be placed
    # Pools hosting our kept replicas that are charged beyond their size (spec §5.5 item 5);
    # reported only: retention ignores capacity, so nothing moves. Sorted by cluster, pool.
    overcommitted: list[Overcommit] = dataclasses.field(default_factory=list)
    # (replica, cluster) of our replicas, not Ready, that lost their pool's last devices to
    # replicas created before them (a race between reconciles): placed again in this pass.
    lost: list[tuple[str, str]] = dataclasses.field(default_factory=list)

    @property
    def staying(self) -> list[Placement]:
        """The replicas that count towards spec.replicas (draining and retiring ones are on
        their way out)."""
        return [p for p in self.placements if not p.draining and not p.retiring]

    @property
    def draining(self) -> list[Placement]:
        return [p for p in self.placements if p.draining]

    @property
    def retiring(self) -> list[Placement]:
        return [p for p in self.placements if p.retiring]
