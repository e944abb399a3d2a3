"""What compose-serving-stack decides for one ServingStack (platform spec §7.2).

The two ProviderConfigs come first; every remote Release and Object waits until both are
observed (C3) and, once composed, is never dropped because that gate closed again.
"""

from __future__ import annotations

from collections.abc import Mapping

import pydantic
from modelplane_common import tolerant
from modelplane_common.function import Outcome, validation_summary
from modelplane_common.managed import held_with_external_name, without_status
from modelplane_common.observed import held, is_ready
from modelplane_common.plain import JSON
from modelplane_schemas.generated.infrastructure_modelplane_ai.v1alpha1 import servingstack as ss
from modelplane_schemas.generated.kubernetes_m_crossplane_io.v1alpha1 import object as kobj

from compose_serving_stack import gpu_driver, monitoring
from compose_serving_stack import resources as rs

STACK_READY = "StackReady"


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
    identity = next((s for s in secrets if s.type == "GCPServiceAccountKey"), None)
    if kubeconfig is None:
        return _hold(outcome, observed, "spec.secrets has no secret of type Kubeconfig")

    kubernetes_config, helm_config = rs.provider_configs(name, namespace, kubeconfig, identity)
    outcome.compose(rs.KEY_PC_KUBERNETES, kubernetes_config, ready=True)
    outcome.compose(rs.KEY_PC_HELM, helm_config, ready=True)
    if rs.KEY_PC_KUBERNETES in observed and rs.KEY_PC_HELM in observed:
        _compose_remote(outcome, stack.spec, name, namespace, observed)
    # Gate closed again (C3): whatever is already on the cluster stays.
    for key, body in observed.items():
        if key not in outcome.resources:
            outcome.compose(key, _held(body), ready=is_ready(body) or key.startswith("usage-"))

    address = _gateway_address(observed.get(rs.KEY_GATEWAY))
    outcome.composite_status = {"gateway": {"address": address}} if address else {}
    return outcome


def _compose_remote(
    outcome: Outcome, spec: ss.Spec, name: str, namespace: str, observed: Mapping[str, JSON]
) -> None:
    for key, chart, target, values in rs.release_specs(spec):
        body = rs.workload_release(name, namespace, key, chart, target=target, values=values)
        outcome.compose(key, body, ready=is_ready(observed.get(key)))

    def obj(key: str, manifest: JSON, readiness: kobj.Readiness | None = None) -> None:
        body = rs.workload_object(name, namespace, key, manifest, readiness)
        outcome.compose(key, body, ready=is_ready(observed.get(key)))

    for crd in rs.inference_extension_crds():
        obj(rs.gaie_key(crd), crd)
    obj(rs.KEY_QUOTA, rs.critical_pods_quota())
    if spec.nvidiaDriverInstaller == "GKE":
        obj(gpu_driver.KEY_DRIVER_INSTALLER, gpu_driver.cos_driver_installer())
    obj(rs.KEY_GATEWAY_NAMESPACE, rs.gateway_namespace())
    gateway = spec.gateway or ss.Gateway()
    class_name = gateway.className or "envoy"
    listeners = gateway.listeners or [ss.Listener(name="http", protocol="HTTP", port=80)]
    obj(rs.KEY_GATEWAY_CLASS, rs.gateway_class(class_name))
    obj(rs.KEY_GATEWAY, rs.gateway(class_name, listeners), rs.gateway_readiness())
    # The PodMonitor's CRD and namespace come with kube-prometheus-stack: wait for its Release.
    monitor = monitoring.KEY_ENGINE_MONITOR
    if is_ready(observed.get(monitoring.KEY_PROMETHEUS)) or monitor in observed:
        obj(monitor, monitoring.engine_pod_monitor())

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
    outcome.compose(
        rs.KEY_USAGE_ENVOY_BY_CLASS,
        rs.ordering_usage(
            name, namespace, rs.KEY_USAGE_ENVOY_BY_CLASS,
            of=(helm_api, "Release", rs.KEY_ENVOY_GATEWAY),
            by=(k8s, "Object", rs.KEY_GATEWAY_CLASS),
        ),
        ready=True,
    )  # fmt: skip


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
