"""What the scheduler reads of the fleet, and how much of it (design/capacity.md, "Inputs at
fleet scale"). Pure, apart from decoding the request.

Instead of every InferenceCluster and every ModelReplica of the fleet, a deployment reads:

* the InferenceClasses (``inference-classes``): a pool's devices, once per class;
* the InferenceCluster and the capacity summary of every cluster one of its replicas is on,
  by name (``cluster.<name>``, ``capacity.<name>``): an InferenceCluster gone is a deleted
  cluster (its replicas move); a summary missing or unreadable holds everything there;
* candidate clusters' summaries, selected by the API server with the deployment's
  ``clusterSelector``: every one (``capacity-all``) when the fleet's summaries are small
  enough, else a run of shards starting at one derived from the deployment's name
  (``capacity-shard-NN``), widened over Crossplane's requirement rounds while too few
  clusters were read or the replicas do not all fit, within a byte budget.

Every decision is a function of what the API server returned, so each round's requirements
are the previous round's, or wider ones, and they stabilise within Crossplane's five rounds.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
from collections.abc import Iterable, Mapping
from typing import Any

from crossplane.function.proto.v1 import run_function_pb2 as fnv1
from modelplane_common import capacity_summary as cs
from modelplane_common import tolerant
from modelplane_common.function import Selector
from modelplane_common.plain import plain_value

from compose_model_deployment import wire

API_VERSION = "modelplane.ai/v1alpha1"
CLASSES = "inference-classes"
ALL_SUMMARIES = "capacity-all"
_SHARD_PREFIX = "capacity-shard-"
_CLUSTER_PREFIX = "cluster."
_SUMMARY_PREFIX = "capacity."
# Enough candidates that the least-loaded choice means something (kube-scheduler scores at
# least 100 nodes), and at most this much summary data in one request (gRPC's limit is 4 MiB).
MIN_CANDIDATES = 100
BYTE_BUDGET = 2 * 1024 * 1024
# What a summary costs in the request beyond its data: its ConfigMap's metadata, with the
# cluster's labels twice (as labels, and in the managedFields of Crossplane's apply).
SUMMARY_OVERHEAD = 1500


def cluster_key(cluster: str) -> str:
    return f"{_CLUSTER_PREFIX}{cluster}"


def summary_key(cluster: str) -> str:
    return f"{_SUMMARY_PREFIX}{cluster}"


def shard_key(shard: int) -> str:
    return f"{_SHARD_PREFIX}{cs.shard_value(shard)}"


def first_shard(namespace: str, name: str) -> int:
    """Where a deployment starts reading: spread over the shards, fixed for the deployment."""
    digest = hashlib.sha256(f"{namespace}/{name}".encode()).digest()
    return int.from_bytes(digest[:8], "big") % cs.SHARDS


@dataclasses.dataclass(frozen=True)
class Scope:
    """Which candidate summaries to read: all of them, or ``shards`` shards from ``first``."""

    first: int
    shards: int  # cs.SHARDS means every summary (one requirement)

    @property
    def everything(self) -> bool:
        return self.shards >= cs.SHARDS

    def requirement_keys(self) -> list[str]:
        if self.everything:
            return [ALL_SUMMARIES]
        return [shard_key((self.first + i) % cs.SHARDS) for i in range(self.shards)]


def requirements(
    match_labels: Mapping[str, str], own: Iterable[str], scope: Scope
) -> dict[str, Selector]:
    labels = {str(k): str(v) for k, v in match_labels.items()} | {cs.SUMMARY_LABEL: "true"}
    wanted = {CLASSES: Selector(API_VERSION, "InferenceClass")}
    for cluster in sorted(set(own)):
        wanted[cluster_key(cluster)] = Selector(API_VERSION, "InferenceCluster", match_name=cluster)
        wanted[summary_key(cluster)] = Selector(
            "v1", "ConfigMap", match_name=cs.configmap_name(cluster), namespace=cs.NAMESPACE
        )
    for key in scope.requirement_keys():
        shard = {} if key == ALL_SUMMARIES else {cs.SHARD_LABEL: key[len(_SHARD_PREFIX) :]}
        wanted[key] = Selector(
            "v1", "ConfigMap", match_labels=labels | shard, namespace=cs.NAMESPACE
        )
    return wanted


@dataclasses.dataclass
class Fleet:
    """The part of the fleet one round read."""

    scope: Scope  # what was read
    clusters: list[dict[str, Any]]  # InferenceCluster-shaped, for scheduler.parse_cluster
    # Our replicas the summaries count (ModelReplica-shaped): one we no longer observe is
    # still ours (being deleted, or orphaned).
    ours: list[dict[str, Any]]
    candidates: int  # summaries read through the scope
    candidate_bytes: int  # their size, as the request carries them
    # Clusters we run on whose summary cannot be read (why): held, nothing new placed there.
    unsummarised: dict[str, str] = dataclasses.field(default_factory=dict)
    # Each cluster's summary, for the other deployments' replicas on it: read only for the
    # clusters the schedule looks at (most of a large fleet never is).
    summaries: dict[str, Mapping[str, Any]] = dataclasses.field(default_factory=dict)
    namespace: str = ""
    deployment: str = ""

    def others(self, cluster: str) -> list[dict[str, Any]]:
        """Every other deployment's replica the cluster's summary counts."""
        content = self.summaries.get(cluster)
        if content is None:
            return []
        ours = (self.namespace, self.deployment)
        return cs.replica_views(content, lambda namespace, name: (namespace, name) != ours)


# A function process reads the same summaries reconcile after reconcile, and deployment after
# deployment: each distinct summary text is parsed (cs.parse_shared) and viewed once. What is
# kept is shared between reconciles and never modified; the text is the key, so a changed
# summary is a new entry.
MAX_MEMO = 50_000
_views: dict[tuple[str, str], SummaryView] = {}


class SummaryView(dict):
    """A candidate cluster as the scheduler parses it (``cs.cluster_view``), built from one
    summary text and the classes' devices; shared between reconciles, never modified."""


def _text(item: Any) -> str | None:
    """A summary ConfigMap's data, or None when it has none."""
    data = item.fields.get("data")
    if data is None or data.WhichOneof("kind") != "struct_value":
        return None
    value = data.struct_value.fields.get(cs.DATA_KEY)
    if value is None or value.WhichOneof("kind") != "string_value":
        return None
    return value.string_value


def _parse(item: Any) -> tuple[Mapping[str, Any], str] | None:
    """A summary ConfigMap's content and its text, or None when unreadable."""
    text = _text(item)
    if text is None:
        return None
    try:
        return cs.parse_shared(text), text
    except cs.UnreadableSummaryError:
        return None


def _view(
    text: str, content: Mapping[str, Any], devices: Mapping[str, Any], devices_key: str
) -> SummaryView:
    view = _views.get((text, devices_key))
    if view is None:
        view = SummaryView(cs.cluster_view(content, devices))
        if len(_views) >= MAX_MEMO:
            _views.clear()
        _views[(text, devices_key)] = view
    return view


def _class_devices(request: fnv1.RunFunctionRequest) -> dict[str, list[dict[str, Any]]]:
    out = {}
    for item in request.required_resources[CLASSES].items:
        klass = {k: plain_value(v) for k, v in item.resource.fields.items()}
        devices = cs.published_devices(tolerant.at(klass, "spec", "devices"))
        name = tolerant.name_of(klass)
        if name and devices is not None:
            out[name] = devices
    return out


def scope_read(request: fnv1.RunFunctionRequest, first: int) -> Scope | None:
    """The scope this round's request carries, or None when no candidates were read yet."""
    if ALL_SUMMARIES in request.required_resources:
        return Scope(first, cs.SHARDS)
    shards = 0
    while shards < cs.SHARDS and shard_key((first + shards) % cs.SHARDS) in (
        request.required_resources
    ):
        shards += 1
    return Scope(first, shards) if shards else None


def read(
    request: fnv1.RunFunctionRequest,
    own: Iterable[str],
    first: int,
    namespace: str,
    deployment: str,
) -> Fleet | None:
    """What this round read, or None while any of it is not resolved yet (Crossplane's first
    round: it fetches the requirements and calls again)."""
    own = sorted(set(own))
    required = request.required_resources
    scope = scope_read(request, first)
    keys = [CLASSES, *(k for c in own for k in (cluster_key(c), summary_key(c)))]
    if scope is None or any(k not in required for k in keys):
        return None
    devices = _class_devices(request)
    devices_key = json.dumps(devices, sort_keys=True)
    fleet = Fleet(scope, [], [], 0, 0, namespace=namespace, deployment=deployment)
    deleted: set[str] = set()
    group = f"{namespace}/{deployment}"

    def add(content: Mapping[str, Any]) -> None:
        fleet.summaries[content["cluster"]] = content
        groups = content.get("replicas")
        if isinstance(groups, Mapping) and group in groups:  # most summaries list none of ours
            ours = (namespace, deployment)
            fleet.ours.extend(cs.replica_views(content, lambda ns, name: (ns, name) == ours))

    for cluster in own:
        found = wire.clusters(request, cluster_key(cluster)) or []
        if not found:
            deleted.add(cluster)  # its replicas move; a summary not yet deleted is stale
            continue
        items = required[summary_key(cluster)].items
        parsed = _parse(items[0].resource) if items else None
        content = parsed[0] if parsed is not None else None
        if content is None or content.get("cluster") != cluster:
            # Others' usage there is not known: hold what runs there, place nothing new.
            why = "missing" if not items else "unreadable"
            fleet.unsummarised[cluster] = (
                f"capacity summary ConfigMap {cs.NAMESPACE}/{cs.configmap_name(cluster)} {why}"
            )
        else:
            add(content)
        fleet.clusters.append(found[0])
    count = size = 0
    for key in scope.requirement_keys():
        for item in required[key].items:
            parsed = _parse(item.resource)
            if parsed is None:
                continue
            content, text = parsed
            count += 1
            size += len(text) + SUMMARY_OVERHEAD
            name = content["cluster"]
            if name in fleet.summaries or name in fleet.unsummarised or name in deleted:
                continue
            add(content)
            fleet.clusters.append(_view(text, content, devices, devices_key))
    fleet.candidates, fleet.candidate_bytes = count, size
    return fleet


# The scopes read, in order: each round reads the same or the next. Four distinct requirement
# sets at most, then a repeat: within Crossplane's five requirement rounds.
WIDENING = (1, 4, 16, cs.SHARDS)


def next_scope(fleet: Fleet | None, first: int, short: bool) -> Scope:
    """The candidates to read next round: the same scope (stable) or the next wider one.

    Everything when 64 times the shards read fit the byte budget; otherwise the next step of
    WIDENING while fewer than MIN_CANDIDATES clusters were read or some wanted replica
    (``short``) found no place among them, and only if that step is estimated within the
    budget (else the scope stays: the search ends there).
    """
    if fleet is None:
        return Scope(first, WIDENING[0])
    scope = fleet.scope
    if scope.everything:
        return scope
    per_shard = fleet.candidate_bytes / scope.shards
    if per_shard * cs.SHARDS <= BYTE_BUDGET:
        return Scope(first, cs.SHARDS)
    if fleet.candidates >= MIN_CANDIDATES and not short:
        return scope
    wider = next((n for n in WIDENING if n > scope.shards), scope.shards)
    if per_shard * wider > BYTE_BUDGET:
        return scope
    return Scope(first, wider)
