"""An Existing cluster that already runs part of the serving stack (spec.cluster.existing
.installed) and the GPU Operator's driver: through real gRPC and `modelplane validate`."""

from __future__ import annotations

from pathlib import Path

import yaml
from click.testing import CliRunner
from compose_inference_cluster.fn import InferenceClusterFunction
from modelplane.main import cli
from modelplane.validation import defaulted, validate_object
from modelplane_common.serving import run_function
from modelplane_common.testing import (
    conditions,
    desired_ready,
    desired_resources,
    make_request,
    observe,
    ready_status,
)

BYO = defaulted(
    {
        "apiVersion": "modelplane.ai/v1alpha1",
        "kind": "InferenceClass",
        "metadata": {"name": "h100-8x-byo"},
        "spec": {
            "devices": [
                {"name": "gpu", "driver": "gpu.nvidia.com", "deviceClassName": "gpu.nvidia.com",
                 "capacity": {"memory": {"value": "81559Mi"}}}
            ]
        },
    }
)  # fmt: skip
GPU_OPERATOR_ROOT = "/run/nvidia/driver"


def existing(**extra: object) -> dict:
    return {
        "apiVersion": "modelplane.ai/v1alpha1",
        "kind": "InferenceCluster",
        "metadata": {"name": "lab-h100"},
        "spec": {
            "cluster": {
                "source": "Existing",
                "existing": {"secretRef": {"name": "lab-h100-kubeconfig"}, **extra},
            },
            "nodePools": [{"name": "h100", "className": "h100-8x-byo", "nodeCount": 2}],
        },
    }


def run(xr: dict, observed: dict | None = None):
    xr = defaulted(xr)
    assert validate_object(xr) == []
    required = {
        "class-h100-8x-byo": [BYO], "model-replicas": [], "replica-objects": [],
        "cache-objects": [],
    }  # fmt: skip
    rsp = run_function(InferenceClusterFunction(), make_request(xr, observed, required))
    for key, body in desired_resources(rsp).items():
        assert validate_object(body, source=key) == [], key
    return rsp


def test_installed_components_and_driver_root_reach_the_serving_stack():
    xr = existing(installed={"all": True}, nvidiaDriverRoot=GPU_OPERATOR_ROOT)
    spec = desired_resources(run(xr))["serving-stack"]["spec"]
    assert spec["installed"] == {"all": True}
    assert spec["nvidiaDriverRoot"] == GPU_OPERATOR_ROOT
    assert "nvidiaDriverInstaller" not in spec  # the GPU Operator installs the driver

    listed = existing(installed={"components": ["leaderWorkerSet", "nodeFeatureDiscovery"]})
    spec = desired_resources(run(listed))["serving-stack"]["spec"]
    assert spec["installed"] == {"components": ["leaderWorkerSet", "nodeFeatureDiscovery"]}
    assert "nvidiaDriverRoot" not in spec  # the default, "/"


def test_nothing_declared_installs_everything_as_before():
    spec = desired_resources(run(existing()))["serving-stack"]["spec"]
    assert "installed" not in spec and "nvidiaDriverRoot" not in spec


def test_a_missing_component_is_named_on_backend_ready_and_keeps_the_cluster_not_ready():
    xr = existing(installed={"components": ["leaderWorkerSet"]})
    stack = desired_resources(run(xr))["serving-stack"]
    message = (
        "the workload cluster lacks leaderWorkerSet (CustomResourceDefinition "
        "leaderworkersets.leaderworkerset.x-k8s.io not found), which spec.installed declares "
        "installed: install it there, or take it off spec.installed so Modelplane installs it"
    )
    status = {
        "conditions": [
            {"type": "Ready", "status": "False", "reason": "Creating"},
            {"type": "StackReady", "status": "False", "reason": "ComponentMissing",
             "message": message},
        ]
    }  # fmt: skip
    observed = {"serving-stack": observe(stack, status)}
    rsp = run(xr, observed)
    assert conditions(rsp)["BackendReady"] == ("False", "ComponentMissing", message)
    assert desired_ready(rsp)["serving-stack"] is False
    # The cluster itself is there: only its stack lacks something.
    assert conditions(rsp)["ClusterReady"][:2] == ("True", "ClusterRunning")

    healthy = {"gateway": {"address": "10.0.0.9"}}
    observed = {"serving-stack": observe(stack, ready_status(**healthy))}
    assert conditions(run(xr, observed))["BackendReady"][:2] == ("True", "BackendHealthy")


def validate(tmp_path: Path, extra: dict) -> tuple[int, str]:
    path = tmp_path / "ic.yaml"
    path.write_text(yaml.safe_dump(existing(**extra)))
    result = CliRunner().invoke(cli, ["validate", str(path)])
    return result.exit_code, result.output + result.stderr


def test_validate_names_the_field_of_an_unknown_component(tmp_path: Path):
    code, output = validate(tmp_path, {"installed": {"components": ["gpuOperator"]}})
    assert code != 0
    assert "spec.cluster.existing.installed.components[0]" in output
    assert "gpuOperator" in output


def test_validate_refuses_all_and_a_list_together(tmp_path: Path):
    code, output = validate(
        tmp_path, {"installed": {"all": True, "components": ["leaderWorkerSet"]}}
    )
    assert code != 0
    assert "spec.cluster.existing.installed: set either all: true or components" in output


def test_validate_refuses_a_relative_driver_root(tmp_path: Path):
    for root in ("run/nvidia/driver", "/run/nvidia/../driver"):
        code, output = validate(tmp_path, {"nvidiaDriverRoot": root})
        assert code != 0, root
        assert "spec.cluster.existing.nvidiaDriverRoot must be an absolute path" in output
    assert validate(tmp_path, {"nvidiaDriverRoot": GPU_OPERATOR_ROOT})[0] == 0
