"""Reading observed composed resources: conditions, readiness, and hold copies (spec C3/C4).

A function that cannot build its normal desired state must re-emit what it already composed,
or Crossplane deletes it. ``held`` gives the copy to re-emit: identity and spec only, never
status or server-populated metadata.
"""

from __future__ import annotations

import copy
from collections.abc import Mapping
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
    status = obj.get("status") if isinstance(obj, Mapping) else None
    conditions = status.get("conditions") if isinstance(status, Mapping) else None
    for cond in conditions if isinstance(conditions, list) else []:
        if isinstance(cond, dict) and cond.get("type") == type_:
            return cond
    return None


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
