"""compose-model-cache: per matched cluster an RWX PVC and, until staged, a hydration Job.

The clusters are read from their cache summaries (cache_inputs): with a clusterSelector
every cluster it matches; without one the clusters where replicas mounting the cache are
placed, and those already staged while they exist (design/cache-staging.md).
"""

from __future__ import annotations

import pydantic
from modelplane_common import capacity_summary as cs
from modelplane_common import tolerant
from modelplane_common.function import Outcome, validation_summary
from modelplane_common.managed import hold_observed
from modelplane_common.observed import held
from modelplane_common.plain import JSON
from modelplane_common.tenancy import remote_namespace, reserved_reason
from modelplane_schemas.generated.modelplane_ai.v1alpha1.modelcache import ModelCache

from compose_model_cache import cache_inputs as inputs
from compose_model_cache import cache_objects as objects
from compose_model_cache import cache_slots as slots
from compose_model_cache import staging

CLUSTERS = inputs.CLUSTERS
CLUSTERS_MATCHED = "ClustersMatched"
# At most this many clusters hydrate one cache at once; the rest wait, with nothing composed.
# It bounds the burst on the model hub (each Job downloads the whole model) and the cache's
# own request, which carries every composed Object as observed: a hydration Job is the
# largest (design/cache-staging.md, "Hydrating at most 64 clusters at once").
MAX_HYDRATING = 64
ARTIFACT_READY = "ArtifactReady"


def compose_cache(
    composite: JSON,
    observed: dict[str, JSON],
    required: inputs.Required,
    *,
    check_shard: int | None = None,
) -> Outcome:
    """The outcome for one ModelCache given its observed Objects and the objects its
    requirements resolved to (``required(key)``: None while not resolved yet).
    ``check_shard``: the shard of staged clusters (``inputs.existence_shard``) whose
    existence this reconcile looks up; None: all of them."""
    metadata = composite.get("metadata") or {}
    namespace, name = metadata.get("namespace") or "default", metadata.get("name", "")
    outcome = Outcome()
    try:
        # Only the spec: status carries whatever Crossplane and earlier reconciles wrote.
        spec = ModelCache.model_validate({"spec": composite.get("spec")}).spec
    except pydantic.ValidationError as err:
        message = f"invalid ModelCache: {validation_summary(err)}"
        outcome.resources.update(hold_observed(observed))
        outcome.condition(ARTIFACT_READY, False, "InvalidSpec", message)
        outcome.event("Warning", message, reason="InvalidSpec")
        return outcome
    reserved = reserved_reason(namespace)
    if reserved:
        message = f"{reserved}; create the ModelCache in a namespace of its own"
        outcome.resources.update(hold_observed(observed))
        outcome.condition(ARTIFACT_READY, False, "ReservedNamespace", message)
        outcome.event("Warning", message, reason="ReservedNamespace")
        outcome.composite_ready = False
        return outcome
    # No selector (or one without matchLabels): stage where replicas mounting it are placed.
    # An explicit empty matchLabels selects every cluster.
    on_demand = spec.clusterSelector is None or spec.clusterSelector.matchLabels is None
    match_labels = {} if on_demand else dict(spec.clusterSelector.matchLabels or {})
    staged = slots.observed_clusters(observed)
    # Staged clusters' summaries are read by name only where ``clusters`` did not return them;
    # on demand (``clusters`` returns only clusters still to stage) only where the cluster's
    # ClusterProviderConfig does not show that it still exists. That is looked up in turn
    # (``check_shard``), and every reconcile where the PVC Object is unhealthy; the others are
    # taken to exist, with the config they are observed with. The lookups are asked for in
    # the first round, beside ``clusters``: Crossplane calls a function at most six times
    # until its requirements settle.
    # A cluster still holding a PVC from before D10 is always read: who mounts that one, and
    # the storage class of the one replacing it, are in its summary.
    remote = remote_namespace(namespace)
    unlisted = inputs.unlisted(required, staged) or []
    legacy = slots.legacy_clusters(observed, staged, remote)
    providers = slots.provider_configs(observed, sorted(staged - legacy)) if on_demand else {}
    checked = {
        cluster: config
        for cluster, config in providers.items()
        if check_shard in (None, inputs.existence_shard(cluster))
        or not slots.healthy(observed, cluster)
    }
    existence = inputs.existing(required, checked)
    present = None
    if not existence.unresolved:
        unchecked = {c: config for c, config in providers.items() if c not in checked}
        present = existence.present | unchecked
    summaries_by_name = inputs.by_name(unlisted, providers, existence.absent)
    outcome.requirements = inputs.requirements(
        namespace,
        name,
        None if on_demand else match_labels,
        summaries_by_name,
        inputs.missing(required, summaries_by_name),
        providers=checked,
    )
    fleet = inputs.read(required, staged, present)
    if fleet is None:
        # Not resolved yet: Crossplane resolves it and calls again. Keep everything meanwhile.
        outcome.resources.update(hold_observed(observed))
        return outcome
    if spec.huggingFace is None:  # the XRD's CEL rule makes this unreachable in a cluster
        message = "spec.huggingFace is required when spec.source is HuggingFace"
        outcome.resources.update(hold_observed(observed))
        outcome.condition(ARTIFACT_READY, False, "InvalidSpec", message)
        outcome.event("Warning", message, reason="InvalidSpec")
        return outcome
    source = spec.huggingFace
    auth = source.authSecret.model_dump(exclude_none=True) if source.authSecret else None

    # A matching cluster whose provider config cannot be read is unknown, not unreachable: it
    # counts only where its PVC already exists, and that PVC is kept exactly as observed.
    replicas, unknown = inputs.users_of(fleet, namespace, name)
    # Where the summary was not read, who mounts the cache is not known.
    users = slots.CacheUsers(replicas, frozenset(unknown | fleet.assumed.keys()))
    chosen = set(fleet.selected)
    if on_demand:
        # Once staged, a cluster keeps its weights while it exists (design/cache-staging.md).
        chosen |= staged & fleet.summaries.keys()
    views = [cs.cluster_view(fleet.summaries[c], {}) for c in sorted(chosen)]
    matched = [
        c
        for c in staging.matched_clusters(views, match_labels)
        if c.provider_config or c.name in staged
    ]
    # A staged cluster known to exist, its summary not read: composed as it is observed.
    matched += [
        staging.MatchedCluster(c, config, staging.DEFAULT_STORAGE_CLASS)
        for c, config in fleet.assumed.items()
        if c not in chosen
    ]
    matched.sort(key=lambda c: c.name)
    previous = tolerant.status(composite)
    was_ready = staging.previously_ready(previous)
    reported = {tolerant.text(e, "name") for e in tolerant.maps(previous, "clusters")}
    statuses = []
    phases = []
    waiting = _waiting(matched, observed, users, was_ready=was_ready, reported=reported)
    # The same manifests on every cluster, built once: shared, they are encoded once too.
    hydration = objects.Wrapper(
        objects.hydration_job(namespace, name, source.repo, source.revision, auth),
        objects.JOB_COMPLETE_QUERY,
        job=True,
    )
    claims: dict[str, objects.Wrapper] = {}
    for cluster in matched:
        moved = slots.moved(observed, cluster.name, legacy)
        pvc_key = objects.pvc_key(cluster.name, moved=moved)
        job_key = objects.job_key(cluster.name, moved=moved)
        observed_pvc, observed_job = observed.get(pvc_key), observed.get(job_key)
        # Phases first: the phase decides whether the Job is composed at all. With no status
        # entry for the cluster (a restore stripped it), a PVC observed without its Job was
        # staged: both are composed together, and only Ready drops the Job.
        latched = not moved and (
            cluster.name in was_ready
            or (cluster.name not in reported and observed_pvc is not None and observed_job is None)
        )
        latched = latched or (moved and cluster.name in was_ready and observed_job is None)
        phase = staging.derive_phase(observed_pvc, observed_job, latched)
        phases.append(phase.phase)
        entry: JSON = {"name": cluster.name, "phase": phase.phase}
        if phase.message:
            entry["message"] = phase.message
        if moved:
            _keep_legacy(
                outcome, observed, cluster=cluster.name, remote=remote, users=users, entry=entry
            )
        if not cluster.provider_config:
            entry["message"] = (
                f"InferenceCluster {cluster.name}: status.providerConfigRef.name is missing or "
                "malformed; its PVC and Job are kept as they are"
            )
            statuses.append(entry)
            for key in (pvc_key, job_key):
                if key in observed:
                    outcome.compose(
                        key, held(observed[key]), ready=staging.object_ready(observed[key])
                    )
            continue
        if cluster.name in waiting:
            entry["message"] = (
                f"waiting to hydrate: at most {MAX_HYDRATING} clusters hydrate at once"
            )
            statuses.append(entry)
            continue
        statuses.append(entry)

        # An existing PVC keeps the class it was created with: the field is immutable, and a
        # changed override must not leave the Object failing to update forever.
        storage_class = staging.applied_storage_class(observed_pvc) or cluster.storage_class
        if storage_class not in claims:
            claims[storage_class] = objects.Wrapper(
                objects.persistent_volume_claim(namespace, name, storage_class, source.sizeGiB),
                objects.PVC_BOUND_QUERY,
                job=False,
            )
        # Always composed for a matched cluster, whatever its state: omission deletes weights.
        outcome.compose(
            pvc_key,
            claims[storage_class](cluster.name, cluster.provider_config),
            ready=staging.object_ready(observed_pvc),
        )
        if phase.phase != "Ready":
            outcome.compose(
                job_key,
                hydration(cluster.name, cluster.provider_config),
                ready=staging.object_ready(observed_job),
            )

    statuses.extend(
        _keep_unmatched(
            outcome,
            observed,
            staged=staged,
            matched={c.name for c in matched},
            users=users,
            unknown=fleet.unknown,
        )
    )
    ready_count = phases.count("Ready")
    outcome.composite_status = {
        "summary": {"ready": f"{ready_count}/{len(matched)}"},
        "clusters": statuses,
    }
    _conditions(outcome, phases, on_demand=on_demand)
    _events(
        outcome,
        composite=composite,
        staged=staged,
        matched=matched,
        repo=source.repo,
        ready_count=ready_count,
    )
    return outcome


def _waiting(
    matched: list[staging.MatchedCluster],
    observed: dict[str, JSON],
    users: slots.CacheUsers,
    *,
    was_ready: set[str],
    reported: set[str | None],
) -> set[str]:
    """Matched clusters with nothing composed yet that wait for a hydration slot: those past
    MAX_HYDRATING hydrating, clusters where replicas mounting the cache wait first, then by
    name. A cluster with anything observed (in either namespace) is never among them:
    omission deletes. Only a running download (PVC Bound, Job not done) holds a slot, so a
    PVC that cannot bind or a failed Job does not keep the others waiting."""
    busy = 0
    fresh = []
    for cluster in matched:
        if not cluster.provider_config:
            continue
        keys = [
            (objects.pvc_key(cluster.name, moved=moved), objects.job_key(cluster.name, moved=moved))
            for moved in (False, True)
        ]
        pvc = next((observed[key] for key, _ in keys if key in observed), None)
        job = next((observed[key] for _, key in keys if key in observed), None)
        if pvc is None and job is None:
            fresh.append(cluster.name)
            continue
        # The main loop's latch: Ready before, or (status lost) a PVC whose Job is gone.
        latched = cluster.name in was_ready or (
            cluster.name not in reported and pvc is not None and job is None
        )
        if job is not None and staging.derive_phase(pvc, job, latched).phase == "Hydrating":
            busy += 1
    fresh.sort(key=lambda name: (not users.on(name), name))
    return set(fresh[max(0, MAX_HYDRATING - busy) :])


def _conditions(outcome: Outcome, phases: list[str], *, on_demand: bool) -> None:
    total, ready = len(phases), phases.count("Ready")
    if total == 0:
        message = (
            "no replica mounting this cache is placed on a cluster with a provider config yet; "
            "without spec.clusterSelector it is staged where they are placed"
            if on_demand
            else "no InferenceCluster matches spec.clusterSelector and has a provider config"
        )
        outcome.condition(CLUSTERS_MATCHED, False, "NoClusters", message)
        outcome.condition(ARTIFACT_READY, False, "NoClusters", message)
        # Nothing is composed, so Crossplane would otherwise derive Ready=True (IC-4).
        outcome.composite_ready = False
        return
    outcome.condition(CLUSTERS_MATCHED, True, "Matched", f"{total} cluster(s) matched")
    if "Failed" in phases:
        failed = phases.count("Failed")
        outcome.condition(
            ARTIFACT_READY, False, "Failed", f"hydration failed on {failed} of {total} cluster(s)"
        )
    elif ready == total:
        outcome.condition(ARTIFACT_READY, True, "Staged", f"staged on all {total} cluster(s)")
        outcome.composite_ready = True
    elif ready:
        outcome.condition(ARTIFACT_READY, False, "Partial", f"staged on {ready} of {total}")
    else:
        outcome.condition(ARTIFACT_READY, False, "Hydrating", f"staging to {total} cluster(s)")


def _events(
    outcome: Outcome,
    *,
    composite: JSON,
    staged: set[str],
    matched: list[staging.MatchedCluster],
    repo: str,
    ready_count: int,
) -> None:
    if matched and not staged & {c.name for c in matched}:
        names = ", ".join(c.name for c in matched)
        outcome.event("Normal", f"Staging {repo} to {len(matched)} clusters: {names}")
    if matched and ready_count == len(matched) and not staging.composite_ready(composite):
        outcome.event("Normal", f"Artifact staged on all {len(matched)} clusters")


def _hold_slot(outcome: Outcome, observed: dict[str, JSON], keys: tuple[str, ...]) -> None:
    for key in keys:
        if key in observed and key not in outcome.resources:
            outcome.compose(key, held(observed[key]), ready=staging.object_ready(observed[key]))


def _keep_legacy(
    outcome: Outcome,
    observed: dict[str, JSON],
    *,
    cluster: str,
    remote: str,
    users: slots.CacheUsers,
    entry: JSON,
) -> None:
    """Keep the PVC (and Job) from before D10 while replicas from before D10 mount it."""
    legacy_pvc = objects.pvc_key(cluster)
    if not slots.is_legacy(observed.get(legacy_pvc), remote):
        return
    legacy_users = users.legacy_on(cluster, remote)
    if not users.known(cluster) or legacy_users:
        _hold_slot(outcome, observed, (legacy_pvc, objects.job_key(cluster)))
        who = ", ".join(legacy_users) or "replicas there not known"
        note = (
            f"staging into namespace {remote}; the PVC in namespace "
            f"{slots.manifest_namespace(observed[legacy_pvc])} stays while it is mounted ({who})"
        )
        entry["message"] = f"{entry['message']}; {note}" if entry.get("message") else note


def _keep_unmatched(
    outcome: Outcome,
    observed: dict[str, JSON],
    *,
    staged: set[str],
    matched: set[str],
    users: slots.CacheUsers,
    unknown: dict[str, str],
) -> list[JSON]:
    """A cluster the selector no longer matches keeps its PVC while replicas run there (D12):
    the ModelDeployment moves them make-before-break, then the weights go. A staged cluster
    whose summary is missing or unreadable (``unknown``: why) keeps everything as observed.
    A deleted cluster (no InferenceCluster) has no users: its objects go."""
    entries = []
    for cluster in sorted(staged - matched):
        running = users.on(cluster)
        if users.known(cluster) and not running:
            continue  # nothing mounts it: dropping it deletes the weights, as intended
        keys = tuple(
            key
            for moved in (True, False)
            for key in (
                objects.pvc_key(cluster, moved=moved),
                objects.job_key(cluster, moved=moved),
            )
        )
        _hold_slot(outcome, observed, keys)
        phase = staging.derive_phase(slots.current_pvc(observed, cluster), None, True)
        if cluster in unknown:
            message = (
                f"{unknown[cluster]}: who mounts the cache there is not known, so its PVC and "
                "Job are kept as they are"
            )
        elif not users.known(cluster):
            message = (
                "the cluster's cache summary does not list this cache's replicas readably; "
                "its PVC and Job are kept as they are"
            )
        else:
            message = (
                "spec.clusterSelector no longer matches this cluster; the PVC stays while "
                f"replicas still mount it ({', '.join(running)})"
            )
        entries.append({"name": cluster, "phase": phase.phase, "message": message})
    return entries
