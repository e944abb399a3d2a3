"""`modelplane validate` compiles every DRA selector of a ModelDeployment against Kubernetes'
typed device environment (issue 22 item 5): the same compiler as the scheduler, so what would
hold the deployment with InvalidNodeSelector is refused at admission, at its field path and in
cel-go's words."""

from __future__ import annotations

import json
from pathlib import Path

from click.testing import CliRunner
from modelplane import repo
from modelplane.main import cli

PATH = "spec.engines[0].members[0].nodeSelector.devices[0].selectors[0].cel"


def deployment(selector: str) -> str:
    return f"""\
apiVersion: modelplane.ai/v1alpha1
kind: ModelDeployment
metadata:
  name: qwen
  namespace: ml-team
spec:
  replicas: 1
  engines:
  - name: main
    members:
    - role: Standalone
      nodeSelector:
        devices:
        - name: gpu
          selectors:
          - cel: {json.dumps(selector)}
      template:
        spec:
          containers:
          - name: engine
            image: vllm/vllm-openai:v0.11.0
"""


def validate(tmp_path: Path, selector: str, *options: str):
    manifest = tmp_path / "deployment.yaml"
    manifest.write_text(deployment(selector))
    result = CliRunner().invoke(cli, ["validate", *options, str(manifest)])
    assert result.exception is None or isinstance(result.exception, SystemExit), result.output
    return result, str(manifest)


def test_a_misspelt_device_field_is_refused_at_its_path(tmp_path: Path):
    selector = 'device.atributes["gpu.nvidia.com"].architecture == "Hopper"'
    result, name = validate(tmp_path, selector)
    assert result.exit_code == 1
    assert result.stderr.splitlines() == [
        f"{name}: ModelDeployment/qwen: {PATH}: Invalid value: {json.dumps(selector)}: "
        "compilation failed: <input>:1:7: undefined field 'atributes'",
        "0 objects valid; 1 problem(s)",
    ]


def test_a_single_equals_is_refused_with_cel_gos_syntax_error(tmp_path: Path):
    selector = 'device.attributes["gpu.nvidia.com"].architecture = "Hopper"'
    result, _ = validate(tmp_path, selector, "-o", "json")
    assert result.exit_code == 1
    (problem,) = json.loads(result.stdout)["problems"]
    assert problem["path"] == PATH
    assert problem["message"] == (
        f"Invalid value: {json.dumps(selector)}: compilation failed: "
        "<input>:1:50: Syntax error: token recognition error at: '= '; "
        "<input>:1:52: Syntax error: extraneous input '\"Hopper\"' expecting <EOF>"
    )


def test_a_well_typed_selector_passes(tmp_path: Path):
    selector = (
        'device.attributes["gpu.nvidia.com"].architecture == "Hopper" && '
        'device.capacity["gpu.nvidia.com"].memory.compareTo(quantity("80Gi")) >= 0'
    )
    result, _ = validate(tmp_path, selector)
    assert result.exit_code == 0, result.stderr
    assert result.stdout.strip() == "1 object valid"


def test_a_selector_that_is_not_a_boolean_is_refused(tmp_path: Path):
    result, name = validate(tmp_path, "device.driver")
    assert result.exit_code == 1
    assert (
        f'{name}: ModelDeployment/qwen: {PATH}: Invalid value: "device.driver": '
        "compilation failed: must evaluate to bool or the unknown type, not string"
    ) in result.stderr.splitlines()


def test_a_model_replicas_device_request_selector_is_compiled_too(tmp_path: Path):
    """A ModelReplica's selectors go verbatim into the workload cluster's ResourceClaims."""
    source = (repo.root() / "examples" / "replica" / "standalone.yaml").read_text()
    good = 'device.capacity["gpu.nvidia.com"].memory.compareTo(quantity("20Gi")) >= 0'
    assert good in source
    manifest = tmp_path / "replica.yaml"
    manifest.write_text(source.replace(good, good.replace("capacity", "capacities")))
    result = CliRunner().invoke(cli, ["validate", "-o", "json", str(manifest)])
    problems = json.loads(result.stdout)["problems"]
    assert [(p["kind"], p["path"]) for p in problems] == [
        ("ModelReplica", "spec.engines[0].members[0].deviceRequests[0].selectors[0].cel")
    ]
    assert problems[0]["message"].endswith(
        "compilation failed: <input>:1:7: undefined field 'capacities'"
    )
