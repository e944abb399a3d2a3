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
# (prefill/decode engines) and canary (two deployments behind one weighted service) widen them;
# cloud-clusters is the only one with an AKSCluster, a VultrCluster or a NebiusCluster.
EXAMPLES = ("multi-cluster", "multi-node", "disaggregated", "canary", "cloud-clusters")

JSON = dict[str, Any]


Recorded = dict[str, dict[str, tuple[fnv1.RunFunctionRequest, tuple[str, ...]]]]


class _RecordingHost:
    """A FunctionHost stand-in that keeps each function's last request per XR, and the
    functions that ran before it in that XR's pipeline (``steps``, set by the runner)."""

    def __init__(self, host: FunctionHost, store: Recorded):
        self.host = host
        self.store = store
        self.steps: list[str] = []

    def run_function(self, name: str, req: fnv1.RunFunctionRequest) -> fnv1.RunFunctionResponse:
        xr = to_plain(req.observed.composite.resource)
        metadata = xr.get("metadata") or {}
        kept = fnv1.RunFunctionRequest()
        kept.CopyFrom(req)
        function = function_directory(name)
        upstream = tuple(self.steps[: self.steps.index(function)])
        by_xr = self.store.setdefault(function, {})
        by_xr[f"{xr.get('kind')}/{metadata.get('name')}"] = (kept, upstream)
        return self.host.run_function(name, req)


def _steps(composition: JSON) -> list[str]:
    pipeline = (composition.get("spec") or {}).get("pipeline") or []
    return [function_directory(step["functionRef"]["name"]) for step in pipeline]


def _recording_fork(plane: ControlPlane) -> tuple[ControlPlane, Recorded]:
    """A fork of ``plane`` whose rounds record every function's last request per XR."""
    shared = (plane.runner, plane.catalog, plane.validator, plane.progress)
    fork = copy.deepcopy(plane, memo={id(thing): thing for thing in shared})
    host = plane.runner.host  # type: ignore[attr-defined]
    recorded: Recorded = {}
    recording = _RecordingHost(host, recorded)

    def runner(
        composition: JSON, xr: JSON, observed: dict, required: list, context: JSON | None = None
    ) -> PipelineResult:
        recording.steps = _steps(composition)
        return run_pipeline(recording, composition, xr, observed, required, context)  # type: ignore[arg-type]

    fork.runner = runner
    return fork, recorded


def _record(plane: ControlPlane, example: str, store: dict) -> None:
    fork, recorded = _recording_fork(plane)
    fork.round()
    for function, requests in recorded.items():
        for xr, (req, upstream) in requests.items():
            store.setdefault(function, []).append(Base.of(f"{example}:{xr}", req, upstream))


def _wrapped_kind(obj: JSON) -> str | None:
    return ((obj.get("spec") or {}).get("forProvider") or {}).get("manifest", {}).get("kind")


def _record_hydrating_cache(plane: ControlPlane, example: str, store: dict) -> None:
    """A ModelCache's hydration Job goes once the weights are staged, so no converged example
    observes it (issue 21: every kind of observed resource is fuzzed). A second cache with the
    same spec, applied to a fork, is recorded in the first round that observes its Job."""
    fork, recorded = _recording_fork(plane)
    (cache,) = fork.list(kind="ModelCache")
    metadata = cache["metadata"]
    twin = {
        "apiVersion": cache["apiVersion"],
        "kind": cache["kind"],
        "metadata": {"name": f"{metadata['name']}-twin", "namespace": metadata["namespace"]},
        "spec": copy.deepcopy(cache["spec"]),
    }
    fork.apply(twin)
    for _ in range(6):
        recorded.clear()
        fork.round()
        req, upstream = recorded["compose-model-cache"][f"ModelCache/{twin['metadata']['name']}"]
        observed = [to_plain(r.resource) for r in req.observed.resources.values()]
        if any(_wrapped_kind(obj) == "Job" for obj in observed):
            name = f"{example}:ModelCache/{twin['metadata']['name']} (hydrating)"
            store.setdefault("compose-model-cache", []).append(Base.of(name, req, upstream))
            return
    raise AssertionError("the second ModelCache's hydration Job was never observed")


@pytest.fixture(scope="session")
def fuzz_bases(converged_example: Callable[[str], Any]) -> dict[str, list[Base]]:
    """Function name -> its converged requests, as fuzz bases (and a hydrating ModelCache)."""
    store: dict[str, list[Base]] = {}
    for example in EXAMPLES:
        converged = converged_example(example)
        assert converged.outcome.converged, converged.outcome.reason
        _record(converged.plane, example, store)
        if example == "multi-node":
            _record_hydrating_cache(converged.plane, example, store)
    return store
