"""Properties of published capacity (design/capacity.md) and of holds, over many specs."""

from __future__ import annotations

from compose_inference_cluster import plan
from hypothesis import given, settings
from hypothesis import strategies as st
from modelplane.validation import defaulted

CLASS_NAMES = ["gke-a", "gke-b", "gke-c"]


def klass(name: str, gpus: int) -> dict:
    return defaulted({
        "apiVersion": "modelplane.ai/v1alpha1", "kind": "InferenceClass",
        "metadata": {"name": name},
        "spec": {
            "provisioning": {"provider": "GKE", "gke": {
                "machineType": "g2-standard-8",
                "accelerator": {"type": "nvidia-l4", "count": gpus}}},
            "devices": [{"name": "gpu", "driver": "gpu.nvidia.com",
                         "deviceClassName": "gpu.nvidia.com", "count": gpus}],
        },
    })  # fmt: skip


@st.composite
def pools(draw: st.DrawFn) -> list[dict]:
    count = draw(st.integers(1, 8))
    out = []
    for i in range(count):
        node_count = draw(st.integers(0, 8))
        pool: dict = {"name": f"p{i}", "className": draw(st.sampled_from(CLASS_NAMES)),
                      "nodeCount": node_count, "zones": ["us-central1-a"]}  # fmt: skip
        if draw(st.booleans()):
            pool["maxNodeCount"] = draw(st.integers(max(node_count, 1), 50))
        if draw(st.booleans()):
            pool["minNodeCount"] = draw(st.integers(0, node_count))
        out.append(pool)
    return out


def cluster(node_pools: list[dict]) -> dict:
    return defaulted({
        "apiVersion": "modelplane.ai/v1alpha1", "kind": "InferenceCluster",
        "metadata": {"name": "c"},
        "spec": {"cluster": {"source": "GKE", "gke": {"project": "acme-inference",
                                                      "region": "us-central1"}},
                 "nodePools": node_pools},
    })  # fmt: skip


def required(gpus: dict[str, int], missing: set[str] = frozenset()) -> dict:
    req: dict = {"model-replicas": [], "replica-objects": []}
    for name in CLASS_NAMES:
        req[f"class-{name}"] = [] if name in missing else [klass(name, gpus[name])]
    return req


GPUS = st.fixed_dictionaries({n: st.integers(1, 8) for n in CLASS_NAMES})


@settings(max_examples=50, deadline=None)
@given(pools(), GPUS)
def test_nodes_is_the_current_size_and_max_nodes_the_bound(node_pools, gpus):
    outcome = plan.compose(cluster(node_pools), {}, required(gpus))
    published = outcome.composite_status["gpuPools"]
    assert [p["name"] for p in published] == [p["name"] for p in node_pools]
    for pool, entry in zip(node_pools, published, strict=True):
        assert entry["nodes"] == pool["nodeCount"]
        assert entry.get("maxNodes") == pool.get("maxNodeCount")
        assert entry["devices"][0]["count"] == gpus[pool["className"]]
        assert entry["devices"][0]["claim"] == "DRA"


@settings(max_examples=50, deadline=None)
@given(pools(), GPUS, st.sets(st.sampled_from(CLASS_NAMES), min_size=1))
def test_a_missing_class_never_drops_a_composed_resource_and_holds_back_only_its_pools(
    node_pools, gpus, missing
):
    xr = cluster(node_pools)
    healthy = plan.compose(xr, {}, required(gpus))
    observed = {
        key: {**c.body, "metadata": {**c.body["metadata"], "uid": key}}
        for key, c in healthy.resources.items()
    }
    xr["status"] = healthy.composite_status
    used = {p["className"] for p in node_pools}
    outcome = plan.compose(xr, observed, required(gpus, missing))
    assert set(outcome.resources) >= set(observed)
    bad = {p["name"] for p in node_pools if p["className"] in missing}
    published = outcome.composite_status["gpuPools"]
    # Issue 21: only the pools of a missing class leave gpuPools (the scheduler keeps replicas
    # pinned to a pool the spec still declares); the others are published unchanged.
    assert published == [e for e in healthy.composite_status["gpuPools"] if e["name"] not in bad]
    assert {e["name"] for e in outcome.composite_status["unavailablePools"]} == bad
    if used & missing:
        assert outcome.composite_ready is not False
