"""compose-model-deployment through real gRPC: requirements, composed objects, status,
conditions and events, and never losing a serving replica."""

from __future__ import annotations

import md_fleet as f
from compose_model_deployment import fleet_inputs
from compose_model_deployment.fn import ModelDeploymentFunction
from compose_model_deployment.names import replica_name
from modelplane_common.serving import run_function
from modelplane_common.testing import (
    conditions,
    desired_ready,
    desired_resources,
    desired_status,
    fleet_required,
    make_request,
    observe,
    ready_status,
    results,
)
from modelplane_schemas.generated.modelplane_ai.v1alpha1.modelendpoint import ModelEndpoint
from modelplane_schemas.generated.modelplane_ai.v1alpha1.modelreplica import ModelReplica

NAME_A0 = replica_name("m", "a", 0)


def xr(spec: dict, conditions_: list[dict] | None = None) -> dict:
    body = {
        "apiVersion": "modelplane.ai/v1alpha1",
        "kind": "ModelDeployment",
        "metadata": {"name": "m", "namespace": f.NAMESPACE},
        "spec": spec,
    }
    if conditions_:
        body["status"] = {"conditions": conditions_}
    return body


def model_cache(name: str, match_labels: dict | None = None) -> dict:
    """A ModelCache in the deployment's namespace; staged everywhere without ``match_labels``."""
    spec: dict = {"source": "HuggingFace", "huggingFace": {"repo": "org/m", "sizeGiB": 1}}
    if match_labels is not None:
        spec["clusterSelector"] = {"matchLabels": match_labels}
    return {
        "apiVersion": "modelplane.ai/v1alpha1",
        "kind": "ModelCache",
        "metadata": {"name": name, "namespace": f.NAMESPACE},
        "spec": spec,
    }


def call(spec, clusters=None, replicas=None, observed=None, previous=None, caches=None):
    required = (
        {}
        if clusters is None
        else {**fleet_required(clusters, replicas or [], observed), "service-routes": []}
    )
    cache = (spec.get("modelCacheRef") or {}).get("name")
    if cache and clusters is not None:
        required["model-cache"] = [model_cache(cache)] if caches is None else caches
    request = make_request(xr(spec, previous), observed=observed or {}, required=required)
    return run_function(ModelDeploymentFunction(), request)


def requirement_labels(rsp, key):
    return dict(rsp.requirements.resources[key].match_labels.labels)


def test_unresolved_requirements_keep_what_exists_and_decide_nothing():
    deployment = f.spec()
    observed = {
        "replica-a-0": observe(f.replica(deployment, "a", 0), ready_status()),
        "endpoint-a-0": observe(
            {
                "apiVersion": "modelplane.ai/v1alpha1",
                "kind": "ModelEndpoint",
                "metadata": {"name": NAME_A0, "namespace": f.NAMESPACE},
                "spec": {"url": "http://x/v1"},
            },
            ready_status(),
        ),
    }
    rsp = call(f.spec(1, clusterSelector={"matchLabels": {"tier": "prod"}}), observed=observed)
    # The classes, the cluster its replica is on and that cluster's capacity summary by name,
    # and one shard of candidates' summaries, selected with the deployment's clusterSelector:
    # never every InferenceCluster or every ModelReplica of the fleet.
    first = fleet_inputs.first_shard(f.NAMESPACE, "m")
    shard = f"capacity-shard-{first:02d}"
    assert set(rsp.requirements.resources) == {
        "inference-classes", "cluster.a", "capacity.a", shard, "service-routes"
    }  # fmt: skip
    assert rsp.requirements.resources["cluster.a"].match_name == "a"
    assert rsp.requirements.resources["capacity.a"].match_name == "capacity-a"
    assert rsp.requirements.resources["capacity.a"].namespace == "modelplane-system"
    assert requirement_labels(rsp, shard) == {
        "tier": "prod",
        "modelplane.ai/capacity-summary": "true",
        "modelplane.ai/capacity-shard": f"{first:02d}",
    }
    assert rsp.requirements.resources[shard].namespace == "modelplane-system"
    # Routes are read in the deployment's own namespace only (where its ModelServices are).
    assert rsp.requirements.resources["service-routes"].kind == "HTTPRoute"
    assert rsp.requirements.resources["service-routes"].namespace == f.NAMESPACE
    assert set(desired_resources(rsp)) == {"replica-a-0", "endpoint-a-0"}
    assert "status" not in desired_resources(rsp)["replica-a-0"]
    assert list(rsp.conditions) == [] and list(rsp.results) == [] and desired_status(rsp) == {}


def test_no_clusters_deletes_replicas_and_says_so():
    deployment = f.spec()
    observed = {"replica-a-0": observe(f.replica(deployment, "a", 0), ready_status())}
    rsp = call(deployment, clusters=[], observed=observed)
    assert desired_resources(rsp) == {}
    assert conditions(rsp)["ReplicasScheduled"] == ("False", "NoClusters", "")
    assert conditions(rsp)["ReplicasReady"] == ("False", "NoReplicasScheduled", "")
    assert results(rsp) == [("SEVERITY_WARNING", "No InferenceClusters found")]
    assert desired_status(rsp)["replicas"] == {"total": 0, "ready": 0}
    assert rsp.desired.composite.ready == 2  # READY_FALSE


def test_warning_events_only_on_transitions():
    previous = [{"type": "ReplicasScheduled", "status": "False", "reason": "NoClusters"}]
    rsp = call(f.spec(), clusters=[], previous=previous)
    assert results(rsp) == []


def test_first_placement_composes_a_valid_replica_and_no_endpoint_yet():
    deployment = f.spec(1, modelCacheRef={"name": "weights"}, serving={"mode": "Unified"})
    rsp = call(deployment, clusters=[f.cluster("a")])
    desired = desired_resources(rsp)
    assert set(desired) == {"replica-a-0"}
    replica = desired["replica-a-0"]
    ModelReplica.model_validate(replica)
    assert replica["metadata"] == {
        "name": NAME_A0,
        "namespace": f.NAMESPACE,
        "labels": {
            "modelplane.ai/deployment": "m",
            "modelplane.ai/cluster": "a",
            "modelplane.ai/replica-index": "0",
            # The cache keeps its PVC on a cluster while replicas labelled with it run there.
            "modelplane.ai/modelcache": "weights",
        },
    }
    assert replica["spec"] == {
        "clusterName": "a",
        "modelCacheRef": {"name": "weights"},
        "serving": {"mode": "Unified"},
        "engines": [
            {
                "name": "main",
                "copies": 1,
                "members": [
                    {
                        "role": "Standalone",
                        "nodePoolName": "p",
                        "deviceRequests": [
                            {
                                "name": "gpu",
                                "deviceClassName": "gpu.nvidia.com",
                                "count": 1,
                                "selectors": [{"cel": f.GPU_SELECTOR}],
                            }
                        ],
                        "template": f.template(),
                    }
                ],
            }
        ],
    }
    assert conditions(rsp)["ReplicasScheduled"] == ("False", "Scheduling", "")
    assert conditions(rsp)["ReplicasReady"] == ("False", "ModelStarting", "0 of 1 ready")
    assert results(rsp) == [("SEVERITY_NORMAL", "Scheduled 1 replicas across 1 clusters: a")]
    assert desired_ready(rsp) == {"replica-a-0": False}
    assert desired_status(rsp)["replicas"] == {"total": 1, "ready": 0}


def test_ready_replica_gets_its_endpoint():
    deployment = f.spec()
    observed = {"replica-a-0": observe(f.replica(deployment, "a", 0), ready_status())}
    rsp = call(
        deployment,
        clusters=[f.cluster("a", gateway="203.0.113.7")],
        replicas=[f.replica(deployment, "a", 0, ready=True)],
        observed=observed,
    )
    desired = desired_resources(rsp)
    endpoint = desired["endpoint-a-0"]
    ModelEndpoint.model_validate(endpoint)
    assert endpoint["metadata"]["name"] == NAME_A0
    assert endpoint["metadata"]["labels"] == desired["replica-a-0"]["metadata"]["labels"]
    assert endpoint["spec"] == {
        "url": f"http://203.0.113.7/{f.NAMESPACE}/{NAME_A0}/v1",
        "rewritePath": f"/{f.NAMESPACE}/{NAME_A0}/",
    }
    assert desired_ready(rsp) == {"replica-a-0": True, "endpoint-a-0": False}
    assert conditions(rsp)["ReplicasScheduled"] == (
        "True",
        "ReplicasCreated",
        "Scheduled 1 of 1 replicas",
    )
    assert conditions(rsp)["ReplicasReady"] == ("True", "AllReplicasReady", "1 of 1 ready")
    assert desired_status(rsp)["replicas"] == {"total": 1, "ready": 1}
    assert results(rsp) == []
    assert rsp.desired.composite.ready == 0  # left to Crossplane: the endpoint is not ready


def test_s6_degraded_cluster_keeps_the_replica_but_withdraws_the_endpoint():
    deployment = f.spec()
    observed = {
        "replica-a-0": observe(f.replica(deployment, "a", 0)),
        "endpoint-a-0": observe(
            {
                "apiVersion": "modelplane.ai/v1alpha1",
                "kind": "ModelEndpoint",
                "metadata": {"name": NAME_A0},
                "spec": {"url": "http://x/v1"},
            }
        ),
    }
    rsp = call(
        deployment,
        clusters=[f.cluster("a", ready=False, gateway=None), f.cluster("b")],
        replicas=[f.replica(deployment, "a", 0)],
        observed=observed,
    )
    assert set(desired_resources(rsp)) == {"replica-a-0"}
    assert desired_status(rsp)["replicas"] == {"total": 1, "ready": 0}


def test_ready_replica_on_a_cluster_turned_not_ready_is_withheld_and_the_condition_says_why():
    """§4.3: a degraded cluster (not Ready, though it still has its gateway address and the
    replica still reports Ready) keeps the replica but gets no traffic, and it does not count
    as ready."""
    deployment = f.spec(replicas=2)
    name_b0 = replica_name("m", "b", 0)
    observed = {
        "replica-a-0": observe(f.replica(deployment, "a", 0), ready_status()),
        "replica-b-0": observe(f.replica(deployment, "b", 0), ready_status()),
        "endpoint-a-0": observe(
            {
                "apiVersion": "modelplane.ai/v1alpha1",
                "kind": "ModelEndpoint",
                "metadata": {"name": NAME_A0, "namespace": f.NAMESPACE},
                "spec": {"url": "http://x/v1"},
            },
            ready_status(),
        ),
        "endpoint-b-0": observe(
            {
                "apiVersion": "modelplane.ai/v1alpha1",
                "kind": "ModelEndpoint",
                "metadata": {"name": name_b0, "namespace": f.NAMESPACE},
                "spec": {"url": "http://y/v1"},
            },
            ready_status(),
        ),
    }
    rsp = call(
        deployment,
        clusters=[f.cluster("a", ready=False, gateway="203.0.113.7"), f.cluster("b")],
        replicas=[
            f.replica(deployment, "a", 0, ready=True),
            f.replica(deployment, "b", 0, ready=True),
        ],
        observed=observed,
    )
    assert set(desired_resources(rsp)) == {"replica-a-0", "replica-b-0", "endpoint-b-0"}
    assert desired_status(rsp)["replicas"] == {"total": 2, "ready": 1}
    assert conditions(rsp)["ReplicasReady"] == (
        "False",
        "ModelStarting",
        "1 of 2 ready; withheld from traffic: a (not Ready)",
    )
    assert rsp.desired.composite.ready == 2  # READY_FALSE


def test_s7_replica_on_a_deleted_cluster_moves():
    deployment = f.spec()
    observed = {"replica-a-0": observe(f.replica(deployment, "a", 0), ready_status())}
    rsp = call(deployment, clusters=[f.cluster("b")], observed=observed)
    assert set(desired_resources(rsp)) == {"replica-b-0"}
    assert results(rsp) == [("SEVERITY_NORMAL", "Scheduled 1 replicas across 1 clusters: b")]


def test_partial_shortfall_is_insufficient_capacity_and_not_ready():
    deployment = f.spec(2)
    observed = {"replica-a-0": observe(f.replica(deployment, "a", 0), ready_status())}
    rsp = call(
        deployment,
        clusters=[f.cluster("a", f.pool("p", 1))],
        replicas=[f.replica(deployment, "a", 0, ready=True)],
        observed=observed,
    )
    status, reason, message = conditions(rsp)["ReplicasScheduled"]
    assert (status, reason) == ("False", "InsufficientCapacity")
    assert message == (
        "1 of 2 replicas scheduled; 0/1 clusters available for the rest: "
        '1 insufficient free devices (needs 1 GPU on one node; pool "p" has none free on any '
        "node)"
    )
    assert conditions(rsp)["ReplicasReady"] == ("False", "ModelStarting", "1 of 2 ready")
    assert results(rsp) == [("SEVERITY_WARNING", message)]
    assert rsp.desired.composite.ready == 2
    assert desired_status(rsp)["replicas"] == {"total": 1, "ready": 1}
    # Reconciled again with the condition recorded: no repeated event, same message.
    previous = [{"type": "ReplicasScheduled", "status": "False", "reason": "InsufficientCapacity"}]
    again = call(
        deployment,
        clusters=[f.cluster("a", f.pool("p", 1))],
        replicas=[f.replica(deployment, "a", 0, ready=True)],
        observed=observed,
        previous=previous,
    )
    assert results(again) == [] and conditions(again)["ReplicasScheduled"][2] == message


def test_nothing_placed_says_why():
    rsp = call(f.spec(), clusters=[f.cluster("a", ready=False)])
    assert conditions(rsp)["ReplicasScheduled"] == (
        "False",
        "InsufficientCapacity",
        "0 of 1 replicas scheduled (checked 1 clusters); 0/1 clusters available: 1 not Ready",
    )
    assert conditions(rsp)["ReplicasReady"] == ("False", "NoReplicasScheduled", "")


def _serving_fleet():
    deployment = f.spec()
    observed = {
        "replica-a-0": observe(f.replica(deployment, "a", 0), ready_status()),
        "endpoint-a-0": observe(
            {
                "apiVersion": "modelplane.ai/v1alpha1",
                "kind": "ModelEndpoint",
                "metadata": {"name": NAME_A0, "namespace": f.NAMESPACE},
                "spec": {"url": "http://x/v1", "rewritePath": "/"},
            },
            ready_status(),
        ),
    }
    return observed


def test_invalid_selector_keeps_serving_replicas_and_endpoints():
    observed = _serving_fleet()
    broken = f.spec(1, f.standalone("main", "device.driver =="))
    rsp = call(broken, clusters=[f.cluster("a"), f.cluster("b")], observed=observed)
    desired = desired_resources(rsp)
    assert set(desired) == {"replica-a-0", "endpoint-a-0"}
    assert desired["replica-a-0"]["spec"] == observed["replica-a-0"]["spec"]
    assert "uid" not in desired["replica-a-0"]["metadata"]
    status, reason, message = conditions(rsp)["ReplicasScheduled"]
    assert (status, reason) == ("False", "InvalidNodeSelector")
    assert message.startswith(
        "Invalid nodeSelector CEL expression: "
        "spec.engines[0].members[0].nodeSelector.devices[0].selectors[0].cel: "
        "<input>:1:17: Syntax error"
    )
    assert results(rsp) == [("SEVERITY_WARNING", message)]
    assert desired_status(rsp)["replicas"] == {"total": 1, "ready": 1}
    assert conditions(rsp)["ReplicasReady"] == ("True", "AllReplicasReady", "1 of 1 ready")
    assert rsp.desired.composite.ready == 2
    # Reconciled again with the condition recorded: same condition, no repeated event.
    previous = [{"type": "ReplicasScheduled", "status": "False", "reason": "InvalidNodeSelector"}]
    again = call(
        broken, clusters=[f.cluster("a"), f.cluster("b")], observed=observed, previous=previous
    )
    assert conditions(again)["ReplicasScheduled"] == (status, reason, message)
    assert results(again) == []
    assert set(desired_resources(again)) == {"replica-a-0", "endpoint-a-0"}


def test_spec_the_schema_rejects_keeps_serving_replicas():
    observed = _serving_fleet()
    broken = f.spec()
    del broken["engines"][0]["members"][0]["template"]
    rsp = call(broken, clusters=[f.cluster("a")], observed=observed)
    assert set(desired_resources(rsp)) == {"replica-a-0", "endpoint-a-0"}
    status, reason, message = conditions(rsp)["ReplicasScheduled"]
    assert (status, reason) == ("False", "InvalidSpec")
    assert "spec.engines[0].members[0].template" in message


def test_composed_replica_missing_from_the_fleet_listing_is_still_ours():
    deployment = f.spec()
    observed = {"replica-a-0": observe(f.replica(deployment, "a", 0), ready_status())}
    rsp = call(
        deployment, clusters=[f.cluster("a"), f.cluster("b")], replicas=[], observed=observed
    )
    assert set(desired_resources(rsp)) == {"replica-a-0", "endpoint-a-0"}


def test_gang_replica_carries_worker_and_claimless_leader():
    deployment = f.spec(1, f.gang(nodes=2, claimless_leader=True))
    rsp = call(deployment, clusters=[f.cluster("a", f.pool("ib", 2))])
    replica = desired_resources(rsp)["replica-a-0"]
    ModelReplica.model_validate(replica)
    leader, worker = replica["spec"]["engines"][0]["members"]
    assert leader["nodePoolName"] == worker["nodePoolName"] == "ib"
    assert "deviceRequests" not in leader and worker["worker"] == {"nodes": 2}
    assert replica["spec"]["modelCacheRef"] == {"name": "weights"}


def test_a_pool_whose_attributes_cannot_be_read_is_named_in_the_scheduling_message():
    unreadable = {**f.gpu(), "attributes": {"cudaComputeCapability": {"version": "8.9"}}}
    rsp = call(f.spec(), clusters=[f.cluster("a", f.pool("l4", 2, unreadable))])
    status, reason, message = conditions(rsp)["ReplicasScheduled"]
    assert (status, reason) == ("False", "InsufficientCapacity")
    assert message == (
        "0 of 1 replicas scheduled (checked 1 clusters); 0/1 clusters available: "
        '1 no pool matches engine "main" (pool "l4": device attributes cannot be read: '
        "cudaComputeCapability: invalid semantic version '8.9')"
    )
