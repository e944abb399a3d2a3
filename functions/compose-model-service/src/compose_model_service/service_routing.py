"""Which endpoints a ModelService routes to, and the HTTPRoute that does it (routing.md §5)."""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence

from modelplane_common import drain_annotations, tolerant
from modelplane_common.endpoint_url import EndpointURL, InvalidURLError, parse_endpoint_url
from modelplane_common.plain import JSON

from compose_model_service.weights import backend_weights

GATEWAY_NAME = "modelplane"
GATEWAY_NAMESPACE = "modelplane-system"
INFERENCE_GATEWAY_NAME = "default"


@dataclasses.dataclass(frozen=True)
class Endpoint:
    """One selected ModelEndpoint as routing sees it."""

    name: str
    backend_name: str  # "" until the endpoint's Service and EndpointSlice exist
    url: EndpointURL | None  # None when spec.url does not parse
    rewrite_path: str
    # status.routing missing or malformed (e.g. stripped by a restore): unknown, unlike the
    # published ``routing: {}`` that says "no backend yet".
    backend_unknown: bool = False

    @property
    def routable(self) -> bool:
        return bool(self.backend_name) and self.url is not None


@dataclasses.dataclass(frozen=True)
class Group:
    """One ``spec.endpoints[]`` entry: its weight and the endpoints it alone selected."""

    weight: int
    endpoints: tuple[Endpoint, ...]

    @property
    def routable(self) -> tuple[Endpoint, ...]:
        return tuple(e for e in self.endpoints if e.routable)


def gather(
    entries: Sequence[Mapping], selected: Sequence[Sequence[Mapping]], namespace: str
) -> list[Group]:
    """Groups in entry order; within one, endpoints sorted by name; first entry wins a tie.

    Only endpoints in ``namespace`` are considered, whatever the resolver returned: a service
    must never route to another namespace's endpoint (backendRefs resolve in the route's own
    namespace, and a look-alike elsewhere must not be able to steal traffic).
    """
    seen: set[str] = set()
    groups = []
    for entry, objects in zip(entries, selected, strict=True):
        labels = (entry.get("selector") or {}).get("matchLabels") or {}
        members = []
        for obj in sorted(objects, key=tolerant.name_of):
            name = tolerant.name_of(obj)
            if not name or tolerant.text(obj, "metadata", "namespace") != namespace or name in seen:
                continue
            have = tolerant.mapping(obj, "metadata", "labels") or {}
            if not labels or not _has_labels(have, labels):
                continue
            if have.get(drain_annotations.RETIRING) == "true":
                # Its replica is going: out of the route first, deleted once no route sends
                # it traffic (the ModelDeployment waits for this route to drop it).
                continue
            seen.add(name)
            members.append(_endpoint(obj))
        groups.append(Group(weight=int(entry.get("weight") or 1), endpoints=tuple(members)))
    return groups


def _has_labels(have: Mapping[str, str], want: Mapping[str, str]) -> bool:
    return all(have.get(key) == value for key, value in want.items())


def _endpoint(obj: Mapping) -> Endpoint:
    try:
        url: EndpointURL | None = parse_endpoint_url(tolerant.text(obj, "spec", "url") or "")
    except InvalidURLError:
        url = None
    routing = tolerant.at(obj, "status", "routing")
    backend = tolerant.text(routing, "backendName")
    return Endpoint(
        name=tolerant.name_of(obj),
        backend_name=backend or "",
        url=url,
        rewrite_path=tolerant.text(obj, "spec", "rewritePath") or "/",
        backend_unknown=backend is None
        and not (isinstance(routing, dict) and "backendName" not in routing),
    )


def with_routed_backends(groups: Sequence[Group], route: Mapping | None) -> list[Group]:
    """Endpoints whose backend is unknown keep the backends the observed route already sends
    their rewrite path to: unknown never withdraws traffic (issue 14). A backend a known
    endpoint claims is never taken, and the unknown endpoints of one path take that path's
    unclaimed backends one each, so every backend the route had stays in it exactly once."""
    claimed = {e.backend_name for g in groups for e in g.endpoints if not e.backend_unknown}
    candidates: dict[str, list[str]] = {}
    for rule in tolerant.maps(route, "spec", "rules"):
        for ref in tolerant.maps(rule, "backendRefs"):
            for found in tolerant.maps(ref, "filters"):
                path = tolerant.text(found, "urlRewrite", "path", "replacePrefixMatch")
                name = tolerant.text(ref, "name")
                if path and name and name not in claimed:
                    names = candidates.setdefault(path, [])
                    if name not in names:
                        names.append(name)
    unknown: dict[str, list[str]] = {}
    for group in groups:
        for e in group.endpoints:
            if e.backend_unknown:
                unknown.setdefault(e.rewrite_path, []).append(e.name)
    adopted: dict[str, str] = {}
    for path, endpoint_names in unknown.items():
        backends = sorted(candidates.get(path, []))
        adopted.update(zip(sorted(endpoint_names), backends, strict=False))
    return [
        Group(
            weight=group.weight,
            endpoints=tuple(
                dataclasses.replace(e, backend_name=adopted[e.name])
                if e.backend_unknown and e.name in adopted
                else e
                for e in group.endpoints
            ),
        )
        for group in groups
    ]


def backend_refs(groups: Sequence[Group]) -> list[JSON]:
    """One core Service backendRef per routable endpoint, with its weight and own rewrite."""
    weights = backend_weights([(g.weight, len(g.routable)) for g in groups])
    refs = []
    for group, group_weights in zip(groups, weights, strict=True):
        for endpoint, weight in zip(group.routable, group_weights, strict=True):
            assert endpoint.url is not None  # routable implies a parsed URL
            rewrite: JSON = {
                "path": {"type": "ReplacePrefixMatch", "replacePrefixMatch": endpoint.rewrite_path}
            }
            if endpoint.url.is_dns_name:
                # Providers behind shared front ends route on Host.
                rewrite["hostname"] = endpoint.url.host
            refs.append(
                {
                    "name": endpoint.backend_name,
                    "port": endpoint.url.port,
                    "weight": weight,
                    "filters": [{"type": "URLRewrite", "urlRewrite": rewrite}],
                }
            )
    return refs


def path_prefix(namespace: str, name: str) -> str:
    return f"/{namespace}/{name}/"


def http_route(namespace: str, name: str, refs: Sequence[JSON], timeouts: JSON) -> JSON:
    """The HTTPRoute on Gateway modelplane; with no refs the gateway answers 500 for now."""
    rule: JSON = {
        "matches": [{"path": {"type": "PathPrefix", "value": path_prefix(namespace, name)}}]
    }
    if refs:
        rule["backendRefs"] = list(refs)
    # Stated on every route (routing.md R2). Traefik accepts the field and, today, ignores it
    # (it has no route timeout by default); a gateway that honours it gets the same bound as
    # the replicas' routes instead of an implementation default such as Envoy's 15 s.
    rule["timeouts"] = dict(timeouts)
    return {
        "apiVersion": "gateway.networking.k8s.io/v1",
        "kind": "HTTPRoute",
        "metadata": {"namespace": namespace},
        "spec": {
            "parentRefs": [{"name": GATEWAY_NAME, "namespace": GATEWAY_NAMESPACE}],
            "rules": [rule],
        },
    }


def public_address(gateway_address: str, namespace: str, name: str) -> str:
    """``http://<gateway address>/<namespace>/<name>``; Traefik listens on 80, so no port."""
    host = gateway_address.strip()
    if ":" in host and not host.startswith("["):
        host = f"[{host}]"  # an IPv6 literal
    return f"http://{host}/{namespace}/{name}"


def parent_status(route: Mapping | None) -> tuple[bool, str]:
    """Whether the observed route's Gateway accepted it and resolved its refs, and why not.

    The status is written by the gateway controller; anything malformed reads as "not yet".
    """
    if not route:
        return False, "the HTTPRoute is not observed yet"
    status = route.get("status")
    parents = status.get("parents") if isinstance(status, Mapping) else None
    for parent in parents if isinstance(parents, list) else []:
        if not isinstance(parent, Mapping):
            continue
        ref = parent.get("parentRef")
        if not isinstance(ref, Mapping) or ref.get("name") != GATEWAY_NAME:
            continue
        if ref.get("namespace", GATEWAY_NAMESPACE) != GATEWAY_NAMESPACE:
            continue
        found = parent.get("conditions")
        conditions = {
            c.get("type"): c
            for c in (found if isinstance(found, list) else [])
            if isinstance(c, Mapping) and isinstance(c.get("type"), str)
        }
        problems = [
            f"{type_}: {(conditions.get(type_) or {}).get('message') or 'not reported'}"
            for type_ in ("Accepted", "ResolvedRefs")
            if (conditions.get(type_) or {}).get("status") != "True"
        ]
        return (not problems), "; ".join(problems)
    return False, f"Gateway {GATEWAY_NAMESPACE}/{GATEWAY_NAME} has not reported on the HTTPRoute"
