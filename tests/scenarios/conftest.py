"""The scenario fleet, brought up once over real gRPC functions; each test gets its own copy.

Bringing the fleet up is the slow part (about 20 s), so one session converges it and every
scenario works on a fork (``scenario_world.fork``) and never disturbs the others.
"""

from __future__ import annotations

import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))

from modelplane.controlplane import ControlPlane, session
from scenario_world import FLEET, converge, fork


@pytest.fixture(scope="session")
def converged_fleet() -> Iterator[ControlPlane]:
    """The fleet synced in two waves (platform, then the ML team), as docs/argocd.md advises:
    every cluster is Ready before the scheduler first runs, so placement is the steady one."""
    with session() as plane:
        for wave in ("platform.yaml", "ml-team.yaml"):
            plane.load(FLEET / wave)
            converge(plane)
        yield plane


@pytest.fixture
def fleet(converged_fleet: ControlPlane) -> ControlPlane:
    return fork(converged_fleet)
