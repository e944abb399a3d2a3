"""How tests/conftest.py shares the session between two pytest-xdist workers. If its grouping
stopped applying, the image tests would build their base twice at once, a test could change the
real plane under the examples' reconcile, and a test reading the real plane's results could
start a second plane."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import pytest
from xdist.scheduler import LoadScopeScheduling

CONFTEST = Path(__file__).resolve().parent / "conftest.py"


def _conftest():
    spec = importlib.util.spec_from_file_location("session_conftest", CONFTEST)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # its dataclasses look their module up
    spec.loader.exec_module(module)
    return module


@pytest.mark.parametrize(
    ("nodeid", "group"),
    [
        (
            "tests/packaging/test_images.py::test_every_image_shares_one_base_layer",
            "tests/packaging/test_images.py",
        ),
        ("tests/realplane/test_install.py::test_x", "real-plane"),
        ("tests/realplane/test_message_limit.py::test_x", "real-plane"),
        ("tests/realplane/test_admission.py::test_x", "real-plane"),
        ("tests/realplane/test_admission_fuzz.py::test_x", "real-plane"),
        (
            "tests/realplane/test_render_matches_crossplane.py::test_x",
            "tests/realplane/test_render_matches_crossplane.py",
        ),
        ("tests/realplane/test_reconcile.py::test_example_converges[quickstart]", "real-plane"),
        ("tests/robustness/test_function_fuzz.py::test_f[compose-usages]", "real-plane"),
        ("tests/validate/test_validate_crds.py::test_a", "tests/validate/test_validate_crds.py"),
        (
            "tests/validate/test_validate_crds.py::test_b[x::y]",
            "tests/validate/test_validate_crds.py",
        ),
        ("tests/packaging/test_package_cli.py::test_c", "tests/packaging/test_package_cli.py"),
    ],
)
def test_the_real_plane_runs_on_one_worker_and_every_other_file_whole(nodeid: str, group: str):
    assert _conftest()._worker_group(nodeid) == group


def test_the_scheduler_groups_by_the_hook_it_overrides(pytestconfig: pytest.Config):
    """The session's scheduler is tests/conftest.py's, and it overrides pytest-xdist's scope
    hook: were either lost, every test would stay green while the real plane's tests spread
    over both workers."""
    hook = pytestconfig.pluginmanager.hook.pytest_xdist_make_scheduler
    assert any(
        Path(str(getattr(impl.plugin, "__file__", ""))) == CONFTEST for impl in hook.get_hookimpls()
    )
    assert "_split_scope" in vars(LoadScopeScheduling)
    by_group = _conftest().ByWorkerGroup
    assert issubclass(by_group, LoadScopeScheduling)
    scheduler = object.__new__(by_group)  # its scope needs no state
    assert scheduler._split_scope("tests/realplane/test_install.py::test_y") == "real-plane"
    assert scheduler._split_scope("tests/docs/test_a.py::test_b") == "tests/docs/test_a.py"


@pytest.mark.parametrize(
    ("nodeids", "ranked"),
    [
        # The plane to itself, then the reconcile's start, the rest beside it, its results last.
        (
            [
                "tests/realplane/test_reconcile.py::test_example_converges[quickstart]",
                "tests/robustness/test_function_fuzz.py::test_f",
                "tests/realplane/test_admission.py::test_x",
                "tests/realplane/test_reconcile.py::"
                "test_the_examples_start_reconciling_on_an_installed_plane",
                "tests/realplane/test_message_limit.py::test_x",
                "tests/realplane/test_install.py::test_x",
            ],
            [
                "tests/realplane/test_message_limit.py::test_x",
                "tests/realplane/test_install.py::test_x",
                "tests/realplane/test_reconcile.py::"
                "test_the_examples_start_reconciling_on_an_installed_plane",
                "tests/robustness/test_function_fuzz.py::test_f",
                "tests/realplane/test_admission.py::test_x",
                "tests/realplane/test_reconcile.py::test_example_converges[quickstart]",
            ],
        ),
    ],
)
def test_the_real_planes_tests_run_in_the_order_the_reconcile_needs(nodeids, ranked):
    """Nothing changes the plane under the examples' reconcile: what fills it runs before the
    reconcile starts, and the tests reading its results come last."""
    assert sorted(nodeids, key=_conftest()._rank) == ranked
