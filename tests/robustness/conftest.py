"""The requests every function received once the examples converged (issue 14's fuzz bases).

The converged examples come from the session fixture tests/examples shares; a fork of each runs
one more round through a host that records the last (fully resolved) request each function got
for each XR. Nothing here converges anything a second time.
"""

from __future__ import annotations

import copy
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from crossplane.function.proto.v1 import run_function_pb2 as fnv1
from modelplane.controlplane import ControlPlane
from modelplane.pipeline import FunctionHost, PipelineResult, run_pipeline
from modelplane.project import function_directory
from modelplane_common.plain import to_plain

sys.path.insert(0, str(Path(__file__).resolve().parent))

from robustness_fuzz import Base

# multi-cluster runs every function but compose-model-cache; multi-node adds it; disaggregated
# (prefill/decode engines) and canary (two deployments behind one weighted service) widen them.
EXAMPLES = ("multi-cluster", "multi-node", "disaggregated", "canary")

JSON = dict[str, Any]


class _RecordingHost:
    """A FunctionHost stand-in that keeps each function's last request per XR."""

    def __init__(self, host: FunctionHost, store: dict[str, dict[str, fnv1.RunFunctionRequest]]):
        self.host = host
        self.store = store

    def run_function(self, name: str, req: fnv1.RunFunctionRequest) -> fnv1.RunFunctionResponse:
        xr = to_plain(req.observed.composite.resource)
        metadata = xr.get("metadata") or {}
        kept = fnv1.RunFunctionRequest()
        kept.CopyFrom(req)
        by_xr = self.store.setdefault(function_directory(name), {})
        by_xr[f"{xr.get('kind')}/{metadata.get('name')}"] = kept
        return self.host.run_function(name, req)


def _record(plane: ControlPlane, example: str, store: dict) -> None:
    shared = (plane.runner, plane.catalog, plane.validator, plane.progress)
    fork = copy.deepcopy(plane, memo={id(thing): thing for thing in shared})
    host = plane.runner.host  # type: ignore[attr-defined]
    recorded: dict[str, dict[str, fnv1.RunFunctionRequest]] = {}
    recording = _RecordingHost(host, recorded)

    def runner(
        composition: JSON, xr: JSON, observed: dict, required: list, context: JSON | None = None
    ) -> PipelineResult:
        return run_pipeline(recording, composition, xr, observed, required, context)  # type: ignore[arg-type]

    fork.runner = runner
    fork.round()
    for function, requests in recorded.items():
        for xr, req in requests.items():
            store.setdefault(function, []).append(Base.of(f"{example}:{xr}", req))


@pytest.fixture(scope="session")
def fuzz_bases(converged_example: Callable[[str], Any]) -> dict[str, list[Base]]:
    """Function name -> its converged requests, as fuzz bases."""
    store: dict[str, list[Base]] = {}
    for example in EXAMPLES:
        converged = converged_example(example)
        assert converged.outcome.converged, converged.outcome.reason
        _record(converged.plane, example, store)
    return store
