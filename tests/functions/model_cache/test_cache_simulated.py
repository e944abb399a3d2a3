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
