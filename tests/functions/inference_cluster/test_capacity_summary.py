"""compose-inference-cluster's capacity summary through real gRPC: the ConfigMap the fleet
scheduler reads instead of every InferenceCluster and ModelReplica (design/capacity.md)."""

from __future__ import annotations

import copy

import pytest
from compose_inference_cluster.fn import InferenceClusterFunction
from modelplane.validation import defaulted, validate_object
from modelplane_common import capacity_summary as cs
from modelplane_common.serving import run_function
from modelplane_common.testing import (
    desired_ready,
    desired_resources,
    desired_status,
    make_request,
    observe,
    results,
)

KEY = "capacity-summary"
CLUSTER = "gke-us-central"


def klass(name: str, accelerator: str, count: int, devices: list[dict]) -> dict:
    return defaulted(
        {"apiVersion": "modelplane.ai/v1alpha1", "kind": "InferenceClass",
         "metadata": {"name": name},
         "spec": {"provisioning": {"provider": "GKE", "gke": {
                      "machineType": "g2-standard-8",
                      "accelerator": {"type": accelerator, "count": count}}},
                  "devices": devices}}
    )  # fmt: skip


L4 = klass(
    "gke-l4-1x-g2",
    "nvidia-l4",
    1,
    [{"name": "gpu", "driver": "gpu.nvidia.com", "deviceClassName": "gpu.nvidia.com",
      "attributes": {"architecture": {"string": "Ada Lovelace"}},
      "capacity": {"memory": {"value": "23034Mi"}}}],
)  # fmt: skip
# Two device entries, one with a count: what the scheduler joins must keep both as published.
H100 = klass(
    "gke-h100-8x-a3",
    "nvidia-h100-80gb",
    8,
    [{"name": "gpu", "driver": "gpu.nvidia.com", "deviceClassName": "gpu.nvidia.com",
      "count": 8, "capacity": {"memory": {"value": "81559Mi"}}},
     {"name": "nic", "driver": "rdma.example.com", "deviceClassName": "rdma.example.com",
      "count": 2}],
)  # fmt: skip
CLASSES = (L4, H100)

READY = {"type": "Ready", "status": "True", "reason": "Available",
         "lastTransitionTime": "2025-01-02T03:04:05Z"}  # fmt: skip
SYNCED = {"type": "Synced", "status": "True", "reason": "ReconcileSuccess",
          "lastTransitionTime": "2025-01-02T03:04:05Z"}  # fmt: skip


def gke_cluster() -> dict:
    xr = defaulted(
        {"apiVersion": "modelplane.ai/v1alpha1", "kind": "InferenceCluster",
         "metadata": {"name": CLUSTER,
                      "labels": {"region": "us-central1", "tier": "gold",
                                 "crossplane.io/composite": CLUSTER}},
         "spec": {"cluster": {"source": "GKE",
                              "gke": {"project": "acme-inference", "region": "us-central1"}},
                  "nodePools": [
                      {"name": "l4", "className": "gke-l4-1x-g2", "nodeCount": 1,
                       "maxNodeCount": 4, "zones": ["us-central1-a"]},
                      {"name": "h100", "className": "gke-h100-8x-a3", "nodeCount": 2,
                       "zones": ["us-central1-b"]}]}}
    )  # fmt: skip
    assert validate_object(xr) == []
    xr["status"] = {"conditions": [READY, SYNCED]}
    return xr


def replica(
    name: str,
    deployment: str,
    index: int,
    pool: str,
    count: int,
    *,
    ready: bool = False,
    deleting: str | None = None,
) -> dict:
    metadata: dict = {
        "name": name,
        "namespace": "ml",
        "creationTimestamp": f"2025-02-0{index + 1}T00:00:00Z",
        "labels": {
            "modelplane.ai/cluster": CLUSTER,
            cs.DEPLOYMENT_LABEL: deployment,
            cs.INDEX_LABEL: str(index),
        },
    }
    if deleting:
        metadata["deletionTimestamp"] = deleting
    body: dict = {
        "apiVersion": "modelplane.ai/v1alpha1",
        "kind": "ModelReplica",
        "metadata": metadata,
        "spec": {
            "clusterName": CLUSTER,
            "engines": [
                {
                    "name": "main",
                    "copies": 1,
                    "members": [
                        {
                            "role": "Standalone",
                            "nodePoolName": pool,
                            "deviceRequests": [
                                {"name": "gpu", "deviceClassName": "gpu.nvidia.com", "count": count}
                            ],
                            "template": {
                                "spec": {
                                    "containers": [{"name": "engine", "image": f"vllm:{name}"}]
                                }
                            },
                        }
                    ],
                }
            ],
        },
    }
    if ready:
        body["status"] = {"conditions": [{"type": "Ready", "status": "True", "reason": "Ok"}]}
    return body


CHAT_0 = replica("chat-0", "chat", 0, "l4", 1, ready=True)
CHAT_1 = replica("chat-1", "chat", 1, "l4", 1)
EMBED_0 = replica("embed-0", "embed", 0, "h100", 8, ready=True, deleting="2025-03-01T00:00:00Z")
REPLICAS = [CHAT_0, CHAT_1, EMBED_0]


def required(replicas: list[dict] | None) -> dict:
    """Every requirement resolved; ``replicas`` None leaves "model-replicas" unresolved."""
    req: dict = {f"class-{c['metadata']['name']}": [c] for c in CLASSES}
    req["replica-objects"] = []
    req["cache-objects"] = []
    if replicas is not None:
        req["model-replicas"] = replicas
    return req


def run(xr: dict, required_: dict, observed: dict | None = None):
    rsp = run_function(InferenceClusterFunction(), make_request(xr, observed, required_))
    assert not [r for r in results(rsp) if r[0] == "SEVERITY_FATAL"], results(rsp)
    return rsp


def summary_configmap(rsp) -> dict:
    return desired_resources(rsp)[KEY]


def test_summary_is_a_valid_configmap_named_and_labelled_for_the_cluster():
    rsp = run(gke_cluster(), required(REPLICAS))
    cm = summary_configmap(rsp)
    assert (cm["apiVersion"], cm["kind"]) == ("v1", "ConfigMap")
    assert cm["metadata"]["name"] == "capacity-gke-us-central" == cs.configmap_name(CLUSTER)
    assert cm["metadata"]["namespace"] == "modelplane-system"
    shard = cs.shard_value(cs.shard_of(CLUSTER))
    assert 0 <= int(shard) < cs.SHARDS and len(shard) == 2
    # The cluster's own labels (so a clusterSelector selects summaries), not Crossplane's.
    assert cm["metadata"]["labels"] == {
        "region": "us-central1",
        "tier": "gold",
        "modelplane.ai/capacity-summary": "true",
        "modelplane.ai/capacity-shard": shard,
    }
    assert list(cm["data"]) == ["summary.json"]
    assert validate_object(cm, source=KEY) == []
    # A ConfigMap has no Ready condition: the cluster must not wait on it.
    assert desired_ready(rsp)[KEY] is True


def test_summary_lists_the_clusters_replicas_pools_and_ready_condition():
    rsp = run(gke_cluster(), required(REPLICAS))
    content = cs.parse(summary_configmap(rsp))
    assert content["cluster"] == CLUSTER
    assert content["labels"]["tier"] == "gold"

    # Pools: className from spec.nodePools, nodes/maxNodes as the cluster publishes them,
    # and no devices (those are the class's, read once per class).
    assert content["status"]["gpuPools"] == [
        {"name": "l4", "className": "gke-l4-1x-g2", "nodes": 1, "maxNodes": 4},
        {"name": "h100", "className": "gke-h100-8x-a3", "nodes": 2},
    ]
    published = {p["name"]: p for p in desired_status(rsp)["gpuPools"]}
    for pool in content["status"]["gpuPools"]:
        for field in ("nodes", "maxNodes"):
            assert pool.get(field) == published[pool["name"]].get(field), (pool, field)
    assert content["spec"]["nodePools"] == [{"name": "l4"}, {"name": "h100"}]
    # The cluster's Ready condition, type and status only while True (a new reason, message or
    # transition time does not rewrite the summary); conditions the scheduler ignores are left
    # out.
    assert content["status"]["conditions"] == [{"type": "Ready", "status": "True"}]

    # Every replica pinned to the cluster, as the scheduler reads it back.
    views = {r["metadata"]["name"]: r for r in cs.replica_views(content)}
    assert sorted(views) == ["chat-0", "chat-1", "embed-0"]
    for source in REPLICAS:
        view = views[source["metadata"]["name"]]
        labels = source["metadata"]["labels"]
        assert view["metadata"]["namespace"] == "ml"
        assert view["metadata"]["labels"] == {
            cs.DEPLOYMENT_LABEL: labels[cs.DEPLOYMENT_LABEL],
            cs.INDEX_LABEL: labels[cs.INDEX_LABEL],
        }
        assert view["metadata"]["creationTimestamp"] == source["metadata"]["creationTimestamp"]
        assert view["spec"]["clusterName"] == CLUSTER
    assert views["embed-0"]["metadata"]["deletionTimestamp"] == "2025-03-01T00:00:00Z"
    assert "deletionTimestamp" not in views["chat-0"]["metadata"]
    ready = {n: v.get("status", {}).get("conditions") == [{"type": "Ready", "status": "True"}]
             for n, v in views.items()}  # fmt: skip
    assert ready == {"chat-0": True, "chat-1": False, "embed-0": True}

    # Two replicas of one deployment share one shape: three replicas, two shapes.
    assert len(content["shapes"]) == 2
    assert views["chat-0"]["spec"]["engines"] == views["chat-1"]["spec"]["engines"]
    assert views["chat-0"]["spec"]["engines"] == [
        {"name": "main", "copies": 1, "members": [
            {"role": "Standalone", "nodePoolName": "l4",
             "deviceRequests": [{"name": "gpu", "deviceClassName": "gpu.nvidia.com",
                                 "count": 1}]}]}
    ]  # fmt: skip
    assert views["embed-0"]["spec"]["engines"][0]["members"][0]["deviceRequests"][0]["count"] == 8


def test_a_cluster_without_replicas_summarises_none():
    content = cs.parse(summary_configmap(run(gke_cluster(), required([]))))
    assert cs.replica_views(content) == []
    assert content["shapes"] == []
    assert [p["name"] for p in content["status"]["gpuPools"]] == ["l4", "h100"]


def test_summary_json_is_byte_identical_whatever_the_order_of_the_replicas():
    forward = summary_configmap(run(gke_cluster(), required(REPLICAS)))
    backward = summary_configmap(run(gke_cluster(), required(REPLICAS[::-1])))
    shuffled = summary_configmap(run(gke_cluster(), required([CHAT_1, EMBED_0, CHAT_0])))
    assert forward["data"]["summary.json"] == backward["data"]["summary.json"]
    assert forward["data"]["summary.json"] == shuffled["data"]["summary.json"]


def test_summary_json_of_one_shape_is_byte_identical_whatever_the_order_of_the_replicas():
    once = summary_configmap(run(gke_cluster(), required([CHAT_0, CHAT_1])))
    again = summary_configmap(run(gke_cluster(), required([CHAT_1, CHAT_0])))
    assert once["data"]["summary.json"] == again["data"]["summary.json"]
    assert once == again


def test_unresolved_replicas_keep_the_observed_summary_unchanged():
    xr = gke_cluster()
    composed = summary_configmap(run(xr, required(REPLICAS)))
    observed = {KEY: observe(composed, name=composed["metadata"]["name"])}
    # The cluster has grown meanwhile; a summary without its replicas would read as free
    # capacity, so the last one is kept as it was until the replicas are known.
    grown = copy.deepcopy(xr)
    grown["spec"]["nodePools"][0]["nodeCount"] = 3
    rsp = run(grown, required(None), observed)
    assert [p["nodes"] for p in desired_status(rsp)["gpuPools"]] == [3, 2]
    kept = summary_configmap(rsp)
    assert kept == composed
    assert kept["data"]["summary.json"] == composed["data"]["summary.json"]
    # Once they are resolved again the summary follows the cluster.
    fresh = cs.parse(summary_configmap(run(grown, required(REPLICAS), observed)))
    assert [p["nodes"] for p in fresh["status"]["gpuPools"]] == [3, 2]


def test_unresolved_replicas_compose_no_summary_that_was_not_observed():
    rsp = run(gke_cluster(), required(None))
    assert KEY not in desired_resources(rsp)
    assert "gke-cluster" in desired_resources(rsp)  # the rest of the cluster goes on


def test_scheduler_sees_exactly_the_devices_the_cluster_publishes_for_each_pool():
    rsp = run(gke_cluster(), required(REPLICAS))
    published = desired_status(rsp)["gpuPools"]
    by_class = {c["metadata"]["name"]: c for c in CLASSES}
    pools = {p["name"]: p["className"] for p in gke_cluster()["spec"]["nodePools"]}
    for pool in published:
        devices = cs.published_devices(by_class[pools[pool["name"]]]["spec"]["devices"])
        assert devices == pool["devices"], pool["name"]
    # The scheduler's view of the pools (summary joined with each class's devices) is the
    # cluster's published status, field for field.
    devices = {n: cs.published_devices(c["spec"]["devices"]) for n, c in by_class.items()}
    view = cs.cluster_view(cs.parse(summary_configmap(rsp)), devices)
    assert view["status"]["gpuPools"] == published
    assert view["metadata"]["labels"]["region"] == "us-central1"


def test_a_not_ready_cluster_keeps_since_when_in_its_summary():
    """The failover clock of a candidate cluster starts at Ready=False's transition."""
    xr = gke_cluster()
    since = "2026-11-27T10:00:00Z"
    xr["status"] = {
        "conditions": [
            {
                "type": "Ready",
                "status": "False",
                "reason": "Unavailable",
                "lastTransitionTime": since,
            }
        ]
    }
    content = cs.parse(summary_configmap(run(xr, required([]))))
    assert content["status"]["conditions"] == [
        {"type": "Ready", "status": "False", "lastTransitionTime": since}
    ]


def test_a_held_cluster_publishes_a_not_ready_summary_of_its_current_replicas():
    """A cluster held (here: a spec the schema would reject) takes nothing new: its summary
    says so and keeps counting what lands on it, instead of offering stale capacity."""
    xr = gke_cluster()
    observed = {KEY: observe(summary_configmap(run(xr, required([CHAT_0]))), {})}
    broken = copy.deepcopy(xr)
    broken["spec"]["nodePools"][0]["nodeCount"] = "lots"
    content = cs.parse(summary_configmap(run(broken, required(REPLICAS), observed)))
    assert content["status"]["conditions"] == [{"type": "Ready", "status": "False"}]
    assert sorted(r["metadata"]["name"] for r in cs.replica_views(content)) == [
        "chat-0", "chat-1", "embed-0"
    ]  # fmt: skip


def test_configmap_names_of_long_cluster_names_do_not_collide():
    shared = "c" * 240
    first, second = cs.configmap_name(shared + "-one"), cs.configmap_name(shared + "-two")
    assert first != second
    assert max(len(first), len(second)) <= 253


def test_a_summary_text_is_parsed_once_and_an_unreadable_one_is_refused_each_time():
    text = cs.configmap("c-1", {}, cs.summary({"metadata": {"name": "c-1"}}, {}, []))["data"][
        cs.DATA_KEY
    ]
    first = cs.parse_shared(text)
    assert first["cluster"] == "c-1"
    assert cs.parse_shared(str(text)) is first  # readers share it; none may modify it
    other = cs.configmap("c-2", {}, cs.summary({"metadata": {"name": "c-2"}}, {}, []))["data"][
        cs.DATA_KEY
    ]
    assert cs.parse_shared(other)["cluster"] == "c-2"
    for bad in ('{"version": 99, "cluster": "c-1"}', "not json"):
        for _ in range(2):
            with pytest.raises(cs.UnreadableSummaryError):
                cs.parse_shared(bad)


def test_the_cache_summary_says_where_each_mounted_cache_is_staged_yet():
    mounting = copy.deepcopy(CHAT_0)
    mounting["metadata"]["labels"]["modelplane.ai/modelcache"] = "qwen"
    cache_object = {
        "apiVersion": "kubernetes.m.crossplane.io/v1alpha1",
        "kind": "Object",
        "metadata": {"name": "qwen-x1", "namespace": "ml",
                     "labels": {"modelplane.ai/cache-cluster": CLUSTER}},
        "spec": {"forProvider": {"manifest": {
            "apiVersion": "v1", "kind": "PersistentVolumeClaim",
            "metadata": {"name": "modelcache-ml-qwen-1", "namespace": "ml",
                         "labels": {"modelplane.ai/modelcache": "qwen"}}}}},
    }  # fmt: skip
    label = cs.cache_label("ml", "qwen")
    wanted = run(gke_cluster(), required([mounting, CHAT_1]))
    assert desired_resources(wanted)["cache-summary"]["metadata"]["labels"][label] == "wanted"
    staged_required = required([mounting, CHAT_1]) | {"cache-objects": [cache_object]}
    staged = desired_resources(run(gke_cluster(), staged_required))["cache-summary"]
    assert staged["metadata"]["labels"][label] == "staged"
    # The caches' Objects not resolved yet: both summaries stay as they were, not "wanted".
    observed = {key: observe(desired_resources(run(gke_cluster(), staged_required))[key],
                             name=f"{key}-x") for key in (KEY, "cache-summary")}  # fmt: skip
    unresolved = required([mounting, CHAT_1])
    del unresolved["cache-objects"]
    held = desired_resources(run(gke_cluster(), unresolved, observed))
    assert held["cache-summary"]["metadata"]["labels"][label] == "staged"
    assert held[KEY]["data"] == observed[KEY]["data"]
