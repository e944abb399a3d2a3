"""Scenario through the simulated control plane: a class disappears from under a running GKE
cluster and comes back. Nothing is deleted meanwhile, the cluster stays Ready, and only the
pool of that class stops being offered (issue 21)."""

from __future__ import annotations

import shutil
from pathlib import Path

import yaml
from modelplane import repo
from modelplane.controlplane import session
from modelplane.kube import condition_status

EXAMPLES = repo.root() / "examples" / "platform"


def test_deleting_a_class_holds_back_its_pool_only_and_restoring_it_recovers(tmp_path: Path):
    for name in ("inferencecluster-gke.yaml", "inferenceclass-l4.yaml"):
        shutil.copy(EXAMPLES / name, tmp_path)
    with session(tmp_path) as plane:
        assert plane.run(max_rounds=40).converged
        cluster = plane.find("InferenceCluster", "gke-us-central")
        assert condition_status(cluster, "Ready") == "True"
        before = {(o["kind"], o["metadata"]["name"]) for o in plane.composed_by(cluster)}
        published = cluster["status"]["gpuPools"]

        plane.delete(plane.key("InferenceClass", "gke-l4-1x-g2"))
        assert plane.run(max_rounds=40).converged
        cluster = plane.find("InferenceCluster", "gke-us-central")
        after = {(o["kind"], o["metadata"]["name"]) for o in plane.composed_by(cluster)}
        assert after == before  # not one node pool, stack or provider config deleted
        assert condition_status(cluster, "ClusterReady") == "True"
        assert condition_status(cluster, "Ready") == "True"
        assert cluster["status"]["gpuPools"] == []  # nothing new goes to the l4 pool
        pools = next(c for c in cluster["status"]["conditions"] if c["type"] == "PoolsResolved")
        assert pools["reason"] == "InvalidNodePool"
        assert "pool l4 (class gke-l4-1x-g2)" in pools["message"]
        assert cluster["status"]["unavailablePools"] == [
            {
                "name": "l4",
                "className": "gke-l4-1x-g2",
                "reason": "InferenceClass gke-l4-1x-g2 not found",
            }
        ]

        plane.apply(yaml.safe_load((EXAMPLES / "inferenceclass-l4.yaml").read_text()))
        assert plane.run(max_rounds=40).converged
        cluster = plane.find("InferenceCluster", "gke-us-central")
        assert condition_status(cluster, "Ready") == "True"
        assert condition_status(cluster, "ClusterReady") == "True"
        assert condition_status(cluster, "PoolsResolved") == "True"
        assert cluster["status"]["gpuPools"] == published
