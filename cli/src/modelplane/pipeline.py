"""Running a Pipeline composition against real gRPC function servers (shared by render and
simulate). INTERFACE ONLY until the render work lands; see the docstrings for the contract."""

from __future__ import annotations

import dataclasses
from typing import Any

JSON = dict[str, Any]


@dataclasses.dataclass
class DesiredResource:
    body: JSON
    ready: str  # "True", "False" or "Unspecified"


@dataclasses.dataclass
class PipelineResult:
    desired_composite: JSON  # the desired XR (status, etc.) as the last step left it
    composite_ready: str  # "True", "False" or "Unspecified"
    resources: dict[str, DesiredResource]  # composition resource name -> desired object
    conditions: list[JSON]  # custom conditions in order: {type,status,reason,message}
    results: list[JSON]  # non-fatal results: {step, severity (enum name), message, reason}
    context: JSON
