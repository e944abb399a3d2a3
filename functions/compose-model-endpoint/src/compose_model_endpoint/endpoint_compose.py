"""compose-model-endpoint: a selectorless Service + EndpointSlice (+ BackendTLSPolicy) per
ModelEndpoint, and ``status.routing.backendName`` once they exist (routing.md §3, D1)."""

from __future__ import annotations

from modelplane_common import tolerant
from modelplane_common.endpoint_url import InvalidURLError, parse_endpoint_url
from modelplane_common.function import Outcome
from modelplane_common.observed import held
from modelplane_common.plain import JSON

from compose_model_endpoint import endpoint_objects as objects

ROUTING_READY = "RoutingReady"


def compose_endpoint(composite: JSON, observed: dict[str, JSON]) -> Outcome:
    """The outcome for one observed ModelEndpoint and its observed composed resources."""
    metadata = composite.get("metadata") or {}
    namespace = metadata.get("namespace") or "default"
    name = metadata.get("name", "")
    raw_url = (composite.get("spec") or {}).get("url", "")
    outcome = Outcome()
    try:
        url = parse_endpoint_url(str(raw_url))
    except InvalidURLError as err:
        return _invalid(outcome, observed, str(err))

    service_name = _observed_name(observed.get(objects.SERVICE_KEY))
    outcome.compose(
        objects.SERVICE_KEY,
        objects.service(namespace, name, url),
        ready=service_name is not None,
    )
    slice_key = objects.endpoint_slice_key(url)
    waiting_for = ["Service"]
    if service_name is not None:
        # The slice and the TLS policy refer to the Service by the name Crossplane gave it.
        outcome.compose(
            slice_key,
            objects.endpoint_slice(namespace, name, service_name, url),
            ready=slice_key in observed,
        )
        waiting_for = [] if slice_key in observed else ["EndpointSlice"]
        if url.scheme == "https":
            tls_observed = objects.BACKEND_TLS_POLICY_KEY in observed
            outcome.compose(
                objects.BACKEND_TLS_POLICY_KEY,
                objects.backend_tls_policy(namespace, name, service_name, url),
                ready=tls_observed,
            )
            if not tls_observed:
                waiting_for.append("BackendTLSPolicy")
    else:
        # The gate is closed (the Service is not observed, e.g. recreated after a deletion):
        # hold what exists, since leaving it out of desired state would delete it.
        for key, body in observed.items():
            if key not in outcome.resources:
                outcome.compose(key, held(body), ready=False)

    if waiting_for:
        outcome.composite_status = {"routing": {}}
        outcome.condition(
            ROUTING_READY,
            False,
            "WaitingForBackend",
            f"waiting for the composed {' and '.join(waiting_for)} to be observed",
        )
        return outcome
    outcome.composite_status = {"routing": {"backendName": service_name}}
    outcome.condition(
        ROUTING_READY,
        True,
        "BackendConfigured",
        f"Service {service_name} routes to {url.host}:{url.port} over {url.scheme}",
    )
    return outcome


def _invalid(outcome: Outcome, observed: dict[str, JSON], message: str) -> Outcome:
    """Compose nothing new, but keep what exists: omission would delete it (nothing lost).

    No backendName is published, so ModelServices stop routing here until the URL is fixed.
    """
    for key, body in observed.items():
        outcome.compose(key, held(body), ready=True)
    outcome.composite_status = {"routing": {}}
    outcome.condition(ROUTING_READY, False, "InvalidURL", message)
    outcome.event("Warning", message, reason="InvalidURL")
    outcome.composite_ready = False
    return outcome


def _observed_name(body: JSON | None) -> str | None:
    return tolerant.name_of(body) or None
