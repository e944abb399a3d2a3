"""A scenario against a real repository function: a GKE cluster turns not Ready, then recovers.

It shows the scripting API issue-7 scenarios use (session, run, providers.inject/clear).
"""

from __future__ import annotations

from pathlib import Path

import yaml
from modelplane.controlplane import session
from modelplane.kube import condition, condition_status
from modelplane.providers import matching

GKE = {
    "apiVersion": "infrastructure.modelplane.ai/v1alpha1",
    "kind": "GKECluster",
    "metadata": {"name": "gke-us", "namespace": "modelplane-system"},
    "spec": {
        "project": "ml-platform-prod",
        "region": "us-central1",
        "nodePools": [
            {
                "name": "l4",
                "role": "GPU",
                "machineType": "g2-standard-8",
                "nodeCount": 2,
                "gpu": {"acceleratorType": "nvidia-l4"},
                "zones": ["us-central1-a"],
            }
        ],
    },
}


def test_gke_cluster_turns_not_ready_and_recovers(tmp_path: Path):
    (tmp_path / "gke.yaml").write_text(yaml.safe_dump(GKE))
    with session(tmp_path) as plane:
        assert plane.run(max_rounds=20).converged
        xr = plane.find("GKECluster", "gke-us", "modelplane-system")
        assert condition_status(xr, "Ready") == "True"
        (cluster,) = plane.list(kind="Cluster", namespace="modelplane-system")
        assert cluster["status"]["atProvider"]["endpoint"]
        pools = plane.list(kind="NodePool", namespace="modelplane-system")
        assert sorted(p["status"]["atProvider"]["nodeCount"] for p in pools) == [1, 2]

        outage = plane.providers.inject(
            matching(kind="Cluster", name=cluster["metadata"]["name"]),
            status={
                "conditions": [
                    {
                        "type": "Ready",
                        "status": "False",
                        "reason": "Unavailable",
                        "message": "control plane unreachable",
                    }
                ]
            },
        )
        assert plane.run(max_rounds=20).converged
        xr = plane.find("GKECluster", "gke-us", "modelplane-system")
        assert condition(xr, "Ready")["message"] == "Unready resources: cluster"
        assert condition(xr, "ClusterReady")["status"] == "False"
        # Nothing was deleted or recreated while the cluster was down.
        assert (
            plane.find("Cluster", cluster["metadata"]["name"], "modelplane-system")["metadata"][
                "uid"
            ]
            == cluster["metadata"]["uid"]
        )

        plane.providers.clear(outage)
        assert plane.run(max_rounds=20).converged
        xr = plane.find("GKECluster", "gke-us", "modelplane-system")
        assert condition_status(xr, "Ready") == "True"
