"""CRDs for the kinds Modelplane composes or reads, rebuilt from what it ships.

``modelplane generate`` keeps, beside each generated model, a ``<kind>.crd.json`` record: the
version's ``openAPIV3Schema`` as the upstream CRD has it, its scope and apiVersion. The real
plane installs those kinds from these records (never from ``../shared/crds``), so a clone
with nothing beside it judges against the same schemas ``modelplane validate`` uses. Kinds an
XRD defines (``definedBy``) are left to Crossplane, which makes their CRDs itself.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from modelplane_schemas import generated

GENERATED = Path(generated.__file__).parent


def plural(kind: str) -> str:
    """The English plural Kubernetes projects give their kinds (Policy → policies)."""
    lower = kind.lower()
    if lower == "kubernetes":
        return lower  # Vultr's VKE Kubernetes: its CRD's plural is the singular
    if lower.endswith("y") and lower[-2:-1] not in ("a", "e", "o", "u"):
        return lower[:-1] + "ies"
    if lower.endswith(("s", "x", "ch", "sh")):
        return lower + "es"
    return lower + "s"


def shipped_crds(skip_groups: tuple[str, ...] = ()) -> list[dict[str, Any]]:
    """One CRD per shipped (group, kind), every shipped version served, the first stored."""
    by_kind: dict[tuple[str, str], list[tuple[str, dict[str, Any]]]] = {}
    for path in sorted(GENERATED.rglob("*.crd.json")):
        record = json.loads(path.read_text())
        if record.get("definedBy"):
            continue
        group, _, version = record["apiVersion"].rpartition("/")
        if group in skip_groups:
            continue
        by_kind.setdefault((group, record["kind"]), []).append((version, record))
    crds = []
    for (group, kind), versions in sorted(by_kind.items()):
        name = plural(kind)
        crds.append({
            "apiVersion": "apiextensions.k8s.io/v1",
            "kind": "CustomResourceDefinition",
            "metadata": {"name": f"{name}.{group}", "annotations": _approval(group)},
            "spec": {
                "group": group,
                "names": {"kind": kind, "plural": name, "listKind": f"{kind}List",
                          "singular": kind.lower()},
                "scope": versions[0][1]["scope"],
                "versions": [
                    {"name": version, "served": True, "storage": index == 0,
                     "schema": {"openAPIV3Schema": record["openAPIV3Schema"]}}
                    for index, (version, record) in enumerate(versions)
                ],
            },
        })  # fmt: skip
    return crds


def _approval(group: str) -> dict[str, str]:
    """Groups under k8s.io and kubernetes.io need the API-review annotation; the upstream CRDs
    carry their own, the records do not keep it."""
    if group.endswith((".k8s.io", ".kubernetes.io")) or group in ("k8s.io", "kubernetes.io"):
        return {"api-approved.kubernetes.io": "unapproved, installed by Modelplane's test plane"}
    return {}
