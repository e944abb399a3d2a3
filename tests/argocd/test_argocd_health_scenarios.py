"""What Argo CD shows for a small fleet while the simulated control plane brings it up, and
when things go wrong: a hydration Job fails, capacity runs short, a model never becomes
available, a URL is invalid, a function fails, an XR is paused.

Every status here is written by the real functions (over gRPC) and the simulated reconciler
and providers; the health checks run as Lua, exactly as shipped in docs/argocd/argocd-cm.yaml.
One control plane serves the whole module (bringing it up is the slow part): each scenario
undoes what it did and checks the fleet is back to Healthy.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from compose_model_endpoint.fn import ModelEndpointFunction
from modelplane.controlplane import ControlPlane, session
from modelplane.providers import matching
from modelplane_common.function import Outcome, Request

FLEET = Path(__file__).parent / "fleet"
NAMESPACE = "ml-team"
EXPLODE_LABEL = "argocd-test/explode"


class FailingEndpointFunction(ModelEndpointFunction):
    """The real compose-model-endpoint, except that it crashes on XRs labelled to: the way a
    function bug reaches a user (a Fatal result, so Crossplane reports ReconcileError)."""

    def compose(self, request: Request) -> Outcome:
        labels = (request.composite.get("metadata") or {}).get("labels") or {}
        if labels.get(EXPLODE_LABEL) == "true":
            raise RuntimeError("injected by the test")
        return super().compose(request)


def modelplane_objects(plane: ControlPlane) -> list[dict[str, Any]]:
    return [
        obj
        for obj in plane.objects()
        if str(obj.get("apiVersion", "")).split("/")[0].endswith("modelplane.ai")
    ]


def label(obj: dict[str, Any]) -> str:
    metadata = obj["metadata"]
    namespace = f"{metadata['namespace']}/" if metadata.get("namespace") else ""
    return f"{obj['kind']}/{namespace}{metadata['name']}"


def snapshot(plane: ControlPlane, health: Any) -> dict[str, Any]:
    return {label(obj): health(obj) for obj in modelplane_objects(plane)}


def converge(plane: ControlPlane) -> None:
    result = plane.run(max_rounds=40)
    assert result.converged, result.reason


def bring_up(plane: ControlPlane, health: Any) -> list[dict[str, Any]]:
    """What Argo CD shows before the first round and after each round, up to a fixed point."""
    rounds = [snapshot(plane, health)]
    for _ in range(40):
        report = plane.round()
        rounds.append(snapshot(plane, health))
        if not report.changed:
            return rounds
    pytest.fail("the fleet did not converge in 40 rounds")


@pytest.fixture(scope="module")
def fleet(health: Any) -> Iterator[tuple[ControlPlane, list[list[dict[str, Any]]]]]:
    """The fleet synced in two waves as docs/argocd.md recommends (the platform, then the ML
    team's resources), and what Argo CD showed round by round in each wave."""
    servicers = {"compose-model-endpoint": FailingEndpointFunction()}
    with session(servicers=servicers) as plane:
        waves = []
        for wave in ("platform.yaml", "ml-team.yaml"):
            plane.load(FLEET / wave)
            waves.append(bring_up(plane, health))
        yield plane, waves


def assert_all_healthy(plane: ControlPlane, health: Any) -> None:
    unhealthy = {
        name: shown for name, shown in snapshot(plane, health).items() if shown.status != "Healthy"
    }
    assert not unhealthy


def find(plane: ControlPlane, kind: str, name: str, namespace: str | None = NAMESPACE) -> Any:
    obj = plane.find(kind, name, namespace)
    assert obj is not None, f"{kind}/{name} does not exist"
    return obj


# --- bringing the fleet up ----------------------------------------------------------------


def test_before_crossplane_reconciles_a_new_resource_it_is_progressing(fleet):
    _, (platform, ml_team) = fleet
    assert sorted(platform[0]) == [
        "InferenceClass/l4-1x-byo",
        "InferenceCluster/lab-east",
        "InferenceCluster/lab-west",
        "InferenceGateway/default",
    ]
    new = {name: shown for name, shown in ml_team[0].items() if name not in platform[-1]}
    assert sorted(new) == [
        "ModelCache/ml-team/qwen3-8b",
        "ModelDeployment/ml-team/qwen3-8b",
        "ModelEndpoint/ml-team/hosted-llama",
        "ModelService/ml-team/chat",
    ]
    for shown in [*platform[0].values(), *new.values()]:
        assert shown == type(shown)("Progressing", "Waiting for Crossplane to reconcile")


def test_converged_fleet_is_healthy_with_a_summary_per_kind(fleet):
    plane, (platform, ml_team) = fleet
    assert all(shown.status == "Healthy" for shown in platform[-1].values()), platform[-1]
    final = ml_team[-1]
    assert all(shown.status == "Healthy" for shown in final.values()), final
    gateway = find(plane, "InferenceGateway", "default", None)
    address = gateway["status"]["address"]
    assert final["InferenceGateway/default"].message == f"Gateway address {address}"
    assert final["InferenceClass/l4-1x-byo"].message == "Accepted"
    east = find(plane, "InferenceCluster", "lab-east", None)
    assert final["InferenceCluster/lab-east"].message == (
        f"Serving gateway at {east['status']['gateway']['address']}"
    )
    assert final["ModelDeployment/ml-team/qwen3-8b"].message == "Serving: 2 of 2 ready"
    assert final["ModelCache/ml-team/qwen3-8b"].message == "Artifact staged on all 2 cluster(s)"
    assert final["ModelService/ml-team/chat"].message == (
        f"Serving at http://{address}/ml-team/chat (Matched 3 endpoint(s))"
    )
    hosted = final["ModelEndpoint/ml-team/hosted-llama"].message
    assert hosted.startswith("Service hosted-llama-")
    assert hosted.endswith(" routes to api.provider.example:443 over https")
    replicas = [name for name in final if name.startswith("ModelReplica/")]
    assert sorted(final[name].message for name in replicas) == [
        "Serving on InferenceCluster lab-east",
        "Serving on InferenceCluster lab-west",
    ]
    stacks = [name for name in final if name.startswith("ServingStack/")]
    assert len(stacks) == 2
    assert all(final[name].message.startswith("Serving gateway at ") for name in stacks)


def test_synced_platform_first_nothing_is_ever_degraded_and_waits_are_explained(fleet):
    _, waves = fleet
    seen: dict[str, set[tuple[str, str]]] = {}
    for wave in waves:
        for shown_round in wave:
            for name, shown in shown_round.items():
                seen.setdefault(name, set()).add((shown.status, shown.message))
    degraded = {
        name for name, states in seen.items() for status, _ in states if status == "Degraded"
    }
    assert not degraded
    messages = {name: {message for _, message in states} for name, states in seen.items()}
    assert any(
        m.startswith("Installing: Waiting for ") for m in messages["InferenceGateway/default"]
    )
    assert any(
        m.startswith(
            ("ClusterReady", "BackendReady", "Installing", "WaitingForCluster", "Creating")
        )
        for m in messages["InferenceCluster/lab-east"]
    ), messages["InferenceCluster/lab-east"]
    deployment = messages["ModelDeployment/ml-team/qwen3-8b"]
    assert "ModelStarting: 0 of 2 ready" in deployment or "Scheduling" in deployment, deployment
    cache = messages["ModelCache/ml-team/qwen3-8b"]
    assert any(m.endswith("(0/2 clusters staged)") for m in cache), cache


def test_synced_all_at_once_the_deployment_is_short_of_capacity_until_clusters_are_ready(health):
    """Without waves the scheduler sees only clusters that are not Ready yet: Degraded, saying
    so, until they are (the reason docs/argocd.md recommends a wave per team)."""
    with session(FLEET) as plane:
        for _ in range(10):
            plane.round()
            shown = health(find(plane, "ModelDeployment", "qwen3-8b"))
            if shown.status == "Degraded":
                break
        assert shown.status == "Degraded"
        assert shown.message == (
            "InsufficientCapacity: 0 of 2 replicas scheduled (checked 2 clusters); "
            "0/2 clusters available: 2 not Ready"
        )


# --- things going wrong ---------------------------------------------------------------------


@contextlib.contextmanager
def restored(plane: ControlPlane, health: Any) -> Iterator[None]:
    """Undo a scenario's injections and check the fleet heals."""
    try:
        yield
    finally:
        plane.providers.clear()
    converge(plane)
    assert_all_healthy(plane, health)


def test_failed_hydration_degrades_the_cache_until_a_retry_succeeds(fleet, health):
    plane, _ = fleet
    failure = plane.providers.inject(
        matching(kind="Object", manifest_kind="Job", labels={"crossplane.io/composite": "llama"}),
        manifest_status={
            "failed": 4,
            "conditions": [
                {
                    "type": "Failed",
                    "status": "True",
                    "reason": "BackoffLimitExceeded",
                    "message": "Job has reached the specified backoff limit",
                }
            ],
        },
    )
    cache = {
        "apiVersion": "modelplane.ai/v1alpha1",
        "kind": "ModelCache",
        "metadata": {"name": "llama", "namespace": NAMESPACE},
        "spec": {
            "source": "HuggingFace",
            "huggingFace": {"repo": "meta-llama/Llama-3.1-8B", "sizeGiB": 16},
            "clusterSelector": {"matchLabels": {"tier": "demo"}},
        },
    }
    with restored(plane, health):
        plane.apply(cache)
        converge(plane)
        shown = health(find(plane, "ModelCache", "llama"))
        assert shown.status == "Degraded"
        assert shown.message == (
            "Failed: hydration failed on 2 of 2 cluster(s); lab-east: hydration Job failed "
            "(BackoffLimitExceeded): Job has reached the specified backoff limit"
        )
        plane.providers.clear(failure)
        converge(plane)
        assert health(find(plane, "ModelCache", "llama")).message == (
            "Artifact staged on all 2 cluster(s)"
        )
    plane.delete(plane.key("ModelCache", "llama", NAMESPACE))


def test_short_capacity_degrades_the_deployment_and_scaling_back_heals_it(fleet, health):
    plane, _ = fleet
    key = plane.key("ModelDeployment", "qwen3-8b", NAMESPACE)
    with restored(plane, health):
        plane.patch(key, {"spec": {"replicas": 4}})
        converge(plane)
        shown = health(find(plane, "ModelDeployment", "qwen3-8b"))
        assert shown.status == "Degraded"
        assert shown.message.startswith(
            "InsufficientCapacity: 3 of 4 replicas scheduled; 0/2 clusters available for the rest"
        )
        # The three replicas that fit still serve, and so does the service in front of them.
        assert health(find(plane, "ModelService", "chat")).status == "Healthy"
        plane.patch(key, {"spec": {"replicas": 2}})


def test_scaling_up_within_capacity_is_progressing_not_degraded(fleet, health):
    plane, _ = fleet
    key = plane.key("ModelDeployment", "qwen3-8b", NAMESPACE)
    with restored(plane, health):
        plane.patch(key, {"spec": {"replicas": 3}})
        shown = []
        for _ in range(10):
            report = plane.round()
            shown.append(health(find(plane, "ModelDeployment", "qwen3-8b")))
            if not report.changed:
                break
        assert "Degraded" not in {s.status for s in shown}
        assert any(s.message == "ModelStarting: 2 of 3 ready" for s in shown), shown
        assert shown[-1].message == "Serving: 3 of 3 ready"
        plane.patch(key, {"spec": {"replicas": 2}})


def test_a_model_that_never_becomes_available_shows_why_on_its_replica(fleet, health):
    plane, _ = fleet
    workload = next(
        obj
        for obj in plane.list(kind="Object", namespace=NAMESPACE)
        if obj["spec"]["forProvider"]["manifest"]["kind"] == "Deployment"
    )
    deployment_name = workload["spec"]["forProvider"]["manifest"]["metadata"]["name"]
    replica_name = workload["metadata"]["ownerReferences"][0]["name"]
    stuck = {
        "readyReplicas": 0,
        "conditions": [
            {
                "type": "Available",
                "status": "False",
                "reason": "MinimumReplicasUnavailable",
                "message": "Deployment does not have minimum availability.",
            },
            {
                "type": "Progressing",
                "status": "False",
                "reason": "ProgressDeadlineExceeded",
                "message": f'ReplicaSet "{deployment_name}-7c9" has timed out progressing.',
            },
        ],
    }
    with restored(plane, health):
        plane.providers.inject(
            matching(kind="Object", manifest_kind="Deployment", manifest_name=deployment_name),
            manifest_status=stuck,
        )
        converge(plane)
        replica = health(find(plane, "ModelReplica", replica_name))
        assert replica.status == "Progressing"
        assert replica.message.startswith(
            f"ModelStarting: model-serving-main: Deployment {deployment_name}, 0/1 ready, "
        )
        assert "Available=False (MinimumReplicasUnavailable: " in replica.message
        assert "Progressing=False (ProgressDeadlineExceeded: " in replica.message
        deployment = health(find(plane, "ModelDeployment", "qwen3-8b"))
        assert deployment == type(deployment)("Progressing", "ModelStarting: 1 of 2 ready")
        # The stuck replica's endpoint is withdrawn; the service keeps routing to the rest.
        service = health(find(plane, "ModelService", "chat"))
        assert service.status == "Healthy"
        assert service.message.endswith("(Matched 2 endpoint(s))")


def test_invalid_url_degrades_the_endpoint(fleet, health):
    plane, _ = fleet
    endpoint = {
        "apiVersion": "modelplane.ai/v1alpha1",
        "kind": "ModelEndpoint",
        "metadata": {"name": "raw-ip", "namespace": NAMESPACE},
        "spec": {"url": "https://203.0.113.10/v1"},
    }
    with restored(plane, health):
        plane.apply(endpoint)
        converge(plane)
        shown = health(find(plane, "ModelEndpoint", "raw-ip"))
        assert shown.status == "Degraded"
        assert shown.message == (
            "InvalidURL: spec.url 'https://203.0.113.10/v1' is https with an IP address host; "
            "TLS verification needs a DNS hostname"
        )
        plane.delete(plane.key("ModelEndpoint", "raw-ip", NAMESPACE))


def test_a_failing_function_degrades_its_resource_with_crossplanes_error(fleet, health):
    plane, _ = fleet
    key = plane.key("ModelEndpoint", "hosted-llama", NAMESPACE)
    with restored(plane, health):
        plane.patch(key, {"metadata": {"labels": {EXPLODE_LABEL: "true"}}})
        converge(plane)
        shown = health(find(plane, "ModelEndpoint", "hosted-llama"))
        assert shown.status == "Degraded"
        assert shown.message.startswith("ReconcileError: cannot compose resources: ")
        assert "RuntimeError: injected by the test" in shown.message
        plane.patch(key, {"metadata": {"labels": {EXPLODE_LABEL: "false"}}})


def test_paused_resources_are_suspended_and_resume_progressing(fleet, health):
    plane, _ = fleet
    key = plane.key("ModelService", "chat", NAMESPACE)
    with restored(plane, health):
        plane.patch(key, {"metadata": {"annotations": {"crossplane.io/paused": "true"}}})
        converge(plane)
        shown = health(find(plane, "ModelService", "chat"))
        assert shown.status == "Suspended"
        assert shown.message == "Reconciliation is paused (annotation crossplane.io/paused)"
        # Unpaused but not reconciled yet: Crossplane's condition still says paused.
        plane.patch(key, {"metadata": {"annotations": {"crossplane.io/paused": "false"}}})
        shown = health(find(plane, "ModelService", "chat"))
        assert shown.status == "Progressing"
        assert shown.message == (
            "ReconcilePaused: Reconciliation is paused via the pause annotation"
        )


def test_an_invalid_class_the_api_server_let_through_is_degraded(fleet, health):
    """Version skew (an older XRD in the cluster than the function expects) lets a class the
    function rejects reach it; the function says why and the class is Degraded."""
    plane, _ = fleet
    validator = plane.validator
    bad_class = {
        "apiVersion": "modelplane.ai/v1alpha1",
        "kind": "InferenceClass",
        "metadata": {"name": "no-devices"},
        "spec": {"description": "lost its devices", "devices": []},
    }
    with restored(plane, health):
        plane.validator = lambda obj, source: []
        try:
            plane.apply(bad_class)
        finally:
            plane.validator = validator
        converge(plane)
        shown = health(find(plane, "InferenceClass", "no-devices", None))
        assert shown.status == "Degraded"
        assert shown.message.startswith("InvalidSpec: ")
        assert "devices" in shown.message
        plane.delete(plane.key("InferenceClass", "no-devices"))


def test_conditions_older_than_the_spec_are_not_trusted(fleet, health):
    """Real Crossplane stamps conditions with observedGeneration; right after a sync the spec
    is newer than what they describe, so Argo CD must not call the resource Healthy yet."""
    plane, _ = fleet
    deployment = find(plane, "ModelDeployment", "qwen3-8b")
    generation = deployment["metadata"]["generation"]
    stamped = dict(deployment)
    stamped["status"] = {
        **deployment["status"],
        "conditions": [
            {**c, "observedGeneration": generation} for c in deployment["status"]["conditions"]
        ],
    }
    assert health(stamped).status == "Healthy"
    stamped["metadata"] = {**deployment["metadata"], "generation": generation + 1}
    shown = health(stamped)
    assert shown.status == "Progressing"
    assert shown.message == f"Waiting for Crossplane to reconcile generation {generation + 1}"
