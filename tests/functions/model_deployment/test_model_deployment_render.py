"""The qwen-demo fleet through `modelplane render` and `modelplane validate`."""

from __future__ import annotations

import yaml
from click.testing import CliRunner
from modelplane import repo
from modelplane.main import cli
from modelplane.render import load_objects, render
from modelplane.summaries import summaries
from modelplane_common.testing import function_results
from modelplane_schemas.generated.modelplane_ai.v1alpha1.modelendpoint import ModelEndpoint
from modelplane_schemas.generated.modelplane_ai.v1alpha1.modelreplica import ModelReplica

DEMO = repo.root() / "examples" / "qwen-demo"
CLUSTERS = str(DEMO / "clusters.yaml")


def _render(xr: str, observed: str | None = None) -> tuple[dict, dict[str, dict], list[dict]]:
    text = render(xr, required_location=CLUSTERS, observed_location=observed, include_results=True)
    documents = [d for d in yaml.safe_load_all(text) if d]
    composite = documents[0]
    composed = {
        d["metadata"]["annotations"]["crossplane.io/composition-resource-name"]: d
        for d in documents[1:]
        if d["kind"] != "Result"
    }
    return composite, composed, function_results(documents)


def _conditions(composite: dict) -> dict[str, tuple]:
    return {
        c["type"]: (c["status"], c["reason"], c.get("message", ""))
        for c in composite["status"]["conditions"]
    }


def _strip(obj: dict) -> dict:
    """The object as the model sees it: without the metadata render stamps."""
    return {k: v for k, v in obj.items() if k != "metadata"}


def test_qwen3_8b_spreads_over_both_clusters():
    composite, composed, results = _render(str(DEMO / "qwen3-8b.yaml"))
    assert sorted(composed) == ["replica-lab-east-0", "replica-lab-west-0"]
    for key, replica in composed.items():
        ModelReplica.model_validate(_strip(replica))
        assert replica["spec"]["engines"][0]["members"][0]["nodePoolName"] == "l4"
        assert replica["metadata"]["labels"]["modelplane.ai/cluster"] == key.split("-", 1)[1][:-2]
    assert composite["status"]["replicas"] == {"total": 2, "ready": 0}
    assert _conditions(composite)["ReplicasScheduled"][:2] == ("False", "Scheduling")
    assert [r["message"] for r in results] == [
        "Scheduled 2 replicas across 2 clusters: lab-east, lab-west"
    ]


def test_ready_replicas_get_endpoints_on_their_gateways():
    composite, composed, results = _render(
        str(DEMO / "qwen3-8b.yaml"), str(DEMO / "qwen3-8b-observed.yaml")
    )
    assert sorted(composed) == [
        "endpoint-lab-east-0",
        "endpoint-lab-west-0",
        "replica-lab-east-0",
        "replica-lab-west-0",
    ]
    east = composed["endpoint-lab-east-0"]
    ModelEndpoint.model_validate(_strip(east))
    assert east["spec"] == {
        "url": "http://198.51.100.10/ml-team/qwen3-8b-27943/v1",
        "rewritePath": "/ml-team/qwen3-8b-27943/",
    }
    assert composed["endpoint-lab-west-0"]["spec"]["url"].startswith("http://198.51.100.20/")
    assert composite["status"]["replicas"] == {"total": 2, "ready": 2}
    conditions = _conditions(composite)
    assert conditions["ReplicasScheduled"] == (
        "True",
        "ReplicasCreated",
        "Scheduled 2 of 2 replicas",
    )
    assert conditions["ReplicasReady"] == ("True", "AllReplicasReady", "2 of 2 ready")
    assert results == []


def test_gang_lands_whole_on_the_infiniband_pool():
    _, composed, _ = _render(str(DEMO / "qwen3-235b-gang.yaml"))
    (replica,) = composed.values()
    ModelReplica.model_validate(_strip(replica))
    assert replica["spec"]["clusterName"] == "lab-west"
    assert replica["spec"]["modelCacheRef"] == {"name": "qwen3-235b-weights"}
    leader, worker = replica["spec"]["engines"][0]["members"]
    assert leader["nodePoolName"] == worker["nodePoolName"] == "h100-ib"
    for member in (leader, worker):
        # The fabric steered the placement; only the GPUs are claimed.
        assert [(r["name"], r["count"]) for r in member["deviceRequests"]] == [("gpu", 8)]
    assert worker["worker"] == {"nodes": 1}


def test_more_replicas_than_the_fleet_holds_says_why(tmp_path):
    xr = yaml.safe_load((DEMO / "qwen3-8b.yaml").read_text())
    # Four GPUs per replica: only h100-ib (two nodes of 8) has them, and it holds four such
    # replicas, two per node (D11; counted in whole nodes it held two).
    xr["spec"]["replicas"] = 6
    xr["spec"]["engines"][0]["members"][0]["nodeSelector"]["devices"][0]["count"] = 4
    path = tmp_path / "qwen3-8b-6.yaml"
    path.write_text(yaml.safe_dump(xr))
    composite, composed, results = _render(str(path))
    assert sorted(composed) == [f"replica-lab-west-{i}" for i in range(4)]
    for replica in composed.values():
        (member,) = replica["spec"]["engines"][0]["members"]
        assert member["nodePoolName"] == "h100-ib"
        assert [r["count"] for r in member["deviceRequests"]] == [4]
    assert composite["status"]["replicas"] == {"total": 4, "ready": 0}
    status, reason, message = _conditions(composite)["ReplicasScheduled"]
    assert (status, reason) == ("False", "InsufficientCapacity")
    assert message == (
        "4 of 6 replicas scheduled; 0/2 clusters available for the rest: "
        '1 insufficient free devices (needs 4 GPUs on one node; pool "h100-ib" has none free on '
        "any node; fits after it scales up), "
        '1 no pool matches engine "main" (pool "l4" has 1 matching device per node, request '
        '"gpu" needs 4)'
    )
    assert _conditions(composite)["ReplicasReady"] == ("False", "ModelStarting", "0 of 6 ready")
    assert [r["severity"] for r in results] == ["Warning", "Normal"]


def test_demo_manifests_are_valid():
    result = CliRunner().invoke(cli, ["validate", str(DEMO)])
    assert result.exit_code == 0, result.output


def test_the_demo_fleets_capacity_summaries_are_the_ones_its_clusters_publish():
    """clusters.yaml carries generated summaries; a cluster edited without regenerating them
    (`modelplane summarize`) would render against a stale fleet."""
    objects = load_objects(CLUSTERS)
    committed = [o for o in objects if o["kind"] == "ConfigMap"]
    assert [c["metadata"]["name"] for c in committed] == [
        "capacity-lab-east",
        "caches-lab-east",
        "capacity-lab-west",
        "caches-lab-west",
    ]
    assert committed == summaries(objects)
