"""What compose-inference-gateway decides (platform spec §2, decisions D1).

Order of installation, each step gated on the previous one (and held once composed, C3):
ProviderConfig and Gateway API CRDs -> (MetalLB release -> pool and L2 advertisement) and
Traefik release (once every CRD is Established) -> GatewayClass and Gateway.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping

import pydantic
from modelplane_common import tolerant
from modelplane_common.function import Outcome, validation_summary
from modelplane_common.managed import without_status
from modelplane_common.observed import held, held_all, is_ready, is_true
from modelplane_common.plain import JSON
from modelplane_schemas.generated.modelplane_ai.v1alpha1.inferencegateway import (
    InferenceGateway,
    Traefik,
)

from compose_inference_gateway import resources as rs

CONTROLLER_READY = "ControllerReady"
REQUIRED_NAME = "default"


def compose(xr: JSON, observed: Mapping[str, JSON]) -> Outcome:
    outcome = Outcome()
    name = (xr.get("metadata") or {}).get("name", "")
    if name != REQUIRED_NAME:
        message = (
            f"metadata.name must be {REQUIRED_NAME!r} (got {name!r}): ModelServices look the "
            "InferenceGateway up by that name; nothing is composed"
        )
        return _hold(outcome, observed, "InvalidName", message)
    try:
        gateway = InferenceGateway.model_validate(without_status(xr))
    except pydantic.ValidationError as err:
        return _hold(outcome, observed, "InvalidSpec", validation_summary(err))

    traefik = gateway.spec.traefik if gateway.spec else None
    # The chart pin is the XRD's default (one place, D9), read through the generated model.
    version = (traefik.version if traefik else None) or Traefik().version
    metallb = traefik.metallb if traefik and traefik.loadBalancer == "MetalLB" else None

    def gated(
        key: str, gate_open: bool, build: Callable[[], JSON | pydantic.BaseModel], ready: bool
    ) -> bool:
        """C3: compose when the gate is open or it already exists; True when composed."""
        if gate_open:
            outcome.compose(key, build(), ready=ready)
        elif key in observed:
            outcome.compose(key, held(observed[key]), ready=ready)
        return key in outcome.resources

    outcome.compose(rs.KEY_PROVIDER_CONFIG, rs.provider_config(), ready=True)
    pc_observed = rs.KEY_PROVIDER_CONFIG in observed

    crds_established = True
    for crd in rs.gateway_api_crds():
        key = rs.crd_key(crd)
        established = is_true(observed.get(key), "Established")
        crds_established &= established
        outcome.compose(key, crd, ready=established)

    if metallb is not None:
        outcome.compose(rs.KEY_NAMESPACE_METALLB, rs.metallb_namespace(), ready=True)
        metallb_ready = is_ready(observed.get(rs.KEY_METALLB))
        if gated(rs.KEY_METALLB, pc_observed, rs.metallb_release, metallb_ready):
            pc_usage = rs.usage_pc_key(rs.KEY_METALLB)
            outcome.compose(pc_usage, rs.provider_config_usage(rs.KEY_METALLB), ready=True)
        gated(
            rs.KEY_METALLB_POOL, metallb_ready, lambda: rs.metallb_pool(metallb.addressPool), True
        )
        gated(rs.KEY_METALLB_L2, metallb_ready, rs.metallb_l2, True)

    traefik_ready = is_ready(observed.get(rs.KEY_TRAEFIK))
    traefik_gate = pc_observed and crds_established
    if gated(rs.KEY_TRAEFIK, traefik_gate, lambda: rs.traefik_release(version), traefik_ready):
        pc_usage = rs.usage_pc_key(rs.KEY_TRAEFIK)
        outcome.compose(pc_usage, rs.provider_config_usage(rs.KEY_TRAEFIK), ready=True)
        outcome.compose(rs.KEY_USAGE_GATEWAY_CLASS, rs.gateway_class_usage(), ready=True)
        outcome.compose(rs.KEY_USAGE_GATEWAY, rs.gateway_usage(), ready=True)
    if traefik_ready and rs.KEY_GATEWAY not in observed:
        outcome.event("Normal", "Traefik is ready: composing the Gateway modelplane")
    for key, build in ((rs.KEY_GATEWAY_CLASS, rs.gateway_class), (rs.KEY_GATEWAY, rs.gateway)):
        gated(key, traefik_ready, build, is_true(observed.get(key), "Accepted"))
    monitor = traefik.podMonitor if traefik else None
    monitored = bool(monitor and monitor.enabled)
    if monitored:
        # In Traefik's namespace, which exists once its release is Ready.
        raw = (monitor.labels if monitor else None) or {}
        labels = {k: str(getattr(v, "root", v)) for k, v in raw.items()}
        gated(rs.KEY_POD_MONITOR, traefik_ready, lambda: rs.traefik_pod_monitor(labels), True)

    if traefik_ready:
        outcome.condition(CONTROLLER_READY, True, "ControllerHealthy")
    else:
        waiting = (
            "the traefik release to be Ready"
            if crds_established
            else "the Gateway API CRDs to be Established"
        )
        outcome.condition(CONTROLLER_READY, False, "Installing", f"Waiting for {waiting}")
    outcome.composite_status = _status(observed)
    _carry_over(outcome, observed, metallb is not None, monitored)
    return outcome


def _carry_over(
    outcome: Outcome, observed: Mapping[str, JSON], metallb_mode: bool, monitored: bool
) -> None:
    """Hold observed resources this pass did not compose (for example a CRD an older bundle
    shipped: dropping it would delete every Gateway). Only MetalLB's resources go, and only
    when the user turned MetalLB mode off; the PodMonitor goes when the user turned it off."""
    metallb_keys = {
        rs.KEY_NAMESPACE_METALLB, rs.KEY_METALLB, rs.KEY_METALLB_POOL, rs.KEY_METALLB_L2,
        rs.usage_pc_key(rs.KEY_METALLB),
    }  # fmt: skip
    for key, body in observed.items():
        if key in outcome.resources or (key in metallb_keys and not metallb_mode):
            continue
        if key == rs.KEY_POD_MONITOR and not monitored:
            continue
        outcome.compose(key, held(body), ready=True)


def _status(observed: Mapping[str, JSON]) -> JSON:
    value = tolerant.text(observed.get(rs.KEY_GATEWAY), "status", "addresses", 0, "value")
    return {"address": value} if value else {}


def _hold(outcome: Outcome, observed: Mapping[str, JSON], reason: str, message: str) -> Outcome:
    for key, body in held_all(observed).items():
        outcome.compose(key, body, ready=True)
    outcome.condition(CONTROLLER_READY, False, reason, message)
    outcome.event("Warning", message, reason=reason)
    outcome.composite_ready = False
    return outcome
