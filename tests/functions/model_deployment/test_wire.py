"""wire.py reads clusters from protobuf, and a capacity summary keeps of each replica, without
losing what the scheduler needs."""

from __future__ import annotations

import md_fleet as f
from compose_model_deployment import devices, scheduler, wire
from hypothesis import given, settings
from hypothesis import strategies as st
from modelplane_common import capacity_summary as cs
from modelplane_common.observed import is_ready
from modelplane_common.plain import to_plain, to_struct
from modelplane_common.testing import make_request

JSON_VALUES = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(-(2**53) + 1, 2**53 - 1)
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(max_size=5),
    lambda inner: (
        st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=4), inner, max_size=4)
    ),
    max_leaves=20,
)


@settings(max_examples=50, deadline=None)
@given(JSON_VALUES)
def test_plain_matches_the_shared_decoder(value):
    struct = to_struct({"v": value})
    assert wire.plain(struct.fields["v"]) == to_plain(struct)["v"]


def _request(required):
    xr = {"metadata": {"name": "m", "namespace": f.NAMESPACE}, "spec": f.spec()}
    return make_request(xr, required=required)


def test_unresolved_is_none_and_empty_is_empty():
    assert wire.clusters(_request({}), "clusters") is None
    assert wire.clusters(_request({"clusters": []}), "clusters") == []


def test_a_capacity_summary_keeps_what_the_ledger_reads_of_each_replica():
    gang = f.spec(1, f.gang(nodes=3, copies=2, claimless_leader=True), f.standalone("side"))
    theirs = f.replica(gang, "a", 0, pools=["x", "y"], deployment_name="other", ready=True)
    theirs["metadata"]["creationTimestamp"] = "2026-11-27T12:00:00Z"
    elsewhere = f.replica(gang, "a", 1, pools=["x", "y"], namespace="other-team")
    content = cs.parse(cs.configmap("a", {}, cs.summary(f.cluster("a"), {}, [theirs, elsewhere])))
    read = sorted(cs.replica_views(content), key=lambda r: r["metadata"]["namespace"])
    assert len(content["shapes"]) == 1  # one shape, stored once
    for full, summary in zip([theirs, elsewhere], read, strict=True):
        original, parsed = scheduler.parse_replica(full), scheduler.parse_replica(summary)
        assert (parsed.name, parsed.namespace, parsed.deployment, parsed.index) == (
            original.name, original.namespace, original.deployment, original.index
        )  # fmt: skip
        assert (parsed.created, parsed.cluster) == (original.created, original.cluster)
        assert list(parsed.claims()) == list(original.claims())
        assert "template" not in str(summary)
    assert [is_ready(r) for r in read] == [True, False]
    # What each pod of a claiming member takes (D11): the devices, per pool and gang.
    claims = [
        (c.pool, c.copies, c.pods, c.worker, [(r.device_class, r.count) for r in c.requests])
        for c in scheduler.parse_replica(read[0]).claims()
    ]
    assert claims == [
        ("x", 2, 3, True, [("gpu.nvidia.com", 1)]),
        ("y", 1, 1, False, [("gpu.nvidia.com", 1)]),
    ]
    (request_,) = read[0]["spec"]["engines"][0]["members"][1]["deviceRequests"]
    assert request_["selectors"] == [{"cel": f.GPU_SELECTOR}]


def test_clusters_keep_metadata_and_status():
    cluster = f.cluster("a", f.pool("p", 3), labels={"tier": "prod"})
    taints = [{"key": "modelplane.ai/maintenance", "effect": "NoExecute"}]
    cluster["spec"] = {"cluster": {"source": "Existing"}, "taints": taints}
    (read,) = wire.clusters(_request({"clusters": [cluster]}), "clusters")
    # Of the spec only what the scheduler reads: taints and the failover grace period.
    assert read == {
        "metadata": cluster["metadata"],
        "spec": {"taints": taints},
        "status": cluster["status"],
    }


def test_identical_pool_entries_are_decoded_once_and_shared():
    fleet = [f.cluster("a", f.pool("p", 3)), f.cluster("b", f.pool("p", 3), f.pool("q", 1))]
    a, b = wire.clusters(_request({"clusters": fleet}), "clusters")
    assert a["status"]["gpuPools"][0] is b["status"]["gpuPools"][0]
    assert a["status"]["gpuPools"][0] == fleet[0]["status"]["gpuPools"][0]
    assert b["status"]["gpuPools"][1]["nodes"] == 1
    pool = devices.parse_pool(a["status"]["gpuPools"][0])
    assert devices.parse_pool(b["status"]["gpuPools"][0]) is pool


def test_plain_pool_dicts_are_never_trusted_by_identity():
    entry = f.pool("p", 3)
    assert devices.parse_pool(entry).nodes == 3
    entry["nodes"] = 1
    assert devices.parse_pool(entry).nodes == 1
