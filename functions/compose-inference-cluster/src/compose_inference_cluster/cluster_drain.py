"""What the InferenceCluster says about replicas leaving it (issue 15).

The ModelDeployment function decides drains (NoExecute taints, failover) and stamps each
replica that must leave with ``modelplane.ai/draining`` (why) and, when no other cluster can
take its replacement, ``modelplane.ai/drain-blocked`` (why not). This function already reads
every ModelReplica on the cluster (the deletion guard), so it reports from those stamps: one
place to watch a drain, without re-running any scheduling here.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from modelplane_common.drain_annotations import BLOCKED, DRAINING
from modelplane_common.observed import condition, listed
from modelplane_common.plain import JSON

REPLICAS_DRAINED = "ReplicasDrained"
MAX_LISTED = 6


def _annotations(replica: Mapping[str, Any]) -> Mapping[str, Any]:
    annotations = (replica.get("metadata") or {}).get("annotations")
    return annotations if isinstance(annotations, Mapping) else {}


def _who(replica: Mapping[str, Any]) -> str:
    metadata = replica.get("metadata") or {}
    return f"{metadata.get('namespace', '')}/{metadata.get('name', '')}"


def _plural(count: int, one: str, many: str) -> str:
    return f"{count} {one if count == 1 else many}"


def condition_for(xr: JSON, replicas: list[JSON]) -> tuple[bool, str, str] | None:
    """``ReplicasDrained`` as (status, reason, message), or None when there is nothing to say:
    no NoExecute taint, no replica leaving, and never reported before."""
    leaving = sorted((r for r in replicas if _annotations(r).get(DRAINING)), key=_who)
    stuck = [r for r in leaving if _annotations(r).get(BLOCKED)]
    if stuck:
        items = [
            f"{_who(r)} ({_annotations(r)[DRAINING]}): {_annotations(r)[BLOCKED]}" for r in stuck
        ]
        verb = "keeps" if len(stuck) == 1 else "keep"
        message = f"{_plural(len(stuck), 'replica', 'replicas')} {verb} serving, "
        return (
            False,
            "DrainBlocked",
            message + f"no other cluster fits: {listed(items, MAX_LISTED)}",
        )
    if leaving:
        items = [f"{_who(r)} ({_annotations(r)[DRAINING]})" for r in leaving]
        message = f"{_plural(len(leaving), 'replica', 'replicas')} moving to other clusters, "
        return (
            False,
            "Draining",
            message + f"each serving until its replacement does: {listed(items, MAX_LISTED)}",
        )
    taints = (xr.get("spec") or {}).get("taints")
    evicting = isinstance(taints, list) and any(
        isinstance(t, dict) and t.get("effect") == "NoExecute" for t in taints
    )
    if evicting or condition(xr, REPLICAS_DRAINED) is not None:
        return True, "Drained", "no replica is moving off this cluster"
    return None
