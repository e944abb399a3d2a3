"""Property-based tests over random fleets and deployments (issue 3, "Done when")."""

from __future__ import annotations

import md_fleet as f
from compose_model_deployment import devices, names, scheduler
from compose_model_deployment.fn import ModelDeploymentFunction
from crossplane.function.proto.v1 import run_function_pb2 as fnv1
from hypothesis import HealthCheck, Phase, find, given, settings
from hypothesis import strategies as st
from modelplane_common.testing import (
    conditions,
    desired_resources,
    desired_status,
    fleet_required,
    make_request,
    observe,
)

HOPPER = 'device.attributes["gpu.nvidia.com"].architecture == "Hopper"'
BIG = 'device.capacity["gpu.nvidia.com"].memory.compareTo(quantity("100Gi")) >= 0'
SELECTORS = [f.GPU_SELECTOR, HOPPER, BIG, f.NIC_SELECTOR]
DEVICES = [
    f.gpu(1, "Hopper", "80Gi"),
    f.gpu(8, "Hopper", "141Gi"),
    f.gpu(1, "Ada", "24Gi"),
    f.nic("Synthetic"),
    f.nic("DRA"),
    {
        "name": "bad",
        "driver": "gpu.nvidia.com",
        "deviceClassName": "g",
        "count": 1,
        "attributes": {"cudaComputeCapability": {"version": "9.0"}},
    },
]
CLUSTER_NAMES = ["a", "b", "c", "d", "e"]
POOL_NAMES = ["p", "q", "r"]
SETTINGS = settings(max_examples=50, deadline=None, suppress_health_check=[HealthCheck.too_slow])


@st.composite
def pools(draw):
    out = []
    for name in draw(st.lists(st.sampled_from(POOL_NAMES), unique=True, max_size=3)):
        kind = draw(st.integers(0, 9))
        if kind == 0:
            out.append({"name": name, "devices": "garbage"})  # malformed entry
            continue
        chosen = draw(st.lists(st.sampled_from(range(len(DEVICES))), min_size=1, max_size=3))
        entry = f.pool(name, draw(st.integers(0, 4)), *[DEVICES[i] for i in chosen])
        if draw(st.booleans()):
            entry["maxNodes"] = draw(st.integers(1, 8))
        out.append(entry)
    return out


@st.composite
def fleets(draw):
    clusters = []
    for name in draw(st.lists(st.sampled_from(CLUSTER_NAMES), unique=True, max_size=5)):
        body = f.cluster(
            name,
            # Mostly eligible, so that placements (not only rejections) are exercised.
            ready=draw(st.integers(0, 4)) > 0,
            gateway=draw(st.sampled_from(["203.0.113.1"] * 3 + [None])),
            provider=draw(st.sampled_from(["pc"] * 3 + [None])),
        )
        body["status"]["gpuPools"] = draw(pools())
        if draw(st.integers(0, 9)) == 0:
            del body["status"]["gpuPools"]
        clusters.append(body)
    return clusters


@st.composite
def engines(draw, name):
    selector = f.node_selector(
        draw(st.sampled_from(SELECTORS)), count=draw(st.sampled_from([1, 1, 8]))
    )
    copies = draw(st.integers(1, 2))
    if draw(st.booleans()):
        engine = f.standalone(name, copies=copies)
        engine["members"][0]["nodeSelector"] = selector
        return engine
    return f.gang(
        name,
        nodes=draw(st.integers(1, 2)),
        worker=selector,
        claimless_leader=draw(st.booleans()),
        copies=copies,
    )


@st.composite
def deployments(draw):
    names = draw(st.lists(st.sampled_from(["main", "side"]), unique=True, min_size=1))
    return f.spec(draw(st.integers(1, 4)), *[draw(engines(n)) for n in names])


@st.composite
def scenarios(draw):
    deployment = draw(deployments())
    clusters = draw(fleets())
    ours = []
    identities = draw(
        st.lists(
            st.tuples(st.sampled_from([*CLUSTER_NAMES, "gone"]), st.integers(0, 2)),
            unique=True,
            max_size=5,
        )
    )
    for cluster_name, index in identities:
        pins = [draw(st.sampled_from([*POOL_NAMES, "gone"])) for _ in deployment["engines"]]
        ours.append(
            f.replica(deployment, cluster_name, index, pools=pins, ready=draw(st.booleans()))
        )
    # Other deployments mostly sit on published pools, so that new placements compete with
    # them for nodes (otherwise an ignored charge would rarely show up in 50 examples).
    published = [
        (body["metadata"]["name"], entry["name"])
        for body in clusters
        for entry in body["status"].get("gpuPools") or []
        if isinstance(entry.get("devices"), list)
    ]
    others = []
    for i in range(draw(st.integers(0, 4))):
        other = f.spec(1, draw(engines("main")))
        if published and draw(st.integers(0, 3)) > 0:
            where, pool = draw(st.sampled_from(published))
        else:
            where, pool = draw(st.sampled_from(CLUSTER_NAMES)), draw(st.sampled_from(POOL_NAMES))
        others.append(
            f.replica(
                other,
                where,
                0,
                pools=pool,
                deployment_name=f"other-{i}",
                namespace=draw(st.sampled_from([f.NAMESPACE, "other-team"])),
            )
        )
    return deployment, clusters, ours, others


def _call(deployment, clusters, replicas, observed):
    xr = {
        "apiVersion": "modelplane.ai/v1alpha1",
        "kind": "ModelDeployment",
        "metadata": {"name": "m", "namespace": f.NAMESPACE},
        "spec": deployment,
    }
    request = make_request(
        xr,
        observed=observed,
        required={**fleet_required(clusters, replicas, observed), "service-routes": []},
    )
    return ModelDeploymentFunction().run(request)


def _observed(ours):
    out = {}
    for replica in ours:
        index = int(replica["metadata"]["labels"][names.INDEX_LABEL])
        key = names.replica_key(replica["spec"]["clusterName"], index)
        out[key] = observe(replica, replica.get("status") or {})
    return out


@SETTINGS
@given(scenarios(), st.randoms(use_true_random=False))
def test_never_raises_and_is_deterministic_regardless_of_input_order(scenario, rnd):
    deployment, clusters, ours, others = scenario
    first = _call(deployment, clusters, ours + others, _observed(ours))
    assert not [r for r in first.results if r.severity == fnv1.SEVERITY_FATAL], first.results
    shuffled_clusters, shuffled_replicas = clusters[:], ours + others
    rnd.shuffle(shuffled_clusters)
    rnd.shuffle(shuffled_replicas)
    second = _call(deployment, shuffled_clusters, shuffled_replicas, _observed(ours))
    assert desired_resources(first) == desired_resources(second)
    assert conditions(first) == conditions(second)
    assert desired_status(first) == desired_status(second)
    assert list(first.results) == list(second.results)


def _run(deployment, clusters, replicas):
    return f.run(deployment, clusters, replicas)


def _claimed_pools(replica_body):
    """The pools a replica's members claim devices on."""
    parsed = scheduler.parse_replica(replica_body)
    return [claim.pool for claim in parsed.claims()] if parsed else []


# Device-level capacity (no node overcommitted, placements that fit node by node) is checked
# by test_capacity_properties.py with the test's own node-by-node accounting.


def _survives(deployment, clusters_by_name, replica) -> bool:
    """Whether an observed replica of ours may stay: its cluster exists and every pinned pool
    is unreadable (cannot be judged) or still published and not proven to fail the spec."""
    cluster = clusters_by_name.get(replica["spec"]["clusterName"])
    if cluster is None:
        return False
    published = cluster["status"].get("gpuPools")
    if published is None:
        return True
    parsed = scheduler.parse_deployment("m", f.NAMESPACE, deployment)
    for engine, observed in zip(parsed.engines, replica["spec"]["engines"], strict=True):
        pin = observed["members"][0]["nodePoolName"]
        entry = next((p for p in published if p["name"] == pin), None)
        if entry is None:
            return False
        if not isinstance(entry.get("devices"), list):
            continue
        pool = devices.parse_pool(entry)
        # Only a pool proven not to fit moves a replica: devices whose data cannot be read
        # are given the benefit of the doubt.
        resolved = [
            devices.match_member(m.requests, pool, unreadable_matches=True) for m in engine.members
        ]
        if any(r is None for r in resolved) or not any(resolved):
            return False
    return True


@SETTINGS
@given(scenarios())
def test_observed_replicas_move_only_for_the_three_allowed_reasons(scenario):
    deployment, clusters, ours, others = scenario
    result = _run(deployment, clusters, ours + others)
    clusters_by_name = {c["metadata"]["name"]: c for c in clusters}
    survivors = {r["metadata"]["name"] for r in ours if _survives(deployment, clusters_by_name, r)}
    kept = {p.name for p in result.placements if p.name in survivors}
    # Everything that may stay stays, unless scale-down takes exactly the excess.
    assert len(kept) == min(len(survivors), deployment["replicas"])
    if len(survivors) <= deployment["replicas"]:
        assert kept == survivors


@SETTINGS
@given(scenarios(), st.sampled_from(["device.driver ==", 'nope("x")', ""]), st.booleans())
def test_unknown_inputs_never_drop_anything(scenario, bad_selector, unresolved):
    deployment, clusters, ours, others = scenario
    observed = _observed(ours)
    broken = f.spec(deployment["replicas"], f.standalone("main", bad_selector or "x =="))
    xr = {
        "apiVersion": "modelplane.ai/v1alpha1",
        "kind": "ModelDeployment",
        "metadata": {"name": "m", "namespace": f.NAMESPACE},
        "spec": broken if not unresolved else deployment,
    }
    required = (
        {}
        if unresolved
        else {**fleet_required(clusters, ours + others, observed), "service-routes": []}
    )
    rsp = ModelDeploymentFunction().run(make_request(xr, observed=observed, required=required))
    assert set(desired_resources(rsp)) == set(observed)


def test_scenarios_reach_placements_kept_replicas_and_shortfalls():
    """The strategies above are only worth something if they reach these outcomes."""

    def schedule(scenario):
        deployment, clusters, ours, others = scenario
        return _run(deployment, clusters, ours + others)

    # Generation only: shrinking a found example would only cost time here.
    options = settings(max_examples=2000, database=None, deadline=None, phases=[Phase.generate])
    find(scenarios(), lambda s: len(schedule(s).placements) >= 2, settings=options)
    find(scenarios(), lambda s: bool(schedule(s).shortfall), settings=options)
    find(scenarios(), lambda s: any(p.observed for p in schedule(s).placements), settings=options)
    find(scenarios(), lambda s: any(p.frozen for p in schedule(s).placements), settings=options)

    def competes(scenario) -> bool:
        """A new placement lands on a pool another deployment's replica is charged to."""
        others = scenario[3]
        taken = {(r["spec"]["clusterName"], pool) for r in others for pool in _claimed_pools(r)}
        return any(
            p.observed is None and (p.cluster, e.pool) in taken
            for p in schedule(scenario).placements
            for e in p.engines
        )

    find(scenarios(), competes, settings=options)
