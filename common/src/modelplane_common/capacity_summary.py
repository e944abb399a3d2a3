"""The capacity summary: what one InferenceCluster tells the fleet scheduler (issue 23).

compose-inference-cluster composes it as the ConfigMap ``capacity-<cluster>`` in
``modelplane-system``; compose-model-deployment reads summaries instead of every
InferenceCluster and every ModelReplica of the fleet (design/capacity.md, "Inputs at fleet
scale"). A summary holds only what the scheduler reads, derived only from objects the API
server holds, and serialises deterministically:

* the cluster's labels, taints, failover grace period, declared pool names, its Ready and
  ReadinessKnown conditions, gateway address and provider config;
* per published GPU pool its name, class, ``nodes`` and ``maxNodes``, but not the devices:
  a pool's devices are its InferenceClass's, which the scheduler reads once per class;
* every ModelReplica pinned to the cluster, grouped by deployment and reduced to its name,
  index, age, deletion, readiness and the devices its members claim (the claims once per
  distinct shape);
* for compose-model-cache (design/cache-staging.md): the cluster's source and its cache
  storage class override (``spec.cluster``), and per ModelCache mounted there the replicas
  mounting it (``caches``).

``summary`` builds it whole; it is published as two ConfigMaps, each with only what its
reader reads, because a reader fetches whole ConfigMaps:

* ``capacity-<cluster>`` (``configmap``), for the scheduler: everything but ``caches``. It
  carries the cluster's own labels, so a deployment's ``clusterSelector`` is applied by the
  API server, and a shard label (sha256 of the cluster name, mod ``SHARDS``), so a deployment
  in a large fleet can read a part of it;
* ``caches-<cluster>`` (``cache_configmap``), for compose-model-cache: the cluster's labels,
  source and provider config, and ``caches``, not the replicas (a fraction of the bytes: a
  cache staged on hundreds of clusters reads them all, beside its observed PVCs). It carries
  the cluster's own labels (a cache's ``clusterSelector``) and per ModelCache mounted there a
  ``cache_label``, so a cache without a ``clusterSelector`` reads only the clusters it is used
  on.
"""

from __future__ import annotations

import functools
import hashlib
import json
from collections.abc import Callable, Iterable, Mapping
from typing import Any

from google.protobuf import struct_pb2
from modelplane_schemas.generated.modelplane_ai.v1alpha1 import inferenceclass as klass
from modelplane_schemas.generated.modelplane_ai.v1alpha1 import inferencecluster as ic

from modelplane_common import tolerant
from modelplane_common.cache_naming import CACHE_LABEL
from modelplane_common.naming import CACHE_CLUSTER_LABEL, child_name
from modelplane_common.observed import condition, is_ready
from modelplane_common.plain import JSON, plain_value

NAMESPACE = "modelplane-system"
# On every capacity summary ConfigMap, so one selector finds them all (and nothing else).
SUMMARY_LABEL = "modelplane.ai/capacity-summary"
# On every cache summary ConfigMap (``cache_configmap``).
CACHE_SUMMARY_LABEL = "modelplane.ai/cache-summary"
SHARD_LABEL = "modelplane.ai/capacity-shard"
SHARDS = 64
DATA_KEY = "summary.json"
VERSION = 1
# Crossplane's Usage webhook writes this on an object whose delete it refused. A cluster
# carrying it takes no new replica (the synthetic taint below): its guard lets go once it is
# empty, and a replica placed then would lose its cluster (design/platform.md).
DELETION_ATTEMPT_ANNOTATION = "usage.crossplane.io/deletion-attempt-with-policy"
DELETION_REQUESTED_TAINT = {"key": "modelplane.ai/deletion-requested", "effect": "NoSchedule"}


def deletion_requested(cluster: JSON) -> bool:
    """Whether a delete of ``cluster`` was refused (and so will be replayed)."""
    annotations = tolerant.mapping(cluster, "metadata", "annotations") or {}
    return DELETION_ATTEMPT_ANNOTATION in annotations


# The replica labels a summary keeps (the deployment's name and the replica's index).
DEPLOYMENT_LABEL = "modelplane.ai/deployment"
INDEX_LABEL = "modelplane.ai/replica-index"
# Per ModelCache mounted on the cluster (see cache_label), one of two values: mounted and
# nothing of the cache there yet, or mounted and staged (an Object of the cache there).
CACHE_LABEL_PREFIX = "modelplane.ai/cache-"
CACHE_WANTED = "wanted"
CACHE_STAGED = "staged"
# The InferenceCluster's per-source blocks whose ``cache`` sub-block (the RWX storage class
# override) compose-model-cache reads.
_SOURCE_BLOCKS = ("gke", "eks", "aks", "nebius", "vultr", "existing")
_CONDITIONS = ("Ready", "ReadinessKnown")
_ENTRY_FIELDS = 6
_MAX_NAME = 253


def configmap_name(cluster: str) -> str:
    name = f"capacity-{cluster}"
    return name if len(name) <= _MAX_NAME else child_name("capacity", cluster)


def cache_configmap_name(cluster: str) -> str:
    name = f"caches-{cluster}"
    return name if len(name) <= _MAX_NAME else child_name("caches", cluster)


@functools.lru_cache(maxsize=65536)  # asked for every staged cluster, every reconcile
def shard_of(cluster: str) -> int:
    return int.from_bytes(hashlib.sha256(cluster.encode()).digest()[:8], "big") % SHARDS


def shard_value(shard: int) -> str:
    return f"{shard:02d}"


def cache_label(namespace: str, name: str) -> str:
    """The label on the summary of every cluster where replicas mount ModelCache
    ``namespace/name`` (a label key's name part is at most 63 characters, so a digest)."""
    digest = hashlib.sha256(f"{namespace}/{name}".encode()).hexdigest()[:16]
    return f"{CACHE_LABEL_PREFIX}{digest}"


# --- building (compose-inference-cluster) ---------------------------------------------------


def _claims(engines: Any) -> list[JSON]:
    """A replica's engines reduced to what packing reads: names, copies, members' role, pool,
    gang size and device requests (class, count, selectors)."""
    out = []
    for engine in engines if isinstance(engines, list) else []:
        if not isinstance(engine, dict):
            continue
        members = []
        for member in tolerant.maps(engine, "members"):
            kept = {k: member[k] for k in ("role", "nodePoolName", "worker") if k in member}
            requests = member.get("deviceRequests")
            if isinstance(requests, list):
                kept["deviceRequests"] = [
                    {k: r[k] for k in ("name", "deviceClassName", "count", "selectors") if k in r}
                    for r in requests
                    if isinstance(r, dict)
                ]
            members.append(kept)
        out.append({k: engine[k] for k in ("name", "copies") if k in engine} | {"members": members})
    return out


def staged_caches(cache_objects: Iterable[JSON]) -> list[str]:
    """The ModelCaches (``<namespace>/<name>``) with an Object on a cluster, given the caches'
    Objects there (``modelplane.ai/cache-cluster``): each names its cache by the label on the
    object it wraps, in the cache's namespace. An Object being deleted does not count: a
    cache made again under that name, mounted there, must see the cluster as wanted."""
    staged = set()
    for obj in cache_objects:
        if tolerant.text(obj, "metadata", "deletionTimestamp"):
            continue
        namespace = tolerant.text(obj, "metadata", "namespace")
        labels = tolerant.mapping(obj, "spec", "forProvider", "manifest", "metadata", "labels")
        name = labels.get(CACHE_LABEL) if labels is not None else None
        if namespace and isinstance(name, str) and name:
            staged.add(f"{namespace}/{name}")
    return sorted(staged)


def summary(
    cluster: JSON,
    status: Mapping[str, Any],
    replicas: Iterable[JSON],
    *,
    ready: bool | None = None,
    staged: Iterable[str] = (),
) -> JSON:
    """The summary of ``cluster`` (the observed XR: labels, spec, conditions) given the status
    this reconcile publishes, the ModelReplicas pinned to it and the caches staged on it
    (``staged_caches``). ``ready=False``: the cluster is held this reconcile, so Ready is False
    whatever the XR said last."""
    spec = tolerant.mapping(cluster, "spec") or {}
    classes = {
        tolerant.text(p, "name"): tolerant.text(p, "className")
        for p in tolerant.maps(spec, "nodePools")
    }
    published: JSON = {}
    for key in ("gateway", "providerConfigRef"):
        if key in status:
            published[key] = status[key]
    pools = status.get("gpuPools")
    if isinstance(pools, list):
        published["gpuPools"] = [
            {k: p[k] for k in ("name", "nodes", "maxNodes") if k in p}
            | {"className": classes.get(p.get("name")) or ""}
            for p in pools
            if isinstance(p, dict)
        ]
    # Type and status (and when not True, since when: the failover clock); not the reason,
    # message or time of a True one, whose every rewrite would rewrite the summary.
    conditions = [
        {k: c[k] for k in ("type", "status", "lastTransitionTime") if k in c}
        if c.get("status") != "True"
        else {"type": c.get("type"), "status": "True"}
        for t in _CONDITIONS
        if (c := condition(cluster, t)) is not None
    ]
    if ready is False:
        previous = condition(cluster, "Ready") or {}
        held = {"type": "Ready", "status": "False"}
        if previous.get("status") == "False" and previous.get("lastTransitionTime"):
            held["lastTransitionTime"] = previous["lastTransitionTime"]
        conditions = [held, *(c for c in conditions if c.get("type") != "Ready")]
    if conditions:
        published["conditions"] = conditions
    kept_spec = {k: spec[k] for k in ("taints", "failoverGracePeriod") if k in spec}
    if deletion_requested(cluster):
        taints = tolerant.listing(spec, "taints") or []
        kept_spec["taints"] = [*taints, DELETION_REQUESTED_TAINT]
    if "nodePools" in spec:
        kept_spec["nodePools"] = [{"name": n} for n in classes if n]
    source = _cache_source(spec)
    if source is not None:
        kept_spec["cluster"] = source
    pending: list[tuple[str, list[Any], str]] = []
    caches: dict[str, list[list[str]]] = {}
    for replica in replicas:
        metadata = tolerant.mapping(replica, "metadata") or {}
        labels = tolerant.mapping(metadata, "labels") or {}
        cache = labels.get(CACHE_LABEL)
        if isinstance(cache, str) and cache:
            caches.setdefault(f"{metadata.get('namespace', '')}/{cache}", []).append(
                [
                    str(metadata.get("name", "")),
                    tolerant.text(replica, "status", "remoteNamespace") or "",
                ]
            )
        shape = json.dumps(_claims(tolerant.at(replica, "spec", "engines")), sort_keys=True)
        group = f"{metadata.get('namespace', '')}/{labels.get(DEPLOYMENT_LABEL, '')}"
        entry = [
            str(metadata.get("name", "")),
            str(labels.get(INDEX_LABEL, "")),
            str(metadata.get("creationTimestamp") or ""),
            str(metadata.get("deletionTimestamp") or ""),
            1 if is_ready(replica) else 0,
        ]
        pending.append((group, entry, shape))
    # Shapes numbered in sorted order and entries sorted: the same replicas in any order give
    # the same bytes (no needless ConfigMap update).
    shapes = {shape: i for i, shape in enumerate(sorted({shape for _, _, shape in pending}))}
    groups: dict[str, list[list[Any]]] = {}
    for group, entry, shape in pending:
        groups.setdefault(group, []).append([*entry, shapes[shape]])
    for entries in groups.values():
        entries.sort()
    for users in caches.values():
        users.sort()
    return {
        "version": VERSION,
        "cluster": tolerant.name_of(cluster),
        "labels": tolerant.mapping(cluster, "metadata", "labels") or {},
        "spec": kept_spec,
        "status": published,
        "shapes": [json.loads(s) for s in shapes],
        # "<namespace>/<deployment>": [[name, index, created, deleting, ready, shape], ...]
        "replicas": groups,
        # "<namespace>/<cache>": [[replica name, status.remoteNamespace or ""], ...]
        "caches": caches,
        # "<namespace>/<cache>" with an Object on the cluster, sorted
        "staged": sorted(set(staged)),
    }


def _cache_source(spec: Mapping[str, Any]) -> JSON | None:
    """``spec.cluster`` reduced to what compose-model-cache reads: the source and, in the
    source's own block, the ``cache`` override."""
    cluster = tolerant.mapping(spec, "cluster")
    if cluster is None or "source" not in cluster:
        return None
    kept: JSON = {"source": cluster["source"]}
    source = cluster["source"]
    block = source.lower() if isinstance(source, str) else ""
    cache = tolerant.mapping(cluster, block, "cache") if block in _SOURCE_BLOCKS else None
    if cache is not None:
        kept[block] = {"cache": cache}
    return kept


def _own_labels(labels: Mapping[str, str]) -> dict[str, str]:
    return {k: v for k, v in labels.items() if not k.startswith("crossplane.io/")}


def _configmap(name: str, labels: Mapping[str, str], content: JSON) -> JSON:
    return {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {"name": name, "namespace": NAMESPACE, "labels": dict(labels)},
        "data": {DATA_KEY: json.dumps(content, sort_keys=True, separators=(",", ":"))},
    }


def configmap(cluster: str, labels: Mapping[str, str], content: JSON) -> JSON:
    """The capacity summary ConfigMap publishing ``content`` but its ``caches``: labelled with
    the cluster's own labels (so label selectors on clusters select their summaries), the
    summary label and the shard."""
    data = {k: v for k, v in content.items() if k not in ("caches", "staged")}
    shard = {SUMMARY_LABEL: "true", SHARD_LABEL: shard_value(shard_of(cluster))}
    return _configmap(configmap_name(cluster), _own_labels(labels) | shard, data)


def cache_configmap(cluster: str, labels: Mapping[str, str], content: JSON) -> JSON:
    """The cache summary ConfigMap: of ``content`` only what compose-model-cache reads (the
    cluster's labels, source and provider config, and ``caches``), so a replica placed, a
    condition or a taint changing does not rewrite it unless it changes who mounts a cache;
    labelled with the cluster's own labels, the cache summary label and one ``cache_label``
    per ModelCache mounted there: ``CACHE_WANTED`` while the cache has no Object on the
    cluster, ``CACHE_STAGED`` once it has, so a cache reads the summaries of the clusters it
    still has to stage on, not of all it is staged on (design/cache-staging.md)."""
    spec = content.get("spec") if isinstance(content.get("spec"), dict) else {}
    status = content.get("status") if isinstance(content.get("status"), dict) else {}
    # Not ``staged``: only its labels are read, and any cache staging there would rewrite it.
    kept = ("version", "cluster", "labels", "caches")
    data = {k: content[k] for k in kept if k in content}
    data["spec"] = {k: spec[k] for k in ("cluster",) if k in spec}
    data["status"] = {k: status[k] for k in ("providerConfigRef",) if k in status}
    own = _own_labels(labels)
    caches = content.get("caches") if isinstance(content.get("caches"), dict) else {}
    staged = set(content.get("staged") or ())
    for key in caches:
        namespace, _, name = str(key).partition("/")
        own[cache_label(namespace, name)] = CACHE_STAGED if key in staged else CACHE_WANTED
    return _configmap(cache_configmap_name(cluster), own | {CACHE_SUMMARY_LABEL: "true"}, data)


def configmaps(cluster: str, labels: Mapping[str, str], content: JSON) -> list[JSON]:
    """Both ConfigMaps publishing ``content``: the capacity summary, then the cache summary."""
    return [configmap(cluster, labels, content), cache_configmap(cluster, labels, content)]


def summaries(objects: Iterable[JSON]) -> list[JSON]:
    """Both summary ConfigMaps of each InferenceCluster among ``objects``, in their order, from the
    status each gives, the ModelReplicas among ``objects`` pinned to it and the caches'
    Objects on it: what compose-inference-cluster composes (``modelplane summarize``, the
    benchmark's fleet)."""
    objects = list(objects)
    pinned: dict[str, list[JSON]] = {}
    cache_objects: dict[str, list[JSON]] = {}
    for obj in objects:
        if obj.get("kind") == "ModelReplica":
            where = str(tolerant.text(obj, "spec", "clusterName") or "")
            pinned.setdefault(where, []).append(obj)
        elif obj.get("kind") == "Object":
            where = (tolerant.mapping(obj, "metadata", "labels") or {}).get(CACHE_CLUSTER_LABEL)
            if isinstance(where, str):
                cache_objects.setdefault(where, []).append(obj)
    out = []
    for cluster in objects:
        if cluster.get("kind") != "InferenceCluster":
            continue
        name = tolerant.name_of(cluster)
        status = cluster.get("status") if isinstance(cluster.get("status"), dict) else {}
        labels = tolerant.mapping(cluster, "metadata", "labels") or {}
        staged = staged_caches(cache_objects.get(name, []))
        content = summary(cluster, status, pinned.get(name, []), staged=staged)
        out.extend(configmaps(name, labels, content))
    return out


# --- reading (compose-model-deployment) -----------------------------------------------------


class UnreadableSummaryError(ValueError):
    """A summary ConfigMap whose data is not a summary this version understands."""


def summary_item(resource: struct_pb2.Struct) -> JSON:
    """Of a required summary ConfigMap, as sent, only what a reader looks at (its name and its
    data), read straight from protobuf: its metadata is most of the rest (labels, owner,
    managedFields), and a cache reads hundreds of summaries."""
    out: JSON = {}
    fields = resource.fields
    metadata = fields.get("metadata")
    if metadata is not None and metadata.WhichOneof("kind") == "struct_value":
        name = metadata.struct_value.fields.get("name")
        out["metadata"] = {"name": plain_value(name)} if name is not None else {}
    data = fields.get("data")
    if data is not None:
        out["data"] = plain_value(data)
    return out


def parse(configmap_: Mapping[str, Any]) -> JSON:
    """The summary a ConfigMap carries; raises UnreadableSummaryError."""
    raw = tolerant.text(configmap_, "data", DATA_KEY)
    if raw is None:
        raise UnreadableSummaryError(f"no data.{DATA_KEY}")
    return parse_data(raw)


def parse_data(raw: str) -> JSON:
    """The summary in a ConfigMap's ``data["summary.json"]``; raises UnreadableSummaryError."""
    try:
        content = json.loads(raw)
    except ValueError as err:
        raise UnreadableSummaryError(f"data.{DATA_KEY} is not JSON: {err}") from err
    if not isinstance(content, dict) or content.get("version") != VERSION:
        raise UnreadableSummaryError(f"data.{DATA_KEY} is not a version {VERSION} summary")
    if not isinstance(content.get("cluster"), str) or not content["cluster"]:
        raise UnreadableSummaryError(f"data.{DATA_KEY} names no cluster")
    return content


# Summaries parsed, by their text: a function process reads the same ones reconcile after
# reconcile. What is kept is shared and never modified; a changed summary is a new text.
MAX_PARSED = 50_000
_parsed: dict[str, JSON] = {}


def parse_shared(raw: str) -> Mapping[str, Any]:
    """``parse_data(raw)``, parsed once per distinct text; never modify what it returns."""
    content = _parsed.get(raw)
    if content is None:
        content = parse_data(raw)
        if len(_parsed) >= MAX_PARSED:
            _parsed.clear()
        _parsed[raw] = content
    return content


def cluster_view(content: Mapping[str, Any], devices: Mapping[str, list[JSON]]) -> JSON:
    """The summary as the InferenceCluster the scheduler parses: each pool's devices are its
    class's (``devices``: class name -> published devices); a pool whose class is not known
    is published without devices, which the scheduler reads as an unreadable pool (held)."""
    status = dict(content.get("status") or {})
    pools = status.get("gpuPools")
    if isinstance(pools, list):
        views = []
        for pool in pools:
            if not isinstance(pool, dict):
                views.append(pool)
                continue
            view = {k: v for k, v in pool.items() if k != "className"}
            found = devices.get(str(pool.get("className") or ""))
            if found is not None:
                view["devices"] = found
            views.append(view)
        status["gpuPools"] = views
    return {
        "metadata": {"name": content["cluster"], "labels": content.get("labels") or {}},
        "spec": content.get("spec") or {},
        "status": status,
    }


def replica_views(
    content: Mapping[str, Any], keep: Callable[[str, str], bool] = lambda namespace, name: True
) -> list[JSON]:
    """The summarised replicas of the deployments ``keep`` accepts (namespace, name), as the
    ModelReplicas the scheduler parses."""
    shapes = content.get("shapes") if isinstance(content.get("shapes"), list) else []
    groups = content.get("replicas") if isinstance(content.get("replicas"), dict) else {}
    out = []
    for group, entries in groups.items():
        namespace, _, deployment = str(group).partition("/")
        if not keep(namespace, deployment) or not isinstance(entries, list):
            continue
        for entry in entries:
            if not isinstance(entry, list) or len(entry) != _ENTRY_FIELDS:
                continue
            name, index, created, deleting, ready, shape = entry
            engines = shapes[shape] if isinstance(shape, int) and 0 <= shape < len(shapes) else []
            metadata: JSON = {
                "name": name,
                "namespace": namespace,
                "labels": {DEPLOYMENT_LABEL: deployment, INDEX_LABEL: index},
            }
            if created:
                metadata["creationTimestamp"] = created
            if deleting:
                metadata["deletionTimestamp"] = deleting
            replica: JSON = {
                "metadata": metadata,
                "spec": {"clusterName": content["cluster"], "engines": engines},
            }
            if ready:
                replica["status"] = {"conditions": [{"type": "Ready", "status": "True"}]}
            out.append(replica)
    return out


def published_devices(class_devices: Any) -> list[JSON] | None:
    """An InferenceClass's ``spec.devices`` as compose-inference-cluster publishes them in
    ``status.gpuPools[].devices`` (defaults applied), or None when they cannot be read."""
    if not isinstance(class_devices, list) or not class_devices:
        return None
    try:
        parsed = [klass.Device.model_validate(d) for d in class_devices]
        return [
            ic.Device.model_validate(d.model_dump(by_alias=True, exclude_none=True)).model_dump(
                mode="json", by_alias=True, exclude_none=True
            )
            for d in parsed
        ]
    except ValueError:
        return None
