"""A cache hydration fails, then succeeds (model-cache.md §7-9).

The platform team adds lab-north to the demo tier. The Qwen cache matches it and starts
staging the weights there; the first download fails (say the Hugging Face token Secret is
missing on the new cluster). The cache reports the failed cluster and why, while the clusters
already staged keep their weights untouched. Once the download succeeds the cluster latches
Ready, its Job is no longer composed, and the volume stays.
"""

from __future__ import annotations

from modelplane.controlplane import ControlPlane
from modelplane.kube import JSON, condition_status, lookup
from scenario_world import (
    NAMESPACE,
    conditions,
    converge,
    diff,
    family,
    find,
    label,
    remote_objects,
    snapshot,
    uid,
)

QWEN = "qwen3-8b"
LAB_NORTH = {
    "apiVersion": "modelplane.ai/v1alpha1",
    "kind": "InferenceCluster",
    "metadata": {"name": "lab-north", "labels": {"tier": "demo"}},
    "spec": {
        "cluster": {
            "source": "Existing",
            "existing": {"secretRef": {"name": "lab-north-kubeconfig"}},
        },
        "nodePools": [{"name": "l4", "className": "l4-1x-byo", "nodeCount": 1}],
    },
}
# Merged into the simulated Job's status (conditions by type): a failed Job never completed.
JOB_FAILED = {
    "succeeded": 0,
    "failed": 4,
    "conditions": [
        {"type": "Complete", "status": "False"},
        {
            "type": "Failed",
            "status": "True",
            "reason": "BackoffLimitExceeded",
            "message": "Job has reached the specified backoff limit",
        },
    ],
}


def hydration_job_on(plane: ControlPlane, cluster: str):
    """Matches the cache's hydration Job Object on ``cluster`` (known once it is provisioned)."""

    def match(obj: JSON) -> bool:
        found = plane.find("InferenceCluster", cluster)
        config = lookup(found or {}, ".status.providerConfigRef.name")
        return (
            obj.get("kind") == "Object"
            and lookup(obj, ".spec.forProvider.manifest.kind") == "Job"
            and bool(config)
            and lookup(obj, ".spec.providerConfigRef.name") == config
        )

    return match


def cache_remote(plane: ControlPlane) -> set[tuple[str, str]]:
    return {(c, kind) for c, kind, _ in remote_objects(plane, find(plane, "ModelCache", QWEN))}


def test_hydration_fails_on_a_new_cluster_then_succeeds(fleet: ControlPlane):
    before = snapshot(fleet)
    staged = {label(obj): uid(obj) for obj in fleet.composed_by(find(fleet, "ModelCache", QWEN))}
    failure = fleet.providers.inject(
        hydration_job_on(fleet, "lab-north"), manifest_status=JOB_FAILED
    )
    fleet.apply(LAB_NORTH)
    converge(fleet)

    cache = find(fleet, "ModelCache", QWEN)
    assert cache["status"]["clusters"] == [
        {"name": "gke-us", "phase": "Ready"},
        {"name": "lab-east", "phase": "Ready"},
        {
            "name": "lab-north",
            "phase": "Failed",
            "message": "hydration Job failed (BackoffLimitExceeded): "
            "Job has reached the specified backoff limit",
        },
        {"name": "lab-west", "phase": "Ready"},
    ]
    # The condition counts the failures; status.clusters (above) says where and why.
    assert conditions(cache)["ArtifactReady"] == (
        "False",
        "Failed",
        "hydration failed on 1 of 4 cluster(s)",
    )
    assert conditions(cache)["Ready"] == (
        "False",
        "Creating",
        "Unready resources: hydrate-lab-north",
    )
    # The failed Job stays composed (so provider-kubernetes retries it); the volume too.
    assert cache_remote(fleet) == {
        ("gke-us", "PersistentVolumeClaim"),
        ("lab-east", "PersistentVolumeClaim"),
        ("lab-west", "PersistentVolumeClaim"),
        ("lab-north", "PersistentVolumeClaim"),
        ("lab-north", "Job"),
    }
    # The weights already staged elsewhere are not touched.
    for name, kept in staged.items():
        assert uid(find(fleet, "Object", name.split("/")[-1])) == kept
    volume_on_north = {
        label(obj)
        for obj in fleet.composed_by(cache)
        if lookup(obj, ".spec.forProvider.manifest.kind") == "PersistentVolumeClaim"
    } - set(staged)
    (north_volume,) = volume_on_north
    north_volume_uid = uid(find(fleet, "Object", north_volume.split("/")[-1], NAMESPACE))

    # --- the retry succeeds --------------------------------------------------------------
    fleet.providers.clear(failure)
    converge(fleet)
    cache = find(fleet, "ModelCache", QWEN)
    assert {c["name"]: c["phase"] for c in cache["status"]["clusters"]} == {
        "gke-us": "Ready",
        "lab-east": "Ready",
        "lab-north": "Ready",
        "lab-west": "Ready",
    }
    assert conditions(cache)["ArtifactReady"][:2] == ("True", "Staged")
    assert condition_status(cache, "Ready") == "True"
    events = fleet.events[fleet.key("ModelCache", QWEN, NAMESPACE)]
    assert any(e["message"].endswith("Artifact staged on all 4 clusters") for e in events), events
    # Staged: the Job is dropped on purpose (§9.2), the volume with the weights stays.
    assert ("lab-north", "Job") not in cache_remote(fleet)
    assert uid(find(fleet, "Object", north_volume.split("/")[-1], NAMESPACE)) == north_volume_uid

    # Nothing else changed: lab-north and what it composed came, the cache gained a volume
    # there; no replica moved to the new cluster (retention, model-deployment.md §4.3).
    change = diff(before, snapshot(fleet))
    assert change.removed == change.recreated == set()
    assert change.added == family(fleet, find(fleet, "InferenceCluster", "lab-north", None)) | {
        north_volume
    }
    assert change.changed == {f"ModelCache/{NAMESPACE}/{QWEN}"}
