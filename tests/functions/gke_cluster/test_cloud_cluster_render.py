"""`modelplane render` on the example GKECluster and EKSCluster, first with nothing observed
and then with every composed resource observed Ready, as a user would run it."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml
from click.testing import CliRunner
from modelplane import repo
from modelplane.main import cli
from modelplane_common.testing import validate_against_model

EXAMPLES = repo.root() / "examples" / "cloud-clusters"
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


def condition(xr: dict, type_: str) -> dict:
    (found,) = [c for c in xr["status"]["conditions"] if c["type"] == type_]
    return found


def observe_all(composed: list[dict], tmp_path: Path) -> Path:
    """Write every composed resource back as observed: named, Ready, with provider status."""
    observed_dir = tmp_path / "observed"
    observed_dir.mkdir()
    for index, rendered in enumerate(composed):
        body = dict(rendered)
        metadata = dict(body["metadata"])
        metadata.setdefault("name", f"{metadata.pop('generateName', 'x-')}{index:05d}")
        metadata.pop("generateName", None)
        key = metadata["annotations"]["crossplane.io/composition-resource-name"]
        status: dict = {"conditions": [READY]}
        if key == "network":
            metadata["annotations"] = {
                **metadata["annotations"],
                "crossplane.io/external-name": metadata["name"],
            }
        if key == "cluster":
            status["atProvider"] = {"endpoint": "203.0.113.10"}
        if key == "service-account":
            status["atProvider"] = {"email": "sa@acme-inference.iam.gserviceaccount.com"}
        body["metadata"] = metadata
        body["status"] = status
        (observed_dir / f"{index:02d}.yaml").write_text(yaml.safe_dump(body))
    return observed_dir


@pytest.mark.parametrize(
    ("example", "kind", "pools"),
    [
        ("gkecluster.yaml", "GKECluster", {"system", "l4", "h100"}),
        ("ekscluster.yaml", "EKSCluster", {"system", "l4"}),
    ],
)
def test_render_example_then_converge(example: str, kind: str, pools: set[str], tmp_path):
    xr, *composed = render(str(EXAMPLES / example))
    assert xr["kind"] == kind
    for body in composed:
        validate_against_model(body)
    labels = [
        (body["spec"]["forProvider"].get("nodeConfig") or body["spec"]["forProvider"])["labels"]
        for body in composed
        if body["kind"] in ("NodePool", "NodeGroup")
    ]
    assert {label["modelplane.ai/pool"] for label in labels} == pools
    assert condition(xr, "ClusterReady")["reason"] == "Provisioning"
    assert condition(xr, "Ready")["status"] == "False"

    xr, *composed = render(str(EXAMPLES / example), "-o", str(observe_all(composed, tmp_path)))
    for body in composed:
        validate_against_model(body)
    assert condition(xr, "ClusterReady")["reason"] == "ClusterRunning"
    assert xr["status"]["endpoint"] == "203.0.113.10"
    if kind == "GKECluster":
        # The IAM binding's gate opened: it is new, so the XR waits for it.
        assert "ProjectIAMMember" in {body["kind"] for body in composed}
        assert xr["status"]["network"]["name"].startswith("gke-us-central-")
        assert condition(xr, "Ready")["status"] == "False"
    else:
        assert condition(xr, "Ready")["status"] == "True"
