"""Simulated providers and in-cluster controllers for ``modelplane simulate``.

Between reconciles the real world writes ``status``: providers mark managed resources Ready and
fill ``status.atProvider``, provider-kubernetes copies the remote object (with its live status)
into ``status.atProvider.manifest``, and Kubernetes controllers on the control plane answer for
the objects composed there directly (CRDs get Established, a Gateway gets an address...). This
module is that world, kept table-driven and deterministic: every value is derived from the
object itself, so a run is reproducible and a fixed point exists.

Scenarios bend the world with overrides: ``ProviderSimulator.inject(match, ...)`` patches the
simulated status of every object ``match`` selects until the override is cleared, e.g. a Job
that fails, or a cloud cluster that turns not Ready.
"""

from __future__ import annotations

import copy
import dataclasses
from collections.abc import Callable, Mapping

from modelplane_common import cel
from modelplane_common.managed import EXTERNAL_NAME, OBSERVE_NOT_FOUND, external_name

from modelplane import draclaims
from modelplane.kube import (
    JSON,
    deep_merge,
    group_of,
    is_modelplane_group,
    lookup,
)
from modelplane.kubecontrollers import (
    Site,
    World,
    address_in,
    short_hash,
    simulate_kubernetes,
    unavailable,
)

Matcher = Callable[[JSON], bool]

READY_TRUE = {"type": "Ready", "status": "True", "reason": "Available"}
SYNCED_TRUE = {"type": "Synced", "status": "True", "reason": "ReconcileSuccess"}
KUBERNETES_PROVIDER_GROUPS = {"kubernetes.crossplane.io", "kubernetes.m.crossplane.io"}
HELM_PROVIDER_GROUPS = {"helm.crossplane.io", "helm.m.crossplane.io"}
# Their namespaced managed resources (Crossplane v2), which a terminating namespace holds.
NAMESPACED_PROVIDER_GROUPS = {"kubernetes.m.crossplane.io", "helm.m.crossplane.io"}
# Kinds whose simulated status depends on other objects (a MetalLB pool, a parent Gateway).
WORLD_DEPENDENT_KINDS = {"GatewayClass", "Gateway", "Service", "HTTPRoute", "GRPCRoute"}
# Kinds nobody writes a status for (configuration, not things that run).
_NO_STATUS_KINDS = {"ProviderConfig", "ClusterProviderConfig", "ProviderConfigUsage"}
_UNTOUCHED_GROUPS = {"apiextensions.crossplane.io", "pkg.crossplane.io", "ops.crossplane.io"}


@dataclasses.dataclass
class Override:
    """A scenario's patch on the simulated world.

    ``status`` is merged into the object's status (conditions merged by type), ``manifest_status``
    into the status of a provider-kubernetes Object's remote object before its readiness is
    derived, so a failed Job makes the Object not Ready exactly as provider-kubernetes would.
    """

    match: Matcher
    status: JSON | None = None
    manifest_status: JSON | None = None
    # For Observe-only Objects: the resource they read is absent from the remote cluster.
    absent: bool = False


def matching(
    *,
    kind: str | None = None,
    api_version: str | None = None,
    name: str | None = None,
    namespace: str | None = None,
    labels: Mapping[str, str] | None = None,
    manifest_kind: str | None = None,
    manifest_name: str | None = None,
    manifest_namespace: str | None = None,
) -> Matcher:
    """A matcher on an object's identity and, for Objects, on the identity of what it wraps."""

    def match(obj: JSON) -> bool:
        metadata = obj.get("metadata") or {}
        if kind is not None and obj.get("kind") != kind:
            return False
        if api_version is not None and obj.get("apiVersion") != api_version:
            return False
        if name is not None and metadata.get("name") != name:
            return False
        if namespace is not None and metadata.get("namespace") != namespace:
            return False
        if labels and any((metadata.get("labels") or {}).get(k) != v for k, v in labels.items()):
            return False
        if manifest_kind is None and manifest_name is None and manifest_namespace is None:
            return True
        manifest = lookup(obj, ".spec.forProvider.manifest")
        if not isinstance(manifest, dict):
            return False
        wrapped = manifest.get("metadata") or {}
        return (
            (manifest_kind is None or manifest.get("kind") == manifest_kind)
            and (manifest_name is None or wrapped.get("name") == manifest_name)
            and (manifest_namespace is None or wrapped.get("namespace") == manifest_namespace)
        )

    return match


class ProviderSimulator:
    """Computes what providers and controllers would write into each object."""

    def __init__(self) -> None:
        self.overrides: list[Override] = []
        self.revision = 0  # bumped whenever the overrides change
        # (Object, its manifest) -> why the target cluster's API server refuses it, or None.
        self.admission: Callable[[JSON, JSON], str | None] | None = None

    def inject(
        self,
        match: Matcher,
        status: JSON | None = None,
        manifest_status: JSON | None = None,
        *,
        absent: bool = False,
    ) -> Override:
        override = Override(match, status, manifest_status, absent)
        self.overrides.append(override)
        self.revision += 1
        return override

    def clear(self, override: Override | None = None) -> None:
        """Remove one override, or every override."""
        if override is None:
            self.overrides.clear()
        else:
            self.overrides.remove(override)
        self.revision += 1

    def observe(self, obj: JSON, world: World) -> JSON | None:
        """The object as its provider/controller would leave it, or None if nobody touches it."""
        api_version = str(obj.get("apiVersion", ""))
        kind = str(obj.get("kind", ""))
        group = group_of(api_version)
        if is_modelplane_group(group) or group in _UNTOUCHED_GROUPS or kind in _NO_STATUS_KINDS:
            return None
        if group in NAMESPACED_PROVIDER_GROUPS and (obj.get("metadata") or {}).get(
            "deletionTimestamp"
        ):
            return None  # stuck deleting (ControlPlane._stays_deleting): the provider cannot act
        overrides = [o for o in self.overrides if o.match(obj)]
        if group in KUBERNETES_PROVIDER_GROUPS | HELM_PROVIDER_GROUPS:
            missing = _missing_provider_config(obj, world)
            if missing:
                return _unreachable(obj, missing)
        if group in KUBERNETES_PROVIDER_GROUPS and kind == "Object":
            updated = self._object(obj, overrides, world)
        elif group in HELM_PROVIDER_GROUPS and kind == "Release":
            updated = _managed(obj, _release_at_provider(obj))
        elif group == "protection.crossplane.io":
            updated = copy.deepcopy(obj)
            updated["status"] = {"conditions": [dict(READY_TRUE)]}
        elif _is_managed(obj, group):
            updated = _managed(obj, _cloud_at_provider(obj))
        else:
            updated = simulate_kubernetes(obj, Site(_seed(obj), remote=False, world=world))
            if updated is None and not overrides:
                return None
            updated = updated or copy.deepcopy(obj)
        for override in overrides:
            if override.status:
                updated["status"] = deep_merge(updated.get("status") or {}, override.status)
        return updated

    def _object(self, obj: JSON, overrides: list[Override], world: World) -> JSON:
        """provider-kubernetes: apply the manifest remotely, report it back with its status."""
        updated = copy.deepcopy(obj)
        manifest = lookup(obj, ".spec.forProvider.manifest")
        if not isinstance(manifest, dict):
            updated["status"] = {
                "conditions": [
                    {"type": "Ready", "status": "False", "reason": "Unavailable"},
                    {
                        "type": "Synced",
                        "status": "False",
                        "reason": "ReconcileError",
                        "message": "spec.forProvider.manifest is missing",
                    },
                ]
            }
            return updated
        config = str(lookup(obj, ".spec.providerConfigRef.name") or "default")
        if _observe_only(obj):
            return self._observed_only(obj, manifest, config, overrides)
        refusal = self.admission(obj, manifest) if self.admission is not None else None
        if refusal:
            # Nothing is created remotely; Ready stays whatever was last observed.
            return _unreachable(obj, refusal)
        remote = simulate_kubernetes(manifest, Site(config, remote=True, world=lambda _: []))
        remote = remote or copy.deepcopy(manifest)
        # kube-scheduler places pending pods only: pods already running keep the devices they
        # were allocated, whatever the cluster publishes now.
        pending = (
            None if _running(obj, manifest) else draclaims.unschedulable(manifest, config, world)
        )
        if pending is not None:
            remote["status"] = unavailable(remote, pending)
        return self._observed(obj, remote, overrides)

    def _observed(self, obj: JSON, remote: JSON, overrides: list[Override]) -> JSON:
        """The Object as provider-kubernetes reports it after reading ``remote`` back: the
        scenario's injected manifest status merged in, Ready by the Object's readiness policy."""
        for override in overrides:
            if override.manifest_status:
                remote["status"] = deep_merge(remote.get("status") or {}, override.manifest_status)
        ready_condition = (
            dict(READY_TRUE)
            if self._object_ready(obj, remote)
            else {"type": "Ready", "status": "False", "reason": "Unavailable"}
        )
        updated = copy.deepcopy(obj)
        updated["status"] = {
            "atProvider": {"manifest": remote},
            "conditions": [ready_condition, dict(SYNCED_TRUE)],
        }
        return updated

    def _observed_only(
        self, obj: JSON, manifest: JSON, config: str, overrides: list[Override]
    ) -> JSON:
        """provider-kubernetes with ``managementPolicies: [Observe]``: it reads the resource and
        never writes it, so nothing is admitted. The resource is taken to be there (someone
        installed it) unless a scenario injects ``absent=True``: then, as crossplane-runtime
        reports it, Synced=False and the last Ready and atProvider stay as they were."""
        if any(o.absent for o in overrides):
            return _unreachable(obj, f"observe failed: {OBSERVE_NOT_FOUND}")
        remote = simulate_kubernetes(manifest, Site(config, remote=True, world=lambda _: []))
        return self._observed(obj, remote or copy.deepcopy(manifest), overrides)

    def _object_ready(self, obj: JSON, remote: JSON) -> bool:
        readiness = lookup(obj, ".spec.readiness") or {}
        policy = readiness.get("policy", "SuccessfulCreate")
        conditions = [c for c in (remote.get("status") or {}).get("conditions") or []]
        if policy == "DeriveFromCelQuery":
            return self._cel(str(readiness.get("celQuery", "")), remote)
        if policy == "AllTrue":
            return all(c.get("status") == "True" for c in conditions)
        if policy == "DeriveFromObject":
            marks = [c for c in conditions if c.get("type") in {"Ready", "Available"}]
            return all(c.get("status") == "True" for c in marks)
        return True

    def _cel(self, query: str, remote: JSON) -> bool:
        """Evaluate a DeriveFromCelQuery readiness rule with a real CEL library, as the provider."""
        try:
            result = cel.compile_expression(query, ("object",)).evaluate({"object": remote})
        except (cel.CelCompileError, cel.CelEvalError):
            return False  # a failing query means "not ready", as in provider-kubernetes
        return result is True


def _observe_only(obj: JSON) -> bool:
    """Whether the provider may only read this resource (no Create, Update or Delete)."""
    policies = lookup(obj, ".spec.managementPolicies")
    return (
        isinstance(policies, list)
        and set(policies) <= {"Observe", "LateInitialize"}
        and ("Observe" in policies)
    )


def _running(obj: JSON, manifest: JSON) -> bool:
    """Whether the workload was last observed Available with this very pod spec."""
    previous = lookup(obj, ".status.atProvider.manifest")
    if not isinstance(previous, dict) or previous.get("spec") != manifest.get("spec"):
        return False
    conditions = lookup(previous, ".status.conditions") or []
    return any(
        isinstance(c, dict) and c.get("type") == "Available" and c.get("status") == "True"
        for c in conditions
    )


PROVIDER_CONFIG_KINDS = ("ProviderConfig", "ClusterProviderConfig")


def _missing_provider_config(obj: JSON, world: World) -> str | None:
    """Why the provider cannot reach this object's cluster, or None.

    The operator's ``default`` configs are assumed to exist (they are a prerequisite, not
    something a Modelplane directory declares); any other reference must resolve in the store,
    so deleting a cluster's configs cuts its remote objects off as in a real control plane.
    """
    ref = lookup(obj, ".spec.providerConfigRef") or {}
    name = str(ref.get("name") or "default")
    group = group_of(str(obj.get("apiVersion", "")))
    kind = str(ref.get("kind") or ("ClusterProviderConfig" if ".m." in group else "ProviderConfig"))
    if name == "default":
        return None
    namespace = (obj.get("metadata") or {}).get("namespace")
    for config in world(kind):
        metadata = config.get("metadata") or {}
        if metadata.get("name") != name or group_of(str(config.get("apiVersion", ""))) != group:
            continue
        if kind == "ClusterProviderConfig" or metadata.get("namespace") == namespace:
            return None
    return f'cannot get {kind}: {kind}.{group} "{name}" not found'


def _unreachable(obj: JSON, message: str) -> JSON:
    """Synced=False; everything last observed (Ready, atProvider) stays as it was."""
    updated = copy.deepcopy(obj)
    status = updated.setdefault("status", {})
    conditions = [c for c in status.get("conditions") or [] if c.get("type") != "Synced"]
    status["conditions"] = [
        *conditions,
        {"type": "Synced", "status": "False", "reason": "ReconcileError", "message": message},
    ]
    return updated


def _seed(obj: JSON) -> str:
    metadata = obj.get("metadata") or {}
    return str(metadata.get("uid") or f"{metadata.get('namespace')}/{metadata.get('name')}")


def _is_managed(obj: JSON, group: str) -> bool:
    return (
        group.endswith(".upbound.io")
        or group.endswith(".crossplane.io")
        or isinstance(lookup(obj, ".spec.forProvider"), dict)
    )


def _managed(obj: JSON, at_provider: JSON) -> JSON:
    updated = copy.deepcopy(obj)
    annotations = updated.setdefault("metadata", {}).setdefault("annotations", {})
    annotations.setdefault(EXTERNAL_NAME, _external_name(obj))
    updated["status"] = {
        "atProvider": at_provider,
        "conditions": [dict(READY_TRUE), dict(SYNCED_TRUE)],
    }
    return updated


# AWS resources whose external name is an identifier the cloud generates.
_AWS_GENERATED_IDS = {
    "VPC": "vpc",
    "Subnet": "subnet",
    "InternetGateway": "igw",
    "RouteTable": "rtb",
    "RouteTableAssociation": "rtbassoc",
    "Route": "r",
    "SecurityGroup": "sg",
}


def _external_name(obj: JSON) -> str:
    existing = external_name(obj)
    if existing:
        return str(existing)
    if "aws" in group_of(str(obj.get("apiVersion", ""))) and obj.get("kind") in _AWS_GENERATED_IDS:
        return f"{_AWS_GENERATED_IDS[str(obj['kind'])]}-{short_hash(_seed(obj), length=17)}"
    return str((obj.get("metadata") or {}).get("name", ""))


def _echo(for_provider: JSON) -> JSON:
    """forProvider as atProvider reports it: references and secrets are not echoed."""
    return {
        name: copy.deepcopy(value)
        for name, value in for_provider.items()
        if not name.endswith(("Selector", "Ref", "Refs", "SecretRef"))
    }


def _cloud_at_provider(obj: JSON) -> JSON:
    for_provider = lookup(obj, ".spec.forProvider") or {}
    at = _echo(for_provider)
    name = _external_name(obj)
    kind = str(obj.get("kind", ""))
    group = group_of(str(obj.get("apiVersion", "")))
    seed = _seed(obj)
    project = str(for_provider.get("project", "simulated-project"))
    region = str(for_provider.get("region") or for_provider.get("location") or "us-central1")
    at["id"] = name
    if "aws" in group:
        at["arn"] = f"arn:aws:{group.split('.')[0]}:{region}:123456789012:{kind.lower()}/{name}"
    if "nebius" in group:
        at.update(_nebius_at_provider(kind, seed, for_provider))
    for cloud, rules in (("gcp", _GCP), ("aws", _AWS), ("azure", _AZURE), ("vultr", _VULTR)):
        extra = rules.get(kind) if cloud in group else None
        if extra:
            at.update(extra(name, project, region, seed, for_provider))
    return at


AtProviderRule = Callable[[str, str, str, str, JSON], JSON]

_GCP: dict[str, AtProviderRule] = {
    "Cluster": lambda name, project, region, seed, fp: {
        "id": f"projects/{project}/locations/{region}/clusters/{name}",
        "endpoint": address_in("34", seed),
        "selfLink": f"https://container.googleapis.com/v1/projects/{project}/locations/{region}"
        f"/clusters/{name}",
        "masterVersion": str(fp.get("minMasterVersion", "1.35")),
        "status": "RUNNING",
    },
    "NodePool": lambda name, project, region, seed, fp: {
        "nodeCount": fp.get("nodeCount", fp.get("initialNodeCount", 1)),
        "status": "RUNNING",
    },
    "Network": lambda name, project, region, seed, fp: {
        "id": f"projects/{project}/global/networks/{name}",
        "selfLink": f"https://www.googleapis.com/compute/v1/projects/{project}/global/networks/"
        f"{name}",
    },
    "Subnetwork": lambda name, project, region, seed, fp: {
        "id": f"projects/{project}/regions/{region}/subnetworks/{name}",
        "selfLink": f"https://www.googleapis.com/compute/v1/projects/{project}/regions/{region}"
        f"/subnetworks/{name}",
    },
    "ServiceAccount": lambda name, project, region, seed, fp: {
        "email": f"{fp.get('accountId', name)}@{project}.iam.gserviceaccount.com",
        "uniqueId": str(int(short_hash(seed, length=15), 16)),
    },
}

_AWS: dict[str, AtProviderRule] = {
    "Cluster": lambda name, project, region, seed, fp: {
        "endpoint": f"https://{short_hash(seed, length=32).upper()}.gr7.{region}.eks.amazonaws.com",
        "status": "ACTIVE",
    },
    "NodeGroup": lambda name, project, region, seed, fp: {"status": "ACTIVE"},
    "Role": lambda name, project, region, seed, fp: {
        "arn": f"arn:aws:iam::123456789012:role/{name}"
    },
    "Addon": lambda name, project, region, seed, fp: {"status": "ACTIVE"},
}


_AZURE_SUBSCRIPTION = "/subscriptions/00000000-0000-0000-0000-000000000000"

_AZURE: dict[str, AtProviderRule] = {
    "ResourceGroup": lambda name, project, region, seed, fp: {
        "id": f"{_AZURE_SUBSCRIPTION}/resourceGroups/{name}"
    },
    "KubernetesCluster": lambda name, project, region, seed, fp: {
        "fqdn": f"{fp.get('dnsPrefix', name)}-{short_hash(seed, length=8)}.hcp.{region}.azmk8s.io",
        "currentKubernetesVersion": str(fp.get("kubernetesVersion", "1.35")),
    },
}


# VKE answers with a cluster UUID and the control plane's domain under vultr-k8s.com.
_VULTR: dict[str, AtProviderRule] = {
    "Kubernetes": lambda name, project, region, seed, fp: {
        "id": _uuid(seed),
        "endpoint": f"{_uuid(seed)}.vultr-k8s.com",
        "ip": address_in("45", seed),
        "status": "active",
    },
    "KubernetesNodePool": lambda name, project, region, seed, fp: {
        "id": _uuid(seed + "/pool"),
        "status": "active",
    },
}


def _uuid(seed: str) -> str:
    digest = short_hash(seed, length=32)
    return f"{digest[:8]}-{digest[8:12]}-{digest[12:16]}-{digest[16:20]}-{digest[20:32]}"


# Nebius IDs are a type prefix, "e00" and 17 lowercase letters and digits; mk8s clusters and
# node groups report their state under atProvider.status.
_NEBIUS_ID_PREFIX = {
    "Network": "vpcnetwork",
    "Subnet": "vpcsubnet",
    "Cluster": "mk8scluster",
    "NodeGroup": "mk8snodegroup",
    "GpuCluster": "computegpucluster",
    "Filesystem": "computefilesystem",
}


def _nebius_at_provider(kind: str, seed: str, for_provider: JSON) -> JSON:
    at: JSON = {
        "id": f"{_NEBIUS_ID_PREFIX.get(kind, kind.lower())}-e00{short_hash(seed, length=17)}"
    }
    if kind == "Cluster":
        version = str(lookup(for_provider, ".controlPlane.version") or "1.34")
        at["status"] = {"state": "RUNNING", "controlPlane": {"version": f"{version}.0-nebius-cp.1"}}
    elif kind == "NodeGroup":
        low = lookup(for_provider, ".autoscaling.minNodeCount") or 0
        at["status"] = {"state": "RUNNING", "nodeCount": low, "readyNodeCount": low}
    elif kind == "Filesystem":
        at["status"] = {"state": "READY"}
    return at


def _release_at_provider(obj: JSON) -> JSON:
    chart = lookup(obj, ".spec.forProvider.chart") or {}
    return {
        "state": "deployed",
        "revision": 1,
        "releaseDescription": "Install complete",
        **({"chart": chart.get("name")} if chart.get("name") else {}),
    }
