"""A ModelCache staged end to end in the in-process control plane, on an adopted cluster.

compose-inference-cluster provides the cluster's provider config and the capacity summary the
cache reads (it selects the cluster by its labels); compose-model-cache's
Objects are applied by the simulated provider-kubernetes, which binds the PVC and completes
the Job.
"""

from __future__ import annotations

import shutil
from pathlib import Path

import yaml
from modelplane.controlplane import session
from modelplane.kube import condition_status
from modelplane_common.cache_naming import cache_pvc_name

ROOT = Path(__file__).resolve().parents[3]
CACHE = """
apiVersion: modelplane.ai/v1alpha1
kind: ModelCache
metadata: {name: qwen3-8b, namespace: ml-team}
spec:
  source: HuggingFace
  huggingFace: {repo: Qwen/Qwen3-8B, sizeGiB: 20, authSecret: {name: hf-token}}
  clusterSelector:
    matchLabels: {modelplane.ai/region: on-prem}
"""


def test_cache_is_staged_and_its_job_dropped_once_ready(tmp_path: Path):
    for name in ("inferencecluster-existing.yaml", "inferenceclass-h100-byo.yaml"):
        shutil.copy(ROOT / "examples" / "platform" / name, tmp_path)
    (tmp_path / "cache.yaml").write_text(CACHE)
    with session(tmp_path) as plane:
        assert plane.run(max_rounds=40).converged
        cache = plane.find("ModelCache", "qwen3-8b", "ml-team")
        assert cache["status"]["summary"] == {"ready": "1/1"}
        cluster = yaml.safe_load((tmp_path / "inferencecluster-existing.yaml").read_text())
        assert cache["status"]["clusters"] == [
            {"name": cluster["metadata"]["name"], "phase": "Ready"}
        ]
        assert condition_status(cache, "ArtifactReady") == "True"
        assert condition_status(cache, "Ready") == "True"
        composed = plane.composed_by(cache)
        manifests = [o["spec"]["forProvider"]["manifest"] for o in composed]
        # Only the PVC remains composed: the Job was dropped (orphaned) once staged.
        assert [(m["kind"], m["metadata"]["name"]) for m in manifests] == [
            ("PersistentVolumeClaim", cache_pvc_name("ml-team", "qwen3-8b"))
        ]


ON_DEMAND = """
apiVersion: modelplane.ai/v1alpha1
kind: ModelCache
metadata: {name: qwen3-8b, namespace: ml-team}
spec:
  source: HuggingFace
  huggingFace: {repo: Qwen/Qwen3-8B, sizeGiB: 20}
"""


def test_a_cache_without_a_selector_is_staged_where_the_deployment_places_its_replicas(
    tmp_path: Path,
):
    """The quickstart with its deployment mounting a cache that has no clusterSelector: the
    replicas are placed, their cluster's capacity summary lists them under the cache, the
    cache stages there, and the replicas' pods start on the staged weights."""
    for source in (ROOT / "examples" / "quickstart").glob("*.yaml"):
        shutil.copy(source, tmp_path)
    deployment = yaml.safe_load((tmp_path / "deployment.yaml").read_text())
    deployment["spec"]["modelCacheRef"] = {"name": "qwen3-8b"}
    pod = deployment["spec"]["engines"][0]["members"][0]["template"]["spec"]
    pod["containers"][0]["args"] = ["--model=/mnt/models", "--max-model-len=8192"]
    (tmp_path / "deployment.yaml").write_text(yaml.safe_dump(deployment))
    (tmp_path / "cache.yaml").write_text(ON_DEMAND)
    with session(tmp_path) as plane:
        assert plane.run(max_rounds=60).converged
        cache = plane.find("ModelCache", "qwen3-8b", "ml-team")
        placed = {
            r["spec"]["clusterName"]
            for r in plane.list(kind="ModelReplica")
            if r["metadata"]["labels"].get("modelplane.ai/modelcache") == "qwen3-8b"
        }
        assert len(placed) == 1
        assert cache["status"]["clusters"] == [{"name": c, "phase": "Ready"} for c in placed]
        assert condition_status(cache, "ArtifactReady") == "True"
        for replica in plane.list(kind="ModelReplica"):
            assert condition_status(replica, "Ready") == "True"
