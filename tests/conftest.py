"""Fixtures shared by several test areas."""

from __future__ import annotations

import copy
import dataclasses
from collections.abc import Callable, Iterator
from contextlib import ExitStack
from pathlib import Path
from typing import Any

import pytest
from hypothesis import settings
from modelplane.controlplane import ControlPlane, Convergence, session

# Property tests share two CPUs with everything else in CI: a per-example deadline only
# measures the machine's load, so no test gets one (settings built in tests inherit this).
settings.register_profile("modelplane", deadline=None)
settings.load_profile("modelplane")

EXAMPLES = Path(__file__).resolve().parents[1] / "examples"


@dataclasses.dataclass
class ConvergedExample:
    """An example run to a fixed point: its plane (fork it, never change it), the verdict and
    a snapshot of every object at that point."""

    plane: ControlPlane
    outcome: Convergence
    objects: list[dict[str, Any]]


@pytest.fixture(scope="session")
def converged_example() -> Iterator[Callable[[str], ConvergedExample]]:
    """``converged_example(name)``: examples/<name> simulated over real gRPC functions, once
    per test session (converging is the slow part; tests/examples and tests/argocd share it)."""
    runs: dict[str, ConvergedExample] = {}
    with ExitStack() as stack:

        def run(name: str) -> ConvergedExample:
            if name not in runs:
                plane = stack.enter_context(session(EXAMPLES / name))
                outcome = plane.run(max_rounds=60)
                runs[name] = ConvergedExample(plane, outcome, copy.deepcopy(plane.objects()))
            return runs[name]

        yield run
