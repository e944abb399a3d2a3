"""What a capacity summary tells compose-model-cache: the replicas mounting each cache, a label
per cache on the ConfigMap, and the cluster's cache storage class, and nothing else of its
spec.cluster."""

from __future__ import annotations

import hashlib
import json

from compose_model_cache import staging
from modelplane_common import capacity_summary as cs


def replica(name: str, ns: str, cache: str | None, remote: str | None = None) -> dict:
    labels = {"modelplane.ai/deployment": "d", "modelplane.ai/replica-index": "0"}
    if cache:
        labels["modelplane.ai/modelcache"] = cache
    body: dict = {
        "metadata": {"name": name, "namespace": ns, "labels": labels},
        "spec": {"clusterName": "c"},
    }
    if remote:
        body["status"] = {"remoteNamespace": remote}
    return body


CLUSTER = {
    "metadata": {"name": "c", "labels": {"tier": "demo"}},
    "spec": {
        "cluster": {
            "source": "Existing",
            "existing": {
                "secretRef": {"name": "c-kubeconfig"},
                "cache": {"storageClassName": "trident-rwx"},
            },
        }
    },
}


def test_caches_list_the_replicas_mounting_each_cache_in_any_order():
    replicas = [
        replica("b", "ml-team", "qwen", "ml-team"),
        replica("a", "ml-team", "qwen"),
        replica("x", "team-b", "qwen", "team-b"),
        replica("plain", "ml-team", None),
    ]
    content = cs.summary(CLUSTER, {}, replicas)
    assert content["caches"] == {
        "ml-team/qwen": [["a", ""], ["b", "ml-team"]],
        "team-b/qwen": [["x", "team-b"]],
    }
    again = cs.summary(CLUSTER, {}, list(reversed(replicas)))
    assert json.dumps(again, sort_keys=True) == json.dumps(content, sort_keys=True)
    cache_summary = cs.cache_configmap("c", {"tier": "demo"}, content)
    labels = cache_summary["metadata"]["labels"]
    digest = hashlib.sha256(b"ml-team/qwen").hexdigest()[:16]
    assert labels[f"modelplane.ai/cache-{digest}"] == "wanted"  # nothing staged there yet
    assert labels[cs.cache_label("team-b", "qwen")] == "wanted"
    assert labels[cs.CACHE_SUMMARY_LABEL] == "true" and cs.SUMMARY_LABEL not in labels
    assert len([k for k in labels if k.startswith("modelplane.ai/cache-")]) == 3
    assert labels["tier"] == "demo"
    assert cs.parse(cache_summary)["caches"] == content["caches"]
    # The scheduler's summary neither lists nor is labelled by the caches.
    capacity = cs.configmap("c", {"tier": "demo"}, content)
    assert "caches" not in cs.parse(capacity)
    assert not [k for k in capacity["metadata"]["labels"] if k.startswith(cs.CACHE_LABEL_PREFIX)]


def _cache_object(namespace: str, cache: str | None) -> dict:
    labels = {"modelplane.ai/modelcache": cache} if cache else {}
    return {
        "apiVersion": "kubernetes.m.crossplane.io/v1alpha1",
        "kind": "Object",
        "metadata": {"name": "o", "namespace": namespace,
                     "labels": {"modelplane.ai/cache-cluster": "c"}},
        "spec": {"forProvider": {"manifest": {"metadata": {"labels": labels}}}},
    }  # fmt: skip


def test_a_cache_with_objects_on_the_cluster_is_labelled_staged_there_and_no_longer_wanted():
    replicas = [replica("a", "ml-team", "qwen", "ml-team"), replica("x", "team-b", "qwen")]
    objects = [_cache_object("ml-team", "qwen"), _cache_object("ml-team", "qwen"),
               _cache_object("team-c", "gone"), _cache_object("ml-team", None)]  # fmt: skip
    staged = cs.staged_caches(objects)
    assert staged == ["ml-team/qwen", "team-c/gone"]
    content = cs.summary(CLUSTER, {}, replicas, staged=staged)
    labels = cs.cache_configmap("c", {}, content)["metadata"]["labels"]
    assert labels[cs.cache_label("ml-team", "qwen")] == cs.CACHE_STAGED
    assert labels[cs.cache_label("team-b", "qwen")] == cs.CACHE_WANTED
    # Staged but mounted by nobody: no label (a cache keeps such weights while the cluster
    # exists, and one with a selector reads its clusters by the selector).
    assert cs.cache_label("team-c", "gone") not in labels
    # Only the labels say it: a cache staging anywhere does not rewrite the data.
    assert "staged" not in cs.parse(cs.cache_configmap("c", {}, content))
    assert "staged" not in cs.parse(cs.configmap("c", {}, content))
    # An Object being deleted (a PVC still mounted, say) no longer counts.
    deleting = _cache_object("ml-team", "qwen")
    deleting["metadata"]["deletionTimestamp"] = "2026-01-01T00:00:00Z"
    assert cs.staged_caches([deleting, _cache_object("team-c", "gone")]) == ["team-c/gone"]


def test_the_cache_summary_keeps_only_what_the_cache_reads():
    replicas = [replica(f"r-{i}", "ml-team", "qwen", "ml-team") for i in range(20)]
    status = {
        "providerConfigRef": {"name": "c-pc"},
        "gpuPools": [{"name": "l4", "nodes": 2}],
        "gateway": {"address": "10.0.0.1"},
    }
    cluster = {**CLUSTER, "status": {"conditions": [{"type": "Ready", "status": "True"}]}}
    content = cs.summary(cluster, status, replicas)
    cache_summary = cs.cache_configmap("c", {}, content)
    read = cs.parse(cache_summary)
    assert set(read) == {"version", "cluster", "labels", "spec", "status", "caches"}
    assert read["status"] == {"providerConfigRef": {"name": "c-pc"}}
    assert read["spec"] == {"cluster": content["spec"]["cluster"]}
    # A condition or a taint changing does not rewrite it.
    tainted = {
        **cluster,
        "spec": {**cluster["spec"], "taints": [{"key": "k", "effect": "NoSchedule"}]},
    }
    not_ready = {**tainted, "status": {"conditions": [{"type": "Ready", "status": "False"}]}}
    again = cs.cache_configmap("c", {}, cs.summary(not_ready, status, replicas))
    assert again == cache_summary
    assert len(cache_summary["data"][cs.DATA_KEY]) < len(
        cs.configmap("c", {}, content)["data"][cs.DATA_KEY]
    )


def test_the_summary_keeps_only_the_source_and_its_cache_override():
    content = cs.summary(CLUSTER, {}, [])
    assert content["spec"]["cluster"] == {
        "source": "Existing",
        "existing": {"cache": {"storageClassName": "trident-rwx"}},
    }  # no secretRef: a summary is read fleet-wide
    assert staging.storage_class(cs.cluster_view(content, {})) == "trident-rwx"
    eks = {"metadata": {"name": "e"}, "spec": {"cluster": {"source": "EKS", "eks": {}}}}
    view = cs.cluster_view(cs.summary(eks, {}, []), {})
    assert view["spec"]["cluster"] == {"source": "EKS"}
    assert staging.storage_class(view) == "modelplane-rwx-efs"
