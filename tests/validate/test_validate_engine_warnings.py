"""`modelplane validate` warns about engines the functions would refuse (issue 22): the API
server admits them, so the set stays valid (exit 0), but the warning names the field, the
engine and the port before anything is applied."""

from __future__ import annotations

import json
from pathlib import Path

import yaml
from click.testing import CliRunner
from modelplane.main import cli

ROOT = Path(__file__).resolve().parents[2]
EXAMPLE = ROOT / "examples" / "disaggregated" / "deployment.yaml"


def _deployment() -> dict:
    return next(
        d for d in yaml.safe_load_all(EXAMPLE.read_text()) if d and d["kind"] == "ModelDeployment"
    )


def _decode_container(deployment: dict) -> dict:
    engine = next(e for e in deployment["spec"]["engines"] if e.get("phase") == "Decode")
    return engine["members"][0]["template"]["spec"]["containers"][0]


def _validate(tmp_path: Path, deployment: dict) -> dict:
    path = tmp_path / "deployment.yaml"
    path.write_text(yaml.safe_dump(deployment))
    result = CliRunner().invoke(cli, ["validate", "-o", "json", str(path)])
    assert result.exit_code == 0, result.output
    return json.loads(result.output)


def test_the_example_draws_no_engine_warning(tmp_path):
    assert _validate(tmp_path, _deployment())["warnings"] == []


def test_a_decode_engine_left_on_the_sidecars_port_is_warned_about_by_field(tmp_path):
    deployment = _deployment()
    container = _decode_container(deployment)
    container["args"] = [a for a in container["args"] if not a.startswith("--port")]
    report = _validate(tmp_path, deployment)
    assert report["problemCount"] == 0
    (warning,) = report["warnings"]
    decode_at = [e.get("phase") for e in deployment["spec"]["engines"]].index("Decode")
    assert (
        warning["path"] == f"spec.engines[{decode_at}].members[0].template.spec.containers[0].args"
    )
    assert "listens on port 8000 (vLLM's default)" in warning["message"]
    assert "the function would refuse it" in warning["message"]


def test_sglang_behind_the_vllm_sidecar_is_warned_about(tmp_path):
    deployment = _deployment()
    _decode_container(deployment).update(
        image="lmsysorg/sglang:v0.5.2",
        command=["python3", "-m", "sglang.launch_server"],
        args=["--model-path=/mnt/models", "--port=8001"],
    )
    (warning,) = _validate(tmp_path, deployment)["warnings"]
    assert "runs SGLang" in warning["message"]
