"""`modelplane validate` on route timeouts (issue 22): a bad duration, one out of bounds, or a
backendRequest longer than the request is refused, each naming its field, as the API server
would refuse it."""

from __future__ import annotations

from pathlib import Path

import yaml
from click.testing import CliRunner
from modelplane import repo
from modelplane.main import cli


def run(path: Path):
    result = CliRunner().invoke(cli, ["validate", str(path)])
    assert result.exception is None or isinstance(result.exception, SystemExit), result.output
    return result


def _service(name: str, timeouts: dict) -> dict:
    return {
        "apiVersion": "modelplane.ai/v1alpha1",
        "kind": "ModelService",
        "metadata": {"name": name, "namespace": "ml-team"},
        "spec": {
            "endpoints": [{"selector": {"matchLabels": {"modelplane.ai/deployment": "q"}}}],
            "timeouts": timeouts,
        },
    }


def _deployment(name: str, timeouts: dict) -> dict:
    body = yaml.safe_load((repo.root() / "examples/quickstart/deployment.yaml").read_text())
    body["metadata"]["name"] = name
    body["spec"]["serving"] = {"mode": "Unified", "timeouts": timeouts}
    return body


def test_good_timeouts_are_valid(tmp_path: Path):
    manifest = tmp_path / "good.yaml"
    manifest.write_text(
        yaml.safe_dump_all(
            [
                _service("long", {"request": "2h"}),
                _service("split", {"request": "1h30m", "backendRequest": "45m"}),
                _deployment("long", {"request": "3h", "backendRequest": "3h"}),
            ]
        )
    )
    result = run(manifest)
    assert result.exit_code == 0, result.stderr
    # Warnings name references to objects outside the file; they never fail.
    assert result.stdout.strip().split(";")[0] == "3 objects valid"


def test_bad_timeouts_are_refused_naming_the_field(tmp_path: Path):
    manifest = tmp_path / "bad.yaml"
    manifest.write_text(
        yaml.safe_dump_all(
            [
                _service("words", {"request": "ten minutes"}),
                _service("inverted", {"request": "10m", "backendRequest": "15m"}),
                _deployment("forever", {"request": "0s"}),
                _deployment("inverted", {"backendRequest": "2h"}),
            ]
        )
    )
    result = run(manifest)
    assert result.exit_code == 1
    lines = [line for line in result.stderr.strip().splitlines() if not line.startswith("warn")]
    name = str(manifest)
    md = "spec.serving.timeouts"
    *problems, summary = lines
    assert summary.startswith("0 objects valid; 4 problem(s)")
    assert problems == [
        f"{name}: ModelService/words: spec.timeouts.request: spec.timeouts.request must be a "
        "duration such as 300s, 30m or 1h (at most four parts of up to five digits, each h, m, "
        "s or ms)",
        f"{name}: ModelService/inverted: spec.timeouts: spec.timeouts.backendRequest must not be "
        "longer than spec.timeouts.request (1h when unset)",
        f"{name}: ModelDeployment/forever: {md}.request: {md}.request must be between 1s and 24h",
        f"{name}: ModelDeployment/inverted: {md}: {md}.backendRequest must not be longer than "
        f"{md}.request (1h when unset)",
    ]
