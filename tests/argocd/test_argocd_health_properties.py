"""Properties every health check keeps for any status Crossplane or a function might write,
including half-written and odd ones: the script never errors (Argo CD would show Unknown),
and Healthy, Suspended and Degraded mean the same thing for every kind."""

from __future__ import annotations

from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

KINDS = {
    "InferenceGateway": "modelplane.ai",
    "InferenceClass": "modelplane.ai",
    "InferenceCluster": "modelplane.ai",
    "ModelDeployment": "modelplane.ai",
    "ModelReplica": "modelplane.ai",
    "ModelEndpoint": "modelplane.ai",
    "ModelService": "modelplane.ai",
    "ModelCache": "modelplane.ai",
    "GKECluster": "infrastructure.modelplane.ai",
    "EKSCluster": "infrastructure.modelplane.ai",
    "AKSCluster": "infrastructure.modelplane.ai",
    "VultrCluster": "infrastructure.modelplane.ai",
    "NebiusCluster": "infrastructure.modelplane.ai",
    "ServingStack": "infrastructure.modelplane.ai",
}
TYPES = [
    "Ready",
    "Synced",
    "ControllerReady",
    "Accepted",
    "ClusterReady",
    "BackendReady",
    "StackReady",
    "ReplicasScheduled",
    "ReplicasReady",
    "ModelAccepted",
    "ModelReady",
    "RoutingReady",
    "EndpointsResolved",
    "ClustersMatched",
    "ArtifactReady",
]
REASONS = [
    "ReconcileError",
    "ReconcileSuccess",
    "ReconcilePaused",
    "Available",
    "Creating",
    "InvalidSpec",
    "InvalidURL",
    "InvalidName",
    "InvalidNodePool",
    "InsufficientCapacity",
    "NoClusters",
    "Failed",
    "Hydrating",
    "ModelStarting",
]

conditions = st.lists(
    st.fixed_dictionaries(
        {
            "type": st.sampled_from(TYPES),
            "status": st.sampled_from(["True", "False", "Unknown"]),
        },
        optional={
            "reason": st.sampled_from(REASONS),
            "message": st.text(max_size=20),
            "observedGeneration": st.integers(1, 4),
        },
    ),
    max_size=8,
    unique_by=lambda c: c["type"],
)
statuses = st.one_of(
    st.none(),
    st.fixed_dictionaries(
        {},
        optional={
            "conditions": conditions,
            "address": st.text(max_size=15),
            "endpoint": st.text(max_size=15),
            "gateway": st.fixed_dictionaries({}, optional={"address": st.text(max_size=15)}),
            "summary": st.fixed_dictionaries({}, optional={"ready": st.just("1/2")}),
            "clusters": st.lists(
                st.fixed_dictionaries(
                    {"name": st.sampled_from(["a", "b"])},
                    optional={
                        "phase": st.sampled_from(["Pending", "Hydrating", "Ready", "Failed"]),
                        "message": st.text(max_size=20),
                    },
                ),
                max_size=3,
            ),
        },
    ),
)
annotations = st.one_of(
    st.none(),
    st.dictionaries(
        st.sampled_from(["crossplane.io/paused", "other"]),
        st.sampled_from(["true", "false"]),
        max_size=2,
    ),
)


def resource(kind: str, status: Any, annotations: Any, generation: int | None) -> dict:
    metadata: dict[str, Any] = {"name": "x", "namespace": "ml-team"}
    if annotations is not None:
        metadata["annotations"] = annotations
    if generation is not None:
        metadata["generation"] = generation
    obj: dict[str, Any] = {
        "apiVersion": f"{KINDS[kind]}/v1alpha1",
        "kind": kind,
        "metadata": metadata,
        "spec": {"clusterName": "lab-east", "replicas": 2},
    }
    if status is not None:
        obj["status"] = status
    return obj


def _condition(obj: dict, type_: str) -> dict:
    for found in (obj.get("status") or {}).get("conditions") or []:
        if found["type"] == type_:
            return found
    return {}


@settings(max_examples=150, deadline=None)
@given(
    kind=st.sampled_from(sorted(KINDS)),
    status=statuses,
    annotations=annotations,
    generation=st.one_of(st.none(), st.integers(1, 4)),
)
def test_health_is_total_and_means_the_same_for_every_kind(
    health, kind, status, annotations, generation
):
    obj = resource(kind, status, annotations, generation)
    shown = health(obj)  # raises on a Lua error, an unknown status or an empty message
    paused = (annotations or {}).get("crossplane.io/paused") == "true"
    synced, ready = _condition(obj, "Synced"), _condition(obj, "Ready")
    assert (shown.status == "Suspended") == paused
    if shown.status == "Healthy":
        assert ready.get("status") == "True"
        assert synced and synced.get("status") != "False"
        stale = synced.get("observedGeneration")
        assert generation is None or stale is None or stale >= generation
    if not synced and not paused:
        assert shown.message == "Waiting for Crossplane to reconcile"
    if synced.get("status") == "False" and synced.get("reason") == "ReconcileError":
        stale = synced.get("observedGeneration")
        if not paused and (generation is None or stale is None or stale >= generation):
            assert shown.status == "Degraded"
    assert shown.status in {"Healthy", "Progressing", "Degraded", "Suspended"}
