"""Spec model-deployment §4.9 (S1-S32) on the pure scheduler, plus issue items 1 and 3."""

from __future__ import annotations

import random

import md_fleet as f
import pytest
from compose_model_deployment import scheduler

A100 = 'device.attributes["gpu.nvidia.com"].architecture == "Ampere"'
HOPPER = 'device.attributes["gpu.nvidia.com"].architecture == "Hopper"'


def test_s1_no_clusters():
    result = f.run(f.spec(), [])
    assert result.placements == [] and result.checked == 0


def test_s2_one_cluster():
    result = f.run(f.spec(), [f.cluster("a")])
    assert f.where(result) == ["a/0"] and f.pools_of(result) == [["p"]]
    (placement,) = result.placements
    assert placement.name == "m-" + placement.name.split("-")[-1]
    ((resolved,),) = placement.engines[0].resolved
    assert (resolved.name, resolved.device_class, resolved.count) == ("gpu", "gpu.nvidia.com", 1)


@pytest.mark.parametrize(
    ("kwargs", "reason"),
    [
        ({"ready": False}, "not Ready"),
        ({"gateway": None}, "no gateway address"),
        ({"provider": None}, "no provider config"),
    ],
)
def test_s3_ineligible_cluster(kwargs, reason):
    result = f.run(f.spec(), [f.cluster("a", **kwargs)])
    assert result.placements == []
    assert scheduler.scheduled_message(result, 1) == (
        f"0 of 1 replicas scheduled (checked 1 clusters); 0/1 clusters available: 1 {reason}"
    )


def test_s4_gang_larger_than_the_pool():
    result = f.run(f.spec(1, f.gang(nodes=3)), [f.cluster("a", f.pool("p", 2))])
    assert result.placements == []
    assert result.shortfall == (
        '1 insufficient free devices (needs 1 GPU on each of 3 nodes; pool "p" has 2 nodes)'
    )


def test_s5_sticky():
    deployment = f.spec()
    result = f.run(deployment, [f.cluster("a"), f.cluster("b")], [f.replica(deployment, "b", 0)])
    assert f.where(result) == ["b/0"]
    assert result.placements[0].observed is not None


def test_s6_kept_on_a_degraded_cluster():
    deployment = f.spec()
    clusters = [f.cluster("a", ready=False, gateway=None), f.cluster("b")]
    result = f.run(deployment, clusters, [f.replica(deployment, "a", 0)])
    assert f.where(result) == ["a/0"]


def test_s7_cluster_deleted():
    deployment = f.spec()
    result = f.run(deployment, [f.cluster("b")], [f.replica(deployment, "a", 0)])
    assert f.where(result) == ["b/0"]
    assert result.placements[0].observed is None


def test_s8_spread():
    result = f.run(f.spec(2), [f.cluster("a"), f.cluster("b")])
    assert f.where(result) == ["a/0", "b/0"]


def test_s9_pack_after_spread():
    clusters = [f.cluster("a", f.pool("p", 4)), f.cluster("b", f.pool("p", 4))]
    assert f.where(f.run(f.spec(3), clusters)) == ["a/0", "a/1", "b/0"]


def test_s10_uneven_clusters():
    clusters = [f.cluster("a", f.pool("p", 4)), f.cluster("b", f.pool("p", 1))]
    assert f.where(f.run(f.spec(3), clusters)) == ["a/0", "a/1", "b/0"]


def test_s11_lowest_free_index():
    deployment = f.spec(3)
    observed = [f.replica(deployment, "a", 0), f.replica(deployment, "a", 2)]
    result = f.run(deployment, [f.cluster("a", f.pool("p", 4))], observed)
    assert f.where(result) == ["a/0", "a/1", "a/2"]
    assert [p.observed is None for p in result.placements] == [False, True, False]


def test_s12_scale_down_takes_from_the_most_loaded_cluster():
    deployment = f.spec(2)
    observed = [f.replica(deployment, "a", i) for i in (0, 1)] + [f.replica(deployment, "b", 3)]
    clusters = [f.cluster("a", f.pool("p", 4)), f.cluster("b", f.pool("p", 4))]
    assert f.where(f.run(deployment, clusters, observed)) == ["a/0", "b/3"]


def test_s13_scale_down_ties_go_to_the_greatest_cluster_name():
    deployment = f.spec(1)
    observed = [f.replica(deployment, "a", 0), f.replica(deployment, "b", 0)]
    assert f.where(f.run(deployment, [f.cluster("a"), f.cluster("b")], observed)) == ["a/0"]


def test_s14_alphabetical_ties():
    clusters = [f.cluster("c"), f.cluster("a"), f.cluster("b")]
    assert f.where(f.run(f.spec(2), clusters)) == ["a/0", "b/0"]


def test_s15_capacity_used_by_another_deployment():
    other = f.spec()
    used = f.replica(other, "a", 0, deployment_name="other")
    assert f.run(f.spec(), [f.cluster("a", f.pool("p", 1))], [used]).placements == []


def test_s16_unpublished_pool_charges_nothing():
    other = f.replica(f.spec(), "a", 0, pools="gone", deployment_name="other")
    result = f.run(f.spec(), [f.cluster("a", f.pool("p", 1))], [other])
    assert f.where(result) == ["a/0"]


def test_s17_same_name_in_another_namespace_is_not_ours():
    deployment = f.spec()
    theirs = f.replica(deployment, "a", 0, namespace="other-team")
    result = f.run(deployment, [f.cluster("a", f.pool("p", 1))], [theirs])
    assert result.placements == []


def test_s18_replica_on_unpublished_pool_is_drained_make_before_break():
    # Issue 21 supersedes S18's in-place re-placement: the replica whose pool is gone keeps
    # running, untouched, until its replacement (a/2 on p) serves.
    deployment = f.spec(2)
    observed = [f.replica(deployment, "a", 0), f.replica(deployment, "a", 1, pools="gone")]
    result = f.run(deployment, [f.cluster("a", f.pool("p", 3))], observed)
    assert f.where(result) == ["a/0", "a/1", "a/2"]
    old = result.placements[1]
    assert old.frozen and old.draining == 'no longer fits: a has no pool "gone"'
    assert result.placements[2].replaces == old.name
    assert f.pools_of(result)[2] == ["p"]


def test_s19_kept_replica_is_charged_its_observed_shape():
    deployment = f.spec(2, f.standalone(copies=2))
    kept = f.replica(f.spec(1, f.standalone(copies=1)), "a", 0)
    result = f.run(deployment, [f.cluster("a", f.pool("p", 3))], [kept])
    assert f.where(result) == ["a/0", "a/1"]


def test_s20_pinned_pool_no_longer_matches_drains_make_before_break():
    # Issue 21 supersedes S20's in-place update: the old replica serves until a/1 on y does.
    clusters = [f.cluster("a", f.pool("x", 2, f.gpu(architecture="Ampere")), f.pool("y", 2))]
    old = f.replica(f.spec(1, f.standalone("main", A100)), "a", 0, pools="x")
    result = f.run(f.spec(1, f.standalone("main", HOPPER)), clusters, [old])
    assert f.where(result) == ["a/0", "a/1"]
    assert result.placements[0].name == old["metadata"]["name"]
    assert result.placements[0].frozen
    assert result.placements[0].draining.startswith("no longer fits: engine main")
    assert (
        f.pools_of(result)[1] == ["y"] and result.placements[1].replaces == old["metadata"]["name"]
    )


@pytest.mark.parametrize("pinned", ["x", "y"])
def test_s21_sticky_pool(pinned):
    deployment = f.spec()
    clusters = [f.cluster("a", f.pool("x", 2), f.pool("y", 2))]
    result = f.run(deployment, clusters, [f.replica(deployment, "a", 0, pools=pinned)])
    assert f.pools_of(result) == [[pinned]]


def _small_big() -> dict:
    return f.cluster(
        "a", f.pool("small", 4, f.gpu(architecture="Ampere")), f.pool("big", 4, f.gpu())
    )


def test_s22_leader_follows_the_worker():
    engine = f.gang(leader=f.node_selector(f.GPU_SELECTOR), worker=f.node_selector(HOPPER), nodes=1)
    result = f.run(f.spec(1, engine), [_small_big()])
    assert f.pools_of(result) == [["big"]]
    assert all(result.placements[0].engines[0].resolved)


def test_s23_never_split():
    engine = f.gang(leader=f.node_selector(HOPPER), worker=f.node_selector(A100))
    result = f.run(f.spec(1, engine), [_small_big()])
    assert result.placements == []
    assert result.shortfall == '1 engine "main" would have to be split across pools'


def test_s24_gang_goes_where_it_fits():
    clusters = [f.cluster("a", f.pool("big", 1)), f.cluster("b", f.pool("big", 2))]
    result = f.run(f.spec(1, f.gang(nodes=1)), clusters)
    assert f.where(result) == ["b/0"] and f.pools_of(result) == [["big"]]


def test_s25_claimless_leader_costs_nothing():
    result = f.run(
        f.spec(1, f.gang(nodes=1, claimless_leader=True)), [f.cluster("a", f.pool("p", 1))]
    )
    assert f.where(result) == ["a/0"]
    leader, worker = result.placements[0].engines[0].resolved
    assert leader == () and len(worker) == 1


def test_s26_a_member_that_can_claim_is_not_stranded_on_a_synthetic_match():
    x = f.pool("x", 2, f.gpu(), f.nic("Synthetic"))
    y = f.pool("y", 2, f.gpu(), f.nic("DRA"))
    engine = f.gang(leader=f.node_selector(f.NIC_SELECTOR, name="nic"))
    result = f.run(f.spec(1, engine), [f.cluster("a", x, y)])
    assert f.pools_of(result) == [["y"]]
    leader, worker = result.placements[0].engines[0].resolved
    assert [r.device_class for r in leader] == ["nic.nvidia.com"] and len(worker) == 1


def test_s27_synthetic_only_member_rides_along_claimless():
    x = f.pool("x", 1, f.gpu(), f.nic("Synthetic"))
    engine = f.gang(leader=f.node_selector(f.NIC_SELECTOR, name="nic"))
    result = f.run(f.spec(1, engine), [f.cluster("a", x)])
    assert f.pools_of(result) == [["x"]]
    leader, worker = result.placements[0].engines[0].resolved
    assert leader == () and len(worker) == 1


def test_s28_synthetic_only_engine_is_ineligible():
    engine = f.standalone("main", f.NIC_SELECTOR)
    result = f.run(f.spec(1, engine), [f.cluster("a", f.pool("x", 2, f.gpu(), f.nic()))])
    assert result.placements == []
    assert result.shortfall == '1 only Synthetic devices match engine "main"'


def test_s29_whole_node_request_skips_the_small_pool():
    clusters = [f.cluster("a", f.pool("x", 2, f.gpu(count=4)), f.pool("y", 2, f.gpu(count=8)))]
    result = f.run(f.spec(1, f.standalone(count=8)), clusters)
    assert f.pools_of(result) == [["y"]]
    assert result.placements[0].engines[0].resolved[0][0].count == 8


def test_s30_trial_ledger_prevents_double_booking():
    deployment = f.spec(
        1,
        f.standalone("prefill", copies=3, phase="Prefill"),
        f.standalone("decode", copies=2, phase="Decode"),
        serving={"mode": "PrefillDecode"},
    )
    result = f.run(deployment, [f.cluster("a", f.pool("p", 4))])
    assert result.placements == []
    assert result.shortfall == (
        '1 insufficient free devices (needs 1 GPU on one node; pool "p" has none free on any '
        "node after the replica's other pods)"
    )


def test_s31_duplicate_identity_first_name_wins():
    deployment = f.spec()
    clusters = [f.cluster("a", f.pool("x", 2), f.pool("y", 2))]
    observed = [
        f.replica(deployment, "a", 0, pools="y", name="m-0-dup"),
        f.replica(deployment, "a", 0, pools="x", name="m-0"),
    ]
    result = f.run(deployment, clusters, observed)
    assert [p.name for p in result.placements] == ["m-0"] and f.pools_of(result) == [["x"]]


def test_s32_malformed_selector_stops_scheduling_naming_the_request():
    deployment = f.spec(1, f.standalone("main", f.GPU_SELECTOR, "device.driver =="))
    parsed = scheduler.parse_deployment("m", f.NAMESPACE, deployment)
    with pytest.raises(scheduler.InvalidSelectorError) as err:
        scheduler.compile_selectors(parsed)
    assert str(err.value).startswith(
        "spec.engines[0].members[0].nodeSelector.devices[0].selectors[1].cel: <input>:1:17:"
    )


# --- issue item 1: say why -------------------------------------------------------------------


def _mixed_fleet() -> list[dict]:
    return [
        f.cluster("a", ready=False),
        f.cluster("b", ready=False),
        f.cluster("c", f.pool("l4", 4, f.gpu(architecture="Ada"))),
        f.cluster("d", f.pool("h100", 1)),
        f.cluster("e", f.pool("h100", 1)),
    ]


def test_shortfall_names_each_clusters_reason():
    deployment = f.spec(1, f.gang(nodes=1, worker=f.node_selector(HOPPER)))
    result = f.run(deployment, _mixed_fleet())
    assert scheduler.scheduled_message(result, 1) == (
        "0 of 1 replicas scheduled (checked 5 clusters); 0/5 clusters available: "
        '2 insufficient free devices (needs 1 GPU on one node; pool "h100" has none free on any '
        "node after the replica's other pods), 2 not Ready, "
        '1 no pool matches engine "main" member Worker (pool "l4": request "gpu" selector 0 '
        'matches no device (attribute gpu.nvidia.com/architecture is "Ada"))'
    )


def test_partial_shortfall_reports_the_rest():
    fleet = [f.cluster("a", f.pool("p", 1)), f.cluster("b", ready=False)]
    result = f.run(f.spec(3), fleet)
    assert f.where(result) == ["a/0"]
    assert scheduler.scheduled_message(result, 3) == (
        "1 of 3 replicas scheduled; 0/2 clusters available for the rest: "
        '1 insufficient free devices (needs 1 GPU on one node; pool "p" has none free on any '
        "node), 1 not Ready"
    )


def test_headroom_is_named_when_the_pool_could_scale_up():
    fleet = [f.cluster("a", f.pool("p", 1, maxNodes=4))]
    result = f.run(f.spec(1, f.gang(nodes=1)), fleet)
    assert result.shortfall == (
        '1 insufficient free devices (needs 1 GPU on one node; pool "p" has none free on any '
        "node after the replica's other pods; fits after it scales up)"
    )


def test_message_is_stable_and_independent_of_input_order():
    deployment = f.spec(2, f.gang(nodes=1, worker=f.node_selector(HOPPER)))
    fleet = _mixed_fleet()
    expected = scheduler.scheduled_message(f.run(deployment, fleet), 2)
    for seed in range(5):
        shuffled = fleet[:]
        random.Random(seed).shuffle(shuffled)
        assert scheduler.scheduled_message(f.run(deployment, shuffled), 2) == expected


def test_message_is_bounded_for_a_large_fleet():
    fleet = [f.cluster(f"c{i:03}", f.pool(f"pool-{i}", 1)) for i in range(300)]
    deployment = f.spec(1, f.standalone(count=1, copies=2))
    result = f.run(deployment, fleet)
    message = scheduler.scheduled_message(result, 1)
    assert len(message) <= scheduler.MAX_MESSAGE_LENGTH
    # 300 reasons differing only in pool name are one group, without details.
    assert message.endswith("0/300 clusters available: 300 insufficient free devices")


def test_more_kinds_than_shown_are_summed_up():
    reasons = [f'no pool matches engine "e{i}"' for i in range(8) for _ in range(8 - i)]
    summary = scheduler._summarise(reasons)
    assert summary.startswith('8 no pool matches engine "e0", 7 no pool matches engine "e1"')
    assert summary.endswith("3 for other reasons")  # e6 (2) and e7 (1)


# --- issue item 3: nothing lost --------------------------------------------------------------


def test_malformed_pinned_pool_entry_keeps_the_replica_as_observed():
    deployment = f.spec()
    broken = {"name": "p", "nodes": 2, "devices": "not a list"}
    result = f.run(deployment, [f.cluster("a", broken)], [f.replica(deployment, "a", 0)])
    assert f.where(result) == ["a/0"] and result.placements[0].frozen


def test_unpublished_gpu_pools_keep_the_replica_and_place_nothing_new():
    deployment = f.spec(2)
    withheld = f.cluster("a")
    del withheld["status"]["gpuPools"]
    result = f.run(deployment, [withheld], [f.replica(deployment, "a", 0)])
    assert f.where(result) == ["a/0"] and result.placements[0].frozen
    assert result.shortfall == "1 no status.gpuPools published"


def test_malformed_device_data_in_the_pinned_pool_keeps_the_replica_as_observed():
    deployment = f.spec()
    garbled = f.pool("p", 2, dict(f.gpu(), attributes=["not", "a", "map"]))
    result = f.run(deployment, [f.cluster("a", garbled)], [f.replica(deployment, "a", 0)])
    assert f.where(result) == ["a/0"] and result.placements[0].frozen


def test_a_pool_that_cannot_fit_even_with_its_unreadable_devices_still_moves_the_replica():
    garbled = f.pool("p", 2, dict(f.gpu(count=1), capacity="garbage"))
    old = f.spec()
    wider = f.spec(1, f.standalone(count=8))  # one node of "p" has one device at most
    clusters = [f.cluster("a", garbled, f.pool("q", 2, f.gpu(count=8)))]
    result = f.run(wider, clusters, [f.replica(old, "a", 0)])
    # It moves, make-before-break: a/0 drains while a/1 starts on q.
    assert f.where(result) == ["a/0", "a/1"] and f.pools_of(result)[1] == ["q"]
    assert result.placements[0].draining and not result.placements[1].frozen


def test_an_entry_whose_name_cannot_be_read_keeps_replicas_pinned_to_missing_pools():
    deployment = f.spec()
    nameless = {"nodes": 2, "devices": [f.gpu()]}
    result = f.run(deployment, [f.cluster("a", nameless)], [f.replica(deployment, "a", 0)])
    assert f.where(result) == ["a/0"] and result.placements[0].frozen


def test_a_malformed_entry_does_not_hide_the_clusters_other_pools():
    fleet = [f.cluster("a", {"name": "broken", "devices": 7}, f.pool("p", 1))]
    assert f.pools_of(f.run(f.spec(), fleet)) == [["p"]]


def test_engines_that_no_longer_line_up_are_replaced():
    old = f.spec(1, f.standalone("old"))
    result = f.run(f.spec(1, f.standalone("new")), [f.cluster("a")], [f.replica(old, "a", 0)])
    assert f.where(result) == ["a/0"] and result.placements[0].observed is not None
    assert not result.placements[0].frozen


def test_cluster_selector_filters_candidates():
    fleet = [f.cluster("a"), f.cluster("b", labels={"tier": "prod"})]
    result = f.run(f.spec(1, clusterSelector={"matchLabels": {"tier": "prod"}}), fleet)
    assert f.where(result) == ["b/0"] and result.checked == 1
