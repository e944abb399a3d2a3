"""Properties of both cloud-cluster compositions over generated pool sets: every composed
manifest validates against its provider model, each pool gets exactly one node pool carrying
the modelplane.ai/pool contract, and an invalid spec re-emits exactly what was observed."""

from __future__ import annotations

from compose_eks_cluster.eks_compose import compose_eks_cluster
from compose_gke_cluster.gke_compose import compose_gke_cluster
from hypothesis import given, settings
from hypothesis import strategies as st
from modelplane_common.testing import validate_against_model

NAMES = st.from_regex(r"[a-z][a-z0-9]{0,10}", fullmatch=True).filter(lambda n: n != "system")


@st.composite
def pools(draw: st.DrawFn, cloud: str) -> list[dict]:
    names = draw(st.lists(NAMES, min_size=1, max_size=8, unique=True))
    zones = ["us-central1-a", "us-central1-b", "us-central1-c"]
    if cloud == "EKS":
        zones = ["us-east-1a", "us-east-1b", "us-east-1c"]
    out = []
    for name in names:
        low = draw(st.integers(0, 3))
        size = draw(st.integers(low, low + 4))
        high = draw(st.integers(max(size, 1), size + 8))
        pool: dict = {
            "name": name,
            "role": "GPU",
            "nodeCount": size,
            "minNodeCount": low,
            "maxNodeCount": high,
            "zones": draw(st.lists(st.sampled_from(zones), min_size=1, max_size=3, unique=True)),
        }
        if cloud == "GKE":
            pool["machineType"] = "g2-standard-8"
            pool["gpu"] = {
                "acceleratorType": "nvidia-l4",
                "acceleratorCount": draw(st.integers(1, 8)),
            }
        else:
            pool["instanceType"] = "g6.xlarge"
            pool["gpu"] = {"acceleratorType": "nvidia-l4"}
        out.append(pool)
    return out


def xr(cloud: str, node_pools: list[dict]) -> dict:
    spec: dict = {"region": "us-central1" if cloud == "GKE" else "us-east-1"}
    if cloud == "GKE":
        spec["project"] = "acme-inference"
    spec["nodePools"] = node_pools
    return {
        "apiVersion": "infrastructure.modelplane.ai/v1alpha1",
        "kind": f"{cloud}Cluster",
        "metadata": {"name": "fleet-1", "namespace": "modelplane-system"},
        "spec": spec,
    }


COMPOSE = {"GKE": compose_gke_cluster, "EKS": compose_eks_cluster}
POOL_KIND = {"GKE": "nodepool", "EKS": "nodegroup"}


def labels_of(body: dict) -> dict:
    fp = body["spec"]["forProvider"]
    return (fp.get("nodeConfig") or fp)["labels"]


@settings(max_examples=30, deadline=None)
@given(st.sampled_from(["GKE", "EKS"]).flatmap(lambda c: st.tuples(st.just(c), pools(c))))
def test_every_pool_is_composed_valid_and_labelled(case):
    cloud, node_pools = case
    outcome = COMPOSE[cloud](xr(cloud, node_pools), {})
    prefix = f"{POOL_KIND[cloud]}-"
    composed_pools = {
        k[len(prefix) :]: v.body for k, v in outcome.resources.items() if k.startswith(prefix)
    }
    assert set(composed_pools) == {p["name"] for p in node_pools} | {"system"}
    for name, body in composed_pools.items():
        assert labels_of(body)["modelplane.ai/pool"] == name
    for composed in outcome.resources.values():
        validate_against_model(composed.body)


@settings(max_examples=30, deadline=None)
@given(
    st.sampled_from(["GKE", "EKS"]).flatmap(lambda c: st.tuples(st.just(c), pools(c))),
    st.sampled_from(["no-gpu", "bad-zone", "too-many-nodes", "system-name"]),
)
def test_invalid_spec_re_emits_exactly_what_was_observed(case, breakage):
    cloud, node_pools = case
    first = COMPOSE[cloud](xr(cloud, node_pools), {})
    observed = {}
    for key, composed in first.resources.items():
        body = {**composed.body, "metadata": {**composed.body.get("metadata", {}), "name": key}}
        observed[key] = {**body, "status": {"conditions": [{"type": "Ready", "status": "True"}]}}
    broken = [dict(p) for p in node_pools]
    target = broken[-1]
    if breakage == "no-gpu":
        target.pop("gpu")
    elif breakage == "bad-zone":
        target["zones"] = ["mars-1a"]
    elif breakage == "too-many-nodes":
        target["nodeCount"] = target["maxNodeCount"] + 1
    else:
        target["name"] = "system"
    outcome = COMPOSE[cloud](xr(cloud, broken), observed)
    assert set(outcome.resources) == set(observed)
    for key, composed in outcome.resources.items():
        assert composed.body["spec"] == observed[key]["spec"]
        assert composed.ready is True
    assert outcome.conditions[0].reason == "InvalidSpec"
    assert outcome.composite_ready is False
