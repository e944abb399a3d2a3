"""`modelplane simulate` driven as a user does: the CLI, real gRPC functions, real files.

Test-only XRDs and compositions live in a tmp repository (MODELPLANE_ROOT); their functions
are real gRPC servers in this process, reached through Development-runtime Function objects
in the simulated directory, exactly as a user would point at functions they run themselves.
"""

from __future__ import annotations

import asyncio
import hashlib
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml
from click.testing import CliRunner
from crossplane.function import logging as function_logging
from crossplane.function.proto.v1 import run_function_pb2 as fnv1
from crossplane.function.proto.v1 import run_function_pb2_grpc as grpcv1
from modelplane.main import cli
from modelplane_common.function import CompositionFunction, InputError, Outcome, Request
from modelplane_common.serving import BackgroundServer

API = "test.modelplane.ai/v1alpha1"
REPO = Path(__file__).resolve().parents[2]


class WidgetFunction(CompositionFunction):
    """One ConfigMap per spec.items entry, ready once observed."""

    name = "compose-widget"

    def compose(self, request: Request) -> Outcome:
        outcome = Outcome(composite_status={"count": len(request.spec.get("items") or [])})
        for item in request.spec.get("items") or []:
            key = f"cm-{item}"
            outcome.compose(
                key,
                {"apiVersion": "v1", "kind": "ConfigMap", "data": {"item": item}},
                ready=key in request.observed,
            )
        return outcome


class RestlessFunction(CompositionFunction):
    """Never settles: bumps a counter in its ConfigMap every reconcile."""

    name = "compose-gadget"

    def compose(self, request: Request) -> Outcome:
        seen = int(((request.observed.get("counter") or {}).get("data") or {}).get("n", "0"))
        outcome = Outcome()
        outcome.compose(
            "counter",
            {
                "apiVersion": "v1",
                "kind": "ConfigMap",
                "metadata": {"namespace": "default"},
                "data": {"n": str(seen + 1)},
            },
            ready=True,
        )
        return outcome


class CrashingFunction(CompositionFunction):
    """A function with a bug: the servicer turns the exception into a Fatal result."""

    name = "compose-crash"

    def compose(self, request: Request) -> Outcome:
        raise ZeroDivisionError("division by zero")


class RefusingFunction(CompositionFunction):
    """Refuses its input the way Modelplane functions do: a Fatal result naming the field."""

    name = "compose-refuse"

    def compose(self, request: Request) -> Outcome:
        raise InputError("spec.items: a widget needs at most 0 items")


class ClusterScopedFunction(CompositionFunction):
    """Composes a Namespace, which a namespaced XR may not do."""

    name = "compose-parent"

    def compose(self, request: Request) -> Outcome:
        outcome = Outcome()
        outcome.compose("ns", {"apiVersion": "v1", "kind": "Namespace"}, ready=True)
        return outcome


@pytest.fixture
def functions() -> Iterator[list[dict]]:
    """The test functions served over gRPC, as Development-runtime Function objects."""
    # As FunctionHost does for the functions it hosts: their logs would share our stdout.
    function_logging.configure(function_logging.Level.DISABLED)
    servers = [
        BackgroundServer(fn())
        for fn in (
            WidgetFunction,
            RestlessFunction,
            ClusterScopedFunction,
            CrashingFunction,
            RefusingFunction,
        )
    ]
    objects = []
    for server in servers:
        address = server.start()
        objects.append(
            {
                "apiVersion": "pkg.crossplane.io/v1",
                "kind": "Function",
                "metadata": {
                    "name": server._servicer.name,
                    "annotations": {
                        "render.crossplane.io/runtime": "Development",
                        "render.crossplane.io/runtime-development-target": address,
                    },
                },
            }
        )
    yield objects
    for server in servers:
        server.stop()


def write(directory: Path, name: str, *docs: dict) -> Path:
    path = directory / name
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(yaml.safe_dump_all(docs, sort_keys=False))
    return path


def simulate(*args: str):
    return CliRunner().invoke(cli, ["simulate", *args])


def widget(items: list[str]) -> dict:
    return {
        "apiVersion": API,
        "kind": "Widget",
        "metadata": {"name": "w", "namespace": "team-a"},
        "spec": {"items": items},
    }


def test_quickstart_example_converges():
    result = simulate(str(REPO / "examples" / "quickstart"))
    assert result.exit_code == 0, result.output
    assert "converged after" in result.stderr
    header, *rows = result.stdout.splitlines()
    assert header.split()[:5] == ["KIND", "NAMESPACE", "NAME", "READY", "SYNCED"]
    classes = [row.split() for row in rows if row.startswith("InferenceClass")]
    assert classes
    assert all(row[3:5] == ["True", "True"] for row in classes)
    assert "round 1: " in result.stderr


def test_yaml_output_is_every_object(test_repo, functions, tmp_path):
    directory = tmp_path / "in"
    write(directory, "functions.yaml", *functions)
    write(directory, "nested/widget.yaml", widget(["a", "b"]))
    result = simulate(str(directory), "-o", "yaml")
    assert result.exit_code == 0, result.output
    docs = list(yaml.safe_load_all(result.stdout))
    assert [d["kind"] for d in docs] == ["Widget", "ConfigMap", "ConfigMap"]
    xr = docs[0]
    uid = xr["metadata"]["uid"]
    names = {d["metadata"]["name"] for d in docs[1:]}
    expected = {
        f"w-{hashlib.sha256((uid + k).encode()).hexdigest()[:12]}" for k in ("cm-a", "cm-b")
    }
    assert names == expected
    assert xr["status"]["count"] == 2


def test_table_lists_composed_resources_under_their_owner(test_repo, functions, tmp_path):
    directory = tmp_path / "in"
    write(directory, "all.yaml", *functions, widget(["a"]))
    result = simulate(str(directory))
    assert result.exit_code == 0, result.output
    lines = result.stdout.splitlines()
    assert lines[1].split()[:6] == ["Widget", "team-a", "w", "True", "True", "count=1"]
    assert lines[2].startswith("  ConfigMap")


def test_non_convergence_exits_non_zero_naming_what_changes(test_repo, functions, tmp_path):
    directory = tmp_path / "in"
    gadget = {"apiVersion": API, "kind": "Gadget", "metadata": {"name": "g"}, "spec": {}}
    write(directory, "all.yaml", *functions, gadget)
    result = simulate(str(directory), "--max-rounds", "5")
    assert result.exit_code == 1
    assert "did not converge: no fixed point after 5 rounds" in result.stderr
    assert "ConfigMap/default/g-" in result.stderr
    assert "round 5:" in result.stderr
    assert "Traceback" not in result.output


def test_cluster_scoped_kind_under_namespaced_xr_is_reported(test_repo, functions, tmp_path):
    directory = tmp_path / "in"
    parent = {"apiVersion": API, "kind": "Parent", "metadata": {"name": "p", "namespace": "t"}}
    write(directory, "all.yaml", *functions, parent | {"spec": {}})
    result = simulate(str(directory))
    assert result.exit_code == 1
    assert "Parent/t/p: Synced=False ReconcileError" in result.stderr
    assert 'cannot apply cluster scoped composed resource "ns"' in result.stderr
    assert "Namespace" not in result.stdout


def test_invalid_manifest_names_file_and_field(tmp_path):
    broken = yaml.safe_load((REPO / "examples" / "platform" / "inferenceclass-l4.yaml").read_text())
    broken["spec"]["devices"][0]["count"] = 0
    path = write(tmp_path / "in", "class.yaml", broken)
    result = simulate(str(path.parent))
    assert result.exit_code == 1
    assert str(path) in result.stderr
    assert "spec.devices[0].count" in result.stderr
    assert "Traceback" not in result.output
    assert result.stdout == ""


def test_unparseable_yaml_is_a_clear_error(tmp_path):
    directory = tmp_path / "in"
    directory.mkdir()
    (directory / "bad.yaml").write_text("kind: [unclosed\n")
    result = simulate(str(directory))
    assert result.exit_code == 1
    assert "bad.yaml: not valid YAML" in result.stderr


def test_crashing_function_is_reported_without_a_traceback(test_repo, functions, tmp_path):
    composition = test_repo / "apis" / "widgets" / "definition.yaml"
    composition.write_text(
        composition.read_text().replace("name: compose-widget", "name: compose-crash")
    )
    directory = tmp_path / "in"
    write(directory, "all.yaml", *functions, widget(["a"]))
    result = simulate(str(directory))
    assert result.exit_code == 1
    assert (
        "Widget/team-a/w: Synced=False ReconcileError: cannot compose resources:" in result.stderr
    )
    assert "ZeroDivisionError: division by zero" in result.stderr
    assert "Traceback" not in result.output


def test_unreachable_function_times_out_with_a_message(test_repo, tmp_path):
    gone = {
        "apiVersion": "pkg.crossplane.io/v1",
        "kind": "Function",
        "metadata": {
            "name": "compose-widget",
            "annotations": {
                "render.crossplane.io/runtime": "Development",
                "render.crossplane.io/runtime-development-target": "127.0.0.1:9",
            },
        },
    }
    directory = tmp_path / "in"
    write(directory, "all.yaml", gone, widget(["a"]))
    result = simulate(str(directory), "--timeout", "2")
    assert result.exit_code == 1
    assert 'cannot run Composition pipeline step "compose-widget"' in result.stderr
    assert "Traceback" not in result.output


# --------------------------------------------------------------------------------------------
# More bad input: each a clear message naming what to fix, exit 1, never a traceback


def _fails(result, *messages: str) -> None:
    assert result.exit_code == 1, result.output
    for message in messages:
        assert message in result.stderr, result.stderr
    assert "Traceback" not in result.output


def test_unknown_modelplane_kind_is_refused(tmp_path):
    gizmo = {"apiVersion": "modelplane.ai/v1alpha1", "kind": "Gizmo", "metadata": {"name": "g"}}
    path = write(tmp_path / "in", "gizmo.yaml", gizmo)
    result = simulate(str(path.parent))
    _fails(
        result,
        f"{path}: Gizmo/g: no CompositeResourceDefinition in apis/ serves "
        "apiVersion modelplane.ai/v1alpha1 kind Gizmo",
    )
    assert result.stdout == ""


def test_xr_violating_a_cel_rule_names_file_field_and_rule(tmp_path):
    broken = yaml.safe_load((REPO / "examples" / "platform" / "inferenceclass-l4.yaml").read_text())
    del broken["spec"]["devices"][0]["deviceClassName"]
    path = write(tmp_path / "in", "class.yaml", broken)
    result = simulate(str(path.parent))
    _fails(
        result,
        f"{path}: InferenceClass/gke-l4-1x-g2: spec.devices[0]: deviceClassName is required "
        "when claim is DRA",
    )
    assert result.stdout == ""


def test_kind_without_a_composition_is_not_synced(test_repo, functions, tmp_path):
    definition = test_repo / "apis" / "widgets" / "definition.yaml"
    xrd_only = next(yaml.safe_load_all(definition.read_text()))  # drop the Composition
    definition.write_text(yaml.safe_dump(xrd_only))
    directory = tmp_path / "in"
    write(directory, "all.yaml", *functions, widget(["a"]))
    result = simulate(str(directory))
    _fails(result, "Widget/team-a/w: Synced=False ReconcileError: cannot select composition")


def test_missing_composition_ref_is_named(test_repo, functions, tmp_path):
    xr = widget(["a"])
    xr["spec"]["crossplane"] = {"compositionRef": {"name": "no-such-composition"}}
    directory = tmp_path / "in"
    write(directory, "all.yaml", *functions, xr)
    result = simulate(str(directory))
    _fails(result, 'Composition "no-such-composition"')


def test_fatal_result_is_reported_with_its_message(test_repo, functions, tmp_path):
    definition = test_repo / "apis" / "widgets" / "definition.yaml"
    definition.write_text(
        definition.read_text().replace("name: compose-widget", "name: compose-refuse")
    )
    directory = tmp_path / "in"
    write(directory, "all.yaml", *functions, widget(["a"]))
    result = simulate(str(directory))
    _fails(
        result,
        "Widget/team-a/w: Synced=False ReconcileError: cannot compose resources:",
        "spec.items: a widget needs at most 0 items",
    )


class HangingFunction(grpcv1.FunctionRunnerServiceServicer):
    """Accepts the call and never answers in time."""

    async def RunFunction(self, req, _context):
        await asyncio.sleep(30)
        return fnv1.RunFunctionResponse()


def test_function_that_hangs_times_out_with_a_message(test_repo, tmp_path):
    server = BackgroundServer(HangingFunction())
    hanging = {
        "apiVersion": "pkg.crossplane.io/v1",
        "kind": "Function",
        "metadata": {
            "name": "compose-widget",
            "annotations": {
                "render.crossplane.io/runtime": "Development",
                "render.crossplane.io/runtime-development-target": server.start(),
            },
        },
    }
    try:
        directory = tmp_path / "in"
        write(directory, "all.yaml", hanging, widget(["a"]))
        started = time.monotonic()
        result = simulate(str(directory), "--timeout", "2")
        assert time.monotonic() - started < 20
    finally:
        server.stop()
    _fails(
        result,
        "Widget/team-a/w: Synced=False",
        'cannot run Composition pipeline step "compose-widget"',
    )
