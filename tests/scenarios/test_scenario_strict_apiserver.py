"""A workload cluster's API server, as strict as a real one (decision D8).

An Object's manifest is accepted only when its kind is built in on the cluster the Object
targets, or its CRD is Established there: wrapped in another Object (the ServingStack's
inference-extension CRDs) or installed by a Ready Release (the ServingStack's charts). A
refusal reads as provider-kubernetes reports it: ``Synced=False`` with the API server's words.
"""

from __future__ import annotations

from modelplane.controlplane import ControlPlane
from modelplane.kube import condition, condition_status
from modelplane.providers import matching
from scenario_world import converge

STACK_NAMESPACE = "modelplane-system"


def _stack_config(plane: ControlPlane, cluster: str) -> str:
    """The kubernetes ProviderConfig the cluster's ServingStack composed."""
    (config,) = [
        c
        for c in plane.list("kubernetes.m.crossplane.io/v1alpha1", "ProviderConfig")
        if c["metadata"]["name"].startswith(f"{cluster}-serving-stack")
    ]
    return config["metadata"]["name"]


def _object(plane: ControlPlane, name: str, manifest: dict) -> dict:
    plane.apply(
        {
            "apiVersion": "kubernetes.m.crossplane.io/v1alpha1",
            "kind": "Object",
            "metadata": {"name": name, "namespace": STACK_NAMESPACE},
            "spec": {
                "forProvider": {"manifest": manifest},
                "providerConfigRef": {
                    "kind": "ProviderConfig",
                    "name": _stack_config(plane, "lab-east"),
                },
            },
        }
    )
    converge(plane)
    found = plane.find("Object", name, STACK_NAMESPACE)
    assert found is not None
    return found


def _remote(api_version: str, kind: str, **spec: object) -> dict:
    body = {
        "apiVersion": api_version,
        "kind": kind,
        "metadata": {"name": "probe", "namespace": "default"},
    }
    return {**body, "spec": spec} if spec else body


def test_a_kind_no_crd_serves_is_refused_on_the_workload_cluster(fleet: ControlPlane):
    refused = _object(fleet, "widget", _remote("example.com/v1", "Widget", size=1))
    synced = condition(refused, "Synced")
    assert (synced["status"], synced["reason"]) == ("False", "ReconcileError")
    assert synced["message"] == (
        'observe failed: cannot get object: no matches for kind "Widget" in version '
        '"example.com/v1"'
    )
    assert condition_status(refused, "Ready") != "True"
    assert "atProvider" not in (refused.get("status") or {})


def test_crds_from_wrapped_crds_and_ready_charts_are_served(fleet: ControlPlane):
    # InferencePool: the ServingStack wraps its CRD in an Object; ServiceMonitor: the
    # kube-prometheus-stack Release installs it.
    pool = _object(
        fleet,
        "pool",
        _remote(
            "inference.networking.k8s.io/v1",
            "InferencePool",
            selector={"matchLabels": {"app": "x"}},
            targetPorts=[{"number": 8000}],
            endpointPickerRef={"name": "epp", "port": {"number": 9002}},
        ),
    )
    assert condition_status(pool, "Synced") == "True", condition(pool, "Synced")
    monitor = _object(
        fleet,
        "monitor",
        _remote(
            "monitoring.coreos.com/v1",
            "ServiceMonitor",
            selector={},
            endpoints=[{"port": "metrics"}],
        ),
    )
    assert condition_status(monitor, "Synced") == "True", condition(monitor, "Synced")


def test_a_chart_that_is_not_ready_serves_no_crds(fleet: ControlPlane):
    fleet.providers.inject(
        matching(kind="Release", labels={"modelplane.ai/resource": "prometheus"}),
        status={"conditions": [{"type": "Ready", "status": "False", "reason": "Unavailable"}]},
    )
    monitor = _object(
        fleet,
        "monitor",
        _remote("monitoring.coreos.com/v1", "ServiceMonitor", selector={}, endpoints=[]),
    )
    assert 'no matches for kind "ServiceMonitor"' in condition(monitor, "Synced")["message"]


def test_a_manifest_its_schema_rejects_is_refused(fleet: ControlPlane):
    deployment = _remote("apps/v1", "Deployment", replicas="three")
    refused = _object(fleet, "bad-deployment", deployment)
    synced = condition(refused, "Synced")
    assert synced["status"] == "False"
    assert synced["message"].startswith("create failed: cannot create object: ")
    assert "spec.replicas" in synced["message"]
