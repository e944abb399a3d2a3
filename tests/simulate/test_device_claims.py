"""simulate judges device claims as kube-scheduler would (cli/src/modelplane/draclaims.py)."""

from __future__ import annotations

import shutil
from pathlib import Path

from click.testing import CliRunner
from modelplane.main import cli

REPO = Path(__file__).resolve().parents[2]
UNPLACEABLE = REPO / "tests" / "data" / "unplaceable-replica.yaml"


def test_a_claim_no_device_of_the_pool_satisfies_leaves_the_replica_not_ready(
    tmp_path: Path,
) -> None:
    """The real cluster leaves such a pod Pending (tests/realplane checks the same file on a
    real kube-scheduler); simulate used to make its Deployment Available."""
    scenario = tmp_path / "scenario"
    shutil.copytree(REPO / "examples" / "quickstart", scenario)
    shutil.copy(UNPLACEABLE, scenario / UNPLACEABLE.name)
    result = CliRunner().invoke(cli, ["simulate", str(scenario)])
    assert result.exit_code == 1
    line = next(x for x in result.output.splitlines() if "ModelReplica/ml-team/big-model-x1" in x)
    assert "ModelReady=False ModelStarting" in line
    assert "cannot allocate all claims" in line


def test_claims_the_pool_satisfies_still_converge(tmp_path: Path) -> None:
    result = CliRunner().invoke(cli, ["simulate", str(REPO / "examples" / "quickstart")])
    assert result.exit_code == 0, result.output
