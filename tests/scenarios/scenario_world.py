"""What a user sees of the simulated fleet, read back for the issue-7 scenarios.

A scenario asserts in the user's terms: which ModelReplicas exist and on which cluster, which
remote objects each cluster holds, which ModelEndpoints are composed, what the ModelService
routes to, what the conditions say, and that nothing outside the scenario changed (a diff of
every object's identity and intent before and after).
"""

from __future__ import annotations

import copy
import dataclasses
import hashlib
import json
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from modelplane.controlplane import ControlPlane
from modelplane.kube import lookup

FLEET = Path(__file__).parent / "fleet"
NAMESPACE = "ml-team"
MAX_ROUNDS = 40

JSON = dict[str, Any]


def fork(plane: ControlPlane) -> ControlPlane:
    """An independent copy of ``plane`` (store, providers, field managers) that shares its
    function host, so every scenario starts from the same converged fleet without paying for
    bringing it up again."""
    shared = (plane.runner, plane.catalog, plane.validator, plane.progress)
    return copy.deepcopy(plane, memo={id(thing): thing for thing in shared})


def converge(plane: ControlPlane) -> int:
    """Run to a fixed point; the number of rounds it took."""
    result = plane.run(max_rounds=MAX_ROUNDS)
    assert result.converged, f"{result.reason}: still changing {result.still_changing}"
    return len(result.rounds)


def label(obj: JSON) -> str:
    """``Kind/namespace/name`` (``Kind/name`` when cluster-scoped), for readable diffs."""
    metadata = obj["metadata"]
    namespace = f"{metadata['namespace']}/" if metadata.get("namespace") else ""
    return f"{obj['kind']}/{namespace}{metadata['name']}"


def find(plane: ControlPlane, kind: str, name: str, namespace: str | None = NAMESPACE) -> JSON:
    obj = plane.find(kind, name, namespace)
    assert obj is not None, f"{kind}/{name} does not exist"
    return obj


def uid(obj: JSON) -> str:
    return str(obj["metadata"]["uid"])


def conditions(obj: JSON) -> dict[str, tuple[str, str, str]]:
    """type -> (status, reason, message)."""
    return {
        c["type"]: (c["status"], c.get("reason", ""), c.get("message", ""))
        for c in (obj.get("status") or {}).get("conditions") or []
    }


# --- who is where ---------------------------------------------------------------------------


def replica_name(deployment: str, cluster: str, index: int) -> str:
    """The name of a replica and its endpoint (model-deployment.md §4.8)."""
    digest = hashlib.sha256(f"{deployment}-{cluster}-{index}".encode()).hexdigest()[:5]
    return f"{deployment[:57].rstrip('-')}-{digest}"


def replicas(plane: ControlPlane, deployment: str) -> dict[str, str]:
    """The deployment's ModelReplicas: name -> cluster."""
    return {
        r["metadata"]["name"]: r["spec"]["clusterName"]
        for r in plane.list(
            kind="ModelReplica",
            namespace=NAMESPACE,
            labels={"modelplane.ai/deployment": deployment},
        )
    }


def endpoints(plane: ControlPlane, deployment: str) -> dict[str, str]:
    """The deployment's composed ModelEndpoints: name -> url."""
    return {
        e["metadata"]["name"]: e["spec"]["url"]
        for e in plane.list(
            kind="ModelEndpoint",
            namespace=NAMESPACE,
            labels={"modelplane.ai/deployment": deployment},
        )
    }


def gateway_address(plane: ControlPlane, cluster: str) -> str:
    return str(lookup(find(plane, "InferenceCluster", cluster, None), ".status.gateway.address"))


def cluster_of_provider_config(plane: ControlPlane) -> dict[str, str]:
    """provider config name -> InferenceCluster name."""
    found = {}
    for cluster in plane.list(kind="InferenceCluster"):
        name = lookup(cluster, ".status.providerConfigRef.name")
        if name:
            found[str(name)] = cluster["metadata"]["name"]
    return found


def remote_objects(plane: ControlPlane, owner: JSON) -> set[tuple[str, str, str]]:
    """What ``owner`` (recursively) put on workload clusters: (cluster, kind, name) of every
    manifest its provider-kubernetes Objects wrap."""
    clusters = cluster_of_provider_config(plane)
    found = set()
    for obj in plane.composed_by(owner):
        manifest = lookup(obj, ".spec.forProvider.manifest")
        if obj["kind"] != "Object" or not isinstance(manifest, dict):
            continue
        config = str(lookup(obj, ".spec.providerConfigRef.name"))
        found.add(
            (
                clusters.get(config, f"<gone: {config}>"),
                manifest["kind"],
                manifest["metadata"]["name"],
            )
        )
    return found


def routed(plane: ControlPlane, service: str) -> dict[str, int]:
    """What the ModelService's HTTPRoute sends traffic to: ModelEndpoint name -> weight.

    backendRefs name the Services ModelEndpoints compose; each is traced back to its owner.
    """
    owner_of = {
        s["metadata"]["name"]: s["metadata"]["ownerReferences"][0]["name"]
        for s in plane.list(kind="Service", namespace=NAMESPACE)
        if s["metadata"].get("ownerReferences")
    }
    (route,) = plane.composed_by(find(plane, "ModelService", service), recursive=False)
    assert route["kind"] == "HTTPRoute"
    return {
        owner_of[ref["name"]]: ref["weight"]
        for rule in route["spec"]["rules"]
        for ref in rule["backendRefs"]
    }


def replica_usage(plane: ControlPlane, cluster: str) -> JSON | None:
    """The ClusterUsage guarding ``cluster`` while ModelReplicas run on it (platform §4.8)."""
    owner = find(plane, "InferenceCluster", cluster, None)
    guards = [
        obj
        for obj in plane.composed_by(owner, recursive=False)
        if obj["kind"] == "ClusterUsage"
        and obj["metadata"]["annotations"]["crossplane.io/composition-resource-name"]
        == "usage-replicas"
    ]
    return guards[0] if guards else None


def guards_replicas(plane: ControlPlane, cluster: str) -> bool:
    """Whether ``cluster``'s guard says ModelReplicas are on it (not only Objects of deleted
    ones, not nothing). The guard itself stands from the cluster's creation until a deletion
    finds it empty (design/platform.md)."""
    guard = replica_usage(plane, cluster)
    assert guard is not None, f"InferenceCluster {cluster} has no usage-replicas guard"
    return guard["spec"]["reason"] == "ModelReplicas are scheduled to this InferenceCluster"


# --- nothing else changed -------------------------------------------------------------------


@dataclasses.dataclass(frozen=True)
class Change:
    added: frozenset[str]
    removed: frozenset[str]
    changed: frozenset[str]  # same object, different intent (spec, labels, annotations, owners)
    recreated: frozenset[str]  # same name, new uid

    @property
    def touched(self) -> frozenset[str]:
        return self.added | self.removed | self.changed | self.recreated


Snapshot = dict[str, tuple[str, str]]


def snapshot(plane: ControlPlane) -> Snapshot:
    """Every object's uid and intent: what it is, not what its controllers report (status)."""
    taken = {}
    for obj in plane.objects():
        metadata = obj["metadata"]
        intent = {k: v for k, v in obj.items() if k not in {"metadata", "status"}}
        intent["metadata"] = {
            k: metadata.get(k) for k in ("labels", "annotations", "ownerReferences")
        }
        taken[label(obj)] = (str(metadata.get("uid")), json.dumps(intent, sort_keys=True))
    return taken


def diff(before: Snapshot, after: Snapshot) -> Change:
    both = before.keys() & after.keys()
    return Change(
        added=frozenset(after.keys() - before.keys()),
        removed=frozenset(before.keys() - after.keys()),
        changed=frozenset(
            k for k in both if before[k][0] == after[k][0] and before[k][1] != after[k][1]
        ),
        recreated=frozenset(k for k in both if before[k][0] != after[k][0]),
    )


def labels_of(objects: Iterable[JSON]) -> set[str]:
    return {label(obj) for obj in objects}


def family(plane: ControlPlane, xr: JSON) -> set[str]:
    """``xr`` and everything it composed, recursively."""
    return {label(xr)} | labels_of(plane.composed_by(xr))
