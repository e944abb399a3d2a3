"""End to end through `modelplane render`: the replicas compose-model-deployment writes for the
qwen-demo fleet compose, through compose-model-replica, into objects the workload cluster
accepts, pinned to the pool and provider config the scheduler chose."""

from __future__ import annotations

import pytest
import yaml
from modelplane.render import render
from replica_support import ROOT, manifest_of, object_problems

DEMO = ROOT / "examples" / "qwen-demo"


def _documents(text: str) -> list[dict]:
    return [d for d in yaml.safe_load_all(text) if d]


@pytest.mark.parametrize("deployment", ["qwen3-8b.yaml", "qwen3-235b-gang.yaml"])
def test_scheduled_replicas_compose_valid_remote_objects(tmp_path, deployment):
    clusters = {
        c["metadata"]["name"]: c
        for c in _documents((DEMO / "clusters.yaml").read_text())
        if c.get("kind") == "InferenceCluster"
    }
    rendered = _documents(
        render(str(DEMO / deployment), required_location=str(DEMO / "clusters.yaml"))
    )
    replicas = [d for d in rendered if d["kind"] == "ModelReplica"]
    assert replicas, "the demo fleet fits at least one replica"
    for replica in replicas:
        # As the API server would store the replica: no render-stamped owner metadata.
        metadata = replica["metadata"]
        replica["metadata"] = {k: metadata[k] for k in ("name", "namespace", "labels")}
        path = tmp_path / f"{metadata['name']}.yaml"
        path.write_text(yaml.safe_dump(replica))
        composed = [
            d
            for d in _documents(render(str(path), required_location=str(DEMO / "clusters.yaml")))
            if d["kind"] == "Object"
        ]
        provider_config = clusters[replica["spec"]["clusterName"]]["status"]["providerConfigRef"]
        assert composed
        for obj in composed:
            obj.pop("metadata")  # Crossplane's naming, not ours
            assert object_problems(obj) == []
            assert obj["spec"]["providerConfigRef"]["name"] == provider_config["name"]
        pools = {
            manifest_of(o)["spec"]["template"]["spec"]["nodeSelector"]["modelplane.ai/pool"]
            for o in composed
            if manifest_of(o)["kind"] == "Deployment"
        } | {
            manifest_of(o)["spec"]["leaderWorkerTemplate"]["workerTemplate"]["spec"][
                "nodeSelector"
            ]["modelplane.ai/pool"]
            for o in composed
            if manifest_of(o)["kind"] == "LeaderWorkerSet"
        }
        assert pools == {
            m["nodePoolName"] for e in replica["spec"]["engines"] for m in e["members"]
        }
