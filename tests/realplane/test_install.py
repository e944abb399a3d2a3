"""Modelplane installed by real Crossplane: every XRD Established, every Composition in,
the MRAP accepted, every Function Healthy on its image's mTLS endpoint."""

from __future__ import annotations

from pathlib import Path

from modelplane_realplane import plane, processes, report
from modelplane_realplane.install import Running, observe

ROOT = Path(__file__).resolve().parents[2]
# What the repository ships: one XRD and Composition per apis/<kind>/, one package per function.
KINDS = len(list(ROOT.glob("apis/*/definition.yaml")))
FUNCTIONS = len(list(ROOT.glob("functions/compose-*/pyproject.toml")))


def test_real_crossplane_installs_every_package(real_plane: Running) -> None:
    installed = real_plane.installed
    report.record(("install",), installed.figures())
    print(f"installed in {installed.seconds:.0f} s: {installed.figures()}")
    assert installed.problems == []
    assert (KINDS, FUNCTIONS) >= (12, 13)  # the globs found the repository
    assert installed.xrds == installed.xrds_established == KINDS
    assert installed.functions == installed.functions_healthy == FUNCTIONS
    assert installed.compositions == KINDS
    assert installed.mrap_accepted


def test_functions_are_dialled_over_mtls_at_the_endpoints_the_runtime_set(
    real_plane: Running,
) -> None:
    client = real_plane.plane.client()
    revisions = client.list("pkg.crossplane.io/v1", "FunctionRevision")
    active = [r for r in revisions if r["spec"]["desiredState"] == "Active"]
    assert len(active) == FUNCTIONS
    endpoints = {r["status"]["endpoint"] for r in active}
    assert endpoints == {f"127.0.0.1:{port}" for port in real_plane.plane.functions.values()}
    # Observing again after install changes nothing: the runtime keeps them Healthy.
    assert observe(client).functions_healthy == FUNCTIONS


def test_every_component_runs_in_its_own_process_group_with_a_log(real_plane: Running) -> None:
    running = real_plane.plane
    for name, pid in running.pids.items():
        assert processes.alive(pid), f"{name} is not running"
        assert (running.logs / f"{name}.log").is_file()
    assert plane.Plane.load(running.run) is not None
