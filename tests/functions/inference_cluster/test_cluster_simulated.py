"""Scenario through the simulated control plane: a class disappears from under a running GKE
cluster and comes back. Nothing is deleted meanwhile, and capacity stays published."""

from __future__ import annotations

import shutil
from pathlib import Path

import yaml
from modelplane import repo
from modelplane.controlplane import session
from modelplane.kube import condition_status

EXAMPLES = repo.root() / "examples" / "platform"


def test_deleting_a_class_holds_the_cluster_and_restoring_it_recovers(tmp_path: Path):
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
        assert condition_status(cluster, "ClusterReady") == "False"
        assert cluster["status"]["gpuPools"] == published
        ready = next(c for c in cluster["status"]["conditions"] if c["type"] == "ClusterReady")
        assert ready["reason"] == "WaitingForClasses"
        assert "pool l4 (class gke-l4-1x-g2)" in ready["message"]

        plane.apply(yaml.safe_load((EXAMPLES / "inferenceclass-l4.yaml").read_text()))
        assert plane.run(max_rounds=40).converged
        cluster = plane.find("InferenceCluster", "gke-us-central")
        assert condition_status(cluster, "Ready") == "True"
        assert condition_status(cluster, "ClusterReady") == "True"
