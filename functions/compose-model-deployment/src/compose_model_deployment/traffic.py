"""What traffic reaches a deployment's replicas: which clusters can serve, which replicas are
Ready and routed, and which some HTTPRoute may still send traffic to. Read by the ModelDeployment
function to decide when a draining or retiring replica may go (make-before-break)."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from modelplane_common import tolerant
from modelplane_common.function import Request
from modelplane_common.observed import is_ready

from compose_model_deployment.scheduler import Cluster

SERVICE_ROUTES = "service-routes"
REPLICA_PREFIX = "replica-"
ENDPOINT_PREFIX = "endpoint-"


def serves(replica: Mapping[str, Any] | None, cluster: Cluster | None) -> tuple[bool, str]:
    """Whether a replica counts as ready, and why not when its cluster is the reason: the
    same rule whether or not the scheduler could run (issue 15 item 5)."""
    if cluster is None:
        return False, ""
    why = cannot_serve(cluster)
    if why is not None:
        return False, why
    return replica is not None and is_ready(replica), ""


def cannot_serve(cluster: Cluster) -> str | None:
    """Why a cluster's kept replicas must not get traffic (spec §4.3 degraded cluster), or None."""
    if cluster.readiness is None:
        return "readiness unknown"
    if not cluster.ready:
        return "not Ready"
    if not cluster.gateway:
        return "no gateway address"
    return None


def routable(endpoint: Mapping[str, Any] | None) -> bool:
    """An endpoint ModelServices route to: Ready, with ``status.routing.backendName``."""
    if endpoint is None or not is_ready(endpoint):
        return False
    return bool(tolerant.text(endpoint, "status", "routing", "backendName"))


def serving(request: Request, clusters: Iterable[Cluster]) -> frozenset[str]:
    """Our replicas that are Ready and routed: Ready on a cluster that can serve, with their
    ModelEndpoint Ready and routable, and sent traffic by every HTTPRoute that routes to this
    deployment. Only these let a draining replica go: an endpoint that is merely routable may
    not be in a ModelService's route yet, and removing its predecessor first would leave the
    route pointing only at a backend that is gone."""
    by_name = {c.name: c for c in clusters}
    backends: dict[str, str] = {}
    for key, body in request.observed.items():
        if not key.startswith(REPLICA_PREFIX):
            continue
        endpoint = request.observed.get(ENDPOINT_PREFIX + key[len(REPLICA_PREFIX) :])
        cluster = by_name.get(str(tolerant.text(body, "spec", "clusterName")))
        if serves(body, cluster)[0] and routable(endpoint):
            backends[tolerant.name_of(body)] = str(
                tolerant.text(endpoint, "status", "routing", "backendName")
            )
    routes = request.required(SERVICE_ROUTES)
    if routes is None:  # not resolved: nothing is proven routed, so nothing draining goes
        return frozenset()
    ours = {
        str(tolerant.text(body, "status", "routing", "backendName"))
        for key, body in request.observed.items()
        if key.startswith(ENDPOINT_PREFIX)
    }
    to_us = [sent for sent in map(weighted_backends, routes) if sent & ours]
    return frozenset(
        replica for replica, backend in backends.items() if all(backend in s for s in to_us)
    )


def routed(request: Request) -> dict[str, str]:
    """Our replicas some HTTPRoute of the namespace may still send traffic to, each with what
    holds it (``HTTPRoute chat``, or ``routes not read yet``): the backend its endpoint
    publishes has weight in a route, or a route still rewrites to its path. A going replica
    among these is withdrawn from routes before it is deleted."""
    endpoints = [body for key, body in request.observed.items() if key.startswith(ENDPOINT_PREFIX)]
    routes = request.required(SERVICE_ROUTES)
    if routes is None:
        return {tolerant.name_of(body): "routes not read yet" for body in endpoints}
    # Each route read once: (name, backends it sends traffic to, paths it rewrites to).
    parsed = [(tolerant.name_of(r), weighted_backends(r), _rewrite_paths(r)) for r in routes]
    found: dict[str, str] = {}
    for body in endpoints:
        backend = tolerant.text(body, "status", "routing", "backendName")
        path = tolerant.text(body, "spec", "rewritePath")
        # Either proves it: a route still sends its published backend traffic, or a route
        # still rewrites to its path (its status lost, or its backend being recreated). Paths
        # are unique per endpoint, so this never holds another endpoint's route.
        holding = sorted(
            name for name, sent, paths in parsed if (backend and backend in sent) or path in paths
        )
        if holding:
            found[tolerant.name_of(body)] = "HTTPRoute " + ", ".join(holding)
    return found


def _rewrite_paths(route: Mapping[str, Any]) -> set[str]:
    return {
        str(path)
        for rule in tolerant.maps(route, "spec", "rules")
        for ref in tolerant.maps(rule, "backendRefs")
        for found in tolerant.maps(ref, "filters")
        if (path := tolerant.text(found, "urlRewrite", "path", "replacePrefixMatch"))
    }


def weighted_backends(route: Mapping[str, Any]) -> set[str]:
    """Names of the core Service backends a route sends traffic to (weight above zero)."""
    found = set()
    for rule in tolerant.maps(route, "spec", "rules"):
        for ref in tolerant.maps(rule, "backendRefs"):
            weight = ref.get("weight", 1)
            kind, group = ref.get("kind", "Service"), ref.get("group", "")
            if kind == "Service" and group == "" and (not isinstance(weight, int) or weight > 0):
                found.add(str(ref.get("name", "")))
    return found
