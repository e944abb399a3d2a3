"""Taints, tolerations, make-before-break drains and failover on the pure scheduler
(issue 15)."""

from __future__ import annotations

import md_fleet as f
import pytest
from compose_model_deployment import fn, names, scheduler
from hypothesis import given, settings
from hypothesis import strategies as st

MAINTENANCE = {"key": "modelplane.ai/maintenance", "effect": "NoExecute"}
CORDON = {"key": "modelplane.ai/maintenance", "effect": "NoSchedule"}
A0 = names.replica_name("m", "a", 0)
B0 = names.replica_name("m", "b", 0)


def test_no_schedule_keeps_the_running_replica_and_places_new_ones_elsewhere():
    deployment = f.spec(2)
    fleet = [f.cluster("a", taints=[CORDON]), f.cluster("b")]
    result = f.run(deployment, fleet, [f.replica(deployment, "a", 0)])
    assert f.where(result) == ["a/0", "b/0"]
    assert [p.draining for p in result.placements] == ["", ""]


def test_no_schedule_explains_the_untolerated_taint():
    result = f.run(f.spec(1), [f.cluster("a", taints=[CORDON]), f.cluster("b", ready=False)])
    assert scheduler.scheduled_message(result, 1) == (
        "0 of 1 replicas scheduled (checked 2 clusters); 0/2 clusters available: "
        "1 not Ready, 1 untolerated taint modelplane.ai/maintenance"
    )


@pytest.mark.parametrize(
    "toleration",
    [
        {"key": "modelplane.ai/maintenance", "operator": "Exists"},
        {"key": "modelplane.ai/maintenance", "operator": "Equal", "value": ""},
        {"key": "modelplane.ai/maintenance", "operator": "Exists", "effect": "NoSchedule"},
        {"operator": "Exists"},
    ],
)
def test_a_tolerated_no_schedule_taint_admits_new_replicas(toleration):
    result = f.run(f.spec(1, tolerations=[toleration]), [f.cluster("a", taints=[CORDON])])
    assert f.where(result) == ["a/0"]


@pytest.mark.parametrize(
    "toleration",
    [
        {"key": "modelplane.ai/maintenance", "operator": "Equal", "value": "other"},
        {"key": "modelplane.ai/other", "operator": "Exists"},
        {"key": "modelplane.ai/maintenance", "operator": "Exists", "effect": "NoExecute"},
    ],
)
def test_a_toleration_that_does_not_match_keeps_new_replicas_off(toleration):
    result = f.run(f.spec(1, tolerations=[toleration]), [f.cluster("a", taints=[CORDON])])
    assert f.where(result) == []


def test_no_execute_first_keeps_the_old_replica_and_adds_its_replacement():
    deployment = f.spec(1)
    fleet = [f.cluster("a", taints=[MAINTENANCE]), f.cluster("b")]
    result = f.run(deployment, fleet, [f.replica(deployment, "a", 0, ready=True)], serving=(A0,))
    assert f.where(result) == ["a/0", "b/0"]
    old, new = result.placements
    assert old.draining == "taint modelplane.ai/maintenance:NoExecute" and not old.stuck
    assert new.replaces == A0 and not new.draining
    assert [p.name for p in result.staying] == [B0]
    assert scheduler.drain_message(result) == (
        f"draining: {A0} on a (taint modelplane.ai/maintenance:NoExecute) until {B0} serves"
    )


def _mid_drain() -> tuple[dict, list[dict], list[dict]]:
    """a/0 on a NoExecute-tainted cluster, its replacement b/0 Ready on b."""
    deployment = f.spec(1)
    fleet = [f.cluster("a", taints=[MAINTENANCE]), f.cluster("b")]
    running = [
        f.replica(deployment, "a", 0, ready=True),
        _replacement(f.replica(deployment, "b", 0, ready=True), A0),
    ]
    return deployment, fleet, running


def test_no_execute_keeps_the_old_replica_while_the_replacement_is_not_serving():
    deployment, fleet, running = _mid_drain()
    # Ready but not yet routed (no Ready endpoint): B0 is not in ``serving``.
    result = f.run(deployment, fleet, running, serving=(A0,))
    assert f.where(result) == ["a/0", "b/0"]
    assert result.placements[1].replaces == A0  # the pairing is carried over


def test_no_execute_removes_the_old_replica_once_the_replacement_serves():
    deployment, fleet, running = _mid_drain()
    result = f.run(deployment, fleet, running, serving=(A0, B0))
    assert f.where(result) == ["b/0"]
    assert result.placements[0].replaces == ""  # its partner is gone: the relation ends


def test_a_tolerated_no_execute_taint_leaves_the_replica_alone():
    deployment = f.spec(1, tolerations=[{"key": "modelplane.ai/maintenance", "operator": "Exists"}])
    fleet = [f.cluster("a", taints=[MAINTENANCE]), f.cluster("b")]
    result = f.run(deployment, fleet, [f.replica(deployment, "a", 0, ready=True)], serving=(A0,))
    assert f.where(result) == ["a/0"] and result.draining == []


def test_no_execute_with_nowhere_to_go_keeps_serving_and_says_why():
    deployment = f.spec(1)
    fleet = [f.cluster("a", taints=[MAINTENANCE]), f.cluster("b", f.pool("p", 0))]
    result = f.run(deployment, fleet, [f.replica(deployment, "a", 0, ready=True)], serving=(A0,))
    assert f.where(result) == ["a/0"]
    (old,) = result.placements
    assert old.stuck and old.draining
    assert scheduler.scheduled_message(result, 1) == (
        "0 of 1 replicas scheduled (checked 2 clusters); 0/2 clusters available: "
        '1 insufficient free devices (needs 1 GPU on one node; pool "p" has no nodes), '
        "1 untolerated taint modelplane.ai/maintenance; kept serving, no other cluster fits: "
        f"{A0} on a (taint modelplane.ai/maintenance:NoExecute)"
    )
    # Capacity appears: the drain continues.
    fleet[1] = f.cluster("b")
    result = f.run(deployment, fleet, [f.replica(deployment, "a", 0, ready=True)], serving=(A0,))
    assert f.where(result) == ["a/0", "b/0"] and not result.placements[0].stuck


def test_a_drain_of_several_replicas_never_drops_below_what_serves():
    deployment = f.spec(2)
    fleet = [f.cluster("a", f.pool("p", 4), taints=[MAINTENANCE]), f.cluster("b", f.pool("p", 4))]
    a0, a1 = (f.replica(deployment, "a", i, ready=True) for i in (0, 1))
    result = f.run(deployment, fleet, [a0, a1], serving=(A0, a1["metadata"]["name"]))
    assert f.where(result) == ["a/0", "a/1", "b/0", "b/1"]
    b0, b1 = (_replacement(f.replica(deployment, "b", p.index), p.replaces) for p in result.staying)
    # One replacement serves: exactly one old replica goes, the one it replaces.
    serving = (A0, a1["metadata"]["name"], b0["metadata"]["name"])
    result = f.run(deployment, fleet, [a0, a1, b0, b1], serving=serving)
    assert len(result.draining) == 1
    assert result.draining[0].name == b1["metadata"]["annotations"][scheduler.REPLACES_ANNOTATION]


def test_scaling_down_during_a_drain_drops_the_draining_replica_first():
    deployment = f.spec(1)
    fleet = [f.cluster("a", taints=[MAINTENANCE]), f.cluster("b", f.pool("p", 4))]
    running = [f.replica(deployment, "a", 0, ready=True), f.replica(deployment, "b", 0)]
    result = f.run(deployment, fleet, running, serving=(A0, B0))
    assert f.where(result) == ["b/0"]


# --- failover ----------------------------------------------------------------------------


def _dead(since: str, grace: str | None = None) -> dict:
    return f.cluster("a", ready=False, not_ready_since=since, grace=grace)


def test_a_cluster_not_ready_within_its_grace_period_keeps_its_replica_without_replacement():
    deployment = f.spec(1)
    fleet = [_dead("2026-01-01T00:00:00Z"), f.cluster("b")]
    result = f.run(deployment, fleet, [f.replica(deployment, "a", 0)], now="2026-01-01T00:10:00Z")
    assert f.where(result) == ["a/0"] and result.draining == []


def test_a_cluster_not_ready_past_its_grace_period_fails_over_make_before_break():
    deployment = f.spec(1)
    fleet = [_dead("2026-01-01T00:00:00Z"), f.cluster("b")]
    result = f.run(deployment, fleet, [f.replica(deployment, "a", 0)], now="2026-01-01T00:10:01Z")
    assert f.where(result) == ["a/0", "b/0"]  # the old one stays composed: a may come back
    assert result.placements[0].draining == (
        "cluster not Ready for longer than its failover grace period 10m"
    )
    running = [f.replica(deployment, "a", 0), _replacement(f.replica(deployment, "b", 0), A0)]
    result = f.run(deployment, fleet, running, now="2026-01-01T00:20:00Z", serving=(B0,))
    assert f.where(result) == ["b/0"]


def test_unknown_readiness_past_the_grace_period_never_fails_over():
    """Ready=False with ReadinessKnown=False (statuses being rebuilt, e.g. after a restore) is
    unknown, not a dead cluster: the replica stays where it is and nothing replaces it."""
    deployment = f.spec(1)
    dead = _dead("2026-01-01T00:00:00Z")
    dead["status"]["conditions"].append(
        {"type": "ReadinessKnown", "status": "False", "reason": "Unknown"}
    )
    fleet = [dead, f.cluster("b")]
    result = f.run(deployment, fleet, [f.replica(deployment, "a", 0)], now="2026-01-01T01:00:00Z")
    assert f.where(result) == ["a/0"] and result.draining == []


def test_the_grace_period_is_the_clusters_own():
    deployment = f.spec(1)
    fleet = [_dead("2026-01-01T00:00:00Z", grace="30s"), f.cluster("b")]
    result = f.run(deployment, fleet, [f.replica(deployment, "a", 0)], now="2026-01-01T00:00:31Z")
    assert f.where(result) == ["a/0", "b/0"]


def test_without_a_clock_nothing_fails_over():
    deployment = f.spec(1)
    fleet = [_dead("2026-01-01T00:00:00Z"), f.cluster("b")]
    result = f.run(deployment, fleet, [f.replica(deployment, "a", 0)])
    assert f.where(result) == ["a/0"]


# --- explanations ------------------------------------------------------------------------


def test_reasons_are_counted_by_kind_with_details_only_when_shared():
    deployment = f.spec(3, f.standalone(count=1, copies=2))
    fleet = [
        f.cluster("a", f.pool("p", 2)),
        f.cluster("b", f.pool("x", 1)),
        f.cluster("c", f.pool("y", 1)),
        f.cluster("d", ready=False),
    ]
    result = f.run(deployment, fleet)
    assert scheduler.scheduled_message(result, 3) == (
        "1 of 3 replicas scheduled; 0/4 clusters available for the rest: "
        "3 insufficient free devices, 1 not Ready"
    )


def test_scale_up_hint_only_when_every_engine_fits_at_maximum_sizes():
    two = f.spec(1, f.standalone("a", f.GPU_SELECTOR, copies=2), f.standalone("b", f.GPU_SELECTOR))
    # Engine a fits p at its maximum, but then engine b has nothing left: no hint.
    tight = [f.cluster("c", f.pool("p", 1, maxNodes=2))]
    assert f.run(two, tight).shortfall == (
        '1 insufficient free devices (needs 1 GPU on one node; pool "p" has none free on any '
        "node after the replica's other pods)"
    )
    roomy = [f.cluster("c", f.pool("p", 1, maxNodes=3))]
    assert f.run(two, roomy).shortfall == (
        '1 insufficient free devices (needs 1 GPU on one node; pool "p" has none free on any '
        "node after the replica's other pods; fits after it scales up)"
    )


def _replacement(replica: dict, old: str) -> dict:
    replica["metadata"]["annotations"] = {scheduler.REPLACES_ANNOTATION: old}
    return replica


# --- the zero-downtime property over random drains ---------------------------------------


@settings(max_examples=60, deadline=None)
@given(
    nodes=st.lists(st.integers(0, 3), min_size=2, max_size=4),
    replicas=st.integers(1, 4),
    drained=st.integers(0, 3),
    comes_up=st.lists(st.booleans(), min_size=40, max_size=40),
)
def test_a_drain_never_serves_from_fewer_replicas_than_before(nodes, replicas, drained, comes_up):
    """Replay reconciles: every desired replica is composed, a new one starts serving when
    ``comes_up`` says so, a removed one stops. After any reconcile, the replicas still
    serving are never fewer than before the taint, and nothing stays draining once every
    replacement serves."""
    deployment = f.spec(replicas)
    parsed = scheduler.parse_deployment("m", f.NAMESPACE, deployment)
    clusters = [f.cluster(n, f.pool("p", size)) for n, size in zip("abcd", nodes, strict=False)]

    def reconcile(fleet, observed, serving):
        result = f.run(deployment, fleet, observed, serving=tuple(serving))
        return result, [fn.replica_manifest(parsed, p) for p in result.placements]

    # Steady state before the drain: everything placed serves.
    _, observed = reconcile(clusters, [], set())
    serving = {r["metadata"]["name"] for r in observed}
    before = len(serving)
    victim = clusters[drained % len(clusters)]["metadata"]["name"]
    tainted = [
        f.cluster(c["metadata"]["name"], *c["status"]["gpuPools"], taints=[MAINTENANCE])
        if c["metadata"]["name"] == victim
        else c
        for c in clusters
    ]
    flips = iter(comes_up)
    for _ in range(12):
        result, observed = reconcile(tainted, observed, serving)
        desired = {p.name for p in result.placements}
        serving &= desired  # removed replicas stop serving at once
        assert len(serving) >= before, (victim, result.placements)
        serving |= {name for name in sorted(desired - serving) if next(flips, True)}
    # Once replacements come up, the drain completes wherever capacity allowed one.
    result, _ = reconcile(tainted, observed, serving | {p.name for p in result.placements})
    assert all(p.stuck for p in result.draining)
