"""`modelplane render` and `modelplane simulate` on the example AKSCluster, as a user runs them:
every composed object valid against its provider model, Ready once the cloud answers."""

from __future__ import annotations

from pathlib import Path

import yaml
from click.testing import CliRunner
from modelplane import repo
from modelplane.controlplane import session
from modelplane.kube import condition_status
from modelplane.main import cli
from modelplane.providers import matching
from modelplane_common.testing import validate_against_model

EXAMPLE = repo.root() / "examples" / "cloud-clusters" / "akscluster.yaml"
READY = {
    "type": "Ready",
    "status": "True",
    "reason": "Available",
    "lastTransitionTime": "2026-01-01T00:00:00Z",
}
FQDN = "aks-east-us-1a2b3c.hcp.eastus2.azmk8s.io"


def render(*args: str) -> list[dict]:
    result = CliRunner().invoke(cli, ["render", *args], catch_exceptions=False)
    assert result.exit_code == 0, result.output
    return [doc for doc in yaml.safe_load_all(result.output) if doc]


def validate_against_crd(body: dict) -> None:
    # Simulated or observed status is the server's, not what the function composed.
    validate_against_model({k: v for k, v in body.items() if k != "status"})


def condition(xr: dict, type_: str) -> dict:
    (found,) = [c for c in xr["status"]["conditions"] if c["type"] == type_]
    return found


def observe_all(composed: list[dict], tmp_path: Path) -> Path:
    observed_dir = tmp_path / "observed"
    observed_dir.mkdir()
    for index, rendered in enumerate(composed):
        body = dict(rendered)
        metadata = dict(body["metadata"])
        metadata.setdefault("name", f"{metadata.pop('generateName', 'x-')}{index:05d}")
        metadata.pop("generateName", None)
        status: dict = {"conditions": [READY]}
        if body["kind"] == "KubernetesCluster":
            status["atProvider"] = {"fqdn": FQDN}
        body["metadata"] = metadata
        body["status"] = status
        (observed_dir / f"{index:02d}.yaml").write_text(yaml.safe_dump(body))
    return observed_dir


def test_render_the_example_then_converge(tmp_path: Path):
    xr, *composed = render(str(EXAMPLE))
    assert xr["kind"] == "AKSCluster"
    kinds = sorted(body["kind"] for body in composed)
    assert kinds == [
        "KubernetesCluster", "KubernetesClusterNodePool", "KubernetesClusterNodePool",
        "ProviderConfig", "ProviderConfig", "ResourceGroup", "Subnet", "VirtualNetwork",
    ]  # fmt: skip
    for body in composed:
        validate_against_crd(body)
    pools = {
        body["spec"]["forProvider"]["nodeLabels"]["modelplane.ai/pool"]: body["spec"]["forProvider"]
        for body in composed
        if body["kind"] == "KubernetesClusterNodePool"
    }
    assert set(pools) == {"a100", "h100"}
    assert pools["h100"]["vmSize"] == "Standard_ND96isr_H100_v5"
    assert (pools["h100"]["nodeCount"], pools["h100"]["maxCount"]) == (0, 2)
    assert condition(xr, "ClusterReady")["reason"] == "Provisioning"
    assert condition(xr, "Ready")["status"] == "False"

    xr, *composed = render(str(EXAMPLE), "-o", str(observe_all(composed, tmp_path)))
    assert condition(xr, "ClusterReady")["reason"] == "ClusterRunning"
    assert condition(xr, "Ready")["status"] == "True"
    assert xr["status"]["endpoint"] == FQDN


def test_simulate_the_cloud_clusters_converges_the_aks_cluster_ready():
    result = CliRunner().invoke(
        cli, ["simulate", "-o", "yaml", str(EXAMPLE.parent)], catch_exceptions=False
    )
    assert result.exit_code == 0, result.output
    objects = [doc for doc in yaml.safe_load_all(result.stdout) if doc]
    (xr,) = [o for o in objects if o["kind"] == "AKSCluster"]
    assert condition(xr, "Ready")["status"] == "True"
    assert condition(xr, "ClusterReady")["reason"] == "ClusterRunning"
    assert xr["status"]["endpoint"].endswith(".hcp.eastus2.azmk8s.io")
    azure = [o for o in objects if o["apiVersion"].split("/")[0].endswith("azure.m.upbound.io")]
    assert {o["kind"] for o in azure} == {
        "ResourceGroup", "VirtualNetwork", "Subnet", "KubernetesCluster",
        "KubernetesClusterNodePool",
    }  # fmt: skip
    for body in azure:
        validate_against_crd(body)
        assert condition(body, "Ready")["status"] == "True"


def test_validate_accepts_the_example():
    result = CliRunner().invoke(cli, ["validate", str(EXAMPLE)])
    assert result.exit_code == 0, result.output


def test_an_aks_outage_keeps_every_resource_and_recovers(tmp_path: Path):
    """The AKS control plane turns not Ready: nothing is deleted or recreated, the XR says
    what it waits for, and it is Ready again once Azure answers."""
    (tmp_path / "aks.yaml").write_text(EXAMPLE.read_text())
    with session(tmp_path) as plane:
        assert plane.run(max_rounds=20).converged
        (cluster,) = plane.list(kind="KubernetesCluster", namespace="modelplane-system")
        before = {o["metadata"]["uid"] for o in plane.list(namespace="modelplane-system")}
        outage = plane.providers.inject(
            matching(kind="KubernetesCluster", name=cluster["metadata"]["name"]),
            status={"conditions": [{"type": "Ready", "status": "False", "reason": "Unavailable"}]},
        )
        assert plane.run(max_rounds=20).converged
        xr = plane.find("AKSCluster", "aks-east-us", "modelplane-system")
        assert condition(xr, "ClusterReady")["reason"] == "Provisioning"
        assert "cluster" in condition(xr, "ClusterReady")["message"]
        assert condition_status(xr, "Ready") == "False"
        assert {o["metadata"]["uid"] for o in plane.list(namespace="modelplane-system")} >= before

        plane.providers.clear(outage)
        assert plane.run(max_rounds=20).converged
        xr = plane.find("AKSCluster", "aks-east-us", "modelplane-system")
        assert condition_status(xr, "Ready") == "True"
