"""``modelplane render`` and ``modelplane validate`` judged by the real Crossplane CLI (D7, D8).

Every ``uv run modelplane render ...`` command the examples' READMEs document is rendered by
``modelplane render`` and by the real ``crossplane render`` (CLI v2.5, with the built Crossplane
core as its render engine), both dialling the same twelve function processes. The outputs must
be equal as objects except where design/render.md lists the difference; a listed difference
that no longer occurs fails too, so the list stays exact. ``crossplane resource validate`` and
``modelplane validate`` must give every object of examples/ the same verdict, with the same
kind of list for the exceptions.

Needs Go and the built ``crossplane`` and ``crossplane-core`` (``uv run realplane build``);
without them the judged tests skip, and under CI=true they fail.
"""

from __future__ import annotations

import os
import shutil
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml
from modelplane_realplane import build, report
from modelplane_realplane import rendercheck as rc
from modelplane_realplane import renderdiff as rd
from modelplane_realplane import validatecheck as vc

# ----------------------------------------------------------------------------------------------
# The harness itself (no binaries needed)


def test_every_render_input_is_a_documented_command() -> None:
    inputs = rc.render_inputs()
    assert len(inputs) >= 10
    labels = [i.label for i in inputs]
    assert len(labels) == len(set(labels))
    # A command continued with a backslash is one input.
    assert (
        "examples/qwen-demo/qwen3-8b.yaml -e examples/qwen-demo/clusters.yaml "
        "-o examples/qwen-demo/qwen3-8b-observed.yaml"
    ) in labels
    for item in inputs:
        assert (rc.REPOSITORY / item.args[0]).is_file(), item


def test_command_lines_are_parsed_as_a_shell_would(tmp_path: Path) -> None:
    assert rc.command_arguments("uv run modelplane render a.yaml -r  # why") == ("a.yaml", "-r")
    assert rc.command_arguments("$ uv run modelplane render 'a b.yaml'") == ("a b.yaml",)
    for redirected in (
        "a.yaml > out.yaml",
        "a.yaml 2>/dev/null",
        "a.yaml | less",
        "a.yaml && echo ok",
        "a.yaml; true",
        "< in.yaml",
    ):
        assert rc.command_arguments(f"uv run modelplane render {redirected}") is None
    assert rc.command_arguments("uv run modelplane validate a.yaml") is None
    readme = tmp_path / "examples" / "x" / "README.md"
    readme.parent.mkdir(parents=True)
    readme.write_text(
        "Run `uv run modelplane render prose.yaml`.\n\n```sh\n"
        "uv run modelplane render a.yaml \\\n  -e b.yaml\n"
        "uv run modelplane render a.yaml > out.yaml\n"
        "uv run modelplane render a.yaml -e b.yaml\n```\n"
    )
    found = rc.render_inputs(tmp_path)
    assert [(i.line, i.args) for i in found] == [(4, ("a.yaml", "-e", "b.yaml"))]


def test_outputs_are_compared_as_objects() -> None:
    ours = rd.Outcome(
        0,
        "---\nkind: X\nspec: {a: 1.0, b: [1, 2]}\n"
        "status: {conditions: [{type: A}, {type: B, reason: r}]}\n",
        "",
        0,
    )
    theirs = rd.Outcome(
        0,
        "kind: X\nspec:\n  a: 1\n  b: [1, 3]\n"
        "status: {conditions: [{type: B, reason: s}, {type: A}]}\n",
        "",
        0,
    )
    found = rd.compare_outputs(ours, theirs)
    assert [d.path for d in found] == ["xr:spec.b[1]", "xr:status.conditions[type=B].reason"]
    refused = rd.Outcome(1, "", "boom", 0)
    assert rd.compare_outputs(refused, refused) == []
    assert [d.path for d in rd.compare_outputs(ours, refused)] == ["exit"]


def test_per_resource_events_are_compared_in_any_order() -> None:
    """The reconciler emits them walking a Go map; everything else keeps its place."""

    def event(reason: str, message: str) -> dict[str, str]:
        return {"apiVersion": rd.RENDER_API_VERSION, "kind": "Result", "severity": "Normal",
                "reason": reason, "message": message}  # fmt: skip

    select = event("SelectComposition", "Successfully selected composition: x")
    step = event("ComposeResources", 'Pipeline step "s": hi')
    b, a = (event("ComposeResources", f'Composed resource "{n}" is not yet ready') for n in "ba")
    assert rd.canonical_results([select, step, b, a]) == [select, step, a, b]
    assert rd.canonical_results([step, select]) == [step, select]
    ours = rd.Outcome(0, yaml.safe_dump_all([{"kind": "X"}, select, a, b]), "", 0)
    theirs = rd.Outcome(0, yaml.safe_dump_all([{"kind": "X"}, select, b, a]), "", 0)
    assert rd.compare_outputs(ours, theirs) == []


def test_the_documented_list_must_be_exact() -> None:
    rows = [rd.Documented("*", "xr:metadata.*", "r"), rd.Documented("in", "composed/a", "r")]
    hit = rd.Difference("xr:metadata.uid", rd.MISSING, "u")
    verdict = rd.judge({"in": [hit], "other": [rd.Difference("xr:spec", 1, 2)]}, rows)
    assert [(label, d.path) for label, d in verdict.undocumented] == [("other", "xr:spec")]
    assert verdict.stale == [rows[1]]
    assert rd.judge({"in": [hit, rd.Difference("composed/a", {}, rd.MISSING)]}, rows).exact


def test_design_render_md_holds_both_lists() -> None:
    rd.documented(rd.RENDER_HEADING)
    rd.documented(rd.VALIDATE_HEADING)


# ----------------------------------------------------------------------------------------------
# Judged by the real CLI


def _binaries() -> tuple[Path, Path]:
    """The crossplane CLI and core, built where missing or out of date (this module may run on
    either test worker, before or beside the real plane's build), or a skip (a failure under
    CI) saying why not."""
    reason = None
    if shutil.which("go") is None:
        reason = "Go is not installed: the real Crossplane CLI is built from Go modules"
    else:
        try:
            build.build(["crossplane", "crossplane-core"], log=False)
            return build.binary("crossplane"), build.binary("crossplane-core")
        except build.BuildError as err:
            reason = str(err)
    if os.environ.get("CI"):
        pytest.fail(f"CI must judge render with the real Crossplane CLI: {reason}")
    pytest.skip(f"render was not judged by the real Crossplane CLI: {reason}")


@pytest.fixture(scope="module")
def binaries() -> tuple[Path, Path]:
    return _binaries()


@pytest.fixture(scope="module")
def fleet(
    binaries: tuple[Path, Path], tmp_path_factory: pytest.TempPathFactory
) -> Iterator[rc.FunctionFleet]:
    """Every repository function, started once for this module and stopped after it."""
    functions = rc.FunctionFleet(tmp_path_factory.mktemp("rendercheck"))
    pids = []
    with functions:
        pids = list(functions.pids.values())
        yield functions
    left = [pid for pid in pids if rc.processes.group_members(pid)]
    assert not left, f"function processes left running: {left}"


@pytest.fixture(scope="module")
def comparisons(
    binaries: tuple[Path, Path], fleet: rc.FunctionFleet
) -> tuple[list[rc.Comparison], float]:
    started = time.monotonic()
    found = rc.compare_inputs(rc.render_inputs(), fleet, *binaries)
    return found, time.monotonic() - started


def test_every_render_input_renders(comparisons: tuple[list[rc.Comparison], float]) -> None:
    found, _ = comparisons
    failed = [
        f"{c.input.readme}:{c.input.line} {c.input.label}\n  modelplane: {c.modelplane.stderr}"
        f"\n  crossplane: {c.crossplane.stderr}"
        for c in found
        if c.modelplane.code != 0 and c.crossplane.code != 0
    ]
    assert not failed, "documented render commands fail with both tools:\n" + "\n".join(failed)


def test_render_matches_crossplane_render(
    comparisons: tuple[list[rc.Comparison], float],
) -> None:
    found, seconds = comparisons
    rows = rd.documented(rd.RENDER_HEADING)
    verdict = rd.judge({c.input.label: c.differences for c in found}, rows)
    figures = rc.figures(found, rows)
    report.record(("render",), figures)
    print(f"render judged in {seconds:.0f} s: {figures}")
    lines = [f"  {label}\n    {difference}" for label, difference in verdict.undocumented]
    lines += [f"  no longer differs: {row.input} | {row.path}" for row in verdict.stale]
    assert verdict.exact, (
        f"modelplane render and crossplane render disagree beyond design/render.md "
        f"({rd.RENDER_HEADING!r}); fix modelplane render or document the difference:\n"
        + "\n".join(lines)
    )


def test_validate_agrees_with_crossplane_resource_validate(
    binaries: tuple[Path, Path], tmp_path: Path
) -> None:
    crossplane, _ = binaries
    verdicts = vc.validate_verdicts(crossplane, tmp_path)
    rows = rd.documented(rd.VALIDATE_HEADING)
    verdict = vc.judge_validate(verdicts, rows)
    figures = vc.validate_figures(verdicts, rows)
    report.record(("validate",), figures)
    print(f"validate: {figures}")
    assert figures["objects"] > 0
    assert not [v for v in verdicts if v.crossplane == "notReported"], "objects not reported"
    lines = [f"  {label}: {difference}" for label, difference in verdict.undocumented]
    lines += [f"  no longer differs: {row.input} | {row.path}" for row in verdict.stale]
    assert verdict.exact, (
        f"modelplane validate and crossplane resource validate disagree beyond design/render.md "
        f"({rd.VALIDATE_HEADING!r}):\n" + "\n".join(lines)
    )
