"""Small Kubernetes object helpers shared by the simulator's control plane and providers."""

from __future__ import annotations

import copy
import re
from collections.abc import Iterable, Iterator
from typing import Any

from modelplane_common.observed import condition

JSON = dict[str, Any]

# (apiVersion, kind, namespace or "" when cluster-scoped, name)
ObjectKey = tuple[str, str, str, str]

MODELPLANE_GROUP_SUFFIX = "modelplane.ai"

# Kinds that are cluster-scoped although their group would suggest otherwise, by (group, kind).
_CLUSTER_SCOPED: set[tuple[str, str]] = {
    ("", "Namespace"),
    ("", "Node"),
    ("", "PersistentVolume"),
    ("apiextensions.k8s.io", "CustomResourceDefinition"),
    ("storage.k8s.io", "StorageClass"),
    ("storage.k8s.io", "CSIDriver"),
    ("scheduling.k8s.io", "PriorityClass"),
    ("rbac.authorization.k8s.io", "ClusterRole"),
    ("rbac.authorization.k8s.io", "ClusterRoleBinding"),
    ("admissionregistration.k8s.io", "ValidatingWebhookConfiguration"),
    ("admissionregistration.k8s.io", "MutatingWebhookConfiguration"),
    ("resource.k8s.io", "DeviceClass"),
    ("resource.k8s.io", "ResourceSlice"),
    ("networking.k8s.io", "IngressClass"),
    ("gateway.networking.k8s.io", "GatewayClass"),
    ("apiextensions.crossplane.io", "CompositeResourceDefinition"),
    ("apiextensions.crossplane.io", "Composition"),
    ("apiextensions.crossplane.io", "EnvironmentConfig"),
    ("pkg.crossplane.io", "Function"),
    ("pkg.crossplane.io", "Provider"),
    ("pkg.crossplane.io", "Configuration"),
    ("pkg.crossplane.io", "DeploymentRuntimeConfig"),
}

# Namespaced managed kinds (GKE/EKS `Cluster`, EKS `ClusterAuth`) whose names merely start with
# "Cluster"; the legacy groups' versions are cluster-scoped by the group rule below anyway.
_NAMESPACED_KINDS_NAMED_CLUSTER = {"Cluster", "ClusterAuth"}

# Crossplane's legacy (cluster-scoped) managed-resource groups; the `.m.` groups are namespaced.
_LEGACY_MANAGED_GROUP = re.compile(r"^(?!.*\.m\.)[a-z0-9.-]+\.(upbound\.io|crossplane\.io)$")
CROSSPLANE_OWN_GROUPS = {
    "apiextensions.crossplane.io",
    "pkg.crossplane.io",
    "protection.crossplane.io",
    "ops.crossplane.io",
}

_RBAC_KINDS = {"Role", "ClusterRole", "RoleBinding", "ClusterRoleBinding"}
DNS_SUBDOMAIN = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$")


def group_of(api_version: str) -> str:
    return api_version.split("/", 1)[0] if "/" in api_version else ""


def is_modelplane_group(group: str) -> bool:
    return group == MODELPLANE_GROUP_SUFFIX or group.endswith("." + MODELPLANE_GROUP_SUFFIX)


def kind_is_namespaced(api_version: str, kind: str) -> bool:
    """Scope of a non-XR kind, from a small table (no API discovery offline)."""
    group = group_of(api_version)
    if (group, kind) in _CLUSTER_SCOPED:
        return False
    if kind.startswith("Cluster") and kind not in _NAMESPACED_KINDS_NAMED_CLUSTER:
        return False
    if group in CROSSPLANE_OWN_GROUPS:
        return True  # Usage and friends are namespaced in v2
    return not _LEGACY_MANAGED_GROUP.match(group)


def valid_name(name: object, api_version: str, kind: str) -> bool:
    """Whether the API server accepts ``name`` for this kind: an RFC 1123 subdomain; RBAC
    names are path segments instead (no '/' or '%', not '.' or '..'), so ':' is allowed."""
    if not isinstance(name, str) or not name or len(name) > 253:
        return False
    if kind in _RBAC_KINDS and api_version.startswith("rbac.authorization.k8s.io/"):
        return name not in {".", ".."} and "/" not in name and "%" not in name
    return bool(DNS_SUBDOMAIN.match(name))


def meta(obj: JSON) -> JSON:
    return obj.setdefault("metadata", {})


def key_of(obj: JSON) -> ObjectKey:
    metadata = obj.get("metadata") or {}
    return (
        str(obj.get("apiVersion", "")),
        str(obj.get("kind", "")),
        str(metadata.get("namespace") or ""),
        str(metadata.get("name") or ""),
    )


def describe(key: ObjectKey) -> str:
    """``Kind/namespace/name`` (``Kind/name`` when cluster-scoped), as a user reads it."""
    _, kind, namespace, name = key
    return f"{kind}/{namespace}/{name}" if namespace else f"{kind}/{name}"


def condition_status(obj: JSON, type_: str) -> str:
    found = condition(obj, type_)
    return str(found.get("status", "Unknown")) if found else "Unknown"


def deep_merge(base: JSON, patch: JSON) -> JSON:
    """A copy of ``base`` with ``patch`` merged in: maps recursively, lists and scalars replaced.

    ``conditions`` lists are merged by ``type`` so a patch can flip one condition.
    """
    out = copy.deepcopy(base)
    for name, value in patch.items():
        if isinstance(value, dict) and isinstance(out.get(name), dict):
            out[name] = deep_merge(out[name], value)
        elif name == "conditions" and isinstance(value, list) and isinstance(out.get(name), list):
            out[name] = merge_conditions(out[name], value)
        else:
            out[name] = copy.deepcopy(value)
    return out


def merge_conditions(existing: list[JSON], updates: Iterable[JSON]) -> list[JSON]:
    merged = [copy.deepcopy(c) for c in existing]
    for update in updates:
        for index, current in enumerate(merged):
            if current.get("type") == update.get("type"):
                merged[index] = deep_merge(current, update)
                break
        else:
            merged.append(copy.deepcopy(update))
    return merged


def leaf_paths(value: Any, prefix: tuple[str, ...] = ()) -> Iterator[tuple[str, ...]]:
    """Field paths of a manifest; lists count as atomic leaves (see design/simulate.md)."""
    if isinstance(value, dict) and value:
        for name, sub in value.items():
            yield from leaf_paths(sub, (*prefix, name))
    else:
        yield prefix


def remove_path(obj: JSON, path: tuple[str, ...]) -> None:
    """Remove ``path`` and any map it leaves empty on the way up."""
    if not path:
        return
    trail: list[tuple[JSON, str]] = []
    node: Any = obj
    for name in path[:-1]:
        child = node.get(name) if isinstance(node, dict) else None
        if not isinstance(child, dict):
            return
        trail.append((node, name))
        node = child
    if not isinstance(node, dict) or path[-1] not in node:
        return
    del node[path[-1]]
    for parent, name in reversed(trail):
        if parent[name] != {}:
            break
        del parent[name]


def lookup(obj: Any, dotted: str) -> Any:
    """A value at a simple JSONPath such as ``.status.replicas.ready`` or ``.status.x[0].y``."""
    node = obj
    for part in re.findall(r"[^.\[\]]+|\[\d+\]", dotted.strip().lstrip("{").rstrip("}")):
        if part.startswith("["):
            index = int(part[1:-1])
            if not isinstance(node, list) or index >= len(node):
                return None
            node = node[index]
        else:
            if not isinstance(node, dict):
                return None
            node = node.get(part)
        if node is None:
            return None
    return node
