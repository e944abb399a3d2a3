"""Capacity is counted in devices (decision D11), through RunFunction: replicas share a node's
GPUs, a pool is full when its nodes' devices are taken (not when its nodes each host
something), a gang's workers need distinct nodes, and explanations count devices."""

from __future__ import annotations

import md_fleet as f
from compose_model_deployment.fn import ModelDeploymentFunction
from compose_model_deployment.names import replica_name
from modelplane_common.serving import run_function
from modelplane_common.testing import (
    conditions,
    desired_resources,
    fleet_required,
    make_request,
    observe,
    results,
)

H100 = "h100"


def _xr(spec: dict) -> dict:
    return {
        "apiVersion": "modelplane.ai/v1alpha1",
        "kind": "ModelDeployment",
        "metadata": {"name": "m", "namespace": f.NAMESPACE},
        "spec": spec,
    }


def _cache() -> dict:
    return {
        "apiVersion": "modelplane.ai/v1alpha1",
        "kind": "ModelCache",
        "metadata": {"name": "weights", "namespace": f.NAMESPACE},
        "spec": {"source": "HuggingFace", "huggingFace": {"repo": "org/m", "sizeGiB": 1}},
    }


def call(spec: dict, clusters: list[dict], replicas: list[dict] = (), observed=None):  # type: ignore[assignment]
    required = {
        **fleet_required(clusters, list(replicas), observed),
        "service-routes": [],
        "model-cache": [_cache()],
    }
    request = make_request(_xr(spec), observed=observed or {}, required=required)
    return run_function(ModelDeploymentFunction(), request)


def composed(rsp) -> dict[str, dict]:
    return {k: v for k, v in desired_resources(rsp).items() if k.startswith("replica-")}


def h100_cluster(name: str = "a", nodes: int = 1, **extra) -> dict:
    return f.cluster(name, f.pool(H100, nodes, f.gpu(count=8), **extra))


def test_two_replicas_claiming_two_gpus_share_one_eight_gpu_node():
    rsp = call(f.spec(2, f.standalone(count=2)), [h100_cluster(nodes=1)])
    replicas = composed(rsp)
    assert sorted(replicas) == ["replica-a-0", "replica-a-1"]
    for replica in replicas.values():
        (member,) = replica["spec"]["engines"][0]["members"]
        assert member["nodePoolName"] == H100
        assert [r["count"] for r in member["deviceRequests"]] == [2]
    # Placed, waiting for Crossplane to create them: nothing is short.
    assert conditions(rsp)["ReplicasScheduled"][:2] == ("False", "Scheduling")
    assert results(rsp) == [("SEVERITY_NORMAL", "Scheduled 2 replicas across 1 clusters: a")]


def test_a_sixteen_gpu_pool_takes_four_four_gpu_replicas_and_refuses_a_fifth():
    rsp = call(f.spec(5, f.standalone(count=4)), [h100_cluster(nodes=2)])
    assert sorted(composed(rsp)) == [f"replica-a-{i}" for i in range(4)]
    assert conditions(rsp)["ReplicasScheduled"] == (
        "False",
        "InsufficientCapacity",
        "4 of 5 replicas scheduled; 0/1 clusters available for the rest: "
        '1 insufficient free devices (needs 4 GPUs on one node; pool "h100" has none free '
        "on any node)",
    )


def test_the_explanation_names_the_most_free_on_any_node():
    """D11's own example: 7 of the node's 8 GPUs are taken by another deployment."""
    other = f.replica(f.spec(1, f.standalone(count=7)), "a", 0, pools=H100, deployment_name="o")
    rsp = call(f.spec(1, f.standalone(count=2)), [h100_cluster(nodes=1)], [other])
    assert composed(rsp) == {}
    assert conditions(rsp)["ReplicasScheduled"][2] == (
        "0 of 1 replicas scheduled (checked 1 clusters); 0/1 clusters available: "
        '1 insufficient free devices (needs 2 GPUs on one node; pool "h100" has at most 1 '
        "free on any node)"
    )


def test_replicas_of_other_deployments_are_packed_by_their_devices():
    """Three other replicas of 2 GPUs leave 2 free on the only node: one more fits, not two."""
    others = [
        f.replica(f.spec(1, f.standalone(count=2)), "a", 0, pools=H100, deployment_name=f"o{i}")
        for i in range(3)
    ]
    rsp = call(f.spec(2, f.standalone(count=2)), [h100_cluster(nodes=1)], others)
    assert sorted(composed(rsp)) == ["replica-a-0"]
    assert "needs 2 GPUs on one node" in conditions(rsp)["ReplicasScheduled"][2]


def test_a_gangs_workers_land_on_distinct_nodes():
    # Two workers of 4 GPUs would fit one 8-GPU node by devices, but a gang spans nodes.
    gang = f.spec(
        1, f.gang(nodes=2, claimless_leader=True, worker=f.node_selector(f.GPU_SELECTOR, count=4))
    )
    one_node = call(gang, [h100_cluster(nodes=1)])
    assert composed(one_node) == {}
    assert conditions(one_node)["ReplicasScheduled"][2].endswith(
        '1 insufficient free devices (needs 4 GPUs on each of 2 nodes; pool "h100" has 1 node)'
    )
    two_nodes = call(gang, [h100_cluster(nodes=2)])
    assert sorted(composed(two_nodes)) == ["replica-a-0"]


def test_two_gangs_share_two_nodes_worker_by_worker():
    """Each gang takes 4 GPUs on each of the two nodes: a second gang fits beside the first."""
    gang = f.spec(
        2, f.gang(nodes=2, claimless_leader=True, worker=f.node_selector(f.GPU_SELECTOR, count=4))
    )
    rsp = call(gang, [h100_cluster(nodes=2)])
    assert sorted(composed(rsp)) == ["replica-a-0", "replica-a-1"]
    three = call({**gang, "replicas": 3}, [h100_cluster(nodes=2)])
    assert sorted(composed(three)) == ["replica-a-0", "replica-a-1"]


def test_scaling_headroom_is_named_in_devices():
    rsp = call(f.spec(3, f.standalone(count=4)), [h100_cluster(nodes=1, maxNodes=2)])
    assert sorted(composed(rsp)) == ["replica-a-0", "replica-a-1"]
    assert conditions(rsp)["ReplicasScheduled"][2].endswith(
        '1 insufficient free devices (needs 4 GPUs on one node; pool "h100" has none free on '
        "any node; fits after it scales up)"
    )


def test_a_shrunk_pool_reports_overcommitted_devices_and_keeps_its_replicas():
    deployment = f.spec(2, f.standalone(count=8))
    ours = [f.replica(deployment, "a", i, pools=H100) for i in range(2)]
    observed = {f"replica-a-{i}": observe(r) for i, r in enumerate(ours)}
    rsp = call(deployment, [h100_cluster(nodes=1)], ours, observed=observed)
    assert sorted(composed(rsp)) == ["replica-a-0", "replica-a-1"]
    assert conditions(rsp)["ReplicasReady"][2] == (
        '0 of 2 ready; over-committed: a pool "h100" needs 16 devices, has 8'
    )


def test_the_function_keeps_counting_after_its_own_placements():
    """Placed replicas, once observed, are charged where the packing put them: a later
    reconcile keeps them and adds nothing beyond the node's devices."""
    deployment = f.spec(4, f.standalone(count=3))
    first = call(deployment, [h100_cluster(nodes=1)])
    placed = composed(first)
    assert sorted(placed) == ["replica-a-0", "replica-a-1"]
    observed = {key: observe(body) for key, body in placed.items()}
    second = call(deployment, [h100_cluster(nodes=1)], list(placed.values()), observed)
    assert composed(second) == placed
    assert "over-committed" not in conditions(second)["ReplicasReady"][2]
    assert replica_name("m", "a", 0) == placed["replica-a-0"]["metadata"]["name"]


def _gpu_and_nic(gpus: int, nics: int) -> dict:
    devices = []
    if gpus:
        devices.append({"name": "gpu", "count": gpus, "selectors": [{"cel": f.GPU_SELECTOR}]})
    if nics:
        devices.append({"name": "nic", "count": nics, "selectors": [{"cel": f.NIC_SELECTOR}]})
    engine = f.standalone()
    engine["members"][0]["nodeSelector"] = {"devices": devices}
    return f.spec(1, engine)


def _other(name: str, gpus: int, nics: int) -> dict:
    body = f.replica(_gpu_and_nic(gpus, nics), "a", 0, name=name, deployment_name=name)
    for request in body["spec"]["engines"][0]["members"][0]["deviceRequests"]:
        request["deviceClassName"] = f"{request['name']}.nvidia.com"
    return body


def test_a_pod_needs_every_device_it_claims_on_the_same_node():
    """Node 0 keeps 7 GPUs but no NIC, node 1 a NIC but no GPU: a pod claiming one of each
    fits neither, though the pool has both free."""
    cluster = f.cluster("a", f.pool("p", 2, f.gpu(count=8), f.nic("DRA", count=1)))
    others = [_other("o-a", gpus=1, nics=1), _other("o-b", gpus=8, nics=0)]
    rsp = call(_gpu_and_nic(1, 1), [cluster], others)
    assert composed(rsp) == {}
    assert conditions(rsp)["ReplicasScheduled"][2].endswith(
        '1 insufficient free devices (needs 1 GPU and 1 NIC on one node; pool "p" has no node '
        "with all of them free)"
    )
    # Without o-a, node 1 has both free and the pod fits.
    assert sorted(composed(call(_gpu_and_nic(1, 1), [cluster], others[1:]))) == ["replica-a-0"]


def test_a_pool_whose_replicas_no_longer_pack_is_overcommitted_though_its_total_fits():
    """Three 5-GPU replicas on two 8-GPU nodes: 15 of 16 GPUs, but no node holds two."""
    deployment = f.spec(3, f.standalone(count=5))
    ours = [f.replica(deployment, "a", i, pools=H100) for i in range(3)]
    observed = {f"replica-a-{i}": observe(r) for i, r in enumerate(ours)}
    rsp = call(deployment, [h100_cluster(nodes=2)], ours, observed=observed)
    assert sorted(composed(rsp)) == [f"replica-a-{i}" for i in range(3)]
    assert conditions(rsp)["ReplicasReady"][2] == (
        '0 of 3 ready; over-committed: a pool "h100" needs 15 devices, has 16 but not on the '
        "same nodes"
    )
