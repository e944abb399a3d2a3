"""compose-model-service: one HTTPRoute on Gateway modelplane over the selected endpoints."""

from __future__ import annotations

from datetime import timedelta

import pydantic
from modelplane_common import route_timeouts, tolerant
from modelplane_common.function import Outcome, Selector, validation_summary
from modelplane_common.managed import hold_observed
from modelplane_common.plain import JSON
from modelplane_schemas.generated.gateway_networking_k8s_io.v1.httproute import HTTPRoute
from modelplane_schemas.generated.modelplane_ai.v1alpha1.modelservice import ModelService

from compose_model_service import service_routing as routing

ROUTE_KEY = "httproute"
GATEWAY_REQUIREMENT = "inference-gateway"
ENDPOINTS_READY = "EndpointsResolved"
ROUTING_READY = "RoutingReady"
# Gateway API: a rule whose backendRefs are absent or all invalid answers 500.
NO_BACKEND_STATUS = 500


def endpoints_requirement(index: int) -> str:
    return f"endpoints-{index}"


def requirements(entries: list[JSON], namespace: str) -> dict[str, Selector]:
    wanted = {
        GATEWAY_REQUIREMENT: Selector(
            "modelplane.ai/v1alpha1", "InferenceGateway", match_name=routing.INFERENCE_GATEWAY_NAME
        )
    }
    for index, entry in enumerate(entries):
        # The namespace is essential: without it Crossplane matches labels in every namespace.
        wanted[endpoints_requirement(index)] = Selector(
            "modelplane.ai/v1alpha1",
            "ModelEndpoint",
            match_labels=dict(entry["selector"]["matchLabels"]),
            namespace=namespace,
        )
    return wanted


ENDPOINTS_TTL = timedelta(seconds=15)


def compose_service(
    composite: JSON,
    observed: dict[str, JSON],
    required: dict[str, list[JSON] | None],
) -> Outcome:
    """The outcome for one ModelService given its observed route and resolved requirements."""
    metadata = composite.get("metadata") or {}
    namespace, name = metadata.get("namespace") or "default", metadata.get("name", "")
    # Its endpoints come through requirements, which Crossplane does not watch: look again
    # often, so a replica that becomes Ready (or stops) is routed within seconds, not a minute.
    outcome = Outcome(ttl=ENDPOINTS_TTL)
    try:
        # Only the spec: status carries whatever Crossplane and earlier reconciles wrote.
        spec = ModelService.model_validate({"spec": composite.get("spec")}).spec
    except pydantic.ValidationError as err:
        return _hold(outcome, observed, f"invalid ModelService: {validation_summary(err)}")
    given = (spec.timeouts.request, spec.timeouts.backendRequest) if spec.timeouts else (None, None)
    wrong = route_timeouts.problems(*given, "spec.timeouts")
    if wrong:
        # The XRD's CEL refuses these; the HTTPRoute CRD would refuse the route they make.
        return _hold(outcome, observed, f"invalid ModelService: {'; '.join(wrong)}")
    entries = [entry.model_dump(mode="json", exclude_none=True) for entry in spec.endpoints]
    outcome.requirements = requirements(entries, namespace)
    if any(required.get(key) is None for key in outcome.requirements):
        # Crossplane resolves the requirements and calls again; keep everything meanwhile.
        outcome.resources.update(hold_observed(observed))
        return outcome

    gateways = required[GATEWAY_REQUIREMENT] or []
    gateway_address = tolerant.text(gateways, 0, "status", "address") or ""
    status: JSON = {}
    if gateway_address:
        status["address"] = routing.public_address(gateway_address, namespace, name)
    outcome.composite_status = status

    groups = routing.gather(
        entries,
        [required[endpoints_requirement(i)] or [] for i in range(len(entries))],
        namespace,
    )
    groups = routing.with_routed_backends(groups, observed.get(ROUTE_KEY))
    matched = sum(len(g.endpoints) for g in groups)
    if matched == 0:
        message = f"no ModelEndpoint in namespace {namespace} matches any spec.endpoints[].selector"
        outcome.condition(ENDPOINTS_READY, False, "NoEndpoints", message)
        outcome.condition(
            ROUTING_READY,
            False,
            "NoEndpoints",
            f"{message}; the gateway answers {NO_BACKEND_STATUS} until one does",
        )
        outcome.event("Warning", message, reason="NoEndpoints")
        outcome.composite_ready = False
        # The route stays, with no backend (a deployment scaled to zero, or not placed yet):
        # the gateway answers 500 on the service's path instead of 404 for a path nobody
        # owns, and its request metrics for the route go on, the signal that scales from zero.
        empty = routing.http_route(namespace, name, [], route_timeouts.rule_timeouts(*given))
        outcome.compose(ROUTE_KEY, empty, ready=False)
        return outcome

    refs = routing.backend_refs(groups)
    route = routing.http_route(namespace, name, refs, route_timeouts.rule_timeouts(*given))
    HTTPRoute.model_validate(route)
    waiting = matched - sum(len(g.routable) for g in groups)
    resolved = f"Matched {matched} endpoint(s)"
    if waiting:
        resolved += f"; {waiting} waiting for Backend"
    unknown = sorted(e.name for g in groups for e in g.endpoints if e.backend_unknown)
    if unknown:
        resolved += (
            f"; status.routing of ModelEndpoint {', '.join(unknown)} missing or malformed, "
            "kept on the backend already routed"
        )
    outcome.condition(ENDPOINTS_READY, True, "Resolved", resolved)

    accepted, why = routing.parent_status(observed.get(ROUTE_KEY))
    route_ready = False
    if not gateway_address:
        outcome.condition(
            ROUTING_READY,
            False,
            "WaitingForGateway",
            f"InferenceGateway {routing.INFERENCE_GATEWAY_NAME} is missing or has no address",
        )
    elif accepted and refs:
        route_ready = True
        outcome.condition(
            ROUTING_READY, True, "RouteConfigured", f"routing to {len(refs)} backend(s)"
        )
    else:
        outcome.condition(
            ROUTING_READY, False, "Configuring", why if refs else "no endpoint is routable yet"
        )
    outcome.compose(ROUTE_KEY, route, ready=route_ready)
    return outcome


def _hold(outcome: Outcome, observed: dict[str, JSON], message: str) -> Outcome:
    outcome.resources.update(hold_observed(observed))
    outcome.condition(ROUTING_READY, False, "InvalidSpec", message)
    outcome.event("Warning", message, reason="InvalidSpec")
    outcome.composite_ready = False
    return outcome
