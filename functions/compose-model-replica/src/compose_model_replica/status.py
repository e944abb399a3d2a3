"""Replica status from what provider-kubernetes reports back (model-replica.md §11).

provider-kubernetes copies each remote object into its Object's ``status.atProvider.manifest``
and sets the Object's ``Ready`` from the readiness policy. A workload is **accepted** once that
copy exists and **ready** once its Object is ``Ready=True``. Observed state is read defensively:
a malformed Object degrades to "not accepted" with the reason in the condition, never an error
that would abort the reconcile.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from typing import Any

from modelplane_common import observed, tolerant
from modelplane_common.function import Condition

JSON = dict[str, Any]

ACCEPTED = "ModelAccepted"
READY = "ModelReady"


def _conditions(obj: Mapping[str, Any] | None) -> list[JSON]:
    return tolerant.maps(obj, "status", "conditions")


def _describe(condition: JSON) -> str:
    text = f"{condition.get('type')}={condition.get('status')}"
    why = ": ".join(str(condition[k]) for k in ("reason", "message") if condition.get(k))
    return f"{text} ({why})" if why else text


def sync_error(obj: Mapping[str, Any] | None) -> str | None:
    """The provider's message when it could not apply the Object (``Synced=False``)."""
    synced = observed.condition(obj, "Synced")
    if synced is None or synced.get("status") != "False":
        return None
    return str(synced.get("message") or synced.get("reason") or "not synced")


def _remote_summary(manifest: JSON) -> str:
    """What the remote workload says about itself: ready copies and troubled conditions."""
    parts = [tolerant.describe(manifest)]
    status = tolerant.status(manifest)
    wanted = tolerant.integer(manifest, "spec", "replicas")
    if wanted is not None:
        parts.append(f"{status.get('readyReplicas', 0)}/{wanted} ready")
    for condition in _conditions(manifest):
        # Available is the gate; any other False (or a failure reported True) says why not.
        troubled = (
            condition.get("type") == "Available" and condition.get("status") != "True"
        ) or condition.get("status") == "False"
        troubled = troubled or (
            condition.get("type") == "ReplicaFailure" and condition.get("status") == "True"
        )
        if troubled:
            parts.append(_describe(condition))
    return ", ".join(parts)


@dataclasses.dataclass(frozen=True)
class WorkloadState:
    key: str
    accepted: bool
    ready: bool
    detail: str  # why not accepted or not ready; empty when ready


def workload_state(key: str, obj: Mapping[str, Any] | None) -> WorkloadState:
    """Accepted/ready for one engine workload key from its observed Object (or None)."""
    if obj is None:
        return WorkloadState(key, False, False, "not created yet")
    status = obj.get("status")
    if status is not None and not isinstance(status, Mapping):
        return WorkloadState(key, False, False, "observed Object has a malformed status")
    at_provider = (status or {}).get("atProvider")
    manifest = at_provider.get("manifest") if isinstance(at_provider, Mapping) else None
    if at_provider is not None and not isinstance(at_provider, Mapping):
        return WorkloadState(key, False, False, "observed Object has a malformed status.atProvider")
    if manifest is not None and not isinstance(manifest, Mapping):
        return WorkloadState(
            key, False, False, "observed Object has a malformed status.atProvider.manifest"
        )
    error = sync_error(obj)
    if not manifest:
        detail = f"not applied: {error}" if error else "not yet created on the cluster"
        return WorkloadState(key, False, False, detail)
    if observed.is_ready(obj):
        return WorkloadState(key, True, True, "")
    detail = _remote_summary(dict(manifest))
    if error:
        detail += f"; not applied: {error}"
    return WorkloadState(key, True, False, detail)


def _explain(pending: list[WorkloadState]) -> str:
    return "; ".join(f"{s.key}: {s.detail}" for s in pending)


def replica_conditions(states: list[WorkloadState]) -> list[Condition]:
    """``ModelAccepted`` and ``ModelReady``; only engine workloads gate them."""
    unaccepted = [s for s in states if not s.accepted]
    unready = [s for s in states if not s.ready]
    if unaccepted:
        accepted = Condition(ACCEPTED, False, "Deploying", _explain(unaccepted))
    else:
        accepted = Condition(ACCEPTED, True, "Accepted")
    if not unready:
        ready = Condition(READY, True, "Serving")
    elif not unaccepted:
        ready = Condition(READY, False, "ModelStarting", _explain(unready))
    else:
        ready = Condition(READY, False, "WaitingForModel", _explain(unready))
    return [accepted, ready]


def composed_ready(obj: Mapping[str, Any] | None, workload: bool) -> bool | None:
    """Readiness to report for one desired key: unset until observed; then workloads when
    their Object is Ready=True, everything else as soon as it exists."""
    if obj is None:
        return None
    if workload:
        return observed.is_ready(obj)
    return True
