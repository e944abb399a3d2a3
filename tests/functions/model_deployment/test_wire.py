"""wire.py reads the fleet from protobuf without losing what the scheduler needs."""

from __future__ import annotations

import md_fleet as f
from compose_model_deployment import devices, scheduler, wire
from hypothesis import given, settings
from hypothesis import strategies as st
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
    assert wire.replicas(_request({}), "all-replicas", f.NAMESPACE, "m") is None
    resolved = _request({"clusters": [], "all-replicas": []})
    assert wire.clusters(resolved, "clusters") == []
    assert wire.replicas(resolved, "all-replicas", f.NAMESPACE, "m") == []


def test_replicas_keep_ours_whole_and_what_the_ledger_reads_of_others():
    gang = f.spec(1, f.gang(nodes=3, copies=2, claimless_leader=True), f.standalone("side"))
    ours = f.replica(gang, "a", 1, pools=["x", "y"], ready=True)
    theirs = f.replica(gang, "a", 0, pools=["x", "y"], deployment_name="other")
    same_name_elsewhere = f.replica(gang, "b", 0, namespace="other-team")
    request = _request({"all-replicas": [ours, theirs, same_name_elsewhere]})
    read = wire.replicas(request, "all-replicas", f.NAMESPACE, "m")
    assert read[0] == ours
    for full, summary in zip([theirs, same_name_elsewhere], read[1:], strict=True):
        assert summary["metadata"] == full["metadata"]
        assert list(scheduler.parse_replica(summary).claims()) == list(
            scheduler.parse_replica(full).claims()
        )
        assert "template" not in str(summary)
    # What each pod of a claiming member takes (D11): the devices, per pool and gang.
    claims = [
        (c.pool, c.copies, c.pods, c.worker, [(r.device_class, r.count) for r in c.requests])
        for c in scheduler.parse_replica(read[1]).claims()
    ]
    assert claims == [
        ("x", 2, 3, True, [("gpu.nvidia.com", 1)]),
        ("y", 1, 1, False, [("gpu.nvidia.com", 1)]),
    ]
    (request_,) = read[1]["spec"]["engines"][0]["members"][1]["deviceRequests"]
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
