"""Through real gRPC: a ModelCache hydrates at most MAX_HYDRATING clusters at once. The rest
wait with nothing composed, reported Pending with the reason; clusters where replicas mounting
the cache wait go first; a cluster with anything composed is never held back (omission would
delete it). Bounds the burst on the model hub and the cache's request
(design/cache-staging.md, "Size")."""

from __future__ import annotations

import mc_fleet
from compose_model_cache.cache_compose import MAX_HYDRATING
from mc_fleet import FRONTIER, cluster, desired, observe, replica

EXTRA = 6
NAMES = [f"c-{i:03d}" for i in range(MAX_HYDRATING + EXTRA)]


FLEET = [cluster(n) for n in NAMES]


def cache(selector: dict | None = FRONTIER, status: dict | None = None) -> dict:
    return mc_fleet.cache(selector, status=status)


def clusters_status(rsp) -> dict[str, dict]:
    status = mc_fleet.composite_status(rsp)
    return {entry["name"]: entry for entry in status["clusters"]}


def _slots(objects: dict[str, dict]) -> set[str]:
    """Clusters with a PVC and a Job composed."""
    pvcs = {k.split("pvc-", 1)[1] for k in objects if "pvc-" in k}
    jobs = {k.split("hydrate-", 1)[1] for k in objects if "hydrate-" in k}
    assert jobs <= pvcs
    return jobs


def test_at_most_max_hydrating_clusters_start_and_the_rest_wait_reported():
    rsp = mc_fleet.run(cache(), mc_fleet.fleet(FLEET))
    objects = desired(rsp)
    started = _slots(objects)
    assert started == set(NAMES[:MAX_HYDRATING])
    # A waiting cluster has nothing composed (no PVC either) and says why.
    assert not any(name in key for key in objects for name in NAMES[MAX_HYDRATING:])
    status = clusters_status(rsp)
    assert set(status) == set(NAMES)
    for name in NAMES[MAX_HYDRATING:]:
        assert status[name]["phase"] == "Pending"
        assert f"at most {MAX_HYDRATING} clusters hydrate at once" in status[name]["message"]


def test_clusters_where_replicas_wait_for_the_weights_go_first():
    users = [replica("r-0", NAMES[-1]), replica("r-1", NAMES[-2])]
    rsp = mc_fleet.run(cache(selector=None), mc_fleet.fleet(FLEET, users))
    # Without a selector only the two clusters with replicas are staged at all.
    assert _slots(desired(rsp)) == {NAMES[-1], NAMES[-2]}
    rsp = mc_fleet.run(cache(), mc_fleet.fleet(FLEET, users))
    started = _slots(desired(rsp))
    assert {NAMES[-1], NAMES[-2]} <= started and len(started) == MAX_HYDRATING


def test_a_finished_cluster_frees_its_slot_for_a_waiting_one():
    first = desired(mc_fleet.run(cache(), mc_fleet.fleet(FLEET)))
    observed = observe(first, complete=True)
    # All 64 Jobs completed: the next reconcile reports them Ready and drops their Jobs...
    rsp = mc_fleet.run(cache(), mc_fleet.fleet(FLEET), observed)
    status = clusters_status(rsp)
    assert {n for n, e in status.items() if e["phase"] == "Ready"} == set(NAMES[:MAX_HYDRATING])
    # ...and starts the waiting ones, while every staged PVC stays.
    objects = desired(rsp)
    assert _slots(objects) == set(NAMES[MAX_HYDRATING:])
    for key in (k for k in observed if "pvc-" in k):
        assert objects[key]["spec"] == observed[key]["spec"]


def test_running_hydrations_are_never_dropped_even_over_the_limit():
    """A cache that hydrated more clusters at once (before the limit, or after a restore that
    lost its status) keeps every Object it has; only new clusters wait."""
    more = [cluster(f"d-{i:03d}") for i in range(MAX_HYDRATING + 10)]
    observed = {}
    for body in more:
        single = desired(mc_fleet.run(cache(), mc_fleet.fleet([body])))
        observed |= observe(single)  # PVC Bound, Job still running
    fleet = mc_fleet.fleet([*more, *FLEET])
    objects = desired(mc_fleet.run(cache(), fleet, observed))
    for key, body in observed.items():
        assert objects[key]["spec"] == body["spec"], key
    assert _slots(objects) == {b["metadata"]["name"] for b in more}  # nothing new starts


def test_only_running_downloads_hold_a_slot():
    """A PVC that cannot bind (its storage class is missing) or a failed Job holds no slot:
    such clusters do not keep the others waiting."""
    first = desired(mc_fleet.run(cache(), mc_fleet.fleet(FLEET)))
    stuck = observe(first)
    for key, body in stuck.items():
        if key.startswith("pvc-"):
            body["status"]["atProvider"]["manifest"]["status"] = {"phase": "Pending"}
    objects = desired(mc_fleet.run(cache(), mc_fleet.fleet(FLEET), stuck))
    assert _slots(objects) == set(NAMES)  # the stuck ones are kept, the others start
    for key, body in stuck.items():
        assert objects[key]["spec"] == body["spec"], key


def test_a_lost_status_does_not_hold_slots_for_staged_clusters():
    """After a restore that stripped the cache's status, a PVC observed without its Job was
    staged (the main loop's rule): such clusters hold no slot."""
    first = desired(mc_fleet.run(cache(), mc_fleet.fleet(FLEET)))
    staged = {k: v for k, v in observe(first).items() if k.startswith("pvc-")}
    objects = desired(mc_fleet.run(cache(), mc_fleet.fleet(FLEET), staged))
    assert _slots(objects) == set(NAMES[MAX_HYDRATING:])


def test_a_staged_cluster_named_like_a_job_holds_no_slot():
    """A cluster's objects are told apart by their keys, not by words in its name: a staged
    cluster called ``hydrate-east`` (its PVC observed, its Job done and gone, the cache's
    status lost) is not taken for a running download that holds a slot."""
    odd = cluster("hydrate-east")
    first = desired(mc_fleet.run(cache(), mc_fleet.fleet([odd])))
    staged = {k: v for k, v in observe(first).items() if k.startswith("pvc-")}
    objects = desired(mc_fleet.run(cache(), mc_fleet.fleet([odd, *FLEET]), staged))
    started = {name for name in NAMES if f"hydrate-{name}" in objects}
    assert len(started) == MAX_HYDRATING
    assert "hydrate-hydrate-east" not in objects


def test_an_unmatched_cluster_named_like_a_pvc_reports_its_pvcs_phase():
    """A cluster the selector no longer matches, where a replica still mounts the cache,
    reports the phase of its PVC (Bound, staged: Ready), not of a Job left under the other
    key, whatever words its name holds."""
    odd, users = [cluster("pvc-east")], [replica("r-0", "pvc-east")]
    observed = observe(desired(mc_fleet.run(cache(), mc_fleet.fleet(odd, users))))
    observed["ns-hydrate-pvc-east"] = observed.pop("hydrate-pvc-east")  # still running
    rsp = mc_fleet.run(cache(selector={"zone": "nowhere"}), mc_fleet.fleet(odd, users), observed)
    assert set(desired(rsp)) == set(observed)  # kept while r-0 mounts it
    assert clusters_status(rsp)["pvc-east"]["phase"] == "Ready"
