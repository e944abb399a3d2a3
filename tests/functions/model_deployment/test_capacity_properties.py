"""Device-level capacity (decision D11, issue 23 item 1) through RunFunction, over random
fleets: pools with random devices per node, deployments with random requests, counts, copies
and gangs, and replicas already running (ours and other deployments').

The checks never call the packer. The test keeps its own node-by-node accounting: every
replica the function composes, with every other replica of the fleet, is replayed onto the
pools' nodes in the documented order (replicas by name, then namespace; engines, copies,
members, pods in order; first fit; a Worker member's pods on distinct nodes).
"""

from __future__ import annotations

from collections import defaultdict
from typing import Any

import md_fleet as f
from compose_model_deployment import names
from compose_model_deployment.fn import ModelDeploymentFunction
from hypothesis import HealthCheck, Phase, find, given, settings
from hypothesis import strategies as st
from modelplane_common.testing import (
    conditions,
    desired_resources,
    fleet_required,
    make_request,
    observe,
)

SETTINGS = settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
GPU_CLASS, NIC_CLASS = "gpu.nvidia.com", "nic.nvidia.com"
CLUSTER_NAMES = ["a", "b", "c"]
POOL_NAMES = ["p", "q"]


# --- random fleets and deployments ----------------------------------------------------------


@st.composite
def pool_entries(draw, name: str) -> dict[str, Any]:
    """A pool whose devices each have their own class, so a request names its device."""
    devices = [f.gpu(draw(st.sampled_from([1, 2, 4, 8])))]
    nic = draw(st.sampled_from(["none", "DRA", "Synthetic"]))
    if nic != "none":
        devices.append(f.nic(nic, count=draw(st.sampled_from([1, 2, 8]))))
    if draw(st.booleans()):
        devices.reverse()  # device order matters to first fit within a node
    entry = f.pool(name, draw(st.integers(0, 4)), *devices)
    if draw(st.integers(0, 3)) == 0:
        entry["maxNodes"] = draw(st.integers(1, 6))
    return entry


@st.composite
def fleets(draw) -> list[dict[str, Any]]:
    clusters = []
    for name in draw(st.lists(st.sampled_from(CLUSTER_NAMES), unique=True, min_size=1)):
        pools = [
            draw(pool_entries(p))
            for p in draw(st.lists(st.sampled_from(POOL_NAMES), unique=True, min_size=1))
        ]
        clusters.append(f.cluster(name, *pools))
    return clusters


@st.composite
def selectors(draw) -> dict[str, Any]:
    devices = [
        {
            "name": "gpu",
            "count": draw(st.sampled_from([1, 1, 2, 3, 4, 8])),
            "selectors": [{"cel": f.GPU_SELECTOR}],
        }
    ]
    if draw(st.integers(0, 3)) == 0:
        devices.append(
            {
                "name": "nic",
                "count": draw(st.integers(1, 2)),
                "selectors": [{"cel": f.NIC_SELECTOR}],
            }
        )
    return {"devices": devices}


@st.composite
def engines(draw, name: str) -> dict[str, Any]:
    copies = draw(st.integers(1, 2))
    if draw(st.booleans()):
        engine = f.standalone(name, copies=copies)
        engine["members"][0]["nodeSelector"] = draw(selectors())
        return engine
    return f.gang(
        name,
        nodes=draw(st.integers(1, 3)),
        leader=draw(selectors()),
        worker=draw(selectors()),
        claimless_leader=draw(st.booleans()),
        copies=copies,
    )


@st.composite
def deployments(draw) -> dict[str, Any]:
    engine_names = draw(st.lists(st.sampled_from(["main", "side"]), unique=True, min_size=1))
    body = f.spec(draw(st.integers(1, 6)), *[draw(engines(n)) for n in engine_names])
    if len(engine_names) > 1:
        for engine, phase in zip(body["engines"], ["Prefill", "Decode"], strict=True):
            engine["phase"] = phase
        body["serving"] = {"mode": "PrefillDecode"}
    return body


def stamped(deployment, clusters, where, index, pins, **extra) -> dict[str, Any]:
    """A replica as the function stamps it: each request resolved to its device's class, a
    request met by a Synthetic device (or by none) dropped, as it claims nothing."""
    body = f.replica(deployment, where, index, pools=pins, **extra)
    cluster = next((c for c in clusters if c["metadata"]["name"] == where), None)
    for engine in body["spec"]["engines"]:
        for member in engine["members"]:
            offer = _offer(cluster, member["nodePoolName"]) if cluster else None
            claimable = offer[1] if offer else {}
            kept = []
            for request in member.pop("deviceRequests", []):
                request["deviceClassName"] = GPU_CLASS if request["name"] == "gpu" else NIC_CLASS
                if request["deviceClassName"] in claimable or offer is None:
                    kept.append(request)
            if kept:
                member["deviceRequests"] = kept
    return body


def _pins(draw, clusters, cluster_name, count) -> list[str]:
    cluster = next((c for c in clusters if c["metadata"]["name"] == cluster_name), None)
    published = [p["name"] for p in cluster["status"]["gpuPools"]] if cluster else POOL_NAMES
    return [draw(st.sampled_from(published)) for _ in range(count)]


@st.composite
def scenarios(draw):
    deployment = draw(deployments())
    clusters = draw(fleets())
    others = []
    for i in range(draw(st.integers(0, 5))):
        other = f.spec(1, draw(engines("main")))
        where = draw(st.sampled_from(CLUSTER_NAMES))
        (pin,) = _pins(draw, clusters, where, 1)
        others.append(
            stamped(
                other,
                clusters,
                where,
                0,
                pin,
                deployment_name=f"other-{i}",
                namespace=draw(st.sampled_from([f.NAMESPACE, "other-team"])),
            )
        )
    ours = []
    for where, index in draw(
        st.lists(st.tuples(st.sampled_from(CLUSTER_NAMES), st.integers(0, 2)), unique=True)
    ):
        pins = _pins(draw, clusters, where, len(deployment["engines"]))
        ours.append(stamped(deployment, clusters, where, index, pins))
    return deployment, clusters, ours, others


# --- the function, through RunFunction -----------------------------------------------------


def _xr(spec: dict[str, Any]) -> dict[str, Any]:
    return {
        "apiVersion": "modelplane.ai/v1alpha1",
        "kind": "ModelDeployment",
        "metadata": {"name": "m", "namespace": f.NAMESPACE},
        "spec": spec,
    }


def _observed(ours: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    out = {}
    for replica in ours:
        index = int(replica["metadata"]["labels"][names.INDEX_LABEL])
        out[names.replica_key(replica["spec"]["clusterName"], index)] = observe(replica, {})
    return out


def reconcile(deployment, clusters, ours, others):
    required = {
        **fleet_required(clusters, ours + others),
        "service-routes": [],
        "model-cache": [
            {
                "apiVersion": "modelplane.ai/v1alpha1",
                "kind": "ModelCache",
                "metadata": {"name": "weights", "namespace": f.NAMESPACE},
                "spec": {"source": "HuggingFace", "huggingFace": {"repo": "o/m", "sizeGiB": 1}},
            }
        ],
    }
    request = make_request(_xr(deployment), observed=_observed(ours), required=required)
    return ModelDeploymentFunction().run(request)


def composed_replicas(rsp) -> list[dict[str, Any]]:
    return [
        body
        for key, body in desired_resources(rsp).items()
        if key.startswith("replica-") and body.get("kind") == "ModelReplica"
    ]


# --- the test's own accounting ---------------------------------------------------------------


def _offer(cluster: dict[str, Any], pool: str) -> tuple[int, dict[str, int]] | None:
    """(nodes, claimable devices per node by class) of a published pool, or None."""
    for entry in cluster["status"]["gpuPools"]:
        if entry["name"] == pool:
            per_node = {
                d["deviceClassName"]: d["count"] for d in entry["devices"] if d["claim"] == "DRA"
            }
            return entry["nodes"], per_node
    return None


def _pods(replica: dict[str, Any], clusters) -> dict[str, list[tuple[dict[str, int], object]]]:
    """Per published pool, the replica's pods in order: (devices by class, gang or None). A
    request asking one node for more than the pool's node has of its class takes nothing: no
    node could ever hold it (the pod is Pending, not running)."""
    cluster = next(c for c in clusters if c["metadata"]["name"] == replica["spec"]["clusterName"])
    out: dict[str, list[tuple[dict[str, int], object]]] = defaultdict(list)
    for e, engine in enumerate(replica["spec"]["engines"]):
        for copy_ in range(engine.get("copies", 1)):
            for m, member in enumerate(engine["members"]):
                offer = _offer(cluster, member["nodePoolName"])
                if offer is None:
                    continue  # a pool not published charges nothing
                claims: dict[str, int] = defaultdict(int)
                for request in member.get("deviceRequests") or []:
                    cls, k = request["deviceClassName"], request.get("count", 1)
                    if claims[cls] + k <= offer[1].get(cls, 0):
                        claims[cls] += k
                claims = {cls: k for cls, k in claims.items() if k}
                if not claims:
                    continue  # a claimless member costs nothing
                pods = member.get("worker", {}).get("nodes", 1)
                gang = (e, copy_, m) if member["role"] == "Worker" else None
                out[member["nodePoolName"]] += [(claims, gang)] * pods
    return out


def replay(clusters, replicas, probe=None) -> dict[tuple[str, str], tuple[list[dict], int]]:
    """Every pool's nodes after first-fit packing in canonical order: (free per node, pods
    that fit on no node). A pod that fits nowhere is counted, never charged, so the free
    counts can never go negative here. ``probe``: one more replica packed after all others
    (where a new replica's pods first have to fit)."""
    by_name = {c["metadata"]["name"]: c for c in clusters}
    nodes: dict[tuple[str, str], list[dict[str, int]]] = {}
    unplaced: dict[tuple[str, str], int] = defaultdict(int)
    ordered = sorted(replicas, key=lambda r: (r["metadata"]["name"], r["metadata"]["namespace"]))
    for replica in [*ordered, *([probe] if probe else [])]:
        cluster = by_name.get(replica["spec"]["clusterName"])
        if cluster is None:
            continue
        for pool, pods in _pods(replica, clusters).items():
            offer = _offer(cluster, pool)
            assert offer is not None
            key = (cluster["metadata"]["name"], pool)
            free = nodes.setdefault(key, [dict(offer[1]) for _ in range(offer[0])])
            used_by_gang: dict[object, set[int]] = defaultdict(set)
            for claims, gang in pods:
                avoid = used_by_gang[gang] if gang is not None else set()
                node = next(
                    (
                        n
                        for n, left in enumerate(free)
                        if n not in avoid and all(left[cls] >= k for cls, k in claims.items())
                    ),
                    None,
                )
                if node is None:
                    unplaced[key] += 1
                    continue
                for cls, k in claims.items():
                    free[node][cls] -= k
                avoid.add(node)
    return {key: (free, unplaced[key]) for key, free in nodes.items()}


def _split(rsp, ours) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """(replicas that ran before and are kept, replicas placed by this reconcile)."""
    before = {r["metadata"]["name"] for r in ours}
    composed = composed_replicas(rsp)
    return (
        [r for r in composed if r["metadata"]["name"] in before],
        [r for r in composed if r["metadata"]["name"] not in before],
    )


# --- properties ------------------------------------------------------------------------------


@SETTINGS
@given(scenarios())
def test_new_placements_fit_node_by_node_and_never_overcommit(scenario):
    deployment, clusters, ours, others = scenario
    rsp = reconcile(deployment, clusters, ours, others)
    kept, new = _split(rsp, ours)
    before = replay(clusters, kept + others)
    after = replay(clusters, kept + new + others)
    for replica in new:
        for pool in _pods(replica, clusters):
            key = (replica["spec"]["clusterName"], pool)
            # A pool already over-committed takes nothing new ...
            assert before.get(key, ([], 0))[1] == 0, key
            # ... and every pod there, ours and everyone else's, has a node with room for it.
            assert after[key][1] == 0, (key, after[key])
            assert all(v >= 0 for node in after[key][0] for v in node.values())


@SETTINGS
@given(scenarios())
def test_the_next_reconcile_computes_the_same_picture(scenario):
    """Placed replicas, once observed, are kept where they are and never reported
    over-committed: the packing is a function of the fleet, not of when replicas came."""
    deployment, clusters, ours, others = scenario
    first = reconcile(deployment, clusters, ours, others)
    placed = composed_replicas(first)
    second = reconcile(deployment, clusters, placed, others)
    assert {r["metadata"]["name"]: r["spec"] for r in composed_replicas(second)} == {
        r["metadata"]["name"]: r["spec"] for r in placed
    }
    if "over-committed" not in conditions(first)["ReplicasReady"][2]:
        assert "over-committed" not in conditions(second)["ReplicasReady"][2]


def _member_fits_devices(member: dict[str, Any], offer: tuple[int, dict[str, int]]) -> bool:
    return all(r["count"] <= offer[1].get(GPU_CLASS, 0) for r in member["nodeSelector"]["devices"])


@SETTINGS
@given(scenarios())
def test_a_refused_replica_would_not_have_fit(scenario):
    """Short of replicas, no pool could take one more: for every pool whose devices a fresh
    replica's members match, the test's own replay finds a pod with no node, either after
    everything already there or in its place in canonical order. Only single-engine,
    GPU-only deployments, whose matching the test can tell without CEL."""
    deployment, clusters, ours, others = scenario
    (engine, *more) = deployment["engines"]
    claiming = [m for m in engine["members"] if m.get("nodeSelector")]
    if more or any(len(m["nodeSelector"]["devices"]) > 1 for m in claiming):
        return
    rsp = reconcile(deployment, clusters, ours, others)
    if conditions(rsp)["ReplicasScheduled"][1] != "InsufficientCapacity":
        return
    placed = composed_replicas(rsp)
    for cluster in clusters:
        name = cluster["metadata"]["name"]
        taken = {
            int(r["metadata"]["labels"][names.INDEX_LABEL])
            for r in placed
            if r["spec"]["clusterName"] == name
        }
        index = min(set(range(len(taken) + 1)) - taken)
        for entry in cluster["status"]["gpuPools"]:
            offer = _offer(cluster, entry["name"])
            if not all(_member_fits_devices(m, offer) for m in claiming):
                continue
            probe = stamped(deployment, clusters, name, index, entry["name"])
            key = (name, entry["name"])
            appended = replay(clusters, placed + others, probe=probe)[key][1]
            in_place = replay(clusters, [*placed, *others, probe])[key][1]
            assert appended or in_place, (key, entry)


def test_the_scenarios_reach_shared_nodes_gangs_and_shortfalls():
    """The strategies are only worth something if they reach these outcomes."""
    options = settings(max_examples=3000, database=None, deadline=None, phases=[Phase.generate])

    def shares_a_node(scenario) -> bool:
        rsp = reconcile(*scenario)
        _, new = _split(rsp, scenario[2])
        pods: dict[tuple[str, str], int] = defaultdict(int)
        for replica in new:
            for pool, listed in _pods(replica, scenario[1]).items():
                pods[(replica["spec"]["clusterName"], pool)] += len(listed)
        state = replay(scenario[1], composed_replicas(rsp) + scenario[3])
        return any(n > len(state[key][0]) for key, n in pods.items())

    def places_a_gang(scenario) -> bool:
        _, new = _split(reconcile(*scenario), scenario[2])
        return any(
            m.get("worker", {}).get("nodes", 1) > 1 and m.get("deviceRequests")
            for r in new
            for e in r["spec"]["engines"]
            for m in e["members"]
        )

    def falls_short(scenario) -> bool:
        return conditions(reconcile(*scenario))["ReplicasScheduled"][1] == "InsufficientCapacity"

    find(scenarios(), shares_a_node, settings=options)
    find(scenarios(), places_a_gang, settings=options)
    find(scenarios(), falls_short, settings=options)
