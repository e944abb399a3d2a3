"""What one NebiusCluster composes, given the XR, its observed composed resources and the
platform team's kubeconfig Secret (a required resource).

Keys (as the other clouds, spec C2): network, subnet, cluster, nodegroup-system,
nodegroup-<pool>, gpucluster-<fabric>, filesystem (with a cache block),
provider-config-kubernetes, provider-config-helm.

Nebius publishes the cluster's kubeconfig with the endpoint and CA only, so the ProviderConfigs
add an identity: the platform team's Nebius service-account credentials
(``spec.credentialsSecretRef``, identity type ``NebiusServiceAccountCredentials``). Until that
Secret exists with its key, ``KubeconfigReady`` is False (``KubeconfigIncomplete``, naming the
step), the XR is not ready, publishes no secrets and composes no ProviderConfig;
ProviderConfigs composed earlier are held, never dropped.
"""

from __future__ import annotations

from collections.abc import Mapping

import pydantic
from modelplane_common import tolerant
from modelplane_common.function import Outcome, Selector, validation_summary
from modelplane_common.managed import at_provider, cluster_outcome, hold_outcome, without_status
from modelplane_common.observed import held
from modelplane_common.plain import JSON
from modelplane_common.provider_configs import SecretKey
from modelplane_schemas.generated.infrastructure_modelplane_ai.v1alpha1.nebiuscluster import (
    NebiusCluster,
    Spec,
)

from compose_nebius_cluster import nebius_resources as res

CREDENTIALS_REQUIREMENT = "credentials-secret"
KUBECONFIG_READY = "KubeconfigReady"
PROVIDER_CONFIGS = ("provider-config-kubernetes", "provider-config-helm")
# Ready once composed: a ProviderConfig has no Ready condition.
ALWAYS_READY = PROVIDER_CONFIGS
NODE_GROUP_PREFIX = "nodegroup-"
GPU_CLUSTER_PREFIX = "gpucluster-"


def requirements(xr: JSON) -> dict[str, Selector]:
    """The credentials Secret, by name in the XR's namespace (the same on every call)."""
    ref = tolerant.mapping(xr, "spec", "credentialsSecretRef") or {}
    name = ref.get("name")
    if not isinstance(name, str) or not name:
        return {}
    namespace = tolerant.text(xr, "metadata", "namespace") or "default"
    return {CREDENTIALS_REQUIREMENT: Selector("v1", "Secret", match_name=name, namespace=namespace)}


def compose_nebius_cluster(
    xr: JSON, observed: Mapping[str, JSON], credentials: list[JSON] | None
) -> Outcome:
    name = tolerant.text(xr, "metadata", "name") or ""
    namespace = tolerant.text(xr, "metadata", "namespace") or "default"
    wanted = requirements(xr)
    try:
        model = NebiusCluster.model_validate(without_status(xr))
    except pydantic.ValidationError as err:
        outcome = hold_outcome(xr, observed, f"invalid NebiusCluster: {validation_summary(err)}")
        outcome.requirements = wanted
        return outcome
    spec = model.spec
    problems = spec_problems(spec)
    if problems:
        outcome = hold_outcome(xr, observed, f"invalid NebiusCluster: {'; '.join(problems)}")
        outcome.requirements = wanted
        return outcome

    desired: dict[str, JSON] = {
        "network": res.network_manifest(name, spec),
        "subnet": res.subnet_manifest(name, spec),
        "cluster": res.cluster_manifest(name, spec),
        f"{NODE_GROUP_PREFIX}{res.SYSTEM_POOL}": res.system_node_group_manifest(spec),
    }
    for fabric in res.fabrics(spec):
        desired[f"{GPU_CLUSTER_PREFIX}{fabric}"] = res.gpu_cluster_manifest(name, spec, fabric)
    if spec.cache is not None:
        desired["filesystem"] = res.filesystem_manifest(name, spec)
    for pool in spec.nodePools:
        desired[f"{NODE_GROUP_PREFIX}{pool.name}"] = res.node_group_manifest(spec, pool)

    ref = spec.credentialsSecretRef
    secret_key = SecretKey(ref.name, namespace, ref.key or res.CREDENTIALS_KEY)
    state, message = credentials_state(name, namespace, secret_key, credentials)
    if state is True:
        kubernetes_config, helm_config = res.provider_config_manifests(name, namespace, secret_key)
        desired["provider-config-kubernetes"] = kubernetes_config
        desired["provider-config-helm"] = helm_config
    else:
        # Gate closed (or not known yet): keep what was composed, compose nothing new (C3).
        for key in PROVIDER_CONFIGS:
            if key in observed:
                desired[key] = held(observed[key])
    usable = all(key in desired for key in PROVIDER_CONFIGS)
    published = secret_key if state is True else _held_identity(observed, namespace)
    outcome = cluster_outcome(
        desired, observed, status(name, observed, published if usable else None), ALWAYS_READY
    )
    outcome.requirements = wanted
    if state is True:
        outcome.condition(KUBECONFIG_READY, True, "KubeconfigProvided", message)
    elif state is None:
        outcome.condition(KUBECONFIG_READY, None, "Resolving", message)
    else:
        outcome.condition(KUBECONFIG_READY, False, "KubeconfigIncomplete", message)
        if not usable:
            outcome.composite_ready = False
    return outcome


def _held_identity(observed: Mapping[str, JSON], namespace: str) -> SecretKey | None:
    """The credentials the held ProviderConfigs read, which status keeps naming."""
    ref = tolerant.mapping(observed.get(PROVIDER_CONFIGS[0]), "spec", "identity", "secretRef")
    name, key = tolerant.text(ref, "name"), tolerant.text(ref, "key")
    return SecretKey(name, namespace, key) if name and key else None


def credentials_state(
    name: str, namespace: str, secret: SecretKey, credentials: list[JSON] | None
) -> tuple[bool | None, str]:
    """Whether the platform team's Nebius credentials Secret is there with its key (None: not
    known yet), and a message that names the step when it is not."""
    if credentials is None:
        return None, f"looking up Secret {secret.name} in {namespace}"
    published = res.published_kubeconfig_secret(name)
    step = (
        f"Nebius publishes this cluster's kubeconfig (Secret {published}) with the endpoint "
        f"and CA only: create Secret {secret.name} in {namespace} with key {secret.key} "
        "holding the credentials of a Nebius service account with access to the cluster, "
        "which the ProviderConfigs add as their identity (docs/platform.md, Nebius)"
    )
    if not credentials:
        return False, f"Secret {secret.name} not found. {step}"
    found = credentials[0]
    keys = set(tolerant.mapping(found, "data") or {}) | set(
        tolerant.mapping(found, "stringData") or {}
    )
    if secret.key not in keys:
        return False, f"Secret {secret.name} has no key {secret.key}. {step}"
    return True, f"the ProviderConfigs authenticate with Secret {secret.name}, key {secret.key}"


def spec_problems(spec: Spec) -> list[str]:
    """The XRD's rules, checked again for input that bypassed it (render, older XRDs)."""
    problems: list[str] = []
    if not res.PROJECT_ID.match(spec.projectId):
        problems.append(f"spec.projectId: {spec.projectId!r} is not a Nebius project ID")
    version = spec.kubernetesVersion or ""
    if not res.MINOR_VERSION.match(version):
        problems.append(f"spec.kubernetesVersion: {version!r} is not <major>.<minor>")
    seen: set[str] = set()
    for index, pool in enumerate(spec.nodePools):
        at = f"spec.nodePools[{index}]"
        if pool.name in seen:
            problems.append(f"{at}.name: duplicate pool name {pool.name!r}")
        seen.add(pool.name)
        if pool.name == res.SYSTEM_POOL:
            problems.append(f"{at}.name: 'system' is reserved for the injected node group")
        if not res.PLATFORM.match(pool.platform):
            problems.append(f"{at}.platform: {pool.platform!r} is not a Nebius platform name")
        elif pool.role == "GPU" and not pool.platform.startswith("gpu-"):
            problems.append(f"{at}.platform: {pool.platform!r} is not a GPU platform")
        if not res.PRESET.match(pool.preset):
            problems.append(f"{at}.preset: {pool.preset!r} is not a Nebius preset")
        if pool.driversPreset is not None and not res.DRIVERS_PRESET.match(pool.driversPreset):
            problems.append(f"{at}.driversPreset: {pool.driversPreset!r} is not a drivers preset")
        if pool.role == "GPU" and pool.gpu is None:
            problems.append(f"{at}.gpu: required when role is GPU")
        fabric = pool.infinibandFabric
        if fabric is not None and (pool.role != "GPU" or not res.FABRIC.match(fabric)):
            problems.append(f"{at}.infinibandFabric: {fabric!r} needs role GPU and a fabric name")
        low, size, high = pool.minNodeCount, pool.nodeCount, pool.maxNodeCount
        if low is not None and size is not None and low > size:
            problems.append(f"{at}.minNodeCount: {low} exceeds nodeCount {size}")
        if high is not None and size is not None and size > high:
            problems.append(f"{at}.nodeCount: {size} exceeds maxNodeCount {high}")
    return problems


def status(name: str, observed: Mapping[str, JSON], credentials: SecretKey | None) -> JSON:
    """status.secrets (the published kubeconfig and the credentials, together) once the
    ProviderConfigs are composed, none before; the mk8s cluster ID once observed."""
    result: JSON = {"secrets": res.status_secrets(name, credentials) if credentials else []}
    cluster_id = at_provider(observed.get("cluster"), "id")
    if cluster_id:
        result["clusterId"] = cluster_id
    return result
