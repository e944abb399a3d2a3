"""Where the real plane keeps its binaries, state and logs (all git-ignored under _output/)."""

from __future__ import annotations

import os
from pathlib import Path

REPOSITORY = Path(__file__).resolve().parents[3]
OUTPUT = Path(os.environ.get("REALPLANE_OUTPUT", REPOSITORY / "_output" / "realplane"))
BIN = OUTPUT / "bin"
RUN = OUTPUT / "run"  # one control plane's data, certificates and logs
REPORT = OUTPUT / "report.json"
