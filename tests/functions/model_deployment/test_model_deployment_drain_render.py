"""Taints, drains and failover through `modelplane render` on the qwen-demo fleet (issue 15).

Each step renders, then feeds what it composed back as observed state (marked Ready where the
step says so), as Crossplane would on the next reconcile.
"""

from __future__ import annotations

import copy
from pathlib import Path

import yaml
from compose_model_deployment.names import replica_name
from modelplane import repo
from modelplane.render import render
from modelplane.summaries import summaries
from modelplane_common.testing import function_results

DEMO = repo.root() / "examples" / "qwen-demo"
NOW = "modelplane.ai/now"
MAINTENANCE = {"key": "modelplane.ai/maintenance", "effect": "NoExecute"}
WEST = replica_name("qwen3-8b", "lab-west", 0)  # as in qwen-demo/qwen3-8b-observed.yaml
EAST_1 = replica_name("qwen3-8b", "lab-east", 1)


# Both demo replicas and their endpoints, as they were before any taint.
UNDISTURBED = [
    "endpoint-lab-east-0",
    "endpoint-lab-west-0",
    "replica-lab-east-0",
    "replica-lab-west-0",
]


def _write_fleet(path: Path, objects: list[dict]) -> None:
    """The fleet with its capacity summaries rebuilt, as the clusters would publish them."""
    objects = [o for o in objects if o and o["kind"] != "ConfigMap"]
    path.write_text(yaml.safe_dump_all(objects + summaries(objects)))


def _fleet(tmp_path: Path, taints=None, west_ready: str | None = None) -> str:
    clusters = list(yaml.safe_load_all((DEMO / "clusters.yaml").read_text()))
    west = next(c for c in clusters if c and c["metadata"]["name"] == "lab-west")
    if taints:
        west["spec"]["taints"] = taints
    if west_ready:
        west["status"]["conditions"] = [
            {
                "type": "Ready",
                "status": "False",
                "reason": "Unavailable",
                "lastTransitionTime": west_ready,
            }
        ]
    path = tmp_path / "clusters.yaml"
    _write_fleet(path, clusters)
    return str(path)


def _ready(obj: dict) -> dict:
    """Ready; an endpoint also routable (its Service exists: ``status.routing.backendName``)."""
    obj = copy.deepcopy(obj)
    obj["status"] = {"conditions": [{"type": "Ready", "status": "True", "reason": "Available"}]}
    if obj["kind"] == "ModelEndpoint":
        obj["status"]["routing"] = {"backendName": obj["metadata"]["name"]}
    return obj


def _render(tmp_path: Path, fleet: str, observed: list[dict], context: tuple[str, ...] = ()):
    path = tmp_path / "observed.yaml"
    path.write_text(yaml.safe_dump_all(observed))
    text = render(
        str(DEMO / "qwen3-8b.yaml"),
        required_location=fleet,
        observed_location=str(path),
        include_results=True,
        context_values=context,
    )
    documents = [d for d in yaml.safe_load_all(text) if d]
    composed = {
        d["metadata"]["annotations"]["crossplane.io/composition-resource-name"]: d
        for d in documents[1:]
        if d["kind"] != "Result"
    }
    conditions = {
        c["type"]: (c["status"], c["reason"], c.get("message", ""))
        for c in documents[0]["status"]["conditions"]
    }
    results = [d["message"] for d in function_results(documents)]
    return documents[0], composed, conditions, results


def _serving_demo() -> list[dict]:
    """Both demo replicas Ready, each with a Ready endpoint (Ready and routed)."""
    replicas = list(yaml.safe_load_all((DEMO / "qwen3-8b-observed.yaml").read_text()))
    endpoints = [
        _ready(
            {
                "apiVersion": "modelplane.ai/v1alpha1",
                "kind": "ModelEndpoint",
                "metadata": {
                    "name": r["metadata"]["name"],
                    "namespace": "ml-team",
                    "labels": r["metadata"]["labels"],
                    "annotations": {
                        "crossplane.io/composition-resource-name": "endpoint-"
                        + r["metadata"]["annotations"]["crossplane.io/composition-resource-name"][
                            len("replica-") :
                        ]
                    },
                },
                "spec": {"url": "http://x/v1", "rewritePath": "/x/"},
            }
        )
        for r in replicas
        if r
    ]
    return [r for r in replicas if r] + endpoints


def test_no_schedule_keeps_the_running_replica(tmp_path):
    fleet = _fleet(tmp_path, taints=[{**MAINTENANCE, "effect": "NoSchedule"}])
    _, composed, conditions, _ = _render(tmp_path, fleet, _serving_demo())
    assert sorted(composed) == UNDISTURBED
    assert conditions["ReplicasScheduled"][:2] == ("True", "ReplicasCreated")
    assert conditions["ReplicasReady"] == ("True", "AllReplicasReady", "2 of 2 ready")


def test_no_schedule_places_new_replicas_elsewhere(tmp_path):
    fleet = _fleet(tmp_path, taints=[{**MAINTENANCE, "effect": "NoSchedule"}])
    _, composed, _, results = _render(tmp_path, fleet, [])
    assert sorted(k for k in composed if k.startswith("replica-")) == [
        "replica-lab-east-0",
        "replica-lab-east-1",
    ]
    assert results == ["Scheduled 2 replicas across 1 clusters: lab-east"]


def test_no_execute_drains_make_before_break(tmp_path):
    fleet = _fleet(tmp_path, taints=[MAINTENANCE])
    observed = _serving_demo()

    # 1. The old replica and its endpoint stay; its replacement is added on lab-east.
    composite, composed, conditions, results = _render(tmp_path, fleet, observed)
    assert sorted(composed) == [
        "endpoint-lab-east-0",
        "endpoint-lab-west-0",
        "replica-lab-east-0",
        "replica-lab-east-1",
        "replica-lab-west-0",
    ]
    old, new = composed["replica-lab-west-0"], composed["replica-lab-east-1"]
    assert old["metadata"]["annotations"]["modelplane.ai/draining"] == (
        "taint modelplane.ai/maintenance:NoExecute"
    )
    assert new["metadata"]["name"] == EAST_1
    assert new["metadata"]["annotations"]["modelplane.ai/replaces"] == WEST
    assert conditions["ReplicasScheduled"] == (
        "True",
        "ReplicasCreated",
        f"Scheduled 2 of 2 replicas; draining: {WEST} on lab-west "
        f"(taint modelplane.ai/maintenance:NoExecute) until {EAST_1} serves",
    )
    assert conditions["ReplicasReady"] == ("True", "AllReplicasReady", "2 of 2 ready")
    assert composite["status"]["replicas"] == {"total": 3, "ready": 2}
    assert results == [
        f"Replacing {WEST} on lab-west (taint modelplane.ai/maintenance:NoExecute) with "
        f"{EAST_1} on lab-east; {WEST} serves until {EAST_1} does"
    ]

    # 2. The replacement is Ready: it gets its endpoint, the old one still stays.
    observed.append(_ready(new))
    _, composed, conditions, _ = _render(tmp_path, fleet, observed)
    assert "replica-lab-west-0" in composed and "endpoint-lab-west-0" in composed
    assert "endpoint-lab-east-1" in composed
    assert conditions["ReplicasReady"] == ("True", "AllReplicasReady", "2 of 2 ready")  # not 3

    # 3. The replacement's endpoint is Ready but not routable yet: the old one stays.
    endpoint = _ready(composed["endpoint-lab-east-1"])
    del endpoint["status"]["routing"]
    _, composed, _, _ = _render(tmp_path, fleet, [*observed, endpoint])
    assert "replica-lab-west-0" in composed and "endpoint-lab-west-0" in composed

    # 4. The replacement's endpoint is Ready and routable: only now does the old one go.
    observed.append(_ready(composed["endpoint-lab-east-1"]))
    _, composed, conditions, _ = _render(tmp_path, fleet, observed)
    assert sorted(composed) == [
        "endpoint-lab-east-0",
        "endpoint-lab-east-1",
        "replica-lab-east-0",
        "replica-lab-east-1",
    ]
    assert "annotations" not in composed["replica-lab-east-1"]["metadata"] or (
        "modelplane.ai/replaces" not in composed["replica-lab-east-1"]["metadata"]["annotations"]
    )
    assert conditions["ReplicasScheduled"] == (
        "True",
        "ReplicasCreated",
        "Scheduled 2 of 2 replicas",
    )


def test_tolerated_no_execute_leaves_the_replica_alone(tmp_path):
    fleet = _fleet(tmp_path, taints=[MAINTENANCE])
    xr = yaml.safe_load((DEMO / "qwen3-8b.yaml").read_text())
    xr["spec"]["tolerations"] = [{"key": "modelplane.ai/maintenance", "operator": "Exists"}]
    (tmp_path / "xr").mkdir()
    path = tmp_path / "xr" / "qwen3-8b.yaml"
    path.write_text(yaml.safe_dump(xr))
    observed = tmp_path / "observed.yaml"
    observed.write_text(yaml.safe_dump_all(_serving_demo()))
    text = render(str(path), required_location=fleet, observed_location=str(observed))
    keys = sorted(
        d["metadata"]["annotations"]["crossplane.io/composition-resource-name"]
        for d in list(yaml.safe_load_all(text))[1:]
        if d
    )
    assert keys == UNDISTURBED


def test_no_execute_with_nowhere_to_go_keeps_serving_and_says_why(tmp_path):
    fleet = _fleet(tmp_path, taints=[MAINTENANCE])
    observed = _serving_demo()
    # lab-east's only free l4 node is taken by another deployment.
    other = copy.deepcopy(observed[0])
    other["metadata"] = {
        "name": "other-1",
        "namespace": "ml-team",
        "labels": {"modelplane.ai/deployment": "other", "modelplane.ai/cluster": "lab-east"},
    }
    fleet_path = Path(fleet)
    other["spec"]["clusterName"] = "lab-east"
    _write_fleet(fleet_path, [*yaml.safe_load_all(fleet_path.read_text()), other])
    _, composed, conditions, _ = _render(tmp_path, fleet, observed)
    assert sorted(composed) == UNDISTURBED
    status, reason, message = conditions["ReplicasScheduled"]
    assert (status, reason) == ("False", "InsufficientCapacity")
    assert message == (
        "1 of 2 replicas scheduled; 0/2 clusters available for the rest: "
        '1 insufficient free devices (needs 1 GPU on one node; pool "l4" has none free on any '
        "node), "
        "1 untolerated taint modelplane.ai/maintenance; kept serving, no other cluster fits: "
        f"{WEST} on lab-west (taint modelplane.ai/maintenance:NoExecute)"
    )
    annotations = composed["replica-lab-west-0"]["metadata"]["annotations"]
    assert annotations["modelplane.ai/drain-blocked"].startswith("1 insufficient free devices")
    assert conditions["ReplicasReady"] == ("True", "AllReplicasReady", "2 of 2 ready")


def test_failover_waits_for_the_grace_period_on_the_injected_clock(tmp_path):
    fleet = _fleet(tmp_path, west_ready="2026-11-22T00:00:00Z")
    observed = _serving_demo()
    before = (f"{NOW}=2026-11-22T00:09:59Z",)
    _, composed, conditions, _ = _render(tmp_path, fleet, observed, before)
    assert sorted(k for k in composed if k.startswith("replica-")) == [
        "replica-lab-east-0",
        "replica-lab-west-0",
    ]
    assert conditions["ReplicasReady"] == (
        "False",
        "ModelStarting",
        "1 of 2 ready; withheld from traffic: lab-west (not Ready)",
    )
    after = (f"{NOW}=2026-11-22T00:10:01Z",)
    _, composed, _, _ = _render(tmp_path, fleet, observed, after)
    assert sorted(k for k in composed if k.startswith("replica-")) == [
        "replica-lab-east-0",
        "replica-lab-east-1",
        "replica-lab-west-0",  # stays composed: lab-west may come back
    ]
    assert (
        composed["replica-lab-west-0"]["metadata"]["annotations"]["modelplane.ai/draining"]
        == "cluster not Ready for longer than its failover grace period 10m"
    )
