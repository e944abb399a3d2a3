"""`modelplane simulate` on the example GKECluster and EKSCluster: both converge Ready with
their status published, every composed object valid against its provider model."""

from __future__ import annotations

import yaml
from click.testing import CliRunner
from modelplane import repo
from modelplane.main import cli
from modelplane_common.testing import validate_against_model

EXAMPLES = repo.root() / "examples" / "cloud-clusters"


def validate_against_crd(body: dict) -> None:
    # Simulated or observed status is the server's, not what the function composed.
    validate_against_model({k: v for k, v in body.items() if k != "status"})


def test_examples_converge_ready():
    result = CliRunner().invoke(cli, ["simulate", "-o", "yaml", str(EXAMPLES)])
    assert result.exit_code == 0, result.output
    objects = [doc for doc in yaml.safe_load_all(result.stdout) if doc]
    xrs = {o["kind"]: o for o in objects if o["kind"] in ("GKECluster", "EKSCluster")}
    assert set(xrs) == {"GKECluster", "EKSCluster"}
    for xr in xrs.values():
        conditions = {c["type"]: c for c in xr["status"]["conditions"]}
        assert conditions["Ready"]["status"] == "True"
        assert conditions["ClusterReady"]["reason"] == "ClusterRunning"
        assert xr["status"]["endpoint"]
    gke = xrs["GKECluster"]["status"]
    assert gke["network"]["name"]
    assert [s["type"] for s in gke["secrets"]] == ["Kubeconfig", "GCPServiceAccountKey"]
    managed = [o for o in objects if o["apiVersion"].split("/")[0].endswith(".upbound.io")]
    assert {o["kind"] for o in managed} >= {"Cluster", "NodePool", "NodeGroup", "ClusterAuth"}
    for body in managed:
        validate_against_crd(body)
    node_pools = [o for o in managed if o["kind"] == "NodePool"]
    pools = {
        o["spec"]["forProvider"]["nodeConfig"]["labels"]["modelplane.ai/pool"] for o in node_pools
    }
    assert pools == {"system", "l4", "h100"}
