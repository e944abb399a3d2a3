"""What compose-inference-cluster decides for one InferenceCluster (platform spec §4).

Pure: an observed XR, its observed composed resources and the required resources in; an
``Outcome`` out. Gates follow C3 (composed when the gate is open or already observed, never
dropped when it closes again); invalid or incomplete input follows C4 (re-emit everything
observed, compose nothing new, say why).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping
from typing import Any

import pydantic
from modelplane_common import capacity_summary, tolerant
from modelplane_common.function import (
    SETTLING_TTL,
    Outcome,
    Selector,
    Severity,
    validation_summary,
)
from modelplane_common.managed import without_status
from modelplane_common.naming import CACHE_CLUSTER_LABEL
from modelplane_common.observed import condition, held, held_all, is_ready
from modelplane_common.plain import JSON
from modelplane_common.provider_configs import IDENTITY_TYPES
from modelplane_schemas.generated.infrastructure_modelplane_ai.v1alpha1 import akscluster as aks
from modelplane_schemas.generated.infrastructure_modelplane_ai.v1alpha1 import ekscluster as eks
from modelplane_schemas.generated.infrastructure_modelplane_ai.v1alpha1 import gkecluster as gke
from modelplane_schemas.generated.infrastructure_modelplane_ai.v1alpha1 import (
    nebiuscluster as nebius,
)
from modelplane_schemas.generated.infrastructure_modelplane_ai.v1alpha1 import servingstack as ss
from modelplane_schemas.generated.infrastructure_modelplane_ai.v1alpha1 import (
    vultrcluster as vultr,
)
from modelplane_schemas.generated.modelplane_ai.v1alpha1 import inferencecluster as ic

from compose_inference_cluster import cluster_drain as drain
from compose_inference_cluster import pools as pl
from compose_inference_cluster import resources as rs
from compose_inference_cluster import tenants

CLUSTER_READY = "ClusterReady"
POOLS_RESOLVED = "PoolsResolved"
BACKEND_READY = "BackendReady"
# A cloud XR whose published kubeconfig lacks an identity (NebiusCluster) says so this way.
KUBECONFIG_READY = "KubeconfigReady"
KUBECONFIG_INCOMPLETE = "KubeconfigIncomplete"
NEBIUS_CREDENTIALS = "NebiusServiceAccountCredentials"
REPLICAS_REQUIREMENT = "model-replicas"
# The replicas' provider-kubernetes Objects on this cluster: a deleted replica's Objects are
# deleted in the background and still need the cluster (its ProviderConfig, the CRDs of its
# stack) until the workload cluster has deleted what they made. Read only once no replica is
# left: while one is, it alone holds the guard, and a dense cluster's Objects (several per
# replica, each larger than the replica) would take its request past gRPC's 4 MiB.
REPLICA_OBJECTS_REQUIREMENT = "replica-objects"
OBJECT_API_VERSION = "kubernetes.m.crossplane.io/v1alpha1"
# The ModelCaches' Objects on this cluster: their tenants need a namespace here too (D10).
CACHE_OBJECTS_REQUIREMENT = "cache-objects"
# The status fields this function owns (and re-publishes unchanged on a hold).
KEY_CAPACITY_SUMMARY = "capacity-summary"
KEY_CACHE_SUMMARY = "cache-summary"
PUBLISHED_STATUS = ("namespace", "providerConfigRef", "gateway", "gpuPools", "unavailablePools")


def requirements(xr: JSON, replicas: list[JSON] | None) -> dict[str, Selector]:
    """Required resources, the same on every call for the same spec and the same answer
    about replicas (``replicas``: None until it is known); they settle in three calls."""
    name = (xr.get("metadata") or {}).get("name", "")
    wanted = {
        REPLICAS_REQUIREMENT: Selector(
            "modelplane.ai/v1alpha1", "ModelReplica", match_labels={rs.CLUSTER_LABEL: name}
        ),
        CACHE_OBJECTS_REQUIREMENT: Selector(
            OBJECT_API_VERSION, "Object", match_labels={CACHE_CLUSTER_LABEL: name}
        ),
    }
    if replicas == []:
        wanted[REPLICA_OBJECTS_REQUIREMENT] = Selector(
            OBJECT_API_VERSION, "Object", match_labels={rs.CLUSTER_LABEL: name}
        )
    for class_name in sorted({p.get("className", "") for p in _raw_pools(xr)} - {""}):
        wanted[pl.class_requirement(class_name)] = Selector(
            "modelplane.ai/v1alpha1", "InferenceClass", match_name=class_name
        )
    return wanted


def _raw_pools(xr: JSON) -> list[JSON]:
    pools = (xr.get("spec") or {}).get("nodePools") or []
    return [p for p in pools if isinstance(p, dict)]


def compose(
    xr: JSON, observed: Mapping[str, JSON], required: Mapping[str, list[JSON] | None]
) -> Outcome:
    replicas = required.get(REPLICAS_REQUIREMENT)
    outcome = Outcome(requirements=requirements(xr, replicas))
    name = (xr.get("metadata") or {}).get("name", "")

    # 1. The replica guard comes first, before any early exit (§4.8). Who uses the cluster:
    # its replicas, or once none is left, the Objects they made that are still being deleted.
    users = replicas or (required.get(REPLICA_OBJECTS_REQUIREMENT) if replicas == [] else None)
    _guard_replicas(outcome, xr, observed, replicas, users)
    if any(tolerant.text(r, "metadata", "deletionTimestamp") for r in replicas or []):
        # A leaving replica holds its devices in the summary until this function sees it
        # gone, and replicas come by requirement, unwatched: a deployment waiting for those
        # devices (a scale-down's, a drain's) would otherwise wait for the settled minute.
        outcome.ttl = SETTLING_TTL
    caches = required.get(CACHE_OBJECTS_REQUIREMENT)
    tenant_users = None if users is None or caches is None else users + caches
    drained = drain.condition_for(xr, replicas) if replicas is not None else None
    if drained is not None:
        outcome.condition(drain.REPLICAS_DRAINED, *drained)

    try:
        cluster = ic.InferenceCluster.model_validate(without_status(xr))
    except pydantic.ValidationError as err:
        return _hold(
            outcome,
            xr,
            observed,
            "InvalidSpec",
            f"invalid InferenceCluster: {validation_summary(err)}",
            severity="Warning",
            replicas=replicas,
            cache_objects=caches,
        )

    pools = cluster.spec.nodePools or []
    classes = pl.resolve_classes(pl.class_names(pools), required)
    if classes.unresolved and not (classes.missing or classes.invalid):
        # Crossplane has not answered the requirements yet; it calls again with them.
        return _hold(
            outcome,
            xr,
            observed,
            "WaitingForClasses",
            "Resolving InferenceClasses: " + ", ".join(classes.unresolved),
            quiet=True,
            replicas=None,  # a first round: the summary stays as it is
            cache_objects=None,
        )
    # A pool that cannot be resolved holds back only itself (issue 21): the cluster, its
    # other pools and everything running on them go on.
    source = cluster.spec.cluster.source
    unavailable = pl.unavailable_pools(pools, classes, source)
    pools = [p for p in pools if p.name not in unavailable]
    _pool_conditions(outcome, xr, cluster, unavailable)
    gpu_pools = pl.gpu_pools(pools, classes.resolved)
    kept = tolerant.listing(observed.get(rs.KEY_SERVING_STACK), "spec", "draDrivers")
    drivers = pl.dra_drivers(pools, classes.resolved, (kept or []) if unavailable else [])
    if source == "Existing":
        _compose_existing(outcome, cluster, observed, drivers)
    else:
        _compose_cloud(
            outcome,
            cluster,
            observed,
            classes.resolved,
            pools=pools,
            unavailable=set(unavailable),
            dra_drivers=drivers,
        )
    # Without a provider config (yet, or for now) the namespaces are kept as they are.
    composed_config = rs.KEY_PROVIDER_CONFIG in outcome.resources
    tenants.compose(
        outcome,
        name,
        observed,
        tenant_users if composed_config else None,
        provider_config=rs.provider_config_name(name),
        namespace=rs.NAMESPACE,
    )
    outcome.composite_status = _status(outcome, name, observed, gpu_pools)
    outcome.composite_status["unavailablePools"] = [
        {"name": p.name, "className": p.className, "reason": unavailable[p.name]}
        for p in cluster.spec.nodePools or []
        if p.name in unavailable
    ]
    _compose_capacity_summary(outcome, xr, observed, replicas, caches)
    return outcome


def _compose_capacity_summary(
    outcome: Outcome,
    xr: JSON,
    observed: Mapping[str, JSON],
    replicas: list[JSON] | None,
    cache_objects: list[JSON] | None,
    *,
    ready: bool | None = None,
) -> None:
    """The cluster's capacity summary for the fleet scheduler and its cache summary for
    compose-model-cache (design/capacity.md). While its replicas or the caches' Objects on
    it are not resolved the last ones are kept: a summary missing its replicas would read as
    free capacity, one missing a cache's Objects as a cluster that cache must stage on."""
    keys = (KEY_CAPACITY_SUMMARY, KEY_CACHE_SUMMARY)
    if replicas is None or cache_objects is None:
        for key in keys:
            if key in observed:
                outcome.compose(key, held(observed[key]), ready=True)
        return
    name = tolerant.name_of(xr)
    staged = capacity_summary.staged_caches(cache_objects)
    content = capacity_summary.summary(
        xr, outcome.composite_status, replicas, ready=ready, staged=staged
    )
    labels = tolerant.mapping(xr, "metadata", "labels") or {}
    # A ConfigMap has no Ready condition to wait for.
    for key, body in zip(keys, capacity_summary.configmaps(name, labels, content), strict=True):
        outcome.compose(key, body, ready=True)


def _pool_conditions(
    outcome: Outcome,
    xr: JSON,
    cluster: ic.InferenceCluster,
    unavailable: Mapping[str, str],
) -> None:
    """``PoolsResolved`` names every pool held back and why; an event when that changes."""
    if not unavailable:
        outcome.condition(POOLS_RESOLVED, True, "AllPoolsResolved", normal=True)
        return
    message = "; ".join(
        f"pool {p.name} (class {p.className}): {unavailable[p.name]}"
        for p in cluster.spec.nodePools or []
        if p.name in unavailable
    )
    message += "; nothing new is placed on it, and the other pools serve on"
    outcome.condition(POOLS_RESOLVED, False, "InvalidNodePool", message)
    previous = next(
        (c for c in tolerant.maps(xr, "status", "conditions") if c.get("type") == POOLS_RESOLVED),
        {},
    )
    if previous.get("message") != message:
        outcome.event("Warning", message, reason="InvalidNodePool")


def _guard_replicas(
    outcome: Outcome,
    xr: JSON,
    observed: Mapping[str, JSON],
    replicas: list[JSON] | None,
    users: list[JSON] | None,
) -> None:
    """Protect the cluster from its creation until a deletion finds nothing on it.

    Replicas come by requirement, not a watch, so this function sees a new one up to a poll
    interval after it is placed. A guard composed only once replicas are seen would leave that
    interval open for a delete to strand the replica's Objects (the real plane found it). So
    the guard stands from the start and lets go only after a deletion was attempted (the Usage
    webhook records it on the cluster) and no replica nor replica Object is left; its
    ``replayDeletion`` then deletes the cluster.

    While a deletion waits, the cluster looks again within seconds rather than a poll interval:
    what it waits for (replicas and their Objects leaving) comes by requirement, which
    Crossplane does not watch, and every second the guard outlives them keeps the deletion.
    """
    deleting = capacity_summary.deletion_requested(xr)
    if deleting:
        outcome.ttl = SETTLING_TTL
    if users is None:
        # Not resolved yet is not "no replicas": keep the guard as it stands. Crossplane calls
        # again with the requirements resolved, in the same reconcile.
        if rs.KEY_USAGE_REPLICAS in observed:
            guard = held(observed[rs.KEY_USAGE_REPLICAS])
            outcome.compose(rs.KEY_USAGE_REPLICAS, guard, ready=True)
        return
    if not users and deleting:
        return
    reason = (
        rs.REPLICAS_REASON if replicas else rs.OBJECTS_REASON if users else rs.NO_REPLICAS_REASON
    )
    guard = rs.replicas_usage(tolerant.name_of(xr), reason)
    outcome.compose(rs.KEY_USAGE_REPLICAS, guard, ready=True)


def _hold(
    outcome: Outcome,
    xr: JSON,
    observed: Mapping[str, JSON],
    reason: str,
    message: str,
    *,
    replicas: list[JSON] | None,
    cache_objects: list[JSON] | None,
    severity: Severity = "Warning",
    quiet: bool = False,
) -> Outcome:
    """C4: re-emit every observed composed resource, compose nothing new, report why."""
    for key, body in held_all(observed).items():
        # The replica guard (run first) alone decides the deletion guard: re-emitting it here
        # would keep a cluster whose classes are already deleted from ever being deleted.
        if key not in outcome.resources and key != rs.KEY_USAGE_REPLICAS:
            outcome.compose(key, body, ready=_observed_ready(key, observed[key]))
    outcome.condition(CLUSTER_READY, False, reason, message)
    backend = observed.get(rs.KEY_SERVING_STACK)
    if backend is not None and is_ready(backend):
        outcome.condition(BACKEND_READY, True, "BackendHealthy")
    else:
        outcome.condition(BACKEND_READY, False, "WaitingForCluster", "the cluster is not ready")
    if not quiet:
        outcome.event(severity, message, reason=reason)
    # Keep publishing what was true before: the held pools, stack and provider config still
    # exist, and an absent status field would read as "gone" to the scheduler.
    outcome.composite_status = _previous_status(xr)
    outcome.composite_ready = False
    # The summary follows the replicas placed here, and says not Ready: a held cluster takes
    # nothing new (a frozen summary would offer its capacity and hide what lands on it).
    # ``replicas`` None keeps the last one.
    _compose_capacity_summary(outcome, xr, observed, replicas, cache_objects, ready=False)
    return outcome


def _observed_ready(key: str, body: JSON) -> bool:
    """Readiness of a held resource, by the same rules as when it is composed normally."""
    if key in (
        rs.KEY_GKE,
        rs.KEY_EKS,
        rs.KEY_AKS,
        rs.KEY_VULTR,
        rs.KEY_NEBIUS,
        rs.KEY_SERVING_STACK,
    ):
        return is_ready(body)
    return True


def _previous_status(xr: JSON) -> JSON:
    return {k: v for k, v in tolerant.status(xr).items() if k in PUBLISHED_STATUS}


def _compose_existing(
    outcome: Outcome, cluster: ic.InferenceCluster, observed: Any, dra_drivers: list[str] | None
) -> None:
    name = (cluster.metadata or {}).get("name", "")
    existing = cluster.spec.cluster.existing
    assert existing is not None  # XRD rule: existing is required for source Existing
    kubeconfig = rs.SecretKey(existing.secretRef.name, existing.secretRef.key or "kubeconfig")
    identity = None
    secrets = [ss.Secret(type="Kubeconfig", name=kubeconfig.name, key=kubeconfig.key)]
    if existing.identitySecretRef is not None:
        ref = existing.identitySecretRef
        identity = rs.SecretKey(ref.name, ref.key or "private_key")
        secrets.append(ss.Secret(type="GCPServiceAccountKey", name=identity.name, key=identity.key))
    outcome.compose(
        rs.KEY_PROVIDER_CONFIG, rs.cluster_provider_config(name, kubeconfig, identity), ready=True
    )
    root = existing.nvidiaDriverRoot
    outcome.compose(
        rs.KEY_SERVING_STACK,
        rs.serving_stack(
            name,
            secrets,
            root if root and root != "/" else None,
            existing.installed,
            dra_drivers=dra_drivers,
        ),
        ready=is_ready(observed.get(rs.KEY_SERVING_STACK)),
    )
    outcome.condition(CLUSTER_READY, True, "ClusterRunning")
    _backend_condition(outcome, observed, cluster_ready=True)


@dataclasses.dataclass(frozen=True)
class CloudSource:
    """How one ``spec.cluster.source`` is provisioned: its block of the spec, the cloud XR it
    composes (key, kind, usage guard), how its pools are built, where the node image puts the
    NVIDIA driver (None: at /, the DRA driver's default) and which secret, besides the
    kubeconfig, the ProviderConfigs need as identity (None: the kubeconfig suffices)."""

    spec_field: str
    key: str
    kind: str
    usage_key: str
    node_pools: Callable[[list[ic.NodePool], Mapping[str, Any]], list[Any]]
    pool_model: type
    build: Callable[[str, Any, list[Any]], Any]
    driver_root: str | None = None
    identity_secret_type: str | None = None


# GKE: a GCP service-account key; Nebius: the platform team's Nebius service-account
# credentials (the published kubeconfig has the endpoint and CA only). EKS: the AWS provider
# refreshes the kubeconfig's token; AKS and Vultr: the kubeconfig carries a client
# certificate. AKS (gpuDriver: Install), Vultr's GPU images and Nebius's drivers preset put
# the driver at /; GKE installs it under /home/kubernetes/bin/nvidia.
CLOUD_SOURCES: dict[str, CloudSource] = {
    "GKE": CloudSource(
        "gke", rs.KEY_GKE, "GKECluster", rs.KEY_USAGE_GKE, pl.gke_pools, gke.NodePool,
        rs.gke_cluster, rs.GKE_DRIVER_ROOT, "GCPServiceAccountKey",
    ),
    "EKS": CloudSource(
        "eks", rs.KEY_EKS, "EKSCluster", rs.KEY_USAGE_EKS, pl.eks_pools, eks.NodePool,
        rs.eks_cluster,
    ),
    "AKS": CloudSource(
        "aks", rs.KEY_AKS, "AKSCluster", rs.KEY_USAGE_AKS, pl.aks_pools, aks.NodePool,
        rs.aks_cluster,
    ),
    "Vultr": CloudSource(
        "vultr", rs.KEY_VULTR, "VultrCluster", rs.KEY_USAGE_VULTR, pl.vultr_pools,
        vultr.NodePool, rs.vultr_cluster,
    ),
    "Nebius": CloudSource(
        "nebius", rs.KEY_NEBIUS, "NebiusCluster", rs.KEY_USAGE_NEBIUS, pl.nebius_pools,
        nebius.NodePool, rs.nebius_cluster, identity_secret_type=NEBIUS_CREDENTIALS,
    ),
}  # fmt: skip


def _compose_cloud(
    outcome: Outcome,
    cluster: ic.InferenceCluster,
    observed: Mapping[str, JSON],
    classes: Mapping[str, Any],
    *,
    pools: list[ic.NodePool],
    unavailable: set[str],
    dra_drivers: list[str] | None,
) -> None:
    """The cloud cluster with every resolvable pool; an unresolvable one as observed."""
    name = (cluster.metadata or {}).get("name", "")
    source = cluster.spec.cluster.source
    cloud_source = CLOUD_SOURCES[source]
    key, kind, usage_key = cloud_source.key, cloud_source.kind, cloud_source.usage_key
    cloud_spec = getattr(cluster.spec.cluster, cloud_source.spec_field)
    assert cloud_spec is not None  # XRD rule: the block of its source is set
    node_pools = cloud_source.node_pools(pools, classes) + pl.carried_pools(
        observed.get(key), unavailable, cloud_source.pool_model
    )
    body: Any = None
    if node_pools:
        body = cloud_source.build(name, cloud_spec, _in_spec_order(node_pools, cluster))
    driver_root = cloud_source.driver_root

    cloud = observed.get(key)
    cloud_ready = is_ready(cloud)
    if not node_pools:
        # The cloud cluster needs one GPU pool at least: with none resolvable, keep what
        # exists as it is, and create nothing yet.
        if cloud is None:
            outcome.condition(
                CLUSTER_READY, False, "InvalidNodePool", "no node pool can be resolved yet"
            )
            outcome.composite_ready = False
            return
        body = held(cloud)
    outcome.compose(key, body, ready=cloud_ready)

    secrets = _cloud_secrets(cloud) if cloud_ready else []
    kubeconfig = next((s for s in secrets if s.type == "Kubeconfig"), None)
    identity = next((s for s in secrets if s.type == cloud_source.identity_secret_type), None)
    if source == "Nebius" and identity is None:
        # The published kubeconfig alone cannot authenticate: the gate stays closed.
        kubeconfig, secrets = None, []

    # ClusterProviderConfig: gated on the cloud XR being Ready with a kubeconfig (C3).
    if kubeconfig is not None:
        outcome.compose(
            rs.KEY_PROVIDER_CONFIG,
            rs.cluster_provider_config(
                name,
                rs.SecretKey(kubeconfig.name, kubeconfig.key),
                rs.SecretKey(identity.name, identity.key) if identity else None,
                IDENTITY_TYPES[identity.type if identity else "GCPServiceAccountKey"],
            ),
            ready=True,
        )
    elif rs.KEY_PROVIDER_CONFIG in observed:
        outcome.compose(rs.KEY_PROVIDER_CONFIG, held(observed[rs.KEY_PROVIDER_CONFIG]), ready=True)

    if source == "GKE":
        _compose_storage_class(outcome, cluster, observed, cloud)

    # ServingStack: same gate; reuse the observed stack's secrets while the cloud's are away.
    stack = observed.get(rs.KEY_SERVING_STACK)
    stack_secrets = [s for s in secrets if s.type == "Kubeconfig" or s is identity]
    if not stack_secrets and stack is not None:
        stack_secrets = _observed_stack_secrets(stack)
    if stack_secrets:
        if cloud_ready and stack is None:
            outcome.event("Normal", f"{kind} {name} is ready: composing the serving stack")
        outcome.compose(
            rs.KEY_SERVING_STACK,
            rs.serving_stack(name, stack_secrets, driver_root, dra_drivers=dra_drivers),
            ready=is_ready(stack),
        )
        outcome.compose(usage_key, rs.backend_usage(name, kind), ready=True)
    elif stack is not None:
        outcome.compose(rs.KEY_SERVING_STACK, held(stack), ready=is_ready(stack))
    if usage_key not in outcome.resources and usage_key in observed:
        outcome.compose(usage_key, held(observed[usage_key]), ready=True)

    incomplete = condition(cloud, KUBECONFIG_READY) or {}
    if cloud_ready:
        outcome.condition(CLUSTER_READY, True, "ClusterRunning")
    elif incomplete.get("status") == "False" and incomplete.get("reason") == KUBECONFIG_INCOMPLETE:
        # Nebius: the cluster runs, but no ProviderConfig can reach it before the platform
        # team's kubeconfig exists; say which step is missing.
        message = f"{kind} {name}: {incomplete.get('message', '')}"
        outcome.condition(CLUSTER_READY, False, KUBECONFIG_INCOMPLETE, message)
    else:
        outcome.condition(CLUSTER_READY, False, "Provisioning", f"{kind} {name} is not Ready yet")
    _backend_condition(outcome, observed, cluster_ready=cloud_ready)


def _in_spec_order(node_pools: list, cluster: ic.InferenceCluster) -> list:
    """Cloud pools in the order the InferenceCluster declares them, carried ones included."""
    order = {p.name: i for i, p in enumerate(cluster.spec.nodePools or [])}
    return sorted(node_pools, key=lambda p: order.get(p.name, len(order)))


def _observed_stack_secrets(stack: JSON) -> list[ss.Secret]:
    """The observed stack's secrets, or none when any cannot be read: the stack is then held
    as observed rather than recomposed with a secret missing."""
    try:
        return [
            ss.Secret.model_validate(s) for s in tolerant.listing(stack, "spec", "secrets") or []
        ]
    except pydantic.ValidationError:
        return []


def _cloud_secrets(cloud: JSON | None) -> list[ss.Secret]:
    found = []
    for raw in tolerant.listing(cloud, "status", "secrets") or []:
        try:
            found.append(ss.Secret.model_validate(raw))
        except pydantic.ValidationError:
            continue  # a half-written entry is as good as absent; the gate stays closed
    return found


def _compose_storage_class(
    outcome: Outcome,
    cluster: ic.InferenceCluster,
    observed: Mapping[str, JSON],
    cloud: JSON | None,
) -> None:
    """GKE's Filestore class, only at the default name and once the VPC name is known (§4.6)."""
    gke_spec = cluster.spec.cluster.gke
    wanted = (gke_spec.cache.storageClassName if gke_spec and gke_spec.cache else None) or (
        rs.GKE_RWX_CLASS
    )
    name = (cluster.metadata or {}).get("name", "")
    network = tolerant.text(cloud, "status", "network", "name")
    if wanted == rs.GKE_RWX_CLASS and rs.KEY_PROVIDER_CONFIG in outcome.resources and network:
        outcome.compose(rs.KEY_STORAGE_CLASS, rs.gke_storage_class(name, network), ready=True)
    elif rs.KEY_STORAGE_CLASS in observed and wanted == rs.GKE_RWX_CLASS:
        outcome.compose(rs.KEY_STORAGE_CLASS, held(observed[rs.KEY_STORAGE_CLASS]), ready=True)


def _backend_condition(outcome: Outcome, observed: Mapping[str, JSON], cluster_ready: bool) -> None:
    stack = observed.get(rs.KEY_SERVING_STACK)
    missing = condition(stack, "StackReady") or {}
    if missing.get("status") == "False" and missing.get("reason") == "ComponentMissing":
        # A component the cluster should already run is not there (spec.cluster.existing).
        outcome.condition(BACKEND_READY, False, "ComponentMissing", str(missing.get("message")))
    elif is_ready(stack):
        outcome.condition(BACKEND_READY, True, "BackendHealthy")
    elif not cluster_ready:
        outcome.condition(BACKEND_READY, False, "WaitingForCluster", "the cluster is not ready")
    else:
        outcome.condition(BACKEND_READY, False, "Installing", "the serving stack is not ready yet")


def _status(
    outcome: Outcome, name: str, observed: Mapping[str, JSON], gpu_pools: list[JSON]
) -> JSON:
    status: JSON = {"namespace": rs.NAMESPACE, "gpuPools": gpu_pools}
    if rs.KEY_PROVIDER_CONFIG in outcome.resources:
        status["providerConfigRef"] = {"name": rs.provider_config_name(name)}
    stack = observed.get(rs.KEY_SERVING_STACK)
    address = tolerant.text(stack, "status", "gateway", "address")
    if address and rs.KEY_SERVING_STACK in outcome.resources:
        status["gateway"] = {"address": address}
    return status
