"""Crossplane Usages in ``modelplane simulate``: deletion protection and ordering (D8).

A ``protection.crossplane.io`` ``Usage`` (namespaced) or ``ClusterUsage`` protects the object
its ``of`` names. While it does, the Usage webhook denies every delete of that object, the
user's and the garbage collector's alike, with
``This resource is in-use by N usage(s), including the ...``. A Usage protects for as long
as it exists, and Crossplane's finalizer keeps a Usage with a ``by`` until that user is gone,
so deleting all three together removes the user, then the Usage, then the used object. With
``replayDeletion: true`` a denied delete is sent again once the protection is gone; the garbage
collector retries anyway. A denied delete also leaves ``usage.crossplane.io/deletion-attempt-
with-policy`` on the object, as the webhook does.

Selectors are resolved the way Crossplane's usage controller resolves them: matching labels,
and with ``matchControllerRef`` the same controller as the Usage; a namespaced Usage looks in
its own namespace, a ClusterUsage at cluster scope (or in every namespace for a selector).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable

from modelplane.kube import JSON, group_of, lookup, meta

USAGE_GROUP = "protection.crossplane.io"
USAGE_KINDS = ("Usage", "ClusterUsage")
# The policy kubectl and the garbage collector delete with, which the webhook records on an
# object whose delete it refused (capacity_summary.DELETION_ATTEMPT_ANNOTATION).
BACKGROUND = "Background"


@dataclasses.dataclass(frozen=True)
class Protection:
    usage: JSON
    user: JSON | None  # the ``by`` object that still exists, if any

    @property
    def replay(self) -> bool:
        return bool(lookup(self.usage, ".spec.replayDeletion"))

    def describe(self) -> str:
        name = meta(self.usage).get("name", "")
        kind = f"*v1beta1.{self.usage.get('kind')}"
        if self.user is not None:
            user = f"{self.user.get('kind')}/{meta(self.user)['name']}"
            return f'the {kind} "{name}" by resource {user}'
        reason = lookup(self.usage, ".spec.reason")
        return f'the {kind} "{name}" with reason: "{reason}"' if reason else f'the {kind} "{name}"'


def is_usage(obj: JSON) -> bool:
    return obj.get("kind") in USAGE_KINDS and group_of(str(obj.get("apiVersion", ""))) == (
        USAGE_GROUP
    )


def _controller(obj: JSON) -> str | None:
    for ref in meta(obj).get("ownerReferences") or []:
        if ref.get("controller"):
            return str(ref.get("uid"))
    return None


def _resolve(usage: JSON, field: str, objects: Iterable[JSON]) -> list[JSON]:
    """The existing objects the Usage's ``of`` or ``by`` refers to."""
    spec = lookup(usage, f".spec.{field}") or {}
    cluster_usage = usage.get("kind") == "ClusterUsage"
    ref = spec.get("resourceRef") or {}
    selector = spec.get("resourceSelector") or {}
    namespace = (
        None
        if cluster_usage
        else ref.get("namespace") or selector.get("namespace") or meta(usage).get("namespace")
    )
    found = []
    for obj in objects:
        if obj.get("apiVersion") != spec.get("apiVersion") or obj.get("kind") != spec.get("kind"):
            continue
        obj_namespace = meta(obj).get("namespace")
        if ref:
            if meta(obj).get("name") != ref.get("name"):
                continue
            if obj_namespace and (cluster_usage or obj_namespace != namespace):
                continue  # a ClusterUsage's resourceRef names a cluster-scoped object
        else:
            if namespace is not None and obj_namespace and obj_namespace != namespace:
                continue
            labels = meta(obj).get("labels") or {}
            if any(labels.get(k) != v for k, v in (selector.get("matchLabels") or {}).items()):
                continue
            if selector.get("matchControllerRef") and _controller(obj) != _controller(usage):
                continue
        found.append(obj)
    return found


def protections(target: JSON, objects: list[JSON]) -> list[Protection]:
    """The Usages that deny deleting ``target`` now: every Usage whose ``of`` is it, for as
    long as the Usage exists (its finalizer keeps it while a ``by`` user exists)."""
    found = []
    for usage in objects:
        if not is_usage(usage):
            continue
        if not any(obj is target for obj in _resolve(usage, "of", objects)):
            continue
        found.append(Protection(usage, waits_for_user(usage, objects)))
    return found


def in_use_message(found: list[Protection]) -> str:
    """The Usage webhook's denial."""
    return f"This resource is in-use by {len(found)} usage(s), including {found[0].describe()}."


def waits_for_user(usage: JSON, objects: list[JSON]) -> JSON | None:
    """The ``by`` object a Usage's finalizer waits for before the Usage may go, or None."""
    if lookup(usage, ".spec.by") is None:
        return None
    users = _resolve(usage, "by", objects)
    return users[0] if users else None
