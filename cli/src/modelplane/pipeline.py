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


class PipelineError(Exception):
    """A step failed: a Fatal result, a function error, or requirements that never settled.

    The message matches crossplane render's cause, e.g.
    ``pipeline step "compose-x" returned a fatal result: <msg>``.
    """


# Contract (implemented by the render work; simulate codes against it):
#
# class FunctionHost:  context manager
#     FunctionHost(functions: list[JSON] | None = None, timeout: float = 60.0)
#     Hosts each repository function named in a pipeline step in-process
#     (modelplane_common.serving.BackgroundServer, servicer loaded lazily from the
#     `modelplane.functions` entry point), started once and reused across runs; a Function
#     object with annotation render.crossplane.io/runtime: Development is dialled at its
#     render.crossplane.io/runtime-development-target instead.
#
# def run_pipeline(host: FunctionHost, composition: JSON, xr: JSON,
#                  observed: dict[str, JSON], required: list[JSON],
#                  context: JSON | None = None, credentials: dict[str, dict[str, bytes]] | None
#                  = None, honour_namespaces: bool = True) -> PipelineResult
#     Runs every step in order with requirement rounds (spec render.md §1.8-1.9); `required`
#     is the pool of objects requirements are resolved from (namespace honoured per D7 unless
#     honour_namespaces=False). Raises PipelineError on a fatal result or step failure.
