"""A function's request near and past gRPC's 4 MiB: real Crossplane calling the function run
from its image, against ``modelplane simulate`` of the same objects (limits.py).

It runs before the examples reconcile (tests/conftest.py), in a namespace and on summaries of
its own, and leaves nothing behind: the examples' judges read every XR on the plane.
"""

from __future__ import annotations

import concurrent.futures
from pathlib import Path

import pytest
from modelplane_realplane import install, limits, report

pytestmark = pytest.mark.timeout(900)


def test_crossplane_warns_near_4_mib_refuses_past_it_and_simulate_says_the_same(
    real_plane: install.Running, tmp_path: Path
) -> None:
    # simulate (CPU) runs while the real plane is mostly waited on.
    with concurrent.futures.ThreadPoolExecutor(max_workers=1) as pool:
        simulating = pool.submit(limits.simulated_refusal, tmp_path / "simulate")
        real = limits.run(real_plane.plane.client())
        code, simulated = simulating.result()
    report.record(("message_limit",), {
        "near_event": real.near_event, "refused": real.refused,
        "simulated": simulated, "recovered": real.recovered, "seconds": round(real.seconds),
    })  # fmt: skip
    # Past 3 MiB: the function's warning reached the ModelCache as an event.
    assert "MiB of the 4 MiB" in real.near_event, real.near_event
    assert "compose-model-cache" in real.near_event
    # Past 4 MiB: refused before the function ran, and said so on the ModelCache.
    assert "code = ResourceExhausted" in real.refused, real.refused
    assert "compose-model-cache" in real.refused
    # simulate fails the same way, in the same words (only the byte counts differ).
    assert code == 1
    assert limits.without_sizes(simulated) == limits.without_sizes(real.refused)
    # Once the summaries shrink back, the cache reconciles again.
    assert real.recovered
