"""What one GKECluster composes, given the XR and its observed composed resources.

Keys (spec C2): network, projectservice-filestore, subnet, cluster, nodepool-system,
nodepool-<pool>, service-account, service-account-key, iam-binding,
provider-config-kubernetes, provider-config-helm.
"""

from __future__ import annotations

from collections.abc import Mapping

import pydantic
from modelplane_common import tolerant
from modelplane_common.function import Outcome, validation_summary
from modelplane_common.managed import (
    at_provider,
    cluster_outcome,
    external_name,
    gate_then_hold,
    hold_outcome,
    without_status,
)
from modelplane_common.node_pools import pool_problems
from modelplane_common.plain import JSON
from modelplane_schemas.generated.infrastructure_modelplane_ai.v1alpha1.gkecluster import (
    GKECluster,
)

from compose_gke_cluster import gke_resources as res

# Ready once composed: a ProviderConfig has no Ready condition.
ALWAYS_READY = ("provider-config-kubernetes", "provider-config-helm")
# Keys whose crossplane.io/external-name this function sets (kept when holding).
OWN_EXTERNAL_NAMES = ("cluster", "service-account")


def compose_gke_cluster(xr: JSON, observed: Mapping[str, JSON]) -> Outcome:
    name = (xr.get("metadata") or {}).get("name", "")
    namespace = (xr.get("metadata") or {}).get("namespace") or "default"
    try:
        model = GKECluster.model_validate(without_status(xr))
    except pydantic.ValidationError as err:
        message = f"invalid GKECluster: {validation_summary(err)}"
        return hold_outcome(xr, observed, message, OWN_EXTERNAL_NAMES)
    spec = model.spec
    problems = pool_problems(
        spec.nodePools,
        zone_allowed=lambda zone: zone.startswith(f"{spec.region}-"),
        zone_rule=f"a zone of region {spec.region}",
    )
    if problems:
        message = f"invalid GKECluster: {'; '.join(problems)}"
        return hold_outcome(xr, observed, message, OWN_EXTERNAL_NAMES)

    desired: dict[str, JSON] = {
        "network": res.network_manifest(spec),
        "projectservice-filestore": res.filestore_service_manifest(spec),
        "subnet": res.subnetwork_manifest(spec),
        "cluster": res.cluster_manifest(name, spec),
        "nodepool-system": res.system_node_pool_manifest(spec),
    }
    for pool in spec.nodePools:
        key = f"nodepool-{pool.name}"
        desired[key] = res.node_pool_manifest(spec, pool, driver_version(observed.get(key)))
    desired["service-account"] = res.service_account_manifest(name, spec)
    desired["service-account-key"] = res.service_account_key_manifest(name)
    email = at_provider(observed.get("service-account"), "email")
    iam_binding = gate_then_hold(
        "iam-binding", bool(email), lambda: res.iam_binding_manifest(spec, email), observed
    )
    if iam_binding is not None:
        desired["iam-binding"] = iam_binding
    kubernetes_config, helm_config = res.provider_config_manifests(name, namespace)
    desired["provider-config-kubernetes"] = kubernetes_config
    desired["provider-config-helm"] = helm_config

    return cluster_outcome(desired, observed, status(name, observed), ALWAYS_READY)


def driver_version(pool: JSON | None) -> str:
    """INSTALLATION_DISABLED, as GKE's DRA guide says, except for a pool that already exists
    with GKE's own driver: GCP cannot switch that in place, so the pool keeps it (and GKE's
    device plugin) rather than being refused by the provider."""
    accelerators = tolerant.listing(pool, "spec", "forProvider", "nodeConfig", "guestAccelerator")
    for accelerator in accelerators or []:
        version = tolerant.text(accelerator, "gpuDriverInstallationConfig", "gpuDriverVersion")
        if version == res.DRIVER_DEFAULT:
            return res.DRIVER_DEFAULT
    return res.DRIVER_INSTALLATION_DISABLED


def status(name: str, observed: Mapping[str, JSON]) -> JSON:
    """status.secrets always; network name and endpoint once observed."""
    result: JSON = {"secrets": res.status_secrets(name)}
    network_name = external_name(observed.get("network"))
    if network_name:
        result["network"] = {"name": network_name}
    endpoint = at_provider(observed.get("cluster"), "endpoint")
    if endpoint:
        result["endpoint"] = endpoint
    return result
