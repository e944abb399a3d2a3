"""Reading observed composed resources, and the gate-then-hold rules (platform spec C3, C4).

Shared by the cloud-cluster functions (compose-gke-cluster, compose-eks-cluster), which compose
many provider managed resources and must never drop one because a gate closed or an input
went bad.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping

import pydantic

from modelplane_common import tolerant
from modelplane_common.function import Composed, Outcome
from modelplane_common.observed import held, is_ready, listed
from modelplane_common.plain import JSON

EXTERNAL_NAME = "crossplane.io/external-name"
# crossplane-runtime's words when an Observe-only resource's external resource is absent.
OBSERVE_NOT_FOUND = "external resource does not exist"


def external_name(resource: Mapping | None) -> str | None:
    """The ``crossplane.io/external-name`` annotation: the real cloud name, once it exists."""
    return tolerant.text(resource, "metadata", "annotations", EXTERNAL_NAME) or None


def at_provider(resource: Mapping | None, field: str) -> str | None:
    """``status.atProvider.<field>`` (a string) of an observed managed resource, or None while
    it is unknown: missing, or the status, atProvider or field malformed (see tolerant)."""
    return tolerant.text(resource, "status", "atProvider", field)


def validated(model: type[pydantic.BaseModel], body: JSON) -> JSON:
    """``body`` unchanged once it validates against its generated model.

    A manifest the API server would reject fails here, as an internal error that Crossplane
    turns into a Fatal result (deleting nothing), instead of a composed resource that never
    applies.
    """
    model.model_validate(body)
    return body


def held_with_external_name(resource: Mapping) -> JSON:
    """A hold copy that keeps the external-name annotation the function itself set.

    Hold copies drop ``crossplane.io/`` annotations; for a resource whose external name the
    function owns, dropping it from desired state would let server-side apply remove it, and
    the provider would then look for (and create) a resource under a different cloud name.
    """
    body = held(resource)
    name = external_name(resource)
    if name:
        body.setdefault("metadata", {}).setdefault("annotations", {})[EXTERNAL_NAME] = name
    return body


def hold_observed(
    observed: Mapping[str, JSON], own_external_names: tuple[str, ...] = ()
) -> dict[str, Composed]:
    """Every observed composed resource re-emitted unchanged, with its observed readiness (C4).

    ``own_external_names``: keys whose external name the function sets (kept when held).
    """
    out = {}
    for key, resource in observed.items():
        keep = held_with_external_name if key in own_external_names else held
        out[key] = Composed(body=keep(resource), ready=is_ready(resource))
    return out


def gate_then_hold(
    key: str, gate_open: bool, build: Callable[[], JSON], observed: Mapping[str, JSON]
) -> JSON | None:
    """The desired body for a gated resource (C3), or None while it must not exist yet.

    An open gate builds it; a closed gate keeps what was already composed, unchanged.
    """
    if gate_open:
        return build()
    if key in observed:
        return held(observed[key])
    return None


CLUSTER_READY = "ClusterReady"
_LISTED = 8  # resources named in the ClusterReady message


def cluster_outcome(
    desired: Mapping[str, JSON],
    observed: Mapping[str, JSON],
    status: JSON,
    always_ready: tuple[str, ...] = (),
    cluster_key: str = "cluster",
) -> Outcome:
    """The outcome of a cloud-cluster XR: each resource ready when its ``Ready`` is True (or
    ``always_ready``), and a ``ClusterReady`` condition that names what is still pending."""
    outcome = Outcome(composite_status=status)
    for key, body in desired.items():
        ready = key in always_ready or is_ready(observed.get(key))
        outcome.resources[key] = Composed(body=body, ready=ready)
    waiting = sorted(key for key, item in outcome.resources.items() if not item.ready)
    pending = listed(waiting, _LISTED)
    if is_ready(observed.get(cluster_key)):
        message = f"waiting for {pending}" if pending else "cluster and node pools are ready"
        outcome.condition(CLUSTER_READY, True, "ClusterRunning", message)
    else:
        outcome.condition(CLUSTER_READY, False, "Provisioning", f"waiting for {pending}")
    return outcome


def hold_outcome(
    composite: JSON,
    observed: Mapping[str, JSON],
    message: str,
    own_external_names: tuple[str, ...] = (),
) -> Outcome:
    """Invalid input (C4): re-emit every observed resource and the XR's status, compose
    nothing new, and say why in ``ClusterReady`` and a warning event."""
    kept = {k: v for k, v in tolerant.status(composite).items() if k != "conditions"}
    outcome = Outcome(resources=hold_observed(observed, own_external_names), composite_status=kept)
    outcome.composite_ready = False
    outcome.condition(CLUSTER_READY, False, "InvalidSpec", message)
    outcome.event("Warning", message, reason="InvalidSpec")
    return outcome


def without_status(composite: Mapping) -> JSON:
    """The XR as the function reads its input: status is output (and Crossplane may add fields
    there the generated model does not know), so it never makes the input invalid."""
    return {key: value for key, value in composite.items() if key != "status"}
