"""An Existing AMD cluster whose AMD GPU DRA driver is the platform team's
(``existing.installed.components: [amdDraDriver]``): through real gRPC and `modelplane validate`."""

from __future__ import annotations

from pathlib import Path

import yaml
from click.testing import CliRunner
from compose_inference_cluster.fn import InferenceClusterFunction
from modelplane.main import cli
from modelplane.validation import defaulted, validate_object
from modelplane_common.serving import run_function
from modelplane_common.testing import desired_resources, make_request

MI300X = defaulted(
    {
        "apiVersion": "modelplane.ai/v1alpha1",
        "kind": "InferenceClass",
        "metadata": {"name": "mi300x-8x-byo"},
        "spec": {
            "devices": [
                {"name": "gpu", "driver": "gpu.amd.com", "deviceClassName": "gpu.amd.com",
                 "count": 8, "capacity": {"memory": {"value": "192Gi"}}}
            ]
        },
    }
)  # fmt: skip


def existing(**extra: object) -> dict:
    return {
        "apiVersion": "modelplane.ai/v1alpha1",
        "kind": "InferenceCluster",
        "metadata": {"name": "lab-mi300x"},
        "spec": {
            "cluster": {
                "source": "Existing",
                "existing": {"secretRef": {"name": "lab-mi300x-kubeconfig"}, **extra},
            },
            "nodePools": [{"name": "mi300x", "className": "mi300x-8x-byo", "nodeCount": 1}],
        },
    }


def stack_spec(xr: dict) -> dict:
    xr = defaulted(xr)
    assert validate_object(xr) == []
    required = {
        "class-mi300x-8x-byo": [MI300X], "model-replicas": [], "replica-objects": [],
        "cache-objects": [],
    }  # fmt: skip
    rsp = run_function(InferenceClusterFunction(), make_request(xr, None, required))
    desired = desired_resources(rsp)
    for key, body in desired.items():
        assert validate_object(body, source=key) == [], key
    return desired["serving-stack"]["spec"]


def test_a_byo_amd_driver_reaches_the_serving_stack() -> None:
    spec = stack_spec(existing(installed={"components": ["amdDraDriver"]}))
    assert spec["installed"] == {"components": ["amdDraDriver"]}
    assert spec["draDrivers"] == ["gpu.amd.com"]
    spec = stack_spec(existing(installed={"all": True}))
    assert spec["installed"] == {"all": True}
    assert spec["draDrivers"] == ["gpu.amd.com"]


def test_validate_accepts_amd_dra_driver_and_names_a_misspelling(tmp_path: Path) -> None:
    path = tmp_path / "ic.yaml"
    path.write_text(yaml.safe_dump(existing(installed={"components": ["amdDraDriver"]})))
    result = CliRunner().invoke(cli, ["validate", str(path)])
    assert result.exit_code == 0, result.output
    path.write_text(yaml.safe_dump(existing(installed={"components": ["amdGpuDraDriver"]})))
    result = CliRunner().invoke(cli, ["validate", str(path)])
    assert result.exit_code != 0
    output = result.output + result.stderr
    assert "spec.cluster.existing.installed.components[0]" in output
    assert "amdGpuDraDriver" in output
