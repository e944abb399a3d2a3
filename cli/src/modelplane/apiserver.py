"""Which kinds each simulated cluster serves: the discovery half of a strict API server.

A real API server accepts an object only when its kind is built in or a CustomResourceDefinition
for it is installed and ``Established`` (decision D8); anything else is refused with
``no matches for kind "<Kind>" in version "<apiVersion>"``. ``modelplane simulate`` knows two
kinds of cluster:

- the **control plane**: built-in kinds, the CRDs the operator installs with Crossplane and its
  providers (platform spec §1.2-1.3), every XRD in apis/, CRDs composed there directly once
  Established, and the CRDs a Ready Helm Release installs through provider-helm's in-cluster
  config;
- each **workload cluster**, named by the kubeconfig Secret its ProviderConfigs read: built-in
  kinds, CRDs wrapped in provider-kubernetes Objects once the remote CRD is Established, and
  the CRDs a Ready Release installs there (the ServingStack's charts).

Chart contents are a table (the simulator installs no charts): which API groups and kinds each
chart Modelplane composes ships as CRDs.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from functools import cache

from modelplane.kube import (
    CROSSPLANE_OWN_GROUPS,
    JSON,
    condition_status,
    group_of,
    kind_is_namespaced,
    lookup,
    meta,
)
from modelplane.providers import (
    HELM_PROVIDER_GROUPS,
    KUBERNETES_PROVIDER_GROUPS,
    PROVIDER_CONFIG_KINDS,
)

CONTROL_PLANE = "control plane"
ANY_VERSION = "*"

# Groups every Kubernetes API server serves (kinds within them are checked by schema).
BUILTIN_GROUPS = frozenset(
    {
        "",
        "apps",
        "batch",
        "autoscaling",
        "policy",
        "admissionregistration.k8s.io",
        "apiextensions.k8s.io",
        "apiregistration.k8s.io",
        "authentication.k8s.io",
        "authorization.k8s.io",
        "certificates.k8s.io",
        "coordination.k8s.io",
        "discovery.k8s.io",
        "events.k8s.io",
        "flowcontrol.apiserver.k8s.io",
        "networking.k8s.io",
        "node.k8s.io",
        "rbac.authorization.k8s.io",
        "resource.k8s.io",
        "scheduling.k8s.io",
        "storage.k8s.io",
    }
)

# Installed on the control plane by the operator before Modelplane (Crossplane, provider-helm,
# provider-kubernetes; the cloud providers' groups all end in upbound.io).
OPERATOR_GROUPS = frozenset(
    {*CROSSPLANE_OWN_GROUPS, *KUBERNETES_PROVIDER_GROUPS, *HELM_PROVIDER_GROUPS}
)
OPERATOR_GROUP_SUFFIX = ".upbound.io"

_GATEWAY_API = "gateway.networking.k8s.io"
_ENVOY = "gateway.envoyproxy.io"

# chart name -> (group, kind) of every CRD the chart installs. Traefik ships only its own CRDs:
# the Gateway API CRDs its provider watches must be installed beside it (decision D1).
CHART_CRDS: Mapping[str, frozenset[tuple[str, str]]] = {
    "traefik": frozenset(
        ("traefik.io", kind)
        for kind in (
            "IngressRoute", "IngressRouteTCP", "IngressRouteUDP", "Middleware", "MiddlewareTCP",
            "ServersTransport", "ServersTransportTCP", "TLSOption", "TLSStore", "TraefikService",
        )
    ),
    "metallb": frozenset(
        ("metallb.io", kind)
        for kind in (
            "IPAddressPool", "L2Advertisement", "BGPAdvertisement", "BGPPeer", "BFDProfile",
            "Community",
        )
    ),
    # Envoy Gateway's chart bundles the Gateway API CRDs (experimental channel) with its own.
    "gateway-helm": frozenset(
        [
            *((_GATEWAY_API, kind) for kind in (
                "GatewayClass", "Gateway", "HTTPRoute", "GRPCRoute", "ReferenceGrant",
                "BackendTLSPolicy", "ListenerSet", "TCPRoute", "TLSRoute", "UDPRoute",
            )),
            *((_ENVOY, kind) for kind in (
                "Backend", "BackendTrafficPolicy", "ClientTrafficPolicy", "EnvoyExtensionPolicy",
                "EnvoyPatchPolicy", "EnvoyProxy", "HTTPRouteFilter", "SecurityPolicy",
            )),
        ]
    ),
    "ai-gateway-crds-helm": frozenset(
        ("aigateway.envoyproxy.io", kind)
        for kind in ("AIGatewayRoute", "AIServiceBackend", "BackendSecurityPolicy", "MCPRoute")
    ),
    "cert-manager": frozenset(
        [
            *(("cert-manager.io", kind) for kind in (
                "Certificate", "CertificateRequest", "ClusterIssuer", "Issuer",
            )),
            ("acme.cert-manager.io", "Challenge"),
            ("acme.cert-manager.io", "Order"),
        ]
    ),
    "kube-prometheus-stack": frozenset(
        ("monitoring.coreos.com", kind)
        for kind in (
            "Alertmanager", "AlertmanagerConfig", "PodMonitor", "Probe", "Prometheus",
            "PrometheusAgent", "PrometheusRule", "ScrapeConfig", "ServiceMonitor", "ThanosRuler",
        )
    ),
    "lws": frozenset({("leaderworkerset.x-k8s.io", "LeaderWorkerSet")}),
    "node-feature-discovery": frozenset(
        ("nfd.k8s-sigs.io", kind) for kind in ("NodeFeature", "NodeFeatureGroup", "NodeFeatureRule")
    ),
    "dra-driver-nvidia-gpu": frozenset({("resource.nvidia.com", "ComputeDomain")}),
}  # fmt: skip

# (group, version or ANY_VERSION, kind)
ServedKind = tuple[str, str, str]
Discovery = Mapping[str, frozenset[ServedKind]]

_PROVIDER_GROUPS = {"Object": KUBERNETES_PROVIDER_GROUPS, "Release": HELM_PROVIDER_GROUPS}
# Kinds whose changes can change what some cluster serves (Objects only when wrapping a CRD).
_DISCOVERY_KINDS = frozenset({"CustomResourceDefinition", "Release", *PROVIDER_CONFIG_KINDS})


def changes_discovery(obj: JSON) -> bool:
    """Whether writing or deleting ``obj`` can change what a cluster serves (its kinds, or
    the namespaces it has)."""
    if obj.get("kind") in _DISCOVERY_KINDS or _is_namespace(obj):
        return True
    manifest = lookup(obj, ".spec.forProvider.manifest")
    return (
        obj.get("kind") == "Object"
        and isinstance(manifest, dict)
        and (_is_crd(manifest) or _is_namespace(manifest))
    )


# Namespaces every cluster has from the start.
BUILTIN_NAMESPACES = frozenset({"default", "kube-system", "kube-public", "kube-node-lease"})


def _is_namespace(manifest: JSON) -> bool:
    return manifest.get("kind") == "Namespace" and manifest.get("apiVersion") == "v1"


def namespaces(objects: Iterable[JSON], resolver: ClusterResolver) -> dict[str, frozenset[str]]:
    """The namespaces each remote cluster has: the built-in ones, each Namespace an Object
    created there, and each namespace a Ready Helm release installed into (provider-helm
    creates it). A namespaced object anywhere else is refused, as the API server does."""
    found: dict[str, set[str]] = {}
    for obj in objects:
        if _is_namespace(obj):  # the control plane's own
            name = meta(obj).get("name")
            if isinstance(name, str) and name:
                found.setdefault(CONTROL_PLANE, set()).add(name)
            continue
        if is_provider_object(obj, "Object"):
            manifest = lookup(obj, ".spec.forProvider.manifest")
            created = lookup(obj, ".status.atProvider.manifest")
            if not (isinstance(manifest, dict) and _is_namespace(manifest) and created):
                continue
            name = lookup(manifest, ".metadata.name")
        elif is_provider_object(obj, "Release") and condition_status(obj, "Ready") == "True":
            name = lookup(obj, ".spec.forProvider.namespace")
        else:
            continue
        cluster = resolver.cluster_of(obj)
        if cluster is not None and isinstance(name, str) and name:
            found.setdefault(cluster, set()).add(name)
    return {cluster: frozenset(names | BUILTIN_NAMESPACES) for cluster, names in found.items()}


def missing_namespace(manifest: JSON, existing: frozenset[str]) -> str | None:
    """The API server's refusal of a namespaced object whose namespace does not exist."""
    namespace = lookup(manifest, ".metadata.namespace")
    api_version, kind = str(manifest.get("apiVersion", "")), str(manifest.get("kind", ""))
    if not isinstance(namespace, str) or not namespace or namespace in existing:
        return None
    if not kind_is_namespaced(api_version, kind):
        return None
    return f'namespaces "{namespace}" not found'


def no_matches(api_version: str, kind: str) -> str:
    """The API server's words for a kind nobody serves."""
    return f'no matches for kind "{kind}" in version "{api_version}"'


def is_provider_object(obj: JSON, kind: str) -> bool:
    return (
        obj.get("kind") == kind
        and group_of(str(obj.get("apiVersion", ""))) in (_PROVIDER_GROUPS[kind])
    )


def _crd_kinds(crd: JSON) -> set[ServedKind]:
    spec = crd.get("spec") or {}
    group, kind = spec.get("group"), (spec.get("names") or {}).get("kind")
    if not isinstance(group, str) or not isinstance(kind, str):
        return set()
    return {
        (group, str(version.get("name")), kind)
        for version in spec.get("versions") or []
        if isinstance(version, dict) and version.get("served", True)
    }


def _established(crd: JSON | None) -> bool:
    return isinstance(crd, dict) and condition_status(crd, "Established") == "True"


def _is_crd(obj: JSON) -> bool:
    return obj.get("kind") == "CustomResourceDefinition" and group_of(
        str(obj.get("apiVersion", ""))
    ) == ("apiextensions.k8s.io")


class ClusterResolver:
    """Which cluster a provider-kubernetes Object or provider-helm Release acts on."""

    def __init__(self, objects: Iterable[JSON]) -> None:
        self._configs: dict[tuple[str, str, str, str], JSON] = {}
        for obj in objects:
            if obj.get("kind") in PROVIDER_CONFIG_KINDS:
                group = group_of(str(obj.get("apiVersion", "")))
                namespace = (
                    "" if obj["kind"] == "ClusterProviderConfig" else meta(obj).get("namespace", "")
                )
                self._configs[(group, str(obj["kind"]), namespace, meta(obj).get("name", ""))] = obj

    def cluster_of(self, obj: JSON) -> str | None:
        """The cluster's name, or None when it cannot be told (a config missing or unknown)."""
        group = group_of(str(obj.get("apiVersion", "")))
        ref = lookup(obj, ".spec.providerConfigRef") or {}
        default_kind = "ClusterProviderConfig" if ".m." in group else "ProviderConfig"
        kind = str(ref.get("kind") or default_kind)
        namespace = (
            ""
            if kind == "ClusterProviderConfig" or ".m." not in group
            else (meta(obj).get("namespace", ""))
        )
        config = self._configs.get((group, kind, namespace, str(ref.get("name") or "default")))
        if config is None:
            return None
        credentials = lookup(config, ".spec.credentials") or {}
        if credentials.get("source") == "InjectedIdentity":
            return CONTROL_PLANE
        secret = credentials.get("secretRef") or {}
        if credentials.get("source") == "Secret" and secret.get("name"):
            return f"{secret.get('namespace', '')}/{secret['name']}[{secret.get('key', '')}]"
        return None


def _installed_chart_kinds(crd: JSON) -> set[ServedKind]:
    """A CRD only named (an Observe-only Object's manifest) and found on the cluster: a
    component the platform team installed (ServingStack ``spec.installed``). It stands for the
    chart Modelplane would have installed: every kind a chart shipping that group ships."""
    group = str(meta(crd).get("name", "")).partition(".")[2]
    return {
        (chart_group, ANY_VERSION, kind)
        for shipped in CHART_CRDS.values()
        if any(g == group for g, _ in shipped)
        for chart_group, kind in shipped
    }


def discover(
    objects: Iterable[JSON], *, resolver: ClusterResolver | None = None
) -> dict[str, frozenset[ServedKind]]:
    """What every cluster serves beyond the built-in and operator-installed kinds (``resolver``:
    one the caller already built over the same objects)."""
    everything = list(objects)
    resolver = resolver or ClusterResolver(everything)
    served: dict[str, set[ServedKind]] = {CONTROL_PLANE: set()}
    for obj in everything:
        if _is_crd(obj):
            if _established(obj):
                served[CONTROL_PLANE] |= _crd_kinds(obj)
        elif is_provider_object(obj, "Object"):
            manifest = lookup(obj, ".spec.forProvider.manifest")
            remote = lookup(obj, ".status.atProvider.manifest")
            if isinstance(manifest, dict) and _is_crd(manifest) and _established(remote):
                cluster = resolver.cluster_of(obj)
                if cluster is not None:
                    kinds = _crd_kinds(manifest) or _installed_chart_kinds(manifest)
                    served.setdefault(cluster, set()).update(kinds)
        elif is_provider_object(obj, "Release") and condition_status(obj, "Ready") == "True":
            chart = str(lookup(obj, ".spec.forProvider.chart.name") or "")
            cluster = resolver.cluster_of(obj)
            if cluster is not None and chart in CHART_CRDS:
                served.setdefault(cluster, set()).update(
                    (group, ANY_VERSION, kind) for group, kind in CHART_CRDS[chart]
                )
    return {cluster: frozenset(kinds) for cluster, kinds in served.items()}


@cache
def builtin_kind(api_version: str, kind: str) -> bool:
    """Whether Kubernetes itself serves this kind (it has a schema in the Kubernetes release
    the validator pins), e.g. ``v1 Namespace`` yes, ``v1 Widget`` no."""
    from modelplane import validation  # noqa: PLC0415 - schemas load only when needed

    return validation.core_validator(api_version, kind) is not None


def serves(discovery: Discovery, cluster: str, api_version: str, kind: str) -> bool:
    """Whether ``cluster`` accepts objects of this kind (XRDs are the caller's business)."""
    group = group_of(api_version)
    if group in BUILTIN_GROUPS:
        return builtin_kind(api_version, kind)
    if cluster == CONTROL_PLANE and (
        group in OPERATOR_GROUPS or group.endswith(OPERATOR_GROUP_SUFFIX)
    ):
        return True
    version = api_version.rsplit("/", 1)[-1]
    kinds = discovery.get(cluster, frozenset())
    return (group, version, kind) in kinds or (group, ANY_VERSION, kind) in kinds
