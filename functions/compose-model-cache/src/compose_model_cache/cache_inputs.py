"""What compose-model-cache reads of the fleet: cache summaries, not InferenceClusters and
ModelReplicas (issue 23; design/cache-staging.md).

A cache requires, all cache summary ConfigMaps (``caches-<cluster>``) in ``modelplane-system``
that compose-inference-cluster publishes (``modelplane_common.capacity_summary``): the
cluster's labels, source and provider config, and who mounts which cache there, not the
replicas the scheduler reads:

* ``clusters``: with a ``clusterSelector``, the summaries carrying its labels (the clusters
  it stages on); without one, the summaries carrying the cache's own ``cache_label`` as
  ``wanted``: the clusters where replicas mounting it are placed and it has nothing yet (it
  stages on demand);
* ``provider.<cluster>``: without a selector, by name, the ClusterProviderConfig its PVC
  Object uses on a cluster where it has a PVC that ``clusters`` did not return: there, its
  weights stay while the cluster exists, and the config existing (not being deleted) says the
  cluster does; its summary is not read (design/cache-staging.md, "Size");
* ``staged.<cluster>``: by name, the summary of every other cluster where it has a PVC that
  ``clusters`` did not return (asked once ``clusters`` is resolved, so a summary is never sent
  twice): with a selector, for the replicas mounting it there (whose weights stay while they
  run); without one, where that config is missing or being deleted;
* ``cluster.<cluster>``: by name, the InferenceCluster of a staged cluster whose summary is
  missing, to tell a deleted cluster (its weights go with it) from a summary not published
  yet (unknown: everything there is held).

Every read tolerates malformed input; what cannot be read is unknown, never "nothing there".
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Iterable, Mapping
from typing import Any

from modelplane_common import capacity_summary as cs
from modelplane_common import tolerant
from modelplane_common.function import Selector
from modelplane_common.plain import JSON

CLUSTERS = "clusters"
_STAGED_PREFIX = "staged."
_CLUSTER_PREFIX = "cluster."
_PROVIDER_PREFIX = "provider."
PROVIDER_CONFIG_API_VERSION = "kubernetes.m.crossplane.io/v1alpha1"

Required = Callable[[str], list[JSON] | None]


def is_summary_key(key: str) -> bool:
    """A requirement whose objects are summary ConfigMaps."""
    return key == CLUSTERS or key.startswith(_STAGED_PREFIX)


def staged_key(cluster: str) -> str:
    return f"{_STAGED_PREFIX}{cluster}"


def cluster_key(cluster: str) -> str:
    return f"{_CLUSTER_PREFIX}{cluster}"


def provider_key(cluster: str) -> str:
    return f"{_PROVIDER_PREFIX}{cluster}"


def _summary_selector(**match: Any) -> Selector:
    return Selector("v1", "ConfigMap", namespace=cs.NAMESPACE, **match)


def requirements(
    namespace: str,
    name: str,
    match_labels: Mapping[str, str] | None,
    staged: Iterable[str],
    unsummarised: Iterable[str] = (),
    *,
    providers: Mapping[str, str] | None = None,
) -> dict[str, Selector]:
    """``match_labels`` None: the cache has no clusterSelector (it stages on demand).
    ``staged``: staged clusters whose summary is read by name (see ``by_name``);
    ``unsummarised``: those whose summary was not found either (see ``missing``);
    ``providers``: staged clusters whose existence is looked up, with the name of the
    ClusterProviderConfig their PVC Object uses (``existing``)."""
    if match_labels is None:
        labels = {cs.cache_label(namespace, name): cs.CACHE_WANTED}
    else:
        labels = {str(k): str(v) for k, v in match_labels.items()}
    selected = labels | {cs.CACHE_SUMMARY_LABEL: "true"}
    wanted = {CLUSTERS: _summary_selector(match_labels=selected)}
    for cluster, config in sorted((providers or {}).items()):
        wanted[provider_key(cluster)] = Selector(
            PROVIDER_CONFIG_API_VERSION, "ClusterProviderConfig", match_name=config
        )
    for cluster in sorted(set(staged)):
        name = cs.cache_configmap_name(cluster)
        wanted[staged_key(cluster)] = _summary_selector(match_name=name)
    for cluster in sorted(set(unsummarised)):
        wanted[cluster_key(cluster)] = Selector(
            "modelplane.ai/v1alpha1", "InferenceCluster", match_name=cluster
        )
    return wanted


def unlisted(required: Required, staged: Iterable[str]) -> list[str] | None:
    """Staged clusters whose summary ConfigMap ``clusters`` did not return (each is then read
    by name); None while ``clusters`` is not resolved yet."""
    items = required(CLUSTERS)
    if items is None:
        return None
    names = {_configmap_name(item) for item in items}
    return sorted(c for c in set(staged) if cs.cache_configmap_name(c) not in names)


def _configmap_name(item: Any) -> str | None:
    metadata = item.get("metadata") if isinstance(item, Mapping) else None
    name = metadata.get("name") if isinstance(metadata, Mapping) else None
    return name if isinstance(name, str) else None


@dataclasses.dataclass
class Existence:
    """What the ClusterProviderConfig lookups of staged clusters found."""

    # Config present and not being deleted: the cluster exists (cluster -> config name).
    present: dict[str, str]
    # Config missing or being deleted: the cluster may be gone.
    absent: set[str]
    # Lookups Crossplane has not resolved yet.
    unresolved: set[str]


def existing(required: Required, providers: Mapping[str, str]) -> Existence:
    """The lookups of ``providers`` (staged cluster -> the ClusterProviderConfig its PVC
    Object uses), cluster by cluster: one not resolved yet leaves the others' answers as they
    are, so the requirements that follow from them never shrink."""
    found = Existence({}, set(), set())
    for cluster, config in providers.items():
        items = required(provider_key(cluster))
        if items is None:
            found.unresolved.add(cluster)
        elif items and not tolerant.text(items[0], "metadata", "deletionTimestamp"):
            found.present[cluster] = config
        else:
            found.absent.add(cluster)
    return found


# A staged cluster not read this reconcile (on demand, where its summary no longer carries the
# cache as wanted) has its existence looked up in turn: each reconcile, the healthy ones of one
# of this many shards of clusters (by name), so a cache staged on hundreds of clusters reads a
# few dozen provider configs, not hundreds (design/cache-staging.md, "Size").
EXISTENCE_CHECK_SHARDS = 16


def existence_shard(cluster: str) -> int:
    return cs.shard_of(cluster) % EXISTENCE_CHECK_SHARDS


def by_name(unlisted: Iterable[str], providers: Mapping[str, str], absent: set[str]) -> list[str]:
    """Unlisted staged clusters whose summary is read by name: those without a config to look
    up, and those whose config is missing or being deleted."""
    return sorted(c for c in unlisted if c not in providers or c in absent)


def missing(required: Required, staged: Iterable[str]) -> list[str]:
    """Staged clusters whose summary the API server did not find."""
    return sorted(c for c in set(staged) if required(staged_key(c)) == [])


@dataclasses.dataclass
class Fleet:
    """The part of the fleet one reconcile read."""

    # Clusters the ``clusters`` requirement found, with a readable summary, by name.
    selected: list[str]
    # Every readable summary, by cluster name.
    summaries: dict[str, Mapping[str, Any]]
    # Staged clusters whose summary is missing (while the cluster exists) or unreadable: why.
    unknown: dict[str, str]
    # Staged clusters whose InferenceCluster is gone.
    deleted: set[str]
    # Staged clusters not read, known to exist by their ClusterProviderConfig: its name.
    assumed: dict[str, str] = dataclasses.field(default_factory=dict)


def _parse(item: Any, cluster: str | None = None) -> Mapping[str, Any]:
    """The summary a ConfigMap carries (parsed once per distinct text: cs.parse_shared)."""
    text = tolerant.text(item, "data", cs.DATA_KEY)
    if text is None:
        raise cs.UnreadableSummaryError(f"no data.{cs.DATA_KEY}")
    content = cs.parse_shared(text)
    if cluster is not None and content["cluster"] != cluster:
        raise cs.UnreadableSummaryError(f"it summarises cluster {content['cluster']!r}")
    return content


def _summarised_cluster(item: Any, by_configmap: Mapping[str, str]) -> str | None:
    """The staged cluster a summary ConfigMap is named for, if any (``by_configmap``: staged
    clusters by the name of their summary ConfigMap)."""
    name = _configmap_name(item)
    return by_configmap.get(name) if name is not None else None


def read(
    required: Required, staged: Iterable[str], present: Mapping[str, str] | None = None
) -> Fleet | None:
    """What the requirements returned, or None while any of them is not resolved yet.
    ``present``: staged clusters taken to exist without reading their summary (their
    config found by ``existing``, or not looked up this reconcile), with their config's name;
    None while a lookup is not resolved yet, or when none was made."""
    selected_items = required(CLUSTERS)
    if selected_items is None:
        return None
    fleet = Fleet([], {}, {}, set())
    staged = sorted(set(staged))
    by_configmap = {cs.cache_configmap_name(c): c for c in staged}
    # A staged cluster's summary is taken from ``clusters`` when that returned it.
    listed: dict[str, Mapping[str, Any] | cs.UnreadableSummaryError] = {}
    for item in selected_items:
        cluster = _summarised_cluster(item, by_configmap)
        try:
            content = _parse(item)
        except cs.UnreadableSummaryError as err:
            if cluster is not None:
                listed.setdefault(cluster, err)
            # Nothing new is staged there. Whether it still matches is unknown: a staged
            # cluster it names keeps everything as observed.
            if cluster is not None:
                where = f"cache summary ConfigMap {cs.NAMESPACE}/{cs.cache_configmap_name(cluster)}"
                fleet.unknown[cluster] = f"{where} cannot be read ({err})"
            continue
        if cluster is not None:
            listed.setdefault(cluster, content)
        if content["cluster"] not in fleet.summaries:
            fleet.summaries[content["cluster"]] = content
            fleet.selected.append(content["cluster"])
    for cluster in staged:
        where = f"cache summary ConfigMap {cs.NAMESPACE}/{cs.cache_configmap_name(cluster)}"
        if cluster in listed:
            _take_listed(fleet, cluster, listed[cluster], where)
            continue
        if present is not None and cluster in present:
            fleet.assumed[cluster] = present[cluster]
            continue
        found = required(staged_key(cluster))
        if found is None:
            return None
        if not found:
            exists = required(cluster_key(cluster))
            if exists is None:
                return None
            if exists:
                fleet.unknown[cluster] = f"{where} is missing"
                fleet.summaries.pop(cluster, None)
            else:
                fleet.deleted.add(cluster)
                fleet.summaries.pop(cluster, None)
            continue
        if cluster in fleet.unknown:
            continue
        try:
            fleet.summaries[cluster] = _parse(found[0], cluster)
        except cs.UnreadableSummaryError as err:
            fleet.unknown[cluster] = f"{where} cannot be read ({err})"
            fleet.summaries.pop(cluster, None)
    fleet.selected = [c for c in fleet.selected if c in fleet.summaries]
    return fleet


def _take_listed(
    fleet: Fleet,
    cluster: str,
    content: Mapping[str, Any] | cs.UnreadableSummaryError,
    where: str,
) -> None:
    """A staged cluster's summary as ``clusters`` returned it (already parsed)."""
    if isinstance(content, cs.UnreadableSummaryError):
        return  # already unknown
    if content["cluster"] != cluster:
        fleet.unknown[cluster] = (
            f"{where} cannot be read (it summarises cluster {content['cluster']!r})"
        )
        fleet.summaries.pop(cluster, None)
        return
    fleet.summaries[cluster] = content


def users_of(
    fleet: Fleet, namespace: str, name: str
) -> tuple[dict[str, list[tuple[str, str]]], set[str]]:
    """Per cluster read, the replicas mounting cache ``namespace/name`` there (name, remote
    namespace), and the clusters whose list cannot be read (a summary from before caches were
    summarised, or a malformed entry): their users are unknown."""
    key = f"{namespace}/{name}"
    users: dict[str, list[tuple[str, str]]] = {}
    unknown = set(fleet.unknown)
    for cluster, content in fleet.summaries.items():
        caches = content.get("caches")
        entries = caches.get(key, []) if isinstance(caches, Mapping) else None
        if not isinstance(entries, list) or not all(
            type(e) is list and len(e) == 2 and type(e[0]) is str and type(e[1]) is str
            for e in entries
        ):
            unknown.add(cluster)
            continue
        users[cluster] = [(replica, remote) for replica, remote in entries]
    return users, unknown
