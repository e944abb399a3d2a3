"""The hydration script really resumes and never marks a truncated download as done.

The script runs under /bin/sh with stand-ins for ``pip`` and ``hf`` on PATH and the volume
root pointed at a temporary directory.
"""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest
from compose_model_cache.cache_objects import HYDRATION_MOUNT, hydration_script

FAKE_HF = """#!/bin/sh
# Record the call, write part of the weights, then fail or finish as told.
echo "$@" >> "$CALLS"
for arg in "$@"; do dir="$arg"; done  # --local-dir comes last
echo partial >> "$dir/model-00001.safetensors"
if [ -f "$FAIL" ]; then exit 1; fi
echo rest > "$dir/model-00002.safetensors"
"""


@pytest.fixture
def sandbox(tmp_path: Path) -> dict:
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (bin_dir / "pip").write_text("#!/bin/sh\nexit 0\n")
    (bin_dir / "hf").write_text(FAKE_HF)
    for tool in bin_dir.iterdir():
        tool.chmod(0o755)
    volume = tmp_path / "volume"
    volume.mkdir()
    (volume / "lost+found").mkdir()  # filesystems create it; it must not count as hydrated
    return {
        "volume": volume,
        "calls": tmp_path / "calls",
        "fail": tmp_path / "fail",
        "env": {
            **os.environ,
            "PATH": f"{bin_dir}:{os.environ['PATH']}",
            "CALLS": str(tmp_path / "calls"),
            "FAIL": str(tmp_path / "fail"),
        },
    }


def run_script(sandbox: dict, revision: str | None = "main") -> subprocess.CompletedProcess:
    script = hydration_script("Qwen/Qwen3-8B", revision).replace(
        HYDRATION_MOUNT, str(sandbox["volume"])
    )
    return subprocess.run(
        ["/bin/sh", "-c", script], env=sandbox["env"], capture_output=True, text=True, check=False
    )


def test_failed_download_leaves_no_marker_and_the_rerun_resumes(sandbox: dict):
    marker = sandbox["volume"] / ".modelplane-hydrated"
    sandbox["fail"].touch()
    assert run_script(sandbox).returncode != 0
    assert (sandbox["volume"] / "model-00001.safetensors").exists()
    assert not marker.exists()  # truncated weights are never declared done

    sandbox["fail"].unlink()
    assert run_script(sandbox).returncode == 0
    assert marker.exists()
    assert (sandbox["volume"] / "model-00002.safetensors").exists()
    calls = sandbox["calls"].read_text().splitlines()
    assert len(calls) == 2  # the second run downloaded again, into the same directory
    assert calls[0].startswith("download Qwen/Qwen3-8B --revision main --local-dir ")


def test_a_hydrated_volume_is_skipped(sandbox: dict):
    assert run_script(sandbox).returncode == 0
    again = run_script(sandbox)
    assert again.returncode == 0
    assert "already hydrated, skipping" in again.stdout
    assert len(sandbox["calls"].read_text().splitlines()) == 1


def test_without_revision_the_flag_is_left_out():
    script = hydration_script("Qwen/Qwen3-8B", None)
    assert "--revision" not in script
    assert "hf download Qwen/Qwen3-8B --local-dir /mnt/artifact" in script
    assert script.split("; ")[0] == "set -e"
    assert script.endswith("touch /mnt/artifact/.modelplane-hydrated")


def test_hostile_repo_text_stays_one_argument():
    # The XRD pattern rejects this; the script quotes it anyway.
    script = hydration_script("evil/x; rm -rf /", None)
    assert "'evil/x; rm -rf /'" in script
