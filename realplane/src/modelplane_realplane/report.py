"""``_output/realplane/report.json``: what the last run of the real-plane tier found.

Each judge records its own section as it finishes, so the file always holds the figures of
the judges that ran: {"versions", "install", "admission": {"repository", "fuzz"}, "render"}.
"""

from __future__ import annotations

import json
from typing import Any

from modelplane_realplane.components import versions
from modelplane_realplane.paths import REPORT


def start() -> None:
    """A new run: only the pinned versions, until the judges record their figures."""
    REPORT.parent.mkdir(parents=True, exist_ok=True)
    REPORT.write_text(json.dumps({"versions": versions()}, indent=2) + "\n")


def record(path: tuple[str, ...], figures: dict[str, Any]) -> None:
    """Set the section at ``path`` (e.g. ("admission", "fuzz")) to ``figures``."""
    report = json.loads(REPORT.read_text()) if REPORT.is_file() else {"versions": versions()}
    section = report
    for key in path[:-1]:
        section = section.setdefault(key, {})
    section[path[-1]] = figures
    REPORT.parent.mkdir(parents=True, exist_ok=True)
    REPORT.write_text(json.dumps(report, indent=2) + "\n")
