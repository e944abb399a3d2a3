"""Reading observed composed resources: conditions, readiness, and hold copies (spec C3/C4).

A function that cannot build its normal desired state must re-emit what it already composed,
or Crossplane deletes it. ``held`` gives the copy to re-emit: identity and spec only, never
status or server-populated metadata.
"""

from __future__ import annotations

import copy
from collections.abc import Iterable, Mapping
from typing import Any

from modelplane_common import tolerant
from modelplane_common.plain import JSON

# Metadata a function may own; everything else (uid, resourceVersion, managedFields...) is
# the API server's and must not be sent back.
_OWNED_METADATA = ("name", "namespace", "generateName", "labels", "annotations")


def condition(obj: Mapping[str, Any] | None, type_: str) -> JSON | None:
    """The status condition of ``type_`` on ``obj``, or None.

    Observed state is read defensively: a malformed status reads as "no such condition", never
    an error that would abort the reconcile.
    """
    if type(obj) is dict:  # decoded objects: without the general walk (thousands a call)
        status = obj.get("status")
        found = (
            status.get("conditions") if type(status) is dict else tolerant.at(status, "conditions")
        )
    else:
        found = tolerant.at(obj, "status", "conditions")
    if not isinstance(found, list):
        return None
    for cond in found:
        if isinstance(cond, dict) and cond.get("type") == type_:
            return cond
    return None


# Set on an XR while some composed resource it kept has no readable Ready condition (e.g. every
# status was stripped by a backup restore): its own Ready=False then means "not known yet",
# never "down", and readers must not withdraw anything because of it (issue 14).
READINESS_KNOWN = "ReadinessKnown"


def readiness(obj: Mapping[str, Any] | None) -> bool | None:
    """``Ready`` as True, False, or None when unknown: no readable Ready condition, or
    Ready=False on an XR that says its composed resources' readiness is not known yet."""
    found = condition(obj, "Ready")
    state = found.get("status") if found else None
    if state == "True":
        return True
    if state != "False":
        return None
    known = condition(obj, READINESS_KNOWN)
    return None if known and known.get("status") == "False" else False


def readiness_known(
    composite: Mapping[str, Any], observed: Mapping[str, Any], kept: Iterable[str]
) -> tuple[bool, str] | None:
    """The ``ReadinessKnown`` condition for an XR that keeps the composed resources ``kept``:
    (False, names) while any observed one has unknown readiness; (True, "") once all are known
    again, only if the XR carries the condition (it is absent in the normal case)."""
    unknown = sorted(key for key in kept if key in observed and readiness(observed[key]) is None)
    if unknown:
        return False, f"no readable Ready condition yet on {listed(unknown, 6)}"
    if condition(composite, READINESS_KNOWN) is not None:
        return True, ""
    return None


def listed(items: list[str], limit: int) -> str:
    """``a, b and 3 more``: at most ``limit`` names in a condition message."""
    shown = ", ".join(items[:limit])
    return shown + (f" and {len(items) - limit} more" if len(items) > limit else "")


def is_true(obj: Mapping[str, Any] | None, type_: str) -> bool:
    cond = condition(obj, type_)
    return bool(cond) and cond.get("status") == "True"


def is_ready(obj: Mapping[str, Any] | None) -> bool:
    """Whether ``obj`` reports condition Ready=True (Crossplane's and providers' readiness)."""
    return is_true(obj, "Ready")


def held(obj: Mapping[str, Any]) -> JSON:
    """A copy of an observed object fit to re-emit unchanged as desired state."""
    metadata = tolerant.mapping(obj, "metadata") or {}
    annotations = {
        k: v
        for k, v in (tolerant.mapping(metadata, "annotations") or {}).items()
        # Crossplane and kubectl stamp these; they are not ours to own.
        if not k.startswith(("crossplane.io/", "kubectl.kubernetes.io/"))
    }
    kept: JSON = {k: copy.deepcopy(metadata[k]) for k in _OWNED_METADATA if k in metadata}
    if annotations:
        kept["annotations"] = annotations
    else:
        kept.pop("annotations", None)
    body: JSON = {"apiVersion": obj.get("apiVersion"), "kind": obj.get("kind"), "metadata": kept}
    for key, value in obj.items():
        if key not in ("apiVersion", "kind", "metadata", "status"):
            body[key] = copy.deepcopy(value)
    return body


def held_all(observed: Mapping[str, Mapping[str, Any]]) -> dict[str, JSON]:
    """Hold copies of every observed composed resource, by composition resource name."""
    return {key: held(obj) for key, obj in observed.items()}
