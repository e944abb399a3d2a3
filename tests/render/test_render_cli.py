"""``modelplane render`` driven as a user drives it, with real gRPC.

Test-only functions are scripted: each step's behaviour is a Python callable served from its
own ``BackgroundServer``, and ``serve`` writes a Crossplane Functions file pointing
``modelplane render --functions`` at them as Development targets, exactly as a user does with
functions they started themselves. Repository functions (InferenceClass) are hosted in-process
by render itself.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import json
import os
import shutil
import socket
import subprocess
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import grpc
import pytest
import yaml
from click.testing import CliRunner, Result
from crossplane.function import response
from crossplane.function.proto.v1 import run_function_pb2 as fnv1
from crossplane.function.proto.v1 import run_function_pb2_grpc as grpcv1
from crossplane.function.proto.v1beta1 import run_function_pb2 as fnv1beta1
from crossplane.function.proto.v1beta1 import run_function_pb2_grpc as grpcv1beta1
from modelplane.main import cli
from modelplane.project import installed_name
from modelplane_common.plain import to_plain
from modelplane_common.serving import BackgroundServer

XR_API = "test.modelplane.ai/v1"
XR_KIND = "Widget"

Behaviour = Callable[[fnv1.RunFunctionRequest, int], fnv1.RunFunctionResponse]


class Scripted(grpcv1.FunctionRunnerServiceServicer):
    """A function whose response is ``behaviour(request, call_index)``; records each request."""

    def __init__(self, behaviour: Behaviour, delay: float = 0.0) -> None:
        self.behaviour = behaviour
        self.delay = delay
        self.requests: list[fnv1.RunFunctionRequest] = []

    async def RunFunction(self, req, _context):
        self.requests.append(req)
        if self.delay:
            await asyncio.sleep(self.delay)
        return self.behaviour(req, len(self.requests) - 1)


def passthrough(req: fnv1.RunFunctionRequest, _n: int) -> fnv1.RunFunctionResponse:
    return response.to(req)


@pytest.fixture
def serve(tmp_path: Path) -> Iterator[Callable[..., Path]]:
    """``serve(name=servicer, ...)`` -> a Functions file with a Development target for each."""
    servers: list[BackgroundServer] = []

    def start(**servicers: grpcv1.FunctionRunnerServiceServicer) -> Path:
        documents = []
        for name, servicer in servicers.items():
            server = BackgroundServer(servicer)
            servers.append(server)
            documents.append(development_function(name, server.start()))
        path = tmp_path / "functions.yaml"
        path.write_text(yaml.safe_dump_all(documents))
        return path

    yield start
    for server in servers:
        server.stop()


def development_function(name: str, target: str) -> dict[str, Any]:
    return {
        "apiVersion": "pkg.crossplane.io/v1beta1",
        "kind": "Function",
        "metadata": {
            "name": name,
            "annotations": {
                "render.crossplane.io/runtime": "Development",
                "render.crossplane.io/runtime-development-target": target,
            },
        },
        "spec": {"package": f"example.com/{name}:v0.1.0"},
    }


def write(path: Path, *documents: dict[str, Any]) -> Path:
    path.write_text(yaml.safe_dump_all(documents, sort_keys=False))
    return path


def composition(*steps: str | dict[str, Any], mode: str = "Pipeline") -> dict[str, Any]:
    """A Composition for the test Widget kind, one step per function name (or full step)."""
    return {
        "apiVersion": "apiextensions.crossplane.io/v1",
        "kind": "Composition",
        "metadata": {"name": "widgets"},
        "spec": {
            "compositeTypeRef": {"apiVersion": XR_API, "kind": XR_KIND},
            "mode": mode,
            "pipeline": [
                s if isinstance(s, dict) else {"step": s, "functionRef": {"name": s}} for s in steps
            ],
        },
    }


def widget(name: str = "w", namespace: str | None = None, **spec: Any) -> dict[str, Any]:
    metadata: dict[str, Any] = {"name": name}
    if namespace:
        metadata["namespace"] = namespace
    return {"apiVersion": XR_API, "kind": XR_KIND, "metadata": metadata, "spec": spec}


def render(*args: str | Path) -> Result:
    """``modelplane render ARGS`` as a user types it (stdout and stderr kept apart)."""
    return CliRunner().invoke(cli, ["render", *map(str, args)], catch_exceptions=False)


def documents(result: Result) -> list[dict[str, Any]]:
    assert result.exit_code == 0, result.stderr
    assert result.stdout.startswith("---\n")
    return list(yaml.safe_load_all(result.stdout))


def add(rsp: fnv1.RunFunctionResponse, name: str, body: dict[str, Any], ready: bool = True):
    rsp.desired.resources[name].resource.update(body)
    rsp.desired.resources[name].ready = fnv1.READY_TRUE if ready else fnv1.READY_FALSE


def config_map(name: str | None = None, **data: str) -> dict[str, Any]:
    body: dict[str, Any] = {"apiVersion": "v1", "kind": "ConfigMap", "data": data}
    if name:
        body["metadata"] = {"name": name}
    return body


@pytest.fixture
def files(tmp_path: Path) -> Callable[..., Path]:
    """``files(name, *documents)`` writes a YAML stream into the test's folder."""

    def make(name: str, *docs: dict[str, Any]) -> Path:
        return write(tmp_path / name, *docs)

    return make


# --------------------------------------------------------------------------------------------
# The InferenceClass example, hosted in-process from the repository's entry points

ROOT = Path(__file__).resolve().parents[2]
# `uv run` names itself in $UV: after `python3 -m pip install uv` the uv binary need not be on
# PATH (a --user install lands in ~/.local/bin), yet the README's `python3 -m uv run pytest` works.
UV = os.environ.get("UV") or shutil.which("uv") or "uv"
EXAMPLE = ROOT / "examples" / "platform" / "inferenceclass-l4.yaml"

EXPECTED_CLASS = """---
apiVersion: modelplane.ai/v1alpha1
kind: InferenceClass
metadata:
  name: gke-l4-1x-g2
status:
  conditions:
  - lastTransitionTime: "2024-01-01T00:00:00Z"
    reason: Available
    status: "True"
    type: Ready
  - lastTransitionTime: "2024-01-01T00:00:00Z"
    reason: Available
    status: "True"
    type: Accepted
"""


def test_inference_class_example_renders_ready_and_accepted():
    result = render(EXAMPLE)
    assert result.exit_code == 0, result.stderr
    assert result.stdout == EXPECTED_CLASS
    assert result.stderr == ""


def test_full_xr_shows_the_schema_defaults_and_context_document(tmp_path):
    docs = documents(render(EXAMPLE, "-x", "-c", "-r", "--context-values", "tier=1"))
    xr, context = docs
    gke = xr["spec"]["provisioning"]["gke"]
    assert gke["diskSizeGb"] == 100  # XRD default applied before the function ran
    assert xr["spec"]["devices"][0]["claim"] == "DRA"
    assert xr["spec"]["devices"][0]["count"] == 1
    assert context == {
        "apiVersion": "render.crossplane.io/v1beta1",
        "kind": "Context",
        "fields": {"tier": 1},
    }


def test_explicit_composition_argument_is_used():
    composition = ROOT / "apis" / "inferenceclasses" / "composition.yaml"
    assert render(EXAMPLE, composition).stdout == EXPECTED_CLASS


def test_cli_as_a_subprocess_prints_the_stream():
    done = subprocess.run(
        [UV, "run", "--frozen", "modelplane", "render", str(EXAMPLE)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout == EXPECTED_CLASS


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def test_functions_yaml_runs_against_a_function_started_by_hand(tmp_path):
    """What users with the Crossplane CLI do: start the function, dial it from functions.yaml."""
    port = _free_port()
    functions = list(yaml.safe_load_all((ROOT / "functions.yaml").read_text()))
    name = installed_name("compose-inference-class")
    (entry,) = [f for f in functions if f["metadata"]["name"] == name]
    annotations = entry["metadata"]["annotations"]
    annotations["render.crossplane.io/runtime-development-target"] = f"localhost:{port}"
    local = write(tmp_path / "functions.yaml", *functions)
    server = subprocess.Popen(
        [
            UV,
            "run",
            "--frozen",
            "compose-inference-class",
            "--insecure",
            "--address",
            f"localhost:{port}",
        ],
        cwd=ROOT,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        # No sleep: render waits for the function to come up (waitForReady).
        # The command of functions.yaml's own header, positional arguments as crossplane's.
        comp = ROOT / "apis" / "inferenceclasses" / "composition.yaml"
        result = render(EXAMPLE, comp, local, "--timeout", "60")
    finally:
        server.terminate()
        server.wait(timeout=30)
    assert result.exit_code == 0, result.stderr
    assert result.stdout == EXPECTED_CLASS


def test_functions_yaml_lists_every_function_with_its_own_development_target():
    functions = list(yaml.safe_load_all((ROOT / "functions.yaml").read_text()))
    names = [f["metadata"]["name"] for f in functions]
    # The names the Compositions reference: what Crossplane installs from the project.
    assert names == [
        installed_name(p.name) for p in sorted((ROOT / "functions").iterdir()) if p.is_dir()
    ]
    targets = [
        f["metadata"]["annotations"]["render.crossplane.io/runtime-development-target"]
        for f in functions
    ]
    assert len(set(targets)) == len(targets)
    assert all(t.startswith("localhost:") for t in targets)
    assert {f["metadata"]["annotations"]["render.crossplane.io/runtime"] for f in functions} == {
        "Development"
    }


# --------------------------------------------------------------------------------------------
# Composed resources: metadata, order, readiness


def test_composed_resources_are_stamped_and_sorted(serve, files):
    def compose(req, _n):
        rsp = response.to(req)
        add(rsp, "zeta", config_map(x="1"))
        add(rsp, "alpha", config_map(y="true"), ready=False)
        return rsp

    functions = serve(compose=Scripted(compose))
    xr = files("xr.yaml", widget("w1"))
    comp = files("comp.yaml", composition("compose"))
    result = render(xr, comp, "--functions", functions)
    assert result.exit_code == 0, result.stderr
    assert (
        result.stdout
        == """---
apiVersion: test.modelplane.ai/v1
kind: Widget
metadata:
  name: w1
status:
  conditions:
  - lastTransitionTime: "2024-01-01T00:00:00Z"
    message: 'Unready resources: alpha'
    reason: Creating
    status: "False"
    type: Ready
---
apiVersion: v1
data:
  "y": "true"
kind: ConfigMap
metadata:
  annotations:
    crossplane.io/composition-resource-name: alpha
  generateName: w1-
  labels:
    crossplane.io/composite: w1
  ownerReferences:
  - apiVersion: test.modelplane.ai/v1
    blockOwnerDeletion: true
    controller: true
    kind: Widget
    name: w1
    uid: ""
---
apiVersion: v1
data:
  x: "1"
kind: ConfigMap
metadata:
  annotations:
    crossplane.io/composition-resource-name: zeta
  generateName: w1-
  labels:
    crossplane.io/composite: w1
  ownerReferences:
  - apiVersion: test.modelplane.ai/v1
    blockOwnerDeletion: true
    controller: true
    kind: Widget
    name: w1
    uid: ""
"""
    )


def test_unready_list_is_summarised_and_explicit_readiness_wins(serve, files):
    def compose(req, n):
        rsp = response.to(req)
        for name in ("d", "c", "b", "a", "e"):
            add(rsp, name, config_map(), ready=False)
        if n == 1:
            rsp.desired.composite.ready = fnv1.READY_TRUE
        return rsp

    functions = serve(compose=Scripted(compose))
    xr = files("xr.yaml", widget())
    comp = files("comp.yaml", composition("compose"))
    (ready,) = documents(render(xr, comp, "--functions", functions))[0]["status"]["conditions"]
    assert ready["message"] == "Unready resources: a, b, c, and 2 more"
    (ready,) = documents(render(xr, comp, "--functions", functions))[0]["status"]["conditions"]
    assert (ready["status"], ready["reason"]) == ("True", "Available")


def test_dropped_resource_is_not_rendered(serve, files):
    def first(req, _n):
        rsp = response.to(req)
        add(rsp, "keep", config_map())
        add(rsp, "drop", config_map())
        return rsp

    def second(req, _n):
        rsp = response.to(req)
        del rsp.desired.resources["drop"]
        return rsp

    functions = serve(first=Scripted(first), second=Scripted(second))
    xr = files("xr.yaml", widget())
    comp = files("comp.yaml", composition("first", "second"))
    docs = documents(render(xr, comp, "--functions", functions))
    names = [
        d["metadata"]["annotations"]["crossplane.io/composition-resource-name"] for d in docs[1:]
    ]
    assert names == ["keep"]


def test_function_that_omits_desired_wipes_earlier_steps(serve, files):
    def first(req, _n):
        rsp = response.to(req)
        add(rsp, "a", config_map())
        return rsp

    functions = serve(
        first=Scripted(first), fresh=Scripted(lambda req, n: fnv1.RunFunctionResponse())
    )
    xr = files("xr.yaml", widget())
    comp = files("comp.yaml", composition("first", "fresh"))
    assert len(documents(render(xr, comp, "--functions", functions))) == 1


def test_observed_identity_wins_over_the_function(serve, files):
    def compose(req, _n):
        rsp = response.to(req)
        add(rsp, "cm", config_map("foo"))
        return rsp

    observed = config_map()
    observed["metadata"] = {
        "name": "bar-abc12",
        "generateName": "bar-",
        "annotations": {"crossplane.io/composition-resource-name": "cm"},
    }
    function = Scripted(compose)
    functions = serve(compose=function)
    xr = files("xr.yaml", widget())
    comp = files("comp.yaml", composition("compose"))
    obs = files("observed.yaml", observed)
    docs = documents(render(xr, comp, "-o", obs, "--functions", functions))
    metadata = docs[1]["metadata"]
    assert (metadata["name"], metadata["generateName"]) == ("bar-abc12", "bar-")
    (request,) = function.requests
    assert request.observed.resources["cm"].resource["metadata"]["name"] == "bar-abc12"


def test_namespaced_xr_forces_its_namespace_on_composed_resources(serve, files):
    def compose(req, _n):
        rsp = response.to(req)
        body = config_map("cm")
        body["metadata"]["namespace"] = "elsewhere"
        add(rsp, "cm", body)
        return rsp

    functions = serve(compose=Scripted(compose))
    xr = files("xr.yaml", widget("w", namespace="team-a"))
    comp = files("comp.yaml", composition("compose"))
    xr_doc, cm = documents(render(xr, comp, "--functions", functions))
    assert xr_doc["metadata"] == {"name": "w", "namespace": "team-a"}
    assert cm["metadata"]["namespace"] == "team-a"
    assert cm["metadata"]["name"] == "cm"
    assert "generateName" not in cm["metadata"]


def test_resource_controlled_by_another_owner_is_an_error(serve, files):
    def compose(req, _n):
        rsp = response.to(req)
        body = config_map("cm")
        body["metadata"]["ownerReferences"] = [
            {"apiVersion": "v1", "kind": "Other", "name": "o", "uid": "123", "controller": True}
        ]
        add(rsp, "cm", body)
        return rsp

    functions = serve(compose=Scripted(compose))
    xr = files("xr.yaml", widget())
    comp = files("comp.yaml", composition("compose"))
    result = render(xr, comp, "--functions", functions)
    assert result.exit_code == 1
    assert result.stdout == ""
    assert "cm is already controlled by Other o (UID 123)" in result.stderr


# --------------------------------------------------------------------------------------------
# Conditions, results, context


def test_conditions_results_and_context_flow_between_steps(serve, files):
    def first(req, _n):
        rsp = response.to(req)
        rsp.context.update({"from-first": "hello"})
        rsp.conditions.append(
            fnv1.Condition(type="Synced", status=fnv1.STATUS_CONDITION_FALSE, reason="Nope")
        )
        rsp.conditions.append(
            fnv1.Condition(type="Checked", status=fnv1.STATUS_CONDITION_FALSE, reason="Early")
        )
        response.normal(rsp, "first says hi")
        return rsp

    def second(req, _n):
        rsp = response.to(req)
        seen = dict(req.context)
        rsp.desired.composite.resource.update({"status": {"seen": seen}})
        rsp.conditions.append(
            fnv1.Condition(
                type="Checked", status=fnv1.STATUS_CONDITION_TRUE, reason="Late", message="ok"
            )
        )
        response.warning(rsp, "second warns")
        return rsp

    functions = serve(first=Scripted(first), second=Scripted(second))
    xr = files("xr.yaml", widget())
    comp = files("comp.yaml", composition("first", "second"))
    env = files("env.yaml", {"region": "eu"})
    result = render(
        xr,
        comp,
        "--functions",
        functions,
        "-r",
        "-c",
        "--context-files",
        f"apiextensions.crossplane.io/environment={env}",
        "--context-values",
        "count=3",
        "--context-values",
        "name=foo",
    )
    xr_doc, *results, context = documents(result)
    seen = xr_doc["status"]["seen"]
    assert seen["from-first"] == "hello"
    assert seen["count"] == 3  # parsed as a number, like crossplane render
    assert seen["name"] == "foo"
    assert seen["apiextensions.crossplane.io/environment"] == {"region": "eu"}
    types = [(c["type"], c["status"], c["reason"]) for c in xr_doc["status"]["conditions"]]
    # Synced is Crossplane's own type: dropped. The later Checked replaces the earlier one.
    assert types == [("Ready", "True", "Available"), ("Checked", "True", "Late")]
    assert results == [
        {
            "apiVersion": "render.crossplane.io/v1beta1",
            "kind": "Result",
            "step": "first",
            "severity": "SEVERITY_NORMAL",
            "message": "first says hi",
        },
        {
            "apiVersion": "render.crossplane.io/v1beta1",
            "kind": "Result",
            "step": "second",
            "severity": "SEVERITY_WARNING",
            "message": "second warns",
        },
    ]
    assert context["kind"] == "Context"
    assert context["fields"]["from-first"] == "hello"
    assert "--context-values" not in result.stdout


def test_results_and_context_are_only_printed_when_asked(serve, files):
    def first(req, _n):
        rsp = response.to(req)
        response.normal(rsp, "note")
        return rsp

    functions = serve(first=Scripted(first))
    xr = files("xr.yaml", widget())
    comp = files("comp.yaml", composition("first"))
    assert [d["kind"] for d in documents(render(xr, comp, "--functions", functions))] == ["Widget"]


def test_fatal_result_stops_the_pipeline_and_prints_nothing(serve, files):
    def fail(req, _n):
        rsp = response.to(req)
        response.fatal(rsp, "spec.size: must be positive")
        return rsp

    later = Scripted(passthrough)
    functions = serve(fail=Scripted(fail), later=later)
    xr = files("xr.yaml", widget())
    comp = files("comp.yaml", composition("fail", "later"))
    result = render(xr, comp, "--functions", functions)
    assert result.exit_code == 1
    assert result.stdout == ""
    assert result.stderr == (
        'modelplane: error: cannot render composite resource: pipeline step "fail" '
        "returned a fatal result: spec.size: must be positive\n"
    )
    assert later.requests == []


# --------------------------------------------------------------------------------------------
# Requirement rounds


def _require(rsp, key: str, name: str, namespace: str | None = None) -> None:
    selector = rsp.requirements.resources[key]
    selector.api_version, selector.kind, selector.match_name = "v1", "ConfigMap", name
    if namespace:
        selector.namespace = namespace


def _settings(namespace: str, value: str) -> dict[str, Any]:
    body = config_map(value=value)
    body["metadata"] = {"name": "settings", "namespace": namespace}
    return body


def test_requirements_are_resolved_in_two_calls_honouring_the_namespace(serve, files):
    def compose(req, n):
        rsp = response.to(req)
        _require(rsp, "settings", "settings", namespace="team-b")
        rsp.context.update({"round": n})
        items = (
            [dict(i.resource["data"]) for i in req.required_resources["settings"].items]
            if "settings" in req.required_resources
            else None
        )
        rsp.desired.composite.resource.update(
            {
                "status": {
                    "settings": items,
                    "contextRound": dict(req.context).get("round"),
                }
            }
        )
        return rsp

    function = Scripted(compose)
    functions = serve(compose=function)
    xr = files("xr.yaml", widget())
    comp = files("comp.yaml", composition("compose"))
    pool = files("required.yaml", _settings("team-a", "a"), _settings("team-b", "b"))
    (xr_doc,) = documents(render(xr, comp, "-e", pool, "--functions", functions))
    assert len(function.requests) == 2  # asked, then asked for the same thing again: stable
    # Only the selector's namespace matches (D7: like the reconciler, unlike crossplane render).
    assert xr_doc["status"]["settings"] == [{"value": "b"}]
    # Context carries between rounds; the first round's desired state was discarded.
    assert xr_doc["status"]["contextRound"] == 0


def test_requirement_with_nothing_to_match_resolves_empty(serve, files):
    def compose(req, _n):
        rsp = response.to(req)
        _require(rsp, "missing", "nope")
        if "missing" in req.required_resources:
            rsp.desired.composite.resource.update(
                {"status": {"found": len(req.required_resources["missing"].items)}}
            )
        return rsp

    functions = serve(compose=Scripted(compose))
    xr = files("xr.yaml", widget())
    comp = files("comp.yaml", composition("compose"))
    (xr_doc,) = documents(render(xr, comp, "--functions", functions))
    assert xr_doc["status"]["found"] == 0  # key present, nothing found


def test_bootstrap_requirements_arrive_on_the_first_call(serve, files):
    function = Scripted(passthrough)
    functions = serve(compose=function)
    step = {
        "step": "compose",
        "functionRef": {"name": "compose"},
        "input": {"apiVersion": "example.org/v1", "kind": "Input", "size": 3},
        "requirements": {
            "requiredResources": [
                {
                    "requirementName": "cfg",
                    "apiVersion": "v1",
                    "kind": "ConfigMap",
                    "namespace": "team-a",
                    "name": "settings",
                }
            ]
        },
    }
    xr = files("xr.yaml", widget())
    comp = files("comp.yaml", composition(step))
    pool = files("required.yaml", _settings("team-a", "a"))
    documents(render(xr, comp, "-e", pool, "--functions", functions))
    (request,) = function.requests  # never asked for anything: one call
    (item,) = request.required_resources["cfg"].items
    assert item.resource["data"]["value"] == "a"
    assert request.input["size"] == 3
    assert list(request.meta.capabilities) == [1, 2, 3, 4, 5]


def test_requirements_that_never_settle_fail_after_six_calls(serve, files):
    def restless(req, n):
        rsp = response.to(req)
        _require(rsp, "thing", f"name-{n}")
        return rsp

    function = Scripted(restless)
    functions = serve(restless=function)
    xr = files("xr.yaml", widget())
    comp = files("comp.yaml", composition("restless"))
    result = render(xr, comp, "--functions", functions)
    assert result.exit_code == 1
    assert result.stdout == ""
    assert len(function.requests) == 6
    assert result.stderr == (
        "modelplane: error: cannot render composite resource: cannot run pipeline step "
        '"restless": requirements didn\'t stabilize after the maximum number of iterations '
        "(5)\n"
    )


# --------------------------------------------------------------------------------------------
# Functions that misbehave


def test_function_that_raises_is_reported_without_a_traceback(serve, files):
    def boom(req, _n):
        raise RuntimeError("kaboom")

    functions = serve(boom=Scripted(boom))
    xr = files("xr.yaml", widget())
    comp = files("comp.yaml", composition("boom"))
    result = render(xr, comp, "--functions", functions)
    assert result.exit_code == 1
    assert result.stdout == ""
    assert result.stderr.startswith(
        "modelplane: error: cannot render composite resource: cannot run pipeline step "
        '"boom": rpc error: code = Unknown desc = '
    )
    assert "kaboom" in result.stderr
    assert "Traceback" not in result.stderr


def test_function_that_hangs_times_out(serve, files):
    functions = serve(slow=Scripted(passthrough, delay=10))
    xr = files("xr.yaml", widget())
    comp = files("comp.yaml", composition("slow"))
    started = time.monotonic()
    result = render(xr, comp, "--functions", functions, "--timeout", "0.5")
    assert time.monotonic() - started < 5
    assert result.exit_code == 1
    assert result.stdout == ""
    assert 'cannot run pipeline step "slow": rpc error: code = DeadlineExceeded' in (result.stderr)


def test_function_nobody_started_times_out(files, tmp_path):
    functions = write(
        tmp_path / "fns.yaml", development_function("gone", f"127.0.0.1:{_free_port()}")
    )
    xr = files("xr.yaml", widget())
    comp = files("comp.yaml", composition("gone"))
    result = render(xr, comp, "--functions", functions, "--timeout", "1s")
    assert result.exit_code == 1
    assert "DeadlineExceeded" in result.stderr


def test_unknown_function_names_the_functions_file(serve, files):
    functions = serve(other=Scripted(passthrough))
    xr = files("xr.yaml", widget())
    comp = files("comp.yaml", composition("missing"))
    result = render(xr, comp, "--functions", functions)
    assert result.exit_code == 1
    assert result.stderr == (
        "modelplane: error: cannot render composite resource: cannot run pipeline step "
        "\"missing\": unknown Function 'missing' - does it exist in your Functions file?\n"
    )


class _BetaOnly(grpcv1beta1.FunctionRunnerServiceServicer):
    """A function built with an old SDK: it only serves the v1beta1 service."""

    def RunFunction(self, req, _context):
        rsp = fnv1beta1.RunFunctionResponse(desired=req.desired)
        rsp.desired.resources["legacy"].resource.update(config_map())
        rsp.desired.resources["legacy"].ready = fnv1beta1.READY_TRUE
        return rsp


def test_v1beta1_only_function_is_retried_on_the_old_service(files, tmp_path):
    server = grpc.server(concurrent.futures.ThreadPoolExecutor(max_workers=2))
    grpcv1beta1.add_FunctionRunnerServiceServicer_to_server(_BetaOnly(), server)
    port = server.add_insecure_port("127.0.0.1:0")
    server.start()
    try:
        functions = write(tmp_path / "fns.yaml", development_function("old", f"127.0.0.1:{port}"))
        xr = files("xr.yaml", widget())
        comp = files("comp.yaml", composition("old"))
        docs = documents(render(xr, comp, "--functions", functions))
    finally:
        server.stop(None)
    assert docs[1]["metadata"]["annotations"]["crossplane.io/composition-resource-name"] == (
        "legacy"
    )


# --------------------------------------------------------------------------------------------
# Bad input: a clear message, exit 1, nothing on stdout, never a traceback


def _fails(result, message: str) -> None:
    assert result.exit_code == 1, result.stdout
    assert result.stdout == ""
    assert result.stderr.startswith("modelplane: error: cannot render composite resource: ")
    assert message in result.stderr, result.stderr
    assert "Traceback" not in result.stderr


def test_malformed_xr_file(tmp_path):
    xr = tmp_path / "xr.yaml"
    xr.write_text("apiVersion: modelplane.ai/v1alpha1\nkind: InferenceClass\nspec: [unclosed\n")
    _fails(render(xr), f"cannot parse {xr}: ")


def test_xr_that_is_not_an_object(tmp_path):
    xr = tmp_path / "xr.yaml"
    xr.write_text("- just\n- a list\n")
    _fails(render(xr), "is not a Kubernetes object")


def test_missing_xr_file(tmp_path):
    _fails(render(tmp_path / "nope.yaml"), "nope.yaml does not exist")


def test_unknown_kind_without_a_composition(files):
    xr = files(
        "xr.yaml", {"apiVersion": "example.org/v1", "kind": "Gizmo", "metadata": {"name": "g"}}
    )
    _fails(render(xr), "unknown kind Gizmo (example.org/v1): no CompositeResourceDefinition")


def test_missing_composition_file(files, tmp_path):
    _fails(render(EXAMPLE, tmp_path / "composition.yaml"), "composition.yaml does not exist")


def test_kind_with_an_xrd_but_no_composition(tmp_path):
    """A repository whose apis/ has the XRD but no Composition (MODELPLANE_ROOT points there)."""
    (tmp_path / "apis" / "inferenceclasses").mkdir(parents=True)
    (tmp_path / "schemas").mkdir()
    shutil.copy(
        ROOT / "apis" / "inferenceclasses" / "definition.yaml",
        tmp_path / "apis" / "inferenceclasses" / "definition.yaml",
    )
    done = subprocess.run(
        [UV, "run", "--frozen", "--project", str(ROOT), "modelplane", "render", str(EXAMPLE)],
        cwd=ROOT,
        env={**os.environ, "MODELPLANE_ROOT": str(tmp_path)},
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 1
    assert done.stdout == ""
    assert done.stderr == (
        "modelplane: error: cannot render composite resource: no Composition in apis/ has "
        "compositeTypeRef modelplane.ai/v1alpha1 InferenceClass; give a Composition as the "
        "second argument\n"
    )


def test_mismatched_composite_type_ref(files):
    comp = files("comp.yaml", composition("x"))
    _fails(
        render(EXAMPLE, comp),
        "composition's compositeTypeRef.kind (Widget) does not match XR's kind (InferenceClass)",
    )


def test_not_a_composition(files):
    comp = files("comp.yaml", config_map("oops"))
    _fails(render(EXAMPLE, comp), "not a composition: ConfigMap/oops")


def test_non_pipeline_mode(files):
    xr = files("xr.yaml", widget())
    comp = files("comp.yaml", composition("x", mode="Resources"))
    _fails(
        render(xr, comp),
        "render only supports Composition Function pipelines: Composition 'widgets' must "
        "use spec.mode: Pipeline",
    )


def test_xr_violating_a_cel_rule_is_refused(files):
    bad = yaml.safe_load(EXAMPLE.read_text())
    del bad["spec"]["devices"][0]["deviceClassName"]
    xr = files("xr.yaml", bad)
    _fails(render(xr), "deviceClassName is required when claim is DRA")
    assert "spec.devices[0]" in render(xr).stderr


def test_xr_violating_its_schema_is_refused(files):
    bad = yaml.safe_load(EXAMPLE.read_text())
    bad["spec"]["devices"][0]["count"] = 0
    _fails(render(files("xr.yaml", bad)), "spec.devices[0].count")


def test_bad_context_value_flag(files):
    _fails(render(EXAMPLE, "--context-values", "novalue"), "'novalue' is not KEY=VALUE")


def test_bad_timeout(files):
    _fails(render(EXAMPLE, "--timeout", "soon"), "invalid --timeout 'soon'")


def test_observed_resource_without_its_annotation_is_refused(files):
    obs = files("observed.yaml", config_map("orphan"))
    _fails(
        render(EXAMPLE, "-o", obs),
        "observed resource ConfigMap/orphan has no crossplane.io/composition-resource-name",
    )


# --------------------------------------------------------------------------------------------
# crossplane render's arguments and flags (render.md §2.1)


def test_functions_positional_argument_and_the_old_flag_are_the_same(serve, files):
    functions = serve(compose=Scripted(passthrough))
    xr = files("xr.yaml", widget())
    comp = files("comp.yaml", composition("compose"))
    assert documents(render(xr, comp, functions)) == documents(
        render(xr, comp, "--functions", functions)
    )
    _fails(render(xr, comp, functions, "--functions", functions), "give the Functions file once")


def _schema_document() -> dict[str, Any]:
    return {
        "openapi": "3.0.0",
        "components": {
            "schemas": {
                "io.example.v1.Gadget": {
                    "type": "object",
                    "properties": {"spec": {"$ref": "#/components/schemas/io.example.v1.Spec"}},
                    "x-kubernetes-group-version-kind": [
                        {"group": "example.io", "version": "v1", "kind": "Gadget"}
                    ],
                },
                "io.example.v1.Spec": {
                    "type": "object",
                    "properties": {"size": {"type": "integer"}},
                },
            }
        },
    }


def test_required_schemas_are_answered_from_openapi_documents(serve, files, tmp_path):
    def compose(req, _n):
        rsp = response.to(req)
        rsp.requirements.schemas["asked"].api_version = "Example.IO/v1"  # group: any case
        rsp.requirements.schemas["asked"].kind = "Gadget"
        rsp.requirements.schemas["unknown"].api_version = "example.io/v1"
        rsp.requirements.schemas["unknown"].kind = "Gizmo"
        return rsp

    function = Scripted(compose)
    functions = serve(compose=function)
    step = {
        "step": "compose",
        "functionRef": {"name": "compose"},
        "requirements": {
            "requiredSchemas": [
                {"requirementName": "boot", "apiVersion": "example.io/v1", "kind": "Gadget"}
            ]
        },
    }
    (tmp_path / "schemas" / "apis").mkdir(parents=True)
    (tmp_path / "schemas" / "apis" / "example.io_v1.json").write_text(
        json.dumps(_schema_document())
    )
    xr = files("xr.yaml", widget())
    comp = files("comp.yaml", composition(step))
    documents(render(xr, comp, functions, "-s", tmp_path / "schemas"))
    first, last = function.requests[0], function.requests[-1]
    inlined = {"type": "object", "properties": {"size": {"type": "integer"}}}
    assert to_plain(first.required_schemas["boot"].openapi_v3)["properties"]["spec"] == inlined
    assert to_plain(last.required_schemas["asked"].openapi_v3)["properties"]["spec"] == inlined
    assert not last.required_schemas["unknown"].HasField("openapi_v3")  # resolved, not found

    (tmp_path / "empty").mkdir()
    _fails(
        render(xr, comp, functions, "--required-schemas", tmp_path / "empty"),
        "no JSON files found in",
    )


def test_extra_resources_serve_asked_requirements_but_not_bootstrap_ones(serve, files):
    def compose(req, _n):
        rsp = response.to(req)
        _require(rsp, "asked", "settings", namespace="team-a")
        return rsp

    function = Scripted(compose)
    functions = serve(compose=function)
    step = {
        "step": "compose",
        "functionRef": {"name": "compose"},
        "requirements": {
            "requiredResources": [
                {"requirementName": "boot", "apiVersion": "v1", "kind": "ConfigMap",
                 "namespace": "team-a", "name": "settings"}
            ]
        },
    }  # fmt: skip
    xr = files("xr.yaml", widget())
    comp = files("comp.yaml", composition(step))
    extra = files("extra.yaml", _settings("team-a", "a"))
    documents(render(xr, comp, functions, "--extra-resources", extra))
    last = function.requests[-1]
    assert list(last.required_resources["boot"].items) == []
    (item,) = last.required_resources["asked"].items
    assert item.resource["data"]["value"] == "a"


def test_function_annotations_override_every_function(serve, files, tmp_path):
    functions = serve(compose=Scripted(passthrough))
    (function,) = yaml.safe_load_all(functions.read_text())
    target = function["metadata"]["annotations"]["render.crossplane.io/runtime-development-target"]
    # The file points nowhere; -a redirects every Function to the running one.
    function["metadata"]["annotations"]["render.crossplane.io/runtime-development-target"] = (
        "localhost:1"
    )
    moved = write(tmp_path / "moved.yaml", function)
    xr = files("xr.yaml", widget())
    comp = files("comp.yaml", composition("compose"))
    annotation = f"render.crossplane.io/runtime-development-target={target}"
    documents(render(xr, comp, moved, "-a", annotation, "--timeout", "20"))
    _fails(render(xr, comp, moved, "-a", "no-value"), "--function-annotations 'no-value' is not")


def test_xrd_flag_applies_the_given_xrds_defaults(serve, files):
    def compose(req, _n):
        rsp = response.to(req)
        rsp.desired.composite.resource.update(
            {"status": {"seen": dict(req.observed.composite.resource["spec"])}}
        )
        return rsp

    functions = serve(compose=Scripted(compose))
    definition = {
        "apiVersion": "apiextensions.crossplane.io/v2",
        "kind": "CompositeResourceDefinition",
        "metadata": {"name": "widgets.test.modelplane.ai"},
        "spec": {
            "group": "test.modelplane.ai",
            "names": {"kind": XR_KIND, "plural": "widgets"},
            "versions": [
                {
                    "name": "v1",
                    "served": True,
                    "referenceable": True,
                    "schema": {
                        "openAPIV3Schema": {
                            "type": "object",
                            "properties": {
                                "spec": {
                                    "type": "object",
                                    "properties": {"size": {"type": "integer", "default": 3}},
                                }
                            },
                        }
                    },
                }
            ],
        },
    }
    xrd_file = files("xrd.yaml", definition)
    xr = files("xr.yaml", widget())
    comp = files("comp.yaml", composition("compose"))
    (xr_doc,) = documents(render(xr, comp, functions, "--xrd", xrd_file))
    assert xr_doc["status"]["seen"] == {"size": 3}
    (plain,) = documents(render(xr, comp, functions))
    assert plain["status"]["seen"] == {}
    definition["spec"]["versions"][0]["name"] = "v2"
    files("xrd.yaml", definition)
    _fails(
        render(xr, comp, functions, "--xrd", xrd_file),
        "the specified API version 'v1' does not exist in the XRD",
    )
