"""compose-model-cache through real gRPC: clusters on GKE, EKS and Existing in every phase,
read from their capacity summaries as Crossplane resolves the function's requirements."""

from __future__ import annotations

import json
from pathlib import Path

import kubernetes_validate
import mc_fleet
import pytest
import yaml
from crossplane.function.proto.v1 import run_function_pb2 as fnv1
from modelplane.render import load_objects, render
from modelplane.summaries import summaries
from modelplane_common.plain import to_plain
from modelplane_common.testing import function_results
from modelplane_schemas.generated.kubernetes_m_crossplane_io.v1alpha1.object import Object
from modelplane_schemas.generated.modelplane_ai.v1alpha1.inferencecluster import (
    InferenceCluster,
)
from modelplane_schemas.generated.modelplane_ai.v1alpha1.modelcache import ModelCache

NS = "ml-team"
FRONTIER = {"modelplane.ai/tier": "frontier"}
SCRIPT = (
    "set -e; if [ -f /mnt/artifact/.modelplane-hydrated ]; then echo 'already hydrated, "
    "skipping'; exit 0; fi; pip install --quiet huggingface_hub; hf download "
    "meta-llama/Llama-3.3-70B-Instruct --revision main --local-dir /mnt/artifact; touch "
    "/mnt/artifact/.modelplane-hydrated"
)


def cache(
    name: str = "llama-70b",
    ns: str = NS,
    auth: dict | None = None,
    selector: dict | None = FRONTIER,
    status: dict | None = None,
) -> dict:
    """A ModelCache; by default on every frontier cluster (``selector=None``: on demand)."""
    hf: dict = {"repo": "meta-llama/Llama-3.3-70B-Instruct", "revision": "main", "sizeGiB": 160}
    if auth:
        hf["authSecret"] = auth
    spec: dict = {"source": "HuggingFace", "huggingFace": hf}
    if selector is not None:
        spec["clusterSelector"] = {"matchLabels": selector}
    xr = {
        "apiVersion": "modelplane.ai/v1alpha1",
        "kind": "ModelCache",
        "metadata": {"name": name, "namespace": ns},
        "spec": spec,
    }
    ModelCache.model_validate(xr)
    if status:
        xr["status"] = status
    return xr


def cluster(name: str, source: str, storage_class: str | None = None, ready: bool = True) -> dict:
    block: dict = {
        "GKE": {"project": "ml-fleet-prod", "region": "us-central1"},
        "EKS": {"region": "us-east-1"},
        "Existing": {"secretRef": {"name": f"{name}-kubeconfig"}},
    }[source]
    if storage_class:
        block["cache"] = {"storageClassName": storage_class}
    body = {
        "apiVersion": "modelplane.ai/v1alpha1",
        "kind": "InferenceCluster",
        "metadata": {"name": name, "labels": {"modelplane.ai/tier": "frontier"}},
        "spec": {"cluster": {"source": source, source.lower(): block}},
        "status": {
            "providerConfigRef": {"name": f"{name}-cluster-kubeconfig-dbb9b"},
            "conditions": [{"type": "Ready", "status": "True" if ready else "False"}],
        },
    }
    return body


GKE = cluster("gke-us-central", "GKE")
EKS = cluster("eks-us-east", "EKS")
EXISTING = cluster("onprem", "Existing", storage_class="trident-rwx")
FLEET = [GKE, EKS, EXISTING]


def run(xr: dict, clusters: list[dict] | None, observed: dict | None = None, replicas: tuple = ()):
    """The function as Crossplane runs it over a fleet of ``clusters`` (None: nothing resolved
    yet) with ``replicas`` pinned to them."""
    objects = None if clusters is None else mc_fleet.fleet(clusters, replicas)
    return mc_fleet.run(xr, objects, observed)


def desired(rsp) -> dict[str, dict]:
    return {key: to_plain(r.resource) for key, r in rsp.desired.resources.items()}


def status(rsp) -> dict:
    return to_plain(rsp.desired.composite.resource)["status"]


def phases(rsp) -> dict[str, str]:
    return {c["name"]: c["phase"] for c in status(rsp)["clusters"]}


def condition(rsp, type_: str):
    (found,) = [c for c in rsp.conditions if c.type == type_]
    return found


def observed_object(body: dict, remote: dict | None, ready: bool = False) -> dict:
    """An Object as Crossplane observes it once provider-kubernetes reported on it."""
    manifest = dict(body["spec"]["forProvider"]["manifest"])
    if remote is not None:
        manifest["status"] = remote
    return {
        **body,
        "metadata": {"name": "llama-70b-x7k2q", "namespace": NS},
        "status": {
            "atProvider": {"manifest": manifest},
            "conditions": [{"type": "Ready", "status": "True" if ready else "False"}],
        },
    }


BOUND = {"phase": "Bound"}
COMPLETE = {"conditions": [{"type": "Complete", "status": "True"}], "succeeded": 1}
ACTIVE = {"active": 1}
FAILED = {
    "conditions": [
        {
            "type": "Failed",
            "status": "True",
            "reason": "BackoffLimitExceeded",
            "message": "Job has reached the specified backoff limit",
        }
    ]
}


def check_wrapped(body: dict) -> dict:
    """Validate an Object and its wrapped core manifest; return the manifest."""
    Object.model_validate(body)
    manifest = body["spec"]["forProvider"]["manifest"]
    kubernetes_validate.validate(manifest, "1.33", strict=True)
    return manifest


def test_first_call_only_asks_for_the_selected_clusters_summaries():
    rsp = run(cache(selector={"modelplane.ai/tier": "frontier"}), None)
    assert dict(rsp.desired.resources) == {}
    assert set(rsp.requirements.resources) == {"clusters"}
    wanted = rsp.requirements.resources["clusters"]
    assert (wanted.api_version, wanted.kind, wanted.namespace) == (
        "v1",
        "ConfigMap",
        "modelplane-system",
    )
    assert dict(wanted.match_labels.labels) == {
        "modelplane.ai/tier": "frontier",
        "modelplane.ai/cache-summary": "true",
    }


def test_first_reconcile_on_gke_eks_and_existing():
    rsp = run(cache(), FLEET)
    objects = desired(rsp)
    assert sorted(objects) == sorted(
        f"{kind}-{c['metadata']['name']}" for c in FLEET for kind in ("pvc", "hydrate")
    )
    classes = {}
    for key, body in objects.items():
        manifest = check_wrapped(body)
        cluster_name = key.split("-", 1)[1]
        assert body["spec"]["providerConfigRef"] == {
            "kind": "ClusterProviderConfig",
            "name": f"{cluster_name}-cluster-kubeconfig-dbb9b",
        }
        # The label lets the InferenceCluster compose the tenant's namespace there, without
        # guarding the cluster against deletion as a replica's Objects do.
        assert body["metadata"] == {"labels": {"modelplane.ai/cache-cluster": cluster_name}}
        if key.startswith("pvc-"):
            classes[cluster_name] = manifest["spec"]["storageClassName"]
            assert "managementPolicies" not in body["spec"]
        else:
            assert body["spec"]["managementPolicies"] == [
                "Observe",
                "Create",
                "Update",
                "LateInitialize",
            ]
    assert classes == {
        "gke-us-central": "modelplane-rwx",
        "eks-us-east": "modelplane-rwx-efs",
        "onprem": "trident-rwx",
    }
    assert status(rsp) == {
        "summary": {"ready": "0/3"},
        "clusters": [
            {"name": "eks-us-east", "phase": "Pending"},
            {"name": "gke-us-central", "phase": "Pending"},
            {"name": "onprem", "phase": "Pending"},
        ],
    }
    assert condition(rsp, "ClustersMatched").reason == "Matched"
    assert condition(rsp, "ArtifactReady").reason == "Hydrating"
    assert [r.message for r in rsp.results] == [
        "Staging meta-llama/Llama-3.3-70B-Instruct to 3 clusters: eks-us-east, gke-us-central, "
        "onprem"
    ]
    assert rsp.desired.composite.ready == fnv1.READY_UNSPECIFIED
    assert all(r.ready == fnv1.READY_FALSE for r in rsp.desired.resources.values())


def test_rendered_example_matches_the_spec():
    objects = desired(run(cache(auth={"name": "hf-token"}), [GKE]))
    assert objects["pvc-gke-us-central"] == {
        "apiVersion": "kubernetes.m.crossplane.io/v1alpha1",
        "kind": "Object",
        "metadata": {"labels": {"modelplane.ai/cache-cluster": "gke-us-central"}},
        "spec": {
            "providerConfigRef": {
                "kind": "ClusterProviderConfig",
                "name": "gke-us-central-cluster-kubeconfig-dbb9b",
            },
            "readiness": {
                "policy": "DeriveFromCelQuery",
                "celQuery": 'object.status.phase == "Bound"',
            },
            "watch": True,
            "forProvider": {
                "manifest": {
                    "apiVersion": "v1",
                    "kind": "PersistentVolumeClaim",
                    "metadata": {
                        "name": "modelcache-ml-team-llama-70b-bb164",
                        "namespace": "ml-team",
                        "labels": {"modelplane.ai/modelcache": "llama-70b"},
                    },
                    "spec": {
                        "accessModes": ["ReadWriteMany"],
                        "storageClassName": "modelplane-rwx",
                        "resources": {"requests": {"storage": "160Gi"}},
                    },
                }
            },
        },
    }
    job_object = objects["hydrate-gke-us-central"]
    assert job_object["spec"]["readiness"] == {
        "policy": "DeriveFromCelQuery",
        "celQuery": (
            "has(object.status.conditions) && "
            'object.status.conditions.exists(c, c.type == "Complete" && c.status == "True")'
        ),
    }
    assert job_object["spec"]["watch"] is True  # Complete is seen at once, not on a 30 s poll
    job = check_wrapped(job_object)
    assert job["metadata"] == {
        "name": "modelcache-ml-team-llama-70b-hydrate-00904",
        "namespace": "ml-team",
        "labels": {"modelplane.ai/modelcache": "llama-70b"},
    }
    assert (job["spec"]["backoffLimit"], job["spec"]["ttlSecondsAfterFinished"]) == (3, 180)
    pod = job["spec"]["template"]
    assert pod["metadata"] == {"labels": {"modelplane.ai/modelcache": "llama-70b"}}
    assert pod["spec"]["restartPolicy"] == "OnFailure"
    assert pod["spec"]["volumes"] == [
        {
            "name": "artifact",
            "persistentVolumeClaim": {"claimName": "modelcache-ml-team-llama-70b-bb164"},
        }
    ]
    (container,) = pod["spec"]["containers"]
    assert container == {
        "name": "hydrate",
        "image": "python:3.11-slim",
        "command": ["/bin/sh", "-c", SCRIPT],
        "env": [
            {
                "name": "HF_TOKEN",
                "valueFrom": {"secretKeyRef": {"name": "hf-token", "key": "HF_TOKEN"}},
            }
        ],
        "volumeMounts": [{"name": "artifact", "mountPath": "/mnt/artifact"}],
    }


def test_each_phase_on_gke_eks_and_existing():
    first = desired(run(cache(), FLEET))
    observed = {
        # GKE: bound and hydrated.
        "pvc-gke-us-central": observed_object(first["pvc-gke-us-central"], BOUND, ready=True),
        "hydrate-gke-us-central": observed_object(
            first["hydrate-gke-us-central"], COMPLETE, ready=True
        ),
        # EKS: bound, download running.
        "pvc-eks-us-east": observed_object(first["pvc-eks-us-east"], BOUND, ready=True),
        "hydrate-eks-us-east": observed_object(first["hydrate-eks-us-east"], ACTIVE),
        # Existing: the Job gave up.
        "pvc-onprem": observed_object(first["pvc-onprem"], BOUND, ready=True),
        "hydrate-onprem": observed_object(first["hydrate-onprem"], FAILED),
    }
    rsp = run(cache(), FLEET, observed)
    assert status(rsp)["summary"] == {"ready": "1/3"}
    assert status(rsp)["clusters"] == [
        {"name": "eks-us-east", "phase": "Hydrating"},
        {"name": "gke-us-central", "phase": "Ready"},
        {
            "name": "onprem",
            "phase": "Failed",
            "message": "hydration Job failed (BackoffLimitExceeded): Job has reached the "
            "specified backoff limit",
        },
    ]
    objects = desired(rsp)
    # A staged cluster's Job is dropped on purpose (orphaned, then TTL-collected remotely);
    # a failed one stays desired so provider-kubernetes recreates it and the download resumes.
    assert "hydrate-gke-us-central" not in objects
    assert {"hydrate-eks-us-east", "hydrate-onprem"} <= set(objects)
    assert {k for k in objects if k.startswith("pvc-")} == {
        "pvc-gke-us-central",
        "pvc-eks-us-east",
        "pvc-onprem",
    }
    artifact = condition(rsp, "ArtifactReady")
    assert (artifact.status, artifact.reason) == (fnv1.STATUS_CONDITION_FALSE, "Failed")
    assert rsp.desired.resources["pvc-eks-us-east"].ready == fnv1.READY_TRUE
    assert rsp.desired.resources["hydrate-eks-us-east"].ready == fnv1.READY_FALSE
    assert list(rsp.results) == []


# Observed (PVC, Job) status per phase; None means provider-kubernetes has not reported yet.
PHASE_STATES = {
    "Pending": ({"phase": "Pending"}, None),
    "Hydrating": (BOUND, ACTIVE),
    "Ready": (BOUND, COMPLETE),
    "Failed": (BOUND, FAILED),
}


@pytest.mark.parametrize("phase", list(PHASE_STATES))
@pytest.mark.parametrize("source", ["GKE", "EKS", "Existing"])
def test_every_phase_on_every_cluster_source(source: str, phase: str):
    member = {"GKE": GKE, "EKS": EKS, "Existing": EXISTING}[source]
    name = member["metadata"]["name"]
    first = desired(run(cache(), [member]))
    pvc_status, job_status = PHASE_STATES[phase]
    observed = {
        f"pvc-{name}": observed_object(first[f"pvc-{name}"], pvc_status, ready=phase != "Pending"),
        f"hydrate-{name}": observed_object(
            first[f"hydrate-{name}"], job_status, ready=phase == "Ready"
        ),
    }
    rsp = run(cache(), [member], observed)
    (entry,) = status(rsp)["clusters"]
    assert (entry["name"], entry["phase"]) == (name, phase)
    assert status(rsp)["summary"] == {"ready": "1/1" if phase == "Ready" else "0/1"}
    assert f"pvc-{name}" in desired(rsp)  # the staged weights are never dropped
    artifact = condition(rsp, "ArtifactReady")
    expected = fnv1.STATUS_CONDITION_TRUE if phase == "Ready" else fnv1.STATUS_CONDITION_FALSE
    reason = {"Pending": "Hydrating", "Hydrating": "Hydrating", "Ready": "Staged"}.get(phase, phase)
    assert (artifact.status, artifact.reason) == (expected, reason)  # model-cache.md §8
    assert condition(rsp, "ClustersMatched").reason == "Matched"
    if phase == "Failed":
        assert "BackoffLimitExceeded" in entry["message"]


def test_partial_then_staged_then_latched():
    xr = cache()
    first = desired(run(xr, [GKE, EKS]))
    observed = {
        "pvc-gke-us-central": observed_object(first["pvc-gke-us-central"], BOUND, ready=True),
        "hydrate-gke-us-central": observed_object(
            first["hydrate-gke-us-central"], COMPLETE, ready=True
        ),
        "pvc-eks-us-east": observed_object(first["pvc-eks-us-east"], {"phase": "Pending"}),
        "hydrate-eks-us-east": observed_object(first["hydrate-eks-us-east"], {}),
    }
    rsp = run(xr, [GKE, EKS], observed)
    assert phases(rsp) == {"gke-us-central": "Ready", "eks-us-east": "Pending"}
    assert condition(rsp, "ArtifactReady").reason == "Partial"

    observed["pvc-eks-us-east"] = observed_object(first["pvc-eks-us-east"], BOUND, ready=True)
    observed["hydrate-eks-us-east"] = observed_object(
        first["hydrate-eks-us-east"], COMPLETE, ready=True
    )
    rsp = run(xr, [GKE, EKS], observed)
    assert status(rsp)["summary"] == {"ready": "2/2"}
    artifact = condition(rsp, "ArtifactReady")
    assert (artifact.status, artifact.reason) == (fnv1.STATUS_CONDITION_TRUE, "Staged")
    assert rsp.desired.composite.ready == fnv1.READY_TRUE
    assert [r.message for r in rsp.results] == ["Artifact staged on all 2 clusters"]
    assert set(desired(rsp)) == {"pvc-gke-us-central", "pvc-eks-us-east"}

    # Jobs TTL-collected; the cache's own status keeps both Ready while the PVCs stay Bound.
    latched = cache(
        status={
            **status(rsp),
            "conditions": [{"type": "Ready", "status": "True"}],
        }
    )
    kept = {k: v for k, v in observed.items() if k.startswith("pvc-")}
    rsp = run(latched, [GKE, EKS], kept)
    assert status(rsp)["summary"] == {"ready": "2/2"}
    assert list(rsp.results) == []  # no repeated event once the composite is Ready

    # A PVC that is no longer bound drops back to Pending and hydration is composed again.
    kept["pvc-eks-us-east"] = observed_object(first["pvc-eks-us-east"], {"phase": "Lost"})
    rsp = run(latched, [GKE, EKS], kept)
    assert phases(rsp) == {"gke-us-central": "Ready", "eks-us-east": "Pending"}
    assert "hydrate-eks-us-east" in desired(rsp)


def test_cluster_selector_and_provider_config_decide_matching():
    unreachable = cluster("new-cluster", "GKE")
    unreachable["status"] = {}
    other_tier = cluster("dev", "GKE")
    other_tier["metadata"]["labels"] = {"modelplane.ai/tier": "dev"}
    xr = cache(selector={"modelplane.ai/tier": "frontier"})
    rsp = run(xr, [GKE, unreachable, other_tier])
    assert set(desired(rsp)) == {"pvc-gke-us-central", "hydrate-gke-us-central"}
    assert [c["name"] for c in status(rsp)["clusters"]] == ["gke-us-central"]


def test_no_matching_cluster():
    rsp = run(cache(selector={"modelplane.ai/tier": "nowhere"}), [])
    assert dict(rsp.desired.resources) == {}
    assert status(rsp) == {"summary": {"ready": "0/0"}, "clusters": []}
    assert condition(rsp, "ClustersMatched").reason == "NoClusters"
    assert condition(rsp, "ArtifactReady").reason == "NoClusters"
    assert rsp.desired.composite.ready == fnv1.READY_FALSE


def test_cluster_turning_not_ready_keeps_its_pvc_and_job():
    first = desired(run(cache(), [GKE]))
    observed = {
        "pvc-gke-us-central": observed_object(first["pvc-gke-us-central"], BOUND, ready=True),
        "hydrate-gke-us-central": observed_object(first["hydrate-gke-us-central"], ACTIVE),
    }
    flapping = cluster("gke-us-central", "GKE", ready=False)
    flapping["status"].pop("gateway", None)
    rsp = run(cache(), [flapping], observed)
    assert set(desired(rsp)) == {"pvc-gke-us-central", "hydrate-gke-us-central"}
    assert status(rsp)["clusters"] == [{"name": "gke-us-central", "phase": "Hydrating"}]


def test_malformed_observed_objects_never_remove_the_pvc_or_job():
    first = desired(run(cache(), [GKE]))
    garbage_pvc = {**first["pvc-gke-us-central"], "status": {"atProvider": "not-a-map"}}
    garbage_job = {
        **first["hydrate-gke-us-central"],
        "status": {"atProvider": {"manifest": {"status": {"conditions": "oops"}}}, "conditions": 7},
    }
    rsp = run(
        cache(), [GKE], {"pvc-gke-us-central": garbage_pvc, "hydrate-gke-us-central": garbage_job}
    )
    assert not [r for r in rsp.results if r.severity == fnv1.SEVERITY_FATAL]
    assert set(desired(rsp)) == {"pvc-gke-us-central", "hydrate-gke-us-central"}
    assert status(rsp)["clusters"] == [{"name": "gke-us-central", "phase": "Pending"}]


def test_unresolved_clusters_keep_everything():
    first = desired(run(cache(), FLEET))
    observed = {k: observed_object(v, BOUND) for k, v in first.items()}
    rsp = run(cache(), None, observed)
    assert set(desired(rsp)) == set(first)
    for key, body in desired(rsp).items():
        assert body["spec"] == first[key]["spec"]


def test_changed_storage_class_override_keeps_the_existing_pvcs_class():
    first = desired(run(cache(), [EXISTING]))
    observed = {"pvc-onprem": observed_object(first["pvc-onprem"], BOUND, ready=True)}
    changed = cluster("onprem", "Existing", storage_class="weka-rwx")
    pvc = desired(run(cache(), [changed], observed))["pvc-onprem"]
    assert pvc["spec"]["forProvider"]["manifest"]["spec"]["storageClassName"] == "trident-rwx"
    # A new cluster (no PVC yet) gets the override.
    fresh = desired(run(cache(), [changed]))["pvc-onprem"]
    assert fresh["spec"]["forProvider"]["manifest"]["spec"]["storageClassName"] == "weka-rwx"


def test_auth_secret_reaches_the_pod_only_as_a_secret_key_ref():
    rsp = run(cache(auth={"name": "hf-token", "key": "token"}), FLEET)
    text = json.dumps(desired(rsp))
    for body in desired(rsp).values():
        manifest = check_wrapped(body)
        assert manifest["kind"] != "Secret"
        if manifest["kind"] != "Job":
            continue
        (container,) = manifest["spec"]["template"]["spec"]["containers"]
        assert container["env"] == [
            {
                "name": "HF_TOKEN",
                "valueFrom": {"secretKeyRef": {"name": "hf-token", "key": "token"}},
            }
        ]
        assert all("value" not in entry for entry in container["env"])
        assert "HF_TOKEN" not in container["command"][2]
    assert '"value"' not in text
    # The control plane never reads the Secret: it requires only capacity summaries.
    assert {(r.kind, r.namespace) for r in rsp.requirements.resources.values()} == {
        ("ConfigMap", "modelplane-system")
    }


def test_without_auth_the_env_is_empty():
    rsp = run(cache(), [GKE])
    job = desired(rsp)["hydrate-gke-us-central"]["spec"]["forProvider"]["manifest"]
    assert job["spec"]["template"]["spec"]["containers"][0]["env"] == []


def test_same_cache_name_in_two_namespaces_never_shares_a_pvc():
    a = desired(run(cache(name="qwen", ns="team-a"), [GKE]))
    b = desired(run(cache(name="qwen", ns="team-b"), [GKE]))

    def names(objects: dict) -> tuple[str, str, str]:
        pvc = objects["pvc-gke-us-central"]["spec"]["forProvider"]["manifest"]
        job = objects["hydrate-gke-us-central"]["spec"]["forProvider"]["manifest"]
        claim = job["spec"]["template"]["spec"]["volumes"][0]["persistentVolumeClaim"]["claimName"]
        assert claim == pvc["metadata"]["name"]
        return pvc["metadata"]["name"], job["metadata"]["name"], pvc["metadata"]["namespace"]

    pvc_a, job_a, remote_ns_a = names(a)
    pvc_b, job_b, remote_ns_b = names(b)
    # Each tenant's objects live in its own remote namespace (D10), and the names differ too.
    assert (remote_ns_a, remote_ns_b) == ("team-a", "team-b")
    assert pvc_a != pvc_b
    assert job_a != job_b


def test_inference_cluster_fixtures_are_valid():
    for body in FLEET:
        InferenceCluster.model_validate({k: v for k, v in body.items() if k != "status"})


# --- through `modelplane render`, over the examples users read ----------------------------

EXAMPLES = Path(__file__).resolve().parents[3] / "examples" / "cache"


def render_example(name: str, observed: str | None = None) -> tuple[dict, dict[str, dict], list]:
    text = render(
        str(EXAMPLES / name),
        observed_location=str(EXAMPLES / observed) if observed else None,
        required_location=str(EXAMPLES / "clusters.yaml"),
        include_results=True,
    )
    documents = [d for d in yaml.safe_load_all(text) if d]
    composed = {
        d["metadata"]["annotations"]["crossplane.io/composition-resource-name"]: d
        for d in documents[1:]
        if d["kind"] != "Result"
    }
    return documents[0], composed, function_results(documents[1:])


def test_render_first_reconcile_with_auth_secret():
    xr, composed, results = render_example("cache.yaml")
    clusters = ("eks-us-east", "gke-us-central", "onprem-a100")  # gke-europe-west: no config yet
    assert sorted(composed) == sorted(f"{k}-{c}" for c in clusters for k in ("pvc", "hydrate"))
    for key, body in composed.items():
        manifest = check_wrapped(
            {k: v for k, v in body.items() if k in ("apiVersion", "kind", "spec")}
        )
        if key.startswith("hydrate-"):
            env = manifest["spec"]["template"]["spec"]["containers"][0]["env"]
            assert env == [
                {
                    "name": "HF_TOKEN",
                    "valueFrom": {"secretKeyRef": {"name": "hf-token", "key": "HF_TOKEN"}},
                }
            ]
    storage = {
        key.removeprefix("pvc-"): body["spec"]["forProvider"]["manifest"]["spec"][
            "storageClassName"
        ]
        for key, body in composed.items()
        if key.startswith("pvc-")
    }
    assert storage == {
        "eks-us-east": "modelplane-rwx-efs",
        "gke-us-central": "modelplane-rwx",
        "onprem-a100": "trident-rwx",
    }
    assert xr["status"]["summary"] == {"ready": "0/3"}
    assert {c["phase"] for c in xr["status"]["clusters"]} == {"Pending"}
    assert [r["message"] for r in results] == [
        "Staging meta-llama/Llama-3.3-70B-Instruct to 3 clusters: eks-us-east, gke-us-central, "
        "onprem-a100"
    ]


def test_render_each_phase_on_gke_eks_and_existing():
    xr, composed, _ = render_example("cache.yaml", "observed-phases.yaml")
    phases = {c["name"]: c["phase"] for c in xr["status"]["clusters"]}
    assert phases == {
        "eks-us-east": "Hydrating",
        "gke-us-central": "Ready",
        "onprem-a100": "Failed",
    }
    assert xr["status"]["summary"] == {"ready": "1/3"}
    assert "hydrate-gke-us-central" not in composed
    assert {"pvc-gke-us-central", "pvc-eks-us-east", "pvc-onprem-a100"} <= set(composed)
    (artifact,) = [c for c in xr["status"]["conditions"] if c["type"] == "ArtifactReady"]
    assert (artifact["status"], artifact["reason"]) == ("False", "Failed")
    for body in composed.values():
        check_wrapped({k: v for k, v in body.items() if k in ("apiVersion", "kind", "spec")})


def test_render_public_cache_stages_only_where_a_replica_mounting_it_runs():
    xr, composed, results = render_example("cache-public.yaml")
    # No clusterSelector: only eks-us-east, where clusters.yaml places a replica mounting it.
    assert sorted(composed) == ["hydrate-eks-us-east", "pvc-eks-us-east"]
    container = composed["hydrate-eks-us-east"]["spec"]["forProvider"]["manifest"]["spec"][
        "template"
    ]["spec"]["containers"][0]
    assert container["env"] == []
    assert "--revision" not in container["command"][2]
    storage = composed["pvc-eks-us-east"]["spec"]["forProvider"]["manifest"]["spec"]
    assert storage["storageClassName"] == "modelplane-rwx-efs"
    assert xr["status"]["clusters"] == [{"name": "eks-us-east", "phase": "Pending"}]
    assert [r["message"] for r in results] == ["Staging Qwen/Qwen3-8B to 1 clusters: eks-us-east"]


def test_the_cache_examples_capacity_summaries_are_the_ones_its_clusters_publish():
    """clusters.yaml carries generated summaries; a cluster or replica edited without
    regenerating them (`modelplane summarize`) would render against a stale fleet."""
    objects = load_objects(str(EXAMPLES / "clusters.yaml"))
    committed = [o for o in objects if o["kind"] == "ConfigMap"]
    assert [c["metadata"]["name"] for c in committed] == [
        f"{kind}-{cluster}"
        for cluster in ("gke-us-central", "eks-us-east", "onprem-a100", "gke-europe-west")
        for kind in ("capacity", "caches")
    ]
    assert committed == summaries(objects)


def test_spec_the_schema_would_reject_holds_the_staged_weights():
    first = desired(run(cache(), [GKE]))
    observed = {k: observed_object(v, BOUND, ready=True) for k, v in first.items()}
    broken = cache()
    broken["spec"]["huggingFace"]["sizeGiB"] = 0
    rsp = run(broken, [GKE], observed)
    assert set(desired(rsp)) == set(first)
    artifact = condition(rsp, "ArtifactReady")
    assert artifact.reason == "InvalidSpec"
    assert "spec.huggingFace.sizeGiB" in artifact.message
