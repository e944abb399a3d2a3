"""What compose-serving-stack decides for one ServingStack (platform spec §7.2).

The two ProviderConfigs come first; every remote Release and Object waits until both are
observed (C3) and, once composed, is never dropped because that gate closed again.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping

import pydantic
from modelplane_common import tolerant
from modelplane_common.function import Outcome, validation_summary
from modelplane_common.managed import held_with_external_name, without_status
from modelplane_common.observed import held, is_ready
from modelplane_common.plain import JSON
from modelplane_common.provider_configs import IDENTITY_TYPES
from modelplane_schemas.generated.infrastructure_modelplane_ai.v1alpha1 import servingstack as ss
from modelplane_schemas.generated.kubernetes_m_crossplane_io.v1alpha1 import object as kobj

from compose_serving_stack import amd_driver, components, gpu_driver, monitoring
from compose_serving_stack import resources as rs

STACK_READY = "StackReady"
COMPONENT_MISSING = "ComponentMissing"


def compose(xr: JSON, observed: Mapping[str, JSON]) -> Outcome:
    outcome = Outcome()
    metadata = xr.get("metadata") or {}
    name, namespace = metadata.get("name", ""), metadata.get("namespace") or "modelplane-system"
    try:
        stack = ss.ServingStack.model_validate(without_status(xr))
    except pydantic.ValidationError as err:
        return _hold(outcome, observed, f"invalid ServingStack: {validation_summary(err)}")
    secrets = stack.spec.secrets
    kubeconfig = next((s for s in secrets if s.type == "Kubeconfig"), None)
    identity = next((s for s in secrets if s.type in IDENTITY_TYPES), None)
    if kubeconfig is None:
        return _hold(outcome, observed, "spec.secrets has no secret of type Kubeconfig")

    kubernetes_config, helm_config = rs.provider_configs(name, namespace, kubeconfig, identity)
    outcome.compose(rs.KEY_PC_KUBERNETES, kubernetes_config, ready=True)
    outcome.compose(rs.KEY_PC_HELM, helm_config, ready=True)
    declared = _declared(stack.spec)
    gate_open = rs.KEY_PC_KUBERNETES in observed and rs.KEY_PC_HELM in observed
    if gate_open:
        _compose_remote(outcome, stack.spec, name, namespace, observed, declared=declared)
    # Gate closed again (C3): whatever is already on the cluster stays.
    for key, body in observed.items():
        if gate_open and key.startswith(components.KEY_PREFIX):
            continue  # a component no longer declared: its Observe-only Object touches nothing
        if key not in outcome.resources:
            outcome.compose(key, _held(body), ready=is_ready(body) or key.startswith("usage-"))

    address = _gateway_address(observed.get(rs.KEY_GATEWAY))
    outcome.composite_status = {"gateway": {"address": address}} if address else {}
    _missing_condition(outcome, xr, declared, observed)
    return outcome


def _declared(spec: ss.Spec) -> tuple[components.Component, ...]:
    declared = spec.installed
    if declared is None:
        return ()
    return components.installed(declared.all, declared.components, amd_driver.drivers(spec))


def _missing_condition(
    outcome: Outcome,
    xr: JSON,
    declared: tuple[components.Component, ...],
    observed: Mapping[str, JSON],
) -> None:
    """StackReady names every component declared installed that the cluster lacks."""
    absent = components.missing(declared, observed)
    if not absent:
        outcome.condition(STACK_READY, True, "NothingMissing")
        return
    message = components.missing_message(absent)
    outcome.condition(STACK_READY, False, COMPONENT_MISSING, message)
    previous = next(
        (c for c in tolerant.maps(xr, "status", "conditions") if c.get("type") == STACK_READY),
        {},
    )
    if previous.get("message") != message:
        outcome.event("Warning", message, reason=COMPONENT_MISSING)


def _compose_remote(
    outcome: Outcome,
    spec: ss.Spec,
    name: str,
    namespace: str,
    observed: Mapping[str, JSON],
    *,
    declared: tuple[components.Component, ...],
) -> None:
    theirs = {c.name for c in declared}
    not_ours = {key for c in declared for key in c.releases}
    for key, chart, target, values in rs.release_specs(spec):
        body = rs.workload_release(name, namespace, key, chart, target=target, values=values)
        if key in not_ours:
            _hand_off(outcome, key, body, observed)
        else:
            outcome.compose(key, body, ready=is_ready(observed.get(key)))

    def obj(key: str, manifest: JSON, readiness: kobj.Readiness | None = None) -> None:
        body = rs.workload_object(name, namespace, key, manifest, readiness)
        outcome.compose(key, body, ready=is_ready(observed.get(key)))

    def not_ours_obj(key: str, manifest: JSON) -> None:
        _hand_off(outcome, key, rs.workload_object(name, namespace, key, manifest), observed)

    for component in declared:
        for proof in component.proofs:
            seen = components.verdict(observed.get(proof.key))
            body = rs.observe_object(name, namespace, proof.key, proof.manifest())
            outcome.compose(proof.key, body, ready=seen == "present")

    for crd in rs.inference_extension_crds():
        (not_ours_obj if "inferenceExtension" in theirs else obj)(rs.gaie_key(crd), crd)
    # The quota serves the DRA driver's own namespace, which its Release creates.
    if amd_driver.NVIDIA_DRIVER in amd_driver.drivers(spec):
        quota = rs.critical_pods_quota()
        (not_ours_obj if "nvidiaDraDriver" in theirs else obj)(rs.KEY_QUOTA, quota)
    if spec.nvidiaDriverInstaller == "GKE":
        obj(gpu_driver.KEY_DRIVER_INSTALLER, gpu_driver.cos_driver_installer())
    obj(rs.KEY_GATEWAY_NAMESPACE, rs.gateway_namespace())
    gateway = spec.gateway or ss.Gateway()
    class_name = gateway.className or "envoy"
    listeners = gateway.listeners or [ss.Listener(name="http", protocol="HTTP", port=80)]
    obj(rs.KEY_GATEWAY_CLASS, rs.gateway_class(class_name))
    obj(rs.KEY_GATEWAY, rs.gateway(class_name, listeners), rs.gateway_readiness())
    _compose_pod_monitor(obj, observed, external="prometheus" in theirs)

    # Teardown order: Gateway -> GatewayClass -> Envoy Gateway (it clears the class finalizer).
    k8s, helm_api = rs.KUBERNETES_API, rs.HELM_API
    outcome.compose(
        rs.KEY_USAGE_CLASS_BY_GATEWAY,
        rs.ordering_usage(
            name, namespace, rs.KEY_USAGE_CLASS_BY_GATEWAY,
            of=(k8s, "Object", rs.KEY_GATEWAY_CLASS), by=(k8s, "Object", rs.KEY_GATEWAY),
        ),
        ready=True,
    )  # fmt: skip
    if rs.KEY_ENVOY_GATEWAY not in outcome.resources:
        return  # nobody here to order: Envoy Gateway is the platform team's
    outcome.compose(
        rs.KEY_USAGE_ENVOY_BY_CLASS,
        rs.ordering_usage(
            name, namespace, rs.KEY_USAGE_ENVOY_BY_CLASS,
            of=(helm_api, "Release", rs.KEY_ENVOY_GATEWAY),
            by=(k8s, "Object", rs.KEY_GATEWAY_CLASS),
        ),
        ready=True,
    )  # fmt: skip


def _hand_off(outcome: Outcome, key: str, body: JSON, observed: Mapping[str, JSON]) -> None:
    """A component now declared installed: never compose what installs it, and keep what this
    stack installed earlier, Observe only (dropping it would uninstall the component)."""
    if key in observed:
        outcome.compose(key, components.hands_off(body), ready=True)


def _compose_pod_monitor(
    obj: Callable[[str, JSON], None], observed: Mapping[str, JSON], *, external: bool
) -> None:
    """The engines' PodMonitor, once its CRD and namespace exist.

    With Modelplane's kube-prometheus-stack it goes in that release's namespace once the
    Release is Ready; with the platform team's Prometheus, once the PodMonitor CRD is observed,
    in modelplane-system (the stack's own namespace: the other one may not exist). A monitor
    composed before keeps its namespace.
    """
    monitor = monitoring.KEY_ENGINE_MONITOR
    previous = tolerant.text(
        observed.get(monitor), "spec", "forProvider", "manifest", "metadata", "namespace"
    )
    if previous:
        obj(monitor, monitoring.engine_pod_monitor(previous))
    elif external:
        proof = components.BY_NAME["prometheus"].proofs[0]
        if components.verdict(observed.get(proof.key)) == "present":
            obj(monitor, monitoring.engine_pod_monitor(rs.GATEWAY_NAMESPACE))
    elif is_ready(observed.get(monitoring.KEY_PROMETHEUS)):
        obj(monitor, monitoring.engine_pod_monitor())


def _held(body: JSON) -> JSON:
    """A hold copy that keeps the Helm release name this function set: without it, SSA would
    drop the annotation and provider-helm would install the chart again under a new name."""
    return held_with_external_name(body) if body.get("kind") == "Release" else held(body)


def _gateway_address(gateway_object: JSON | None) -> str | None:
    path = ("status", "atProvider", "manifest", "status", "addresses", 0, "value")
    return tolerant.text(gateway_object, *path) or None


def _hold(outcome: Outcome, observed: Mapping[str, JSON], message: str) -> Outcome:
    """C4: the stack is someone's running cluster; re-emit it all and say what is wrong."""
    for key, body in observed.items():
        outcome.compose(key, _held(body), ready=is_ready(body) or key.startswith("usage-"))
    outcome.condition(STACK_READY, False, "InvalidSpec", message)
    outcome.event("Warning", message, reason="InvalidSpec")
    outcome.composite_ready = False
    return outcome
