"""ModelDeployment device selectors, compiled at admission (issue 22 item 5).

The API server stores a ModelDeployment's selectors as plain strings; the scheduler compiles
them later and holds the deployment (``InvalidNodeSelector``) when one does not compile, and a
ModelReplica's are copied into ResourceClaims that the workload cluster refuses. So
``validate`` (and render and simulate, which validate first) compiles them too, in the same
typed DRA environment (``modelplane_common.dracel``), and reports each failure at its field
path with cel-go's wording, as the API server words a DRA claim's selector.
"""

from __future__ import annotations

import json
from typing import Any

from modelplane_common import dracel

from modelplane import xrd

_GROUP = "modelplane.ai"


def issues(
    definition: xrd.Definition, value: Any, reported: list[tuple[str, str]]
) -> list[tuple[str, str]]:
    """(path, message) for each selector of a ModelDeployment (or ModelReplica) that does not
    compile; a path the schema or its rules already reported is left to them."""
    if definition.is_crd or definition.group != _GROUP or definition.kind not in dracel.REQUESTS:
        return []
    if not isinstance(value, dict):
        return []
    seen = {path for path, _ in reported}
    # The API server's wording for a DRA claim's selector that does not compile.
    return [
        (path, f"Invalid value: {_short(expression)}: compilation failed: {message}")
        for path, expression, message in dracel.selector_issues(value.get("spec"), definition.kind)
        if not any(p == path or p.startswith(path) for p in seen)
    ]


def _short(expression: str) -> str:
    text = json.dumps(expression)
    return text if len(text) <= 80 else text[:76] + '..."'
