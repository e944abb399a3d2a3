"""`modelplane render` and `modelplane simulate` on the example NebiusCluster, as a user runs
them: every composed object valid against its provider model, KubeconfigIncomplete without the
platform team's Nebius credentials, Ready once they exist and the cloud answers."""

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

EXAMPLE = repo.root() / "examples" / "cloud-clusters" / "nebiuscluster.yaml"
CREDENTIALS = EXAMPLE.parent / "nebiuscluster-credentials.yaml"
NAME, NS = "nebius-eu-north", "modelplane-system"
READY = {
    "type": "Ready",
    "status": "True",
    "reason": "Available",
    "lastTransitionTime": "2026-01-01T00:00:00Z",
}


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
        if body["kind"] == "Cluster":
            status["atProvider"] = {"id": "mk8scluster-e00abc"}
        body["metadata"] = metadata
        body["status"] = status
        (observed_dir / f"{index:02d}.yaml").write_text(yaml.safe_dump(body))
    return observed_dir


def test_render_without_the_credentials_names_the_step_and_composes_no_provider_config():
    xr, *composed = render(str(EXAMPLE))
    assert "ProviderConfig" not in {body["kind"] for body in composed}
    incomplete = condition(xr, "KubeconfigReady")
    assert (incomplete["status"], incomplete["reason"]) == ("False", "KubeconfigIncomplete")
    assert "nebius-eu-north-credentials" in incomplete["message"]
    assert condition(xr, "Ready")["status"] == "False"


def test_render_the_example_then_converge(tmp_path: Path):
    xr, *composed = render(str(EXAMPLE), "-e", str(CREDENTIALS))
    assert xr["kind"] == "NebiusCluster"
    kinds = sorted(body["kind"] for body in composed)
    assert kinds == [
        "Cluster", "Filesystem", "GpuCluster", "Network", "NodeGroup", "NodeGroup", "NodeGroup",
        "ProviderConfig", "ProviderConfig", "Subnet",
    ]  # fmt: skip
    for body in composed:
        validate_against_crd(body)
    groups = {
        body["spec"]["forProvider"]["name"]: body["spec"]["forProvider"]
        for body in composed
        if body["kind"] == "NodeGroup"
    }
    assert set(groups) == {"system", "h100", "l40s"}
    assert groups["h100"]["template"]["resources"] == {
        "platform": "gpu-h100-sxm",
        "preset": "8gpu-128vcpu-1600gb",
    }
    assert groups["h100"]["autoscaling"] == {"minNodeCount": 0, "maxNodeCount": 4}
    assert "gpuCluster" in groups["h100"]["template"]
    assert "gpuCluster" not in groups["l40s"]["template"]
    assert condition(xr, "ClusterReady")["reason"] == "Provisioning"
    assert condition(xr, "KubeconfigReady")["reason"] == "KubeconfigProvided"

    observed = observe_all(composed, tmp_path)
    xr, *_ = render(str(EXAMPLE), "-e", str(CREDENTIALS), "-o", str(observed))
    assert condition(xr, "ClusterReady")["reason"] == "ClusterRunning"
    assert condition(xr, "Ready")["status"] == "True"
    assert xr["status"]["clusterId"] == "mk8scluster-e00abc"
    assert xr["status"]["secrets"][1] == {
        "type": "NebiusServiceAccountCredentials",
        "name": "nebius-eu-north-credentials",
        "key": "credentials.json",
    }


def test_simulate_the_cloud_clusters_converges_the_nebius_cluster_ready():
    result = CliRunner().invoke(
        cli, ["simulate", "-o", "yaml", str(EXAMPLE.parent)], catch_exceptions=False
    )
    assert result.exit_code == 0, result.output
    objects = [doc for doc in yaml.safe_load_all(result.stdout) if doc]
    (xr,) = [o for o in objects if o["kind"] == "NebiusCluster"]
    assert condition(xr, "Ready")["status"] == "True"
    assert condition(xr, "ClusterReady")["reason"] == "ClusterRunning"
    assert condition(xr, "KubeconfigReady")["status"] == "True"
    assert xr["status"]["clusterId"].startswith("mk8scluster-")
    nebius = [o for o in objects if o["apiVersion"].split("/")[0].endswith("nebius.m.upbound.io")]
    assert {o["kind"] for o in nebius} == {
        "Network", "Subnet", "Cluster", "NodeGroup", "GpuCluster", "Filesystem",
    }  # fmt: skip
    for body in nebius:
        validate_against_crd(body)
        assert condition(body, "Ready")["status"] == "True"


def test_validate_accepts_the_example():
    result = CliRunner().invoke(cli, ["validate", str(EXAMPLE), str(CREDENTIALS)])
    assert result.exit_code == 0, result.output


def test_a_nebius_outage_keeps_every_resource_and_recovers(tmp_path: Path):
    """The mk8s control plane turns not Ready: nothing is deleted or recreated, the XR says
    what it waits for, and it is Ready again once Nebius answers."""
    (tmp_path / "nebius.yaml").write_text(EXAMPLE.read_text())
    (tmp_path / "credentials.yaml").write_text(CREDENTIALS.read_text())
    with session(tmp_path) as plane:
        assert plane.run(max_rounds=20).converged
        (cluster,) = plane.list(kind="Cluster", namespace=NS)
        before = {o["metadata"]["uid"] for o in plane.list(namespace=NS)}
        outage = plane.providers.inject(
            matching(kind="Cluster", name=cluster["metadata"]["name"]),
            status={"conditions": [{"type": "Ready", "status": "False", "reason": "Unavailable"}]},
        )
        assert plane.run(max_rounds=20).converged
        xr = plane.find("NebiusCluster", NAME, NS)
        assert condition(xr, "ClusterReady")["reason"] == "Provisioning"
        assert condition_status(xr, "Ready") == "False"
        assert {o["metadata"]["uid"] for o in plane.list(namespace=NS)} >= before

        plane.providers.clear(outage)
        assert plane.run(max_rounds=20).converged
        assert condition_status(plane.find("NebiusCluster", NAME, NS), "Ready") == "True"
