"""Bring your own stack: components a cluster already runs (ServingStack ``spec.installed``),
through real gRPC. Nothing of theirs is installed, touched or deleted; what is missing is named."""

from __future__ import annotations

from compose_serving_stack.fn import ServingStackFunction
from modelplane.validation import defaulted, validate_object
from modelplane_common.naming import child_name
from modelplane_common.serving import run_function
from modelplane_common.testing import (
    conditions,
    desired_ready,
    desired_resources,
    make_request,
    observe,
    ready_status,
    results,
)

NS = "modelplane-system"
NAME = child_name("lab-h100", "serving-stack")
SECRETS = [{"type": "Kubeconfig", "name": "lab-h100-kubeconfig", "key": "kubeconfig"}]
RELEASES = {
    "cert-manager", "envoy-gateway", "ai-gateway-crds", "ai-gateway", "prometheus",
    "leader-worker-set", "node-feature-discovery", "dra-driver",
}  # fmt: skip
LWS_PROOF = "installed-crd-leaderworkersets.leaderworkerset.x-k8s.io"
PODMONITOR_PROOF = "installed-crd-podmonitors.monitoring.coreos.com"
PROOFS = {
    "installed-crd-certificates.cert-manager.io": "certificates.cert-manager.io",
    "installed-crd-envoyproxies.gateway.envoyproxy.io": "envoyproxies.gateway.envoyproxy.io",
    "installed-crd-aigatewayroutes.aigateway.envoyproxy.io":
        "aigatewayroutes.aigateway.envoyproxy.io",
    PODMONITOR_PROOF: "podmonitors.monitoring.coreos.com",
    LWS_PROOF: "leaderworkersets.leaderworkerset.x-k8s.io",
    "installed-crd-nodefeaturerules.nfd.k8s-sigs.io": "nodefeaturerules.nfd.k8s-sigs.io",
    "installed-deviceclass-gpu.nvidia.com": "gpu.nvidia.com",
    "installed-crd-inferencepools.inference.networking.k8s.io":
        "inferencepools.inference.networking.k8s.io",
    "installed-crd-inferenceobjectives.inference.networking.x-k8s.io":
        "inferenceobjectives.inference.networking.x-k8s.io",
}  # fmt: skip
# crossplane-runtime's condition on an Observe-only resource whose external resource is absent.
NOT_FOUND = {
    "type": "Synced",
    "status": "False",
    "reason": "ReconcileError",
    "message": "observe failed: external resource does not exist",
}


def stack(**spec: object) -> dict:
    xr = defaulted(
        {
            "apiVersion": "infrastructure.modelplane.ai/v1alpha1",
            "kind": "ServingStack",
            "metadata": {"name": NAME, "namespace": NS},
            "spec": {"secrets": SECRETS, **spec},
        }
    )
    assert validate_object(xr) == []
    return xr


def run(xr: dict, observed: dict | None = None):
    rsp = run_function(ServingStackFunction(), make_request(xr, observed))
    for key, body in desired_resources(rsp).items():
        # Every composed object is valid against its generated CRD schema.
        assert validate_object(body, source=key) == [], (key, validate_object(body))
    return rsp


def with_provider_configs(xr: dict) -> dict:
    return {k: observe(v) for k, v in desired_resources(run(xr)).items()}


def found(body: dict) -> dict:
    """An Observe-only Object that found its resource (provider-kubernetes' status)."""
    manifest = body["spec"]["forProvider"]["manifest"]
    return observe(body, ready_status(atProvider={"manifest": manifest}))


def not_found(body: dict, last_ready: bool = False) -> dict:
    """An Observe-only Object whose resource is absent; Ready stays as last seen."""
    ready = {"type": "Ready", "status": "True", "reason": "Available"}
    return observe(body, {"conditions": [NOT_FOUND, *([ready] if last_ready else [])]})


def test_components_declared_installed_are_observed_and_never_installed():
    xr = stack(installed={"components": ["leaderWorkerSet", "prometheus"]})
    rsp = run(xr, with_provider_configs(xr))
    desired = desired_resources(rsp)
    # Modelplane installs the rest, and neither LWS nor kube-prometheus-stack.
    assert RELEASES - {"leader-worker-set", "prometheus"} <= set(desired)
    assert not {"leader-worker-set", "prometheus"} & set(desired)
    for key, crd in ((LWS_PROOF, PROOFS[LWS_PROOF]), (PODMONITOR_PROOF, PROOFS[PODMONITOR_PROOF])):
        body = desired[key]
        assert (body["apiVersion"], body["kind"]) == (
            "kubernetes.m.crossplane.io/v1alpha1",
            "Object",
        )
        # Observe only: provider-kubernetes reads the CRD, never creates, updates or deletes it.
        assert body["spec"]["managementPolicies"] == ["Observe"]
        assert body["spec"]["forProvider"]["manifest"] == {
            "apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
            "metadata": {"name": crd},
        }  # fmt: skip
        assert desired_ready(rsp)[key] is False  # not seen yet
    # Nothing declared is known to be missing yet.
    assert conditions(rsp)["StackReady"][:2] == ("True", "NothingMissing")


def test_everything_installed_composes_only_modelplane_own_objects():
    xr = stack(installed={"all": True})
    rsp = run(xr, with_provider_configs(xr))
    desired = desired_resources(rsp)
    assert not RELEASES & set(desired)
    assert {k for k in desired if k.startswith("installed-")} == set(PROOFS)
    for key, name in PROOFS.items():
        assert desired[key]["spec"]["forProvider"]["manifest"]["metadata"] == {"name": name}
        assert desired[key]["spec"]["managementPolicies"] == ["Observe"]
    # Theirs: the Inference Extension CRDs and the DRA driver's quota are not composed.
    assert not [k for k in desired if k.startswith("gaie-crd-")]
    assert "dra-driver-critical-pods-quota" not in desired
    # Ours: the gateway namespace, class and Gateway; the class-by-Gateway teardown order, but
    # no Usage on an Envoy Gateway release that does not exist.
    assert {"gateway-namespace", "gateway-class", "gateway"} <= set(desired)
    assert "usage-gateway-class-by-gateway" in desired
    assert "usage-envoy-gw-by-gateway-class" not in desired
    assert "nvidia-driver-installer" not in desired


def test_a_missing_component_is_named_and_keeps_the_stack_not_ready():
    xr = stack(installed={"all": True})
    observed = with_provider_configs(xr)
    desired = desired_resources(run(xr, observed))
    for key in PROOFS:
        observed[key] = found(desired[key])
    observed[LWS_PROOF] = not_found(desired[LWS_PROOF])
    rsp = run(xr, observed)
    status, reason, message = conditions(rsp)["StackReady"]
    assert (status, reason) == ("False", "ComponentMissing")
    assert message.startswith(
        "the workload cluster lacks leaderWorkerSet (CustomResourceDefinition "
        "leaderworkersets.leaderworkerset.x-k8s.io not found)"
    )
    assert "spec.installed" in message
    assert ("SEVERITY_WARNING", message) in results(rsp)
    ready = desired_ready(rsp)
    assert ready[LWS_PROOF] is False
    assert all(ready[k] for k in PROOFS if k != LWS_PROOF)
    # Nothing is dropped because something is missing.
    assert set(desired_resources(rsp)) >= set(observed)

    # Installed by the platform team: the stack has nothing missing.
    observed[LWS_PROOF] = found(desired[LWS_PROOF])
    rsp = run(xr, observed)
    assert conditions(rsp)["StackReady"][:2] == ("True", "NothingMissing")
    assert all(desired_ready(rsp)[k] for k in PROOFS)


def test_a_component_that_disappears_is_missing_even_with_a_stale_ready():
    """crossplane-runtime leaves the last Ready=True when the resource vanishes."""
    xr = stack(installed={"components": ["leaderWorkerSet"]})
    observed = with_provider_configs(xr)
    body = desired_resources(run(xr, observed))[LWS_PROOF]
    observed[LWS_PROOF] = not_found(body, last_ready=True)
    rsp = run(xr, observed)
    assert conditions(rsp)["StackReady"][:2] == ("False", "ComponentMissing")
    assert desired_ready(rsp)[LWS_PROOF] is False


def test_a_release_installed_earlier_is_kept_observe_only_when_declared_installed():
    """Switching a component from "install" to "installed" never uninstalls it."""
    before = stack()
    observed = with_provider_configs(before)
    desired = desired_resources(run(before, observed))
    for key in ("leader-worker-set", "gaie-crd-inferencepools.inference.networking.k8s.io"):
        observed[key] = observe(desired[key], ready_status())
    after = stack(installed={"components": ["leaderWorkerSet", "inferenceExtension"]})
    rsp = run(after, observed)
    kept = desired_resources(rsp)
    for key in ("leader-worker-set", "gaie-crd-inferencepools.inference.networking.k8s.io"):
        assert kept[key]["spec"]["managementPolicies"] == ["Observe"]
        # Same chart / manifest: only the provider's permissions changed.
        assert kept[key]["spec"]["forProvider"] == desired[key]["spec"]["forProvider"]
    assert kept["leader-worker-set"]["metadata"]["annotations"] == {
        "crossplane.io/external-name": "leader-worker-set"
    }
    # Never composed before: not composed now.
    assert "gaie-crd-inferenceobjectives.inference.networking.x-k8s.io" not in kept
    assert LWS_PROOF in kept


def test_the_engine_pod_monitor_follows_the_platform_teams_prometheus():
    xr = stack(installed={"components": ["prometheus"]})
    observed = with_provider_configs(xr)
    desired = desired_resources(run(xr, observed))
    assert "engine-pod-monitor" not in desired  # the PodMonitor CRD is not seen yet
    observed[PODMONITOR_PROOF] = found(desired[PODMONITOR_PROOF])
    monitor = desired_resources(run(xr, observed))["engine-pod-monitor"]
    manifest = monitor["spec"]["forProvider"]["manifest"]
    assert (manifest["kind"], manifest["metadata"]["namespace"]) == ("PodMonitor", NS)
    assert "managementPolicies" not in monitor["spec"] or monitor["spec"]["managementPolicies"] == [
        "*"
    ]


def test_the_driver_root_reaches_the_dra_driver():
    xr = stack(
        nvidiaDriverRoot="/run/nvidia/driver", installed={"components": ["nodeFeatureDiscovery"]}
    )
    desired = desired_resources(run(xr, with_provider_configs(xr)))
    values = desired["dra-driver"]["spec"]["forProvider"]["values"]
    assert values["nvidiaDriverRoot"] == "/run/nvidia/driver"
    assert "node-feature-discovery" not in desired


def test_a_component_taken_off_the_list_is_installed_and_no_longer_observed():
    before = stack(installed={"components": ["leaderWorkerSet"]})
    observed = with_provider_configs(before)
    proof = desired_resources(run(before, observed))[LWS_PROOF]
    observed[LWS_PROOF] = not_found(proof)
    desired = desired_resources(run(stack(), observed))
    assert LWS_PROOF not in desired  # Observe only: deleting it deletes nothing remote
    assert desired["leader-worker-set"]["spec"].get("managementPolicies", ["*"]) == ["*"]
