"""Simulated providers and controllers: what status a reconcile sees come back."""

from __future__ import annotations

import json

import pytest
from modelplane import generate, repo
from modelplane.kube import condition, condition_status
from modelplane.providers import ProviderSimulator, matching


def no_world(_: str) -> list[dict]:
    return []


CLUSTER_CONFIG = {
    "apiVersion": "kubernetes.m.crossplane.io/v1alpha1",
    "kind": "ClusterProviderConfig",
    "metadata": {"name": "gke-us"},
}


def configs(kind: str) -> list[dict]:
    """A world where the remote cluster's provider config exists."""
    return [CLUSTER_CONFIG] if kind == "ClusterProviderConfig" else []


def wrapped(manifest: dict, readiness: dict | None = None) -> dict:
    spec = {
        "forProvider": {"manifest": manifest},
        "providerConfigRef": {"kind": "ClusterProviderConfig", "name": "gke-us"},
    }
    if readiness:
        spec["readiness"] = readiness
    return {
        "apiVersion": "kubernetes.m.crossplane.io/v1alpha1",
        "kind": "Object",
        "metadata": {"name": "o", "namespace": "ns", "uid": "u1"},
        "spec": spec,
    }


AVAILABLE = {
    "policy": "DeriveFromCelQuery",
    "celQuery": "has(object.status.conditions) && object.status.conditions.exists(c, "
    'c.type == "Available" && c.status == "True")',
}
COMPLETE = {
    "policy": "DeriveFromCelQuery",
    "celQuery": 'object.status.conditions.exists(c, c.type == "Complete" && c.status == "True")',
}
JOB = {"apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": "hydrate", "namespace": "m"}}


def test_remote_deployment_reports_available_replicas_and_cel_readiness():
    deployment = {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": "engine", "namespace": "m"},
        "spec": {"replicas": 2},
    }
    observed = ProviderSimulator().observe(wrapped(deployment, AVAILABLE), configs)
    remote = observed["status"]["atProvider"]["manifest"]
    assert remote["spec"] == {"replicas": 2}
    assert remote["status"]["readyReplicas"] == 2
    assert condition(remote, "Available")["status"] == "True"
    assert condition_status(observed, "Ready") == "True"
    assert condition_status(observed, "Synced") == "True"


@pytest.mark.parametrize(
    ("manifest", "expected"),
    [
        ({"apiVersion": "v1", "kind": "PersistentVolumeClaim", "spec": {}}, {"phase": "Bound"}),
        (JOB, {"succeeded": 1}),
        (
            {"apiVersion": "leaderworkerset.x-k8s.io/v1", "kind": "LeaderWorkerSet", "spec": {}},
            {"readyReplicas": 1},
        ),
    ],
)
def test_remote_objects_get_live_status(manifest, expected):
    observed = ProviderSimulator().observe(wrapped(manifest), configs)
    status = observed["status"]["atProvider"]["manifest"]["status"]
    assert expected.items() <= status.items()


def test_injected_job_failure_makes_the_object_unready_until_cleared():
    providers = ProviderSimulator()
    failure = providers.inject(
        matching(kind="Object", manifest_kind="Job", manifest_name="hydrate"),
        manifest_status={
            "succeeded": 0,
            "failed": 1,
            "conditions": [
                {"type": "Complete", "status": "False"},
                {"type": "Failed", "status": "True", "reason": "BackoffLimitExceeded"},
            ],
        },
    )
    failed = providers.observe(wrapped(JOB, COMPLETE), configs)
    assert condition_status(failed, "Ready") == "False"
    remote = failed["status"]["atProvider"]["manifest"]
    assert condition(remote, "Failed")["reason"] == "BackoffLimitExceeded"
    providers.clear(failure)
    assert condition_status(providers.observe(wrapped(JOB, COMPLETE), configs), "Ready") == "True"


def test_injected_status_on_a_managed_resource():
    cluster = {
        "apiVersion": "container.gcp.m.upbound.io/v1beta1",
        "kind": "Cluster",
        "metadata": {"name": "gke-us-x1", "namespace": "ns", "uid": "u2"},
        "spec": {"forProvider": {"project": "p", "location": "us-central1"}},
    }
    providers = ProviderSimulator()
    assert condition_status(providers.observe(cluster, no_world), "Ready") == "True"
    providers.inject(
        matching(kind="Cluster", name="gke-us-x1"),
        status={"conditions": [{"type": "Ready", "status": "False", "reason": "Unavailable"}]},
    )
    observed = providers.observe(cluster, no_world)
    assert condition_status(observed, "Ready") == "False"
    assert condition_status(observed, "Synced") == "True"
    assert observed["status"]["atProvider"]["endpoint"]


def test_cloud_managed_resources_get_plausible_at_provider():
    providers = ProviderSimulator()
    pool = {
        "apiVersion": "container.gcp.m.upbound.io/v1beta1",
        "kind": "NodePool",
        "metadata": {"name": "pool", "namespace": "ns"},
        "spec": {"forProvider": {"initialNodeCount": 3, "clusterSelector": {"x": 1}}},
    }
    observed = providers.observe(pool, no_world)
    assert observed["status"]["atProvider"]["nodeCount"] == 3
    assert "clusterSelector" not in observed["status"]["atProvider"]
    network = {
        "apiVersion": "compute.gcp.m.upbound.io/v1beta1",
        "kind": "Network",
        "metadata": {"name": "net-abc", "namespace": "ns"},
        "spec": {"forProvider": {"project": "proj"}},
    }
    observed = providers.observe(network, no_world)
    assert observed["metadata"]["annotations"]["crossplane.io/external-name"] == "net-abc"
    assert observed["status"]["atProvider"]["selfLink"].endswith("/networks/net-abc")
    account = {
        "apiVersion": "cloudplatform.gcp.m.upbound.io/v1beta1",
        "kind": "ServiceAccount",
        "metadata": {"name": "sa", "namespace": "ns"},
        "spec": {"forProvider": {"project": "proj"}},
    }
    email = providers.observe(account, no_world)["status"]["atProvider"]["email"]
    assert email == "sa@proj.iam.gserviceaccount.com"
    eks = {
        "apiVersion": "eks.aws.m.upbound.io/v1beta1",
        "kind": "Cluster",
        "metadata": {"name": "eks", "namespace": "ns"},
        "spec": {"forProvider": {"region": "us-west-2"}},
    }
    endpoint = providers.observe(eks, no_world)["status"]["atProvider"]["endpoint"]
    assert endpoint.endswith(".gr7.us-west-2.eks.amazonaws.com")


def test_helm_release_and_usage_become_ready():
    providers = ProviderSimulator()
    release = {
        "apiVersion": "helm.m.crossplane.io/v1beta1",
        "kind": "Release",
        "metadata": {"name": "traefik", "namespace": "modelplane-system"},
        "spec": {"forProvider": {"chart": {"name": "traefik", "version": "40.2.0"}}},
    }
    observed = providers.observe(release, no_world)
    assert observed["status"]["atProvider"]["state"] == "deployed"
    assert condition_status(observed, "Ready") == "True"
    usage = {"apiVersion": "protection.crossplane.io/v1beta1", "kind": "Usage", "metadata": {}}
    assert condition_status(providers.observe(usage, no_world), "Ready") == "True"


def gateway_api_standard_crds() -> list[dict]:
    """The bundle compose-inference-gateway composes, as `modelplane generate` committed it."""
    (bundle,) = (b for b in generate.BUNDLES if "gateway-api-standard" in b.target)
    return json.loads((repo.root() / bundle.target).read_text())


def test_control_plane_gateway_takes_the_metallb_address_and_routes_are_accepted():
    pool = {
        "apiVersion": "metallb.io/v1beta1",
        "kind": "IPAddressPool",
        "spec": {"addresses": ["172.18.255.200-172.18.255.250"]},
    }
    gateway_class = {
        "apiVersion": "gateway.networking.k8s.io/v1",
        "kind": "GatewayClass",
        "metadata": {"name": "traefik"},
        "spec": {"controllerName": "traefik.io/gateway-controller"},
    }
    gateway = {
        "apiVersion": "gateway.networking.k8s.io/v1",
        "kind": "Gateway",
        "metadata": {"name": "modelplane", "namespace": "modelplane-system"},
        "spec": {"gatewayClassName": "traefik", "listeners": [{"name": "web", "port": 8000}]},
    }
    world = {"IPAddressPool": [pool], "GatewayClass": [gateway_class], "Gateway": [gateway]}
    providers = ProviderSimulator()
    # Traefik serves nothing while a Gateway API CRD it watches is missing (D1).
    waiting = providers.observe(gateway, lambda kind: world.get(kind, []))
    assert "addresses" not in waiting["status"]
    (accepted,) = waiting["status"]["conditions"]
    assert (accepted["status"], accepted["reason"]) == ("False", "Pending")
    assert "GRPCRoute" in accepted["message"] and "BackendTLSPolicy" in accepted["message"]
    world["CustomResourceDefinition"] = [
        providers.observe(crd, no_world) for crd in gateway_api_standard_crds()
    ]
    observed = providers.observe(gateway, lambda kind: world.get(kind, []))
    assert observed["status"]["addresses"][0]["value"] == "172.18.255.200"
    route = {
        "apiVersion": "gateway.networking.k8s.io/v1",
        "kind": "HTTPRoute",
        "metadata": {"name": "r", "namespace": "team"},
        "spec": {"parentRefs": [{"name": "modelplane", "namespace": "modelplane-system"}]},
    }
    (parent,) = providers.observe(route, lambda kind: world.get(kind, []))["status"]["parents"]
    assert parent["controllerName"] == "traefik.io/gateway-controller"
    assert {c["type"] for c in parent["conditions"] if c["status"] == "True"} == {
        "Accepted",
        "ResolvedRefs",
    }


def test_objects_without_a_controller_are_left_alone():
    config_map = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "c"}}
    assert ProviderSimulator().observe(config_map, no_world) is None
    xr = {"apiVersion": "modelplane.ai/v1alpha1", "kind": "InferenceClass", "metadata": {}}
    assert ProviderSimulator().observe(xr, no_world) is None


def test_objects_of_a_deleted_cluster_config_go_unsynced_but_keep_what_was_observed():
    providers = ProviderSimulator()
    deployment = {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "e"}}
    observed = providers.observe(wrapped(deployment, AVAILABLE), configs)
    cut_off = providers.observe(observed, no_world)
    assert condition_status(cut_off, "Ready") == "True"  # last observed, not re-derived
    synced = condition(cut_off, "Synced")
    assert synced["status"] == "False"
    assert (
        'ClusterProviderConfig.kubernetes.m.crossplane.io "gke-us" not found' in synced["message"]
    )
    assert cut_off["status"]["atProvider"] == observed["status"]["atProvider"]
