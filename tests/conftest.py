"""Fixtures shared by several test areas."""

from __future__ import annotations

import copy
import dataclasses
from collections.abc import Callable, Iterator
from contextlib import ExitStack
from pathlib import Path
from typing import Any

import pytest
import yaml
from crossplane.function.proto.v1 import run_function_pb2 as fnv1
from hypothesis import settings
from modelplane.controlplane import ControlPlane, Convergence, session
from modelplane.project import function_directory
from modelplane_common.plain import to_struct
from xdist.scheduler import LoadScopeScheduling

# Property tests share two CPUs with everything else in CI: a per-example deadline only
# measures the machine's load, so no test gets one (settings built in tests inherit this).
settings.register_profile("modelplane", deadline=None)
settings.load_profile("modelplane")

EXAMPLES = Path(__file__).resolve().parents[1] / "examples"

# The real plane's tests that need it to themselves first (tests/realplane/conftest.py
# ``real_plane`` starts it; the message limit test fills and empties it); then the test that
# starts the examples reconciling in the background (tests/realplane/test_reconcile.py); then
# everything else, which runs while the real plane mostly waits; and last the tests that read
# the reconcile's results.
PLANE_ALONE = ("tests/realplane/test_install.py", "tests/realplane/test_message_limit.py")
RECONCILE = "tests/realplane/test_reconcile.py"
RECONCILE_START = "test_the_examples_start_reconciling_on_an_installed_plane"


def _rank(nodeid: str) -> int:
    path, _, name = nodeid.partition("::")
    if path == RECONCILE:
        return 2 if name == RECONCILE_START else 4
    return 1 if path in PLANE_ALONE else 3


def _session_rank(item: pytest.Item) -> int:
    return _rank(item.nodeid)


# Run on the real plane's worker while its examples reconcile in the background (rank 2 to 4):
# the fuzzing, several minutes of one core, and the API server's admission verdicts (dry runs
# and CRDs of their own, which no example composes).
BESIDE_THE_RECONCILE = ("tests/robustness/", "tests/realplane/test_admission")
# The first test reading the reconcile's results waits for it (test_reconcile.py's ``runs``).
RECONCILE_WAIT_SECONDS = 2400
# The first test using the real plane starts it and installs Modelplane (tests/realplane/
# conftest.py ``real_plane``): about 4 minutes beside a busy second worker, past 5 on a slow host.
PLANE_START_SECONDS = 900


def _worker_group(nodeid: str) -> str:
    """Which tests one pytest-xdist worker runs together, in collection order (``-n 2``,
    pyproject.toml): the real plane's tests, in their ranked order, with the fuzzing and the
    admission verdicts between the start of the background reconcile and the tests that read
    it; every other test with its file, so module fixtures are built once (the function images
    among them: each serves in a network namespace of its own, so the real plane's port 9443
    is no obstacle). Groups go to whichever worker is free, in collection order, so the real
    plane (the longest) starts first."""
    path = nodeid.split("::", 1)[0]
    if _rank(nodeid) != 3 or path.startswith(BESIDE_THE_RECONCILE):
        return "real-plane"
    return path


class ByWorkerGroup(LoadScopeScheduling):
    """pytest-xdist's scheduling by scope, with ``_worker_group`` as the scope."""

    def _split_scope(self, nodeid: str) -> str:
        return _worker_group(nodeid)


def pytest_xdist_make_scheduler(config: pytest.Config, log: Any) -> ByWorkerGroup:
    return ByWorkerGroup(config, log)


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    items.sort(key=_session_rank)  # stable: file order is kept within each rank
    strays = [item.nodeid for item in items if "real_plane" in getattr(item, "fixturenames", ())
              and _worker_group(item.nodeid) != "real-plane"]  # fmt: skip
    if strays:
        # On the other worker its session fixture would start a second plane beside the first.
        raise pytest.UsageError(
            f"{strays[0]} uses the real plane but runs on any worker: add its file to "
            "PLANE_ALONE (it changes the plane) or BESIDE_THE_RECONCILE in tests/conftest.py"
        )
    for item in items:
        if _session_rank(item) == 4:
            item.add_marker(pytest.mark.timeout(RECONCILE_WAIT_SECONDS))
        elif "real_plane" in getattr(item, "fixturenames", ()):  # any may be the first
            item.add_marker(pytest.mark.timeout(PLANE_START_SECONDS))


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


@pytest.fixture(scope="session")
def recorded_requests() -> dict[str, fnv1.RunFunctionRequest]:
    """One real RunFunctionRequest per repository function, keyed by function directory: the
    last one each got while examples/multi-cluster converged in-process (it exercises all but
    compose-model-cache and the AKS, Vultr and Nebius cluster functions), and for those the
    first call for examples/cache/cache.yaml and examples/cloud-clusters/{aks,vultr,nebius}
    cluster.yaml."""
    seen: dict[str, fnv1.RunFunctionRequest] = {}
    with session(EXAMPLES / "multi-cluster") as plane:
        host = plane.runner.host  # type: ignore[attr-defined]
        run = host.run_function

        def record(name: str, req: fnv1.RunFunctionRequest) -> fnv1.RunFunctionResponse:
            seen[function_directory(name)] = fnv1.RunFunctionRequest.FromString(
                req.SerializeToString()
            )
            return run(name, req)

        host.run_function = record
        plane.run(max_rounds=60)
    cache = yaml.safe_load((EXAMPLES / "cache" / "cache.yaml").read_text())
    seen["compose-model-cache"] = fnv1.RunFunctionRequest(
        observed=fnv1.State(composite=fnv1.Resource(resource=to_struct(cache)))
    )
    # No AKS cluster in examples/multi-cluster: the first call for the AKSCluster example.
    aks = next(
        doc
        for doc in yaml.safe_load_all((EXAMPLES / "cloud-clusters" / "akscluster.yaml").read_text())
        if doc and doc.get("kind") == "AKSCluster"
    )
    seen["compose-aks-cluster"] = fnv1.RunFunctionRequest(
        observed=fnv1.State(composite=fnv1.Resource(resource=to_struct(aks)))
    )
    # Nor a Vultr cluster: the first call for the VultrCluster example.
    vke = next(
        doc
        for doc in yaml.safe_load_all(
            (EXAMPLES / "cloud-clusters" / "vultrcluster.yaml").read_text()
        )
        if doc and doc.get("kind") == "VultrCluster"
    )
    seen["compose-vultr-cluster"] = fnv1.RunFunctionRequest(
        observed=fnv1.State(composite=fnv1.Resource(resource=to_struct(vke)))
    )
    # Nor a Nebius cluster: the first call for the NebiusCluster example.
    nebius = yaml.safe_load((EXAMPLES / "cloud-clusters" / "nebiuscluster.yaml").read_text())
    seen["compose-nebius-cluster"] = fnv1.RunFunctionRequest(
        observed=fnv1.State(composite=fnv1.Resource(resource=to_struct(nebius)))
    )
    return seen
