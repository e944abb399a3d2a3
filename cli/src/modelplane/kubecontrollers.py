"""What Kubernetes' own controllers make of the objects ``simulate`` stores: Deployments and
LeaderWorkerSets become Available (unless kube-scheduler could not place their device claims:
draclaims.py), Services get addresses, Gateways their controller's status, CRDs Establish.
Split from providers.py, which decides who reconciles what and calls in here.
"""

from __future__ import annotations

import copy
import dataclasses
import hashlib
import ipaddress
from collections.abc import Callable

from modelplane.kube import JSON, condition_status, group_of, lookup

# Objects of a given kind in the control plane (for lookups such as a MetalLB address pool).
World = Callable[[str], list[JSON]]
TRAEFIK_CONTROLLER = "traefik.io/gateway-controller"
# Gateway API kinds Traefik's Gateway provider watches: while any CRD is missing it serves
# nothing (decision D1), so its GatewayClass and Gateways are never Accepted.
TRAEFIK_WATCHES = (
    "GatewayClass", "Gateway", "HTTPRoute", "GRPCRoute", "ReferenceGrant", "BackendTLSPolicy",
)  # fmt: skip


@dataclasses.dataclass(frozen=True)
class Site:
    """Where a Kubernetes object lives: the control plane, or a remote cluster (by config)."""

    seed: str
    remote: bool
    world: World


def short_hash(*parts: str, length: int = 12) -> str:
    return hashlib.sha256("/".join(parts).encode()).hexdigest()[:length]


def address_in(prefix: str, *parts: str) -> str:
    """A deterministic address in ``prefix`` (e.g. "10.96") from the given parts."""
    digest = hashlib.sha256("/".join(parts).encode()).digest()
    octets = prefix.split(".")
    while len(octets) < 4:
        octets.append(str(1 + digest[len(octets)] % 250))
    return ".".join(octets)


# --- Kubernetes controllers -------------------------------------------------------------------


def simulate_kubernetes(obj: JSON, site: Site) -> JSON | None:
    """What Kubernetes controllers make of ``obj``: a copy with its live status, or None."""
    rule = _KUBERNETES.get((group_of(str(obj.get("apiVersion", ""))), str(obj.get("kind", ""))))
    if rule is None:
        return None
    live = copy.deepcopy(obj)
    rule(live, site)
    return live


def _available(reason: str) -> JSON:
    return {"type": "Available", "status": "True", "reason": reason}


def _replicas(live: JSON) -> int:
    value = (live.get("spec") or {}).get("replicas")
    return 1 if value is None else int(value)


def _deployment(live: JSON, site: Site) -> None:
    replicas = _replicas(live)
    live["status"] = {
        "observedGeneration": 1,
        "replicas": replicas,
        "readyReplicas": replicas,
        "availableReplicas": replicas,
        "updatedReplicas": replicas,
        "conditions": [
            _available("MinimumReplicasAvailable"),
            {"type": "Progressing", "status": "True", "reason": "NewReplicaSetAvailable"},
        ],
    }


def unavailable(live: JSON, message: str) -> JSON:
    """A Deployment's or LeaderWorkerSet's status while its pods stay Pending (``message``:
    the scheduler's reason)."""
    replicas = _replicas(live)
    return {
        "observedGeneration": 1,
        "replicas": replicas,
        "readyReplicas": 0,
        "availableReplicas": 0,
        "unavailableReplicas": replicas,
        "updatedReplicas": replicas,
        "conditions": [
            {"type": "Available", "status": "False", "reason": "MinimumReplicasUnavailable",
             "message": f"pods Pending: {message}"},
            {"type": "Progressing", "status": "True", "reason": "ReplicaSetUpdated"},
        ],
    }  # fmt: skip


def _leader_worker_set(live: JSON, site: Site) -> None:
    replicas = _replicas(live)
    live["status"] = {
        "replicas": replicas,
        "readyReplicas": replicas,
        "updatedReplicas": replicas,
        "conditions": [_available("AllGroupsReady")],
    }


def _job(live: JSON, site: Site) -> None:
    live["status"] = {
        "succeeded": 1,
        "active": 0,
        "conditions": [
            {"type": "SuccessCriteriaMet", "status": "True", "reason": "CompletionsReached"},
            {"type": "Complete", "status": "True", "reason": "CompletionsReached"},
        ],
    }


def _pvc(live: JSON, site: Site) -> None:
    spec = live.get("spec") or {}
    storage = lookup(spec, ".resources.requests.storage")
    live["status"] = {
        "phase": "Bound",
        "accessModes": spec.get("accessModes", ["ReadWriteOnce"]),
        **({"capacity": {"storage": storage}} if storage else {}),
    }


def _service(live: JSON, site: Site) -> None:
    spec = live.setdefault("spec", {})
    metadata = live.get("metadata") or {}
    if spec.get("clusterIP") != "None":
        spec.setdefault("clusterIP", address_in("10.96", site.seed, str(metadata.get("name"))))
    if spec.get("type") == "LoadBalancer":
        address = _load_balancer_address(site, str(metadata.get("name")))
        live["status"] = {"loadBalancer": {"ingress": [{"ip": address}]}}
    else:
        live["status"] = {"loadBalancer": {}}


def _load_balancer_address(site: Site, name: str) -> str:
    """The first address of a MetalLB pool on the control plane, else a plausible cloud IP."""
    for pool in site.world("IPAddressPool"):
        for entry in lookup(pool, ".spec.addresses") or []:
            first = _first_address(str(entry))
            if first:
                return first
    return address_in("34" if site.remote else "172.18.255", site.seed, name)


def _first_address(entry: str) -> str | None:
    try:
        if "-" in entry:
            return str(ipaddress.ip_address(entry.split("-", 1)[0].strip()))
        network = ipaddress.ip_network(entry.strip(), strict=False)
        return str(next(network.hosts(), network.network_address))
    except ValueError:
        return None


def _namespace(live: JSON, site: Site) -> None:
    deleting = (live.get("metadata") or {}).get("deletionTimestamp")
    live["status"] = {"phase": "Terminating" if deleting else "Active"}


def _crd(live: JSON, site: Site) -> None:
    live["status"] = {
        "acceptedNames": copy.deepcopy(lookup(live, ".spec.names") or {}),
        "storedVersions": [
            v["name"]
            for v in lookup(live, ".spec.versions") or []
            if isinstance(v, dict) and v.get("storage")
        ],
        "conditions": [
            {"type": "NamesAccepted", "status": "True", "reason": "NoConflicts"},
            {"type": "Established", "status": "True", "reason": "InitialNamesAccepted"},
        ],
    }


def _traefik_missing(site: Site) -> list[str]:
    """Gateway API kinds Traefik watches whose CRD is not Established on the control plane
    (none on a remote cluster, where Traefik is not the gateway)."""
    if site.remote:
        return []
    established = {
        lookup(crd, ".spec.names.kind")
        for crd in site.world("CustomResourceDefinition")
        if lookup(crd, ".spec.group") == "gateway.networking.k8s.io"
        and condition_status(crd, "Established") == "True"
    }
    return [kind for kind in TRAEFIK_WATCHES if kind not in established]


def _not_serving(missing: list[str]) -> JSON:
    return {
        "type": "Accepted",
        "status": "False",
        "reason": "Pending",
        "message": "Traefik's Gateway provider is not running: no CRD for " + ", ".join(missing),
    }


def _gateway_class(live: JSON, site: Site) -> None:
    missing = (
        _traefik_missing(site) if lookup(live, ".spec.controllerName") == TRAEFIK_CONTROLLER else []
    )
    accepted = (
        _not_serving(missing)
        if missing
        else {"type": "Accepted", "status": "True", "reason": "Accepted"}
    )
    live["status"] = {"conditions": [accepted]}


def _class_controller(site: Site, class_name: object) -> str | None:
    for gateway_class in site.world("GatewayClass"):
        if (gateway_class.get("metadata") or {}).get("name") == class_name:
            return str(lookup(gateway_class, ".spec.controllerName"))
    return None


def _gateway(live: JSON, site: Site) -> None:
    controller = _class_controller(site, lookup(live, ".spec.gatewayClassName"))
    missing = _traefik_missing(site) if controller == TRAEFIK_CONTROLLER else []
    if missing:
        live["status"] = {"conditions": [_not_serving(missing)]}
        return
    name = str((live.get("metadata") or {}).get("name"))
    address = _load_balancer_address(site, name)
    listeners = lookup(live, ".spec.listeners") or []
    live["status"] = {
        "addresses": [{"type": "IPAddress", "value": address}],
        "conditions": [
            {"type": "Accepted", "status": "True", "reason": "Accepted"},
            {"type": "Programmed", "status": "True", "reason": "Programmed"},
        ],
        "listeners": [
            {
                "name": listener.get("name"),
                "attachedRoutes": 0,
                "supportedKinds": [{"group": "gateway.networking.k8s.io", "kind": "HTTPRoute"}],
                "conditions": [
                    {"type": "Accepted", "status": "True", "reason": "Accepted"},
                    {"type": "Programmed", "status": "True", "reason": "Programmed"},
                    {"type": "ResolvedRefs", "status": "True", "reason": "ResolvedRefs"},
                ],
            }
            for listener in listeners
            if isinstance(listener, dict)
        ],
    }


def _controller_name(site: Site, parent: JSON, route_namespace: str) -> str:
    """The controller of the Gateway a route attaches to (looked up on the control plane)."""
    gateway_namespace = parent.get("namespace") or route_namespace
    for gateway in site.world("Gateway"):
        metadata = gateway.get("metadata") or {}
        if metadata.get("name") == parent.get("name") and (
            metadata.get("namespace") == gateway_namespace
        ):
            found = _class_controller(site, lookup(gateway, ".spec.gatewayClassName"))
            if found is not None:
                return found
    return "gateway.envoyproxy.io/gatewayclass-controller"


def _route(live: JSON, site: Site) -> None:
    namespace = str((live.get("metadata") or {}).get("namespace") or "default")
    live["status"] = {
        "parents": [
            {
                "parentRef": copy.deepcopy(parent),
                "controllerName": _controller_name(site, parent, namespace),
                "conditions": [
                    {"type": "Accepted", "status": "True", "reason": "Accepted"},
                    {"type": "ResolvedRefs", "status": "True", "reason": "ResolvedRefs"},
                ],
            }
            for parent in lookup(live, ".spec.parentRefs") or []
            if isinstance(parent, dict)
        ]
    }


def _inference_pool(live: JSON, site: Site) -> None:
    live["status"] = {
        "parents": [
            {
                "parentRef": {"kind": "Gateway", "name": "inference-gateway"},
                "conditions": [
                    {"type": "Accepted", "status": "True", "reason": "Accepted"},
                    {"type": "ResolvedRefs", "status": "True", "reason": "ResolvedRefs"},
                ],
            }
        ]
    }


KubernetesRule = Callable[[JSON, Site], None]

# (group, kind) -> how its controller fills in the live object. Kinds not listed have no status.
_KUBERNETES: dict[tuple[str, str], KubernetesRule] = {
    ("apps", "Deployment"): _deployment,
    ("apps", "StatefulSet"): _deployment,
    ("leaderworkerset.x-k8s.io", "LeaderWorkerSet"): _leader_worker_set,
    ("batch", "Job"): _job,
    ("", "PersistentVolumeClaim"): _pvc,
    ("", "Service"): _service,
    ("", "Namespace"): _namespace,
    ("apiextensions.k8s.io", "CustomResourceDefinition"): _crd,
    ("gateway.networking.k8s.io", "GatewayClass"): _gateway_class,
    ("gateway.networking.k8s.io", "Gateway"): _gateway,
    ("gateway.networking.k8s.io", "HTTPRoute"): _route,
    ("gateway.networking.k8s.io", "GRPCRoute"): _route,
    ("inference.networking.k8s.io", "InferencePool"): _inference_pool,
    ("inference.networking.x-k8s.io", "InferencePool"): _inference_pool,
}
