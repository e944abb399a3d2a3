"""Several deployments reconciled from one snapshot, competing for the last free devices
(issue 23 item 3).

Crossplane reconciles ModelDeployments concurrently, each from its own view of the fleet. The
fleet has two free L4 GPUs (lab-east's second node, lab-west's one node); three new deployments
of one single-GPU replica each are reconciled together from the same view, so all three take
lab-east's free GPU. From then on every reconcile replays the fleet first come, first served:
the two replicas that lost are placed again (one on lab-west, one nowhere: the fleet is full
and says so), no cluster ends with more replicas than GPUs, and nothing that served before is
touched.
"""

from __future__ import annotations

from collections import Counter

from modelplane.controlplane import ControlPlane
from scenario_world import NAMESPACE, conditions, converge, find, replicas, snapshot, uid

RACERS = ("race-a", "race-b", "race-c")
GPUS = {"gke-us": 2, "lab-east": 2, "lab-west": 1}


def deployment(name: str) -> dict:
    return {
        "apiVersion": "modelplane.ai/v1alpha1",
        "kind": "ModelDeployment",
        "metadata": {"name": name, "namespace": NAMESPACE},
        "spec": {
            "replicas": 1,
            "clusterSelector": {"matchLabels": {"tier": "demo"}},
            "engines": [
                {
                    "name": "main",
                    "members": [
                        {
                            "role": "Standalone",
                            "nodeSelector": {
                                "devices": [
                                    {
                                        "name": "gpu",
                                        "selectors": [
                                            {
                                                "cel": 'device.attributes["gpu.nvidia.com"]'
                                                '.architecture == "Ada Lovelace"'
                                            }
                                        ],
                                    }
                                ]
                            },
                            "template": {
                                "spec": {
                                    "containers": [
                                        {
                                            "name": "engine",
                                            "image": "vllm/vllm-openai:v0.11.0",
                                            "args": [f"--model=BAAI/{name}"],
                                        }
                                    ]
                                }
                            },
                        }
                    ],
                }
            ],
        },
    }


def every_replica(plane: ControlPlane) -> dict[str, str]:
    return {
        r["metadata"]["name"]: r["spec"]["clusterName"]
        for r in plane.list(kind="ModelReplica", namespace=NAMESPACE)
    }


def test_deployments_racing_for_the_last_gpus_from_one_snapshot_settle_without_overcommit(
    fleet: ControlPlane,
):
    serving_before = {
        name: uid(find(fleet, "ModelReplica", name))
        for deployment_name in ("qwen3-8b", "embed")
        for name in replicas(fleet, deployment_name)
    }
    assert serving_before
    before = snapshot(fleet)
    keys = [fleet.apply(deployment(name)) for name in RACERS]

    # The race: every reconcile reads the fleet as it was before any of them placed.
    fleet.reconcile_together(keys)
    raced = {name: replicas(fleet, name) for name in RACERS}
    assert [set(placed.values()) for placed in raced.values()] == [{"lab-east"}] * 3

    converge(fleet)
    placed = {name: replicas(fleet, name) for name in RACERS}
    where = sorted(cluster for p in placed.values() for cluster in p.values())
    # Two GPUs were free: two racers run, on lab-east and lab-west; the third is refused.
    assert where == ["lab-east", "lab-west"]
    # No cluster hosts more single-GPU replicas than it has GPUs.
    load = Counter(every_replica(fleet).values())
    assert all(load[cluster] <= gpus for cluster, gpus in GPUS.items()), load
    # First come, first served: the racer that kept lab-east is the one every reconcile
    # replayed first (same creation second, so the name decides), and it was never moved.
    (winner,) = [name for name, p in placed.items() if set(p.values()) == {"lab-east"}]
    assert placed[winner] == raced[winner]
    # The losers were told why, on their deployments.
    losers = [name for name in RACERS if name != winner]
    for name in losers:
        events = fleet.events.get(fleet.key("ModelDeployment", name, NAMESPACE), [])
        assert any(e["reason"] == "LostCapacityRace" for e in events), (name, events)
    refused = [name for name, p in placed.items() if not p]
    assert len(refused) == 1
    (scheduled_status, reason, message) = conditions(find(fleet, "ModelDeployment", refused[0]))[
        "ReplicasScheduled"
    ]
    assert (scheduled_status, reason) == ("False", "InsufficientCapacity"), message
    # Everything that served before the race serves exactly as before.
    for name, was in serving_before.items():
        assert uid(find(fleet, "ModelReplica", name)) == was
        assert conditions(find(fleet, "ModelReplica", name))["Ready"][0] == "True"
    assert before  # the snapshot helper read the fleet before the race
