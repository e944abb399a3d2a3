"""`modelplane simulate` of examples/amd-mi300x with the AMD GPU DRA driver declared installed
(``existing.installed.components: [amdDraDriver]``): the stack installs the rest, observes
DeviceClass gpu.amd.com instead of installing AMD's release, the replicas are served, and a
driver that goes missing is named on the cluster without anything being deleted."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
import yaml
from modelplane import repo
from modelplane.controlplane import session
from modelplane.kube import condition, condition_status
from modelplane.providers import matching

EXAMPLE = repo.root() / "examples" / "amd-mi300x"


@pytest.fixture
def directory(tmp_path: Path) -> Path:
    for path in EXAMPLE.glob("*.yaml"):
        shutil.copy(path, tmp_path / path.name)
    cluster = yaml.safe_load((EXAMPLE / "cluster.yaml").read_text())
    cluster["spec"]["cluster"]["existing"]["installed"] = {"components": ["amdDraDriver"]}
    (tmp_path / "cluster.yaml").write_text(yaml.safe_dump(cluster))
    return tmp_path


@pytest.mark.timeout(600)
def test_a_byo_amd_driver_is_observed_and_its_absence_named(directory: Path) -> None:
    with session(directory) as plane:
        assert plane.run(max_rounds=60).converged
        ic = plane.find("InferenceCluster", "lab-mi300x")
        assert condition_status(ic, "Ready") == "True"
        (stack,) = plane.list(kind="ServingStack", namespace="modelplane-system")
        assert stack["spec"]["installed"] == {"components": ["amdDraDriver"]}
        composed = plane.composed_by(stack)
        releases = {o["metadata"]["labels"]["modelplane.ai/resource"]
                    for o in composed if o["kind"] == "Release"}  # fmt: skip
        assert "amd-gpu-dra-driver" not in releases and "dra-driver" not in releases
        assert "node-feature-discovery" in releases
        (observer,) = [o for o in composed if o["spec"].get("managementPolicies") == ["Observe"]]
        assert observer["spec"]["forProvider"]["manifest"]["metadata"]["name"] == "gpu.amd.com"
        (deployment,) = plane.list(kind="ModelDeployment", namespace="ml-team")
        assert deployment["status"]["replicas"] == {"total": 2, "ready": 2}

        gone = plane.providers.inject(
            matching(kind="Object", manifest_kind="DeviceClass", manifest_name="gpu.amd.com"),
            absent=True,
        )
        assert plane.run(max_rounds=40).converged
        ic = plane.find("InferenceCluster", "lab-mi300x")
        backend = condition(ic, "BackendReady")
        assert (backend["status"], backend["reason"]) == ("False", "ComponentMissing")
        assert "amdDraDriver (DeviceClass gpu.amd.com not found)" in backend["message"]
        assert plane.find("ModelDeployment", "qwen25-72b", "ml-team") is not None

        plane.providers.clear(gone)
        assert plane.run(max_rounds=40).converged
        ic = plane.find("InferenceCluster", "lab-mi300x")
        assert condition(ic, "BackendReady")["reason"] == "BackendHealthy"
