"""The examples reconciled on the real plane, operated, deleted, and compared with simulate.

One session fixture runs every example once (apply with kubectl, converge, compare with
``modelplane simulate``, operate, delete) in a background thread while the rest of the session
runs; the tests below read its record, so a failure names the example and what the real
clusters said. Figures go to _output/realplane/report.json.
"""

from __future__ import annotations

import concurrent.futures
from collections.abc import Iterator
from pathlib import Path

import pytest
from modelplane_realplane import install, operations, reconcile, report, simparity
from modelplane_realplane.clusters import Plane
from modelplane_realplane.paths import REPOSITORY

EXAMPLES = reconcile.EXAMPLES
# The session fixture applies, operates and deletes four examples (about ten minutes).
pytestmark = pytest.mark.timeout(2400)


def reconcile_examples(plane: Plane, work: Path) -> dict[str, reconcile.ExampleRun]:
    """Every example applied, converged, compared with simulate, operated on and deleted."""
    examples = {name: REPOSITORY / "examples" / name for name in EXAMPLES}
    # simulate runs in the background meanwhile, in the order its results are needed.
    simulations = simparity.Simulations([
        examples[operations.EXAMPLE],
        operations.race_scenario(examples[operations.EXAMPLE], work),
        operations.unplaceable_scenario(examples[operations.EXAMPLE], work),
        *(examples[name] for name in EXAMPLES if name != operations.EXAMPLE),
    ])  # fmt: skip
    done: dict[str, reconcile.ExampleRun] = {}
    try:
        for name in EXAMPLES:
            done[name] = reconcile.run_example(
                plane, examples[name], work,
                operate=operations.run if name == operations.EXAMPLE else None,
                simulations=simulations,
            )  # fmt: skip
    finally:
        simulations.close()
    return done


def record(done: dict[str, reconcile.ExampleRun]) -> None:
    report.record(("reconcile",), {name: {"ready": r.outcome.ready, "seconds": r.outcome.seconds}
                                   for name, r in done.items()})  # fmt: skip
    report.record(("simulate_parity",), {name: {"differences": len(r.differences)}
                                         for name, r in done.items()})  # fmt: skip
    report.record(("deletion",), {name: {"clean": r.deletion.clean, "seconds": r.deletion.seconds,
                                         "order_ok": r.deletion.order_ok,
                                         "gone": r.deletion.gone}
                                  for name, r in done.items()})  # fmt: skip
    ops = done[operations.EXAMPLE].operations
    if ops is not None:
        report.record(("operations",), {
            "scale": ops.scale, "drain_min_serving": ops.drain_min_serving,
            "drain_moved": ops.drain_moved,
            "delete_clean": all(r.deletion.clean and r.deletion.order_ok for r in done.values()),
            "restore_untouched": ops.restore_untouched,
            "unplaceable_agrees": ops.unplaceable.get("agree", False),
            "race": ops.race,
            "drain_series": ops.drain_series,
            "seconds": ops.seconds,
        })  # fmt: skip


@pytest.fixture(scope="session")
def reconciling(
    real_plane: install.Running, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[concurrent.futures.Future[dict[str, reconcile.ExampleRun]]]:
    """The examples reconciling in a background thread. Most of the tier is waiting on the
    real plane, so the rest of the test session runs meanwhile: tests/conftest.py orders the
    tests that start it right after the other real-plane tests and those that read its
    results (``runs``) last."""
    work = tmp_path_factory.mktemp("examples")
    pool = concurrent.futures.ThreadPoolExecutor(max_workers=1, thread_name_prefix="reconcile")
    started = pool.submit(reconcile_examples, real_plane.plane, work)
    yield started
    # Never stop the plane under a running tier (when its result tests were deselected).
    concurrent.futures.wait([started])
    pool.shutdown()


@pytest.fixture(scope="session")
def runs(
    reconciling: concurrent.futures.Future[dict[str, reconcile.ExampleRun]],
) -> dict[str, reconcile.ExampleRun]:
    done = reconciling.result()
    record(done)
    return done


def test_the_examples_start_reconciling_on_an_installed_plane(
    real_plane: install.Running,
    reconciling: concurrent.futures.Future[dict[str, reconcile.ExampleRun]],
) -> None:
    """The tier starts only on a plane where every XRD is established and every function
    healthy (a start on a broken install would only time out, example by example)."""
    installed = real_plane.installed
    assert installed.xrds_established == installed.xrds, installed
    assert installed.functions_healthy == installed.functions, installed
    assert not reconciling.done() or reconciling.exception() is None, reconciling.exception()


@pytest.mark.parametrize("example", EXAMPLES)
def test_example_converges_on_the_real_plane(
    runs: dict[str, reconcile.ExampleRun], example: str
) -> None:
    """Every XR Ready and Synced, every Object and Release too; on the workload cluster every
    Deployment Available, every LeaderWorkerSet ready, every pod Running on a node of the pool
    it asks for, every ResourceClaim allocated."""
    outcome = runs[example].outcome
    assert outcome.ready, "\n".join(outcome.problems)


@pytest.mark.parametrize("example", EXAMPLES)
def test_example_deletes_cleanly_in_order(
    runs: dict[str, reconcile.ExampleRun], example: str
) -> None:
    """Deleted as a user would (deployments, then services, then the platform), with Usage
    protection on: each InferenceCluster outlives every Object its replicas made, and nothing
    is left on either cluster."""
    deletion = runs[example].deletion
    assert deletion.clean, deletion.left
    assert deletion.order_ok, deletion.gone


@pytest.mark.parametrize("example", EXAMPLES)
def test_simulate_agrees_with_the_real_plane_or_says_why(
    runs: dict[str, reconcile.ExampleRun], example: str
) -> None:
    """Composed resources, remote manifests and XR conditions: every difference between
    ``modelplane simulate`` and the real plane is one design/simulate.md explains."""
    explained = simparity.documented().get(example, [])
    found = runs[example].differences
    unexplained = [line for line in found if line not in explained]
    stale = [line for line in explained if line not in found]
    assert not unexplained, "differences design/simulate.md does not explain:\n" + "\n".join(
        unexplained
    )
    assert not stale, "design/simulate.md explains differences no longer seen:\n" + "\n".join(stale)


def test_operations_hold_on_the_real_plane(runs: dict[str, reconcile.ExampleRun]) -> None:
    ops = runs[operations.EXAMPLE].operations
    assert ops is not None
    assert ops.scale, ops.notes
    assert ops.drain_moved, ops.notes
    assert ops.drain_min_serving >= 1, ops.drain_series
    assert ops.restore_untouched, ops.notes


def test_two_tenants_racing_for_the_last_gpu_settle_without_overcommit(
    runs: dict[str, reconcile.ExampleRun],
) -> None:
    """Issue 23, item 3, under real Crossplane's concurrent reconciles: two tenants' deployments
    applied at once for the one free L4. One runs, the other is refused for capacity and says
    so, nothing stays Pending on the workload cluster, the replica that already served is never
    touched, and simulate of the same files settles the same way."""
    ops = runs[operations.EXAMPLE].operations
    assert ops is not None
    race = ops.race
    assert operations.settled_race(race["real"]), (race, ops.notes)
    assert operations.settled_race(race["simulated"]), race
    assert race["pending_left"] == [], race
    assert race["untouched"], race


def test_a_pod_the_real_scheduler_cannot_place_is_reported_alike_by_simulate(
    runs: dict[str, reconcile.ExampleRun],
) -> None:
    """tests/data/unplaceable-replica.yaml claims a GPU no L4 has: the real pod stays Pending
    (kube-scheduler: cannot allocate all claims) and simulate reports the same conditions."""
    ops = runs[operations.EXAMPLE].operations
    assert ops is not None
    scenario = ops.unplaceable
    assert "cannot allocate all claims" in (scenario.get("pending") or ""), scenario
    assert scenario["real"] == scenario["simulated"], scenario
