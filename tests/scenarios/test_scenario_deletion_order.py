"""Deletion ordering, round by round (routing.md §8, platform.md §2.4, §4.8, §7.2).

The simulator enforces Usages as Crossplane's webhook and usage controller do: a protected
object's delete is denied (and replayed), a Usage with a ``by`` outlives its user. Each test
deletes one kind, then runs one round at a time and records the round in which every object
disappeared (round 0 is the delete call itself, with what garbage collection removes at once).
"""

from __future__ import annotations

from modelplane.controlplane import ControlPlane
from modelplane.kube import group_of, key_of, lookup
from scenario_world import NAMESPACE, converge, find, guards_replicas, label, routed

MAX_ROUNDS = 12


def _name(obj: dict) -> str:
    """A readable label: what a Release installs, what an Object wraps, else Kind.group/name."""
    if obj["kind"] == "Release":
        return f"Release[{lookup(obj, '.spec.forProvider.chart.name')}]"
    if obj["kind"] == "Object":
        manifest = lookup(obj, ".spec.forProvider.manifest")
        return f"Object[{manifest['kind']}/{manifest['metadata']['name']}]"
    return f"{obj['kind']}.{group_of(obj['apiVersion'])}/{label(obj).split('/', 1)[1]}"


def teardown(plane: ControlPlane, kind: str, name: str, namespace: str | None = None) -> dict:
    """Delete, then run round by round until nothing changes: label -> round it went."""
    before = {key_of(o): _name(o) for o in plane.objects()}
    gone = {before[key]: 0 for key in plane.delete(plane.key(kind, name, namespace))}
    return gone | teardown_pending(plane, before)


def teardown_pending(plane: ControlPlane, before: dict | None = None) -> dict:
    """Round by round until nothing changes, recording when each object went."""
    before = before or {key_of(o): _name(o) for o in plane.objects()}
    gone: dict[str, int] = {}
    for number in range(1, MAX_ROUNDS + 1):
        present = {key_of(o) for o in plane.objects()}
        report = plane.round()
        remaining = {key_of(o) for o in plane.objects()}
        gone |= {before[key]: number for key in present - remaining if key in before}
        if not report.changed:
            return gone
    raise AssertionError(f"still tearing down after {MAX_ROUNDS} rounds")


def _cluster_resources(plane: ControlPlane, cluster: str) -> list[dict]:
    owner = find(plane, "InferenceCluster", cluster, None)
    return plane.composed_by(owner)


def test_an_inference_cluster_with_replicas_is_kept_until_they_are_gone(fleet: ControlPlane):
    cluster = find(fleet, "InferenceCluster", "gke-us", None)
    assert fleet.delete(key_of(cluster)) == []  # denied: replicas run there (platform §4.8)
    converge(fleet)
    assert (
        find(fleet, "InferenceCluster", "gke-us", None)["metadata"]["uid"]
        == (cluster["metadata"]["uid"])
    )
    (message,) = fleet.pending_deletions.values()
    assert message.startswith("This resource is in-use by 1 usage(s), including the ")
    assert message.endswith('with reason: "ModelReplicas are scheduled to this InferenceCluster".')
    assert any(event["reason"] == "DeletionBlocked" for event in fleet.events[key_of(cluster)])

    # Drain: the deployments go; the cluster's own deletion is replayed once no replica is left.
    owned = {_name(o) for o in _cluster_resources(fleet, "gke-us")}
    for deployment in ("qwen3-8b", "embed"):
        fleet.delete(fleet.key("ModelDeployment", deployment, NAMESPACE))
    order = teardown_pending(fleet)
    assert fleet.find("InferenceCluster", "gke-us") is None and not fleet.pending_deletions
    assert owned <= set(order)  # everything it composed is gone in the end

    usage_replicas = next(n for n in order if n.startswith("ClusterUsage") and "gke-us" in n)
    stack = next(n for n in order if n.startswith("ServingStack"))
    cloud = next(n for n in order if n.startswith("GKECluster"))
    assert order[usage_replicas] < order["InferenceCluster.modelplane.ai/gke-us"]
    # The stack's Helm releases uninstall while the cluster still exists (§4.8).
    assert order[stack] < order[cloud]
    # Gateway -> GatewayClass -> Envoy Gateway release (§7.2).
    assert (
        order["Object[Gateway/inference-gateway]"]
        < order["Object[GatewayClass/envoy]"]
        < order["Release[gateway-helm]"]
    )
    # Each stack ProviderConfig outlives every Release and Object using it (routing §8.1).
    for group, consumer in (("helm.m.crossplane.io", "Release["), ("kubernetes.m", "Object[")):
        config = next(n for n in order if n.startswith(f"ProviderConfig.{group}") and "stack" in n)
        last = max(round_ for name, round_ in order.items() if name.startswith(consumer))
        assert last < order[config], (config, order)


def test_a_model_deployment_goes_at_once_and_the_cluster_guard_says_so_after_it(
    fleet: ControlPlane,
):
    replicas = [
        _name(r)
        for r in fleet.list(kind="ModelReplica", namespace=NAMESPACE)
        if r["metadata"]["labels"].get("modelplane.ai/deployment") == "qwen3-8b"
    ]
    order = teardown(fleet, "ModelDeployment", "qwen3-8b", NAMESPACE)
    assert replicas and all(order[r] == 0 for r in replicas)  # no Usage holds a replica
    assert all(order[n] == 0 for n in order if n.startswith("Object[Deployment/qwen3-8b"))
    # lab-east ran only a qwen replica: its guard stays (it stands until a deletion finds the
    # cluster empty) and says, a round later, that no replica is left there.
    assert not [n for n in order if n.startswith("ClusterUsage")]
    assert not guards_replicas(fleet, "lab-east")
    assert not fleet.pending_deletions
    assert "qwen3-8b" not in " ".join(routed(fleet, "chat"))


def test_a_model_service_takes_only_its_route(fleet: ControlPlane):
    order = teardown(fleet, "ModelService", "chat", NAMESPACE)
    assert {n.split("/")[0] for n in order} == {
        "ModelService.modelplane.ai",
        "HTTPRoute.gateway.networking.k8s.io",
    }
    assert set(order.values()) == {0} and not fleet.pending_deletions


def test_the_inference_gateway_releases_go_before_the_provider_config(fleet: ControlPlane):
    order = teardown(fleet, "InferenceGateway", "default")
    config = "ProviderConfig.helm.m.crossplane.io/modelplane-system/modelplane-in-cluster"
    releases = [n for n in order if n.startswith("Release[")]
    assert sorted(releases) == ["Release[metallb]", "Release[traefik]"]
    # provider-helm needs its ProviderConfig to uninstall each release (platform §2.4).
    assert max(order[r] for r in releases) < order[config]
    # As platform §2.4 writes them, the GatewayClass and Gateway Usages name the Traefik
    # release as their user, so the release goes first and the class and Gateway after it.
    assert order["Release[traefik]"] < order["GatewayClass.gateway.networking.k8s.io/traefik"]
    assert (
        order["Release[traefik]"]
        < order["Gateway.gateway.networking.k8s.io/modelplane-system/modelplane"]
    )
    assert not fleet.pending_deletions
