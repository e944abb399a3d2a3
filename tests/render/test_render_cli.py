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
from modelplane.pipeline import child_name
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

# Byte for byte what crossplane render v2.5 (core v2.3) prints for this input: the XR as the
# one reconcile left it, with the references it recorded and the reconciler's conditions.
EXPECTED_CLASS = """---
apiVersion: modelplane.ai/v1alpha1
kind: InferenceClass
metadata:
  name: gke-l4-1x-g2
spec:
  crossplane:
    resourceRefs: []
status:
  conditions:
  - lastTransitionTime: "2024-01-01T00:00:00Z"
    reason: WatchCircuitClosed
    status: "True"
    type: Responsive
  - lastTransitionTime: "2024-01-01T00:00:00Z"
    reason: Available
    status: "True"
    type: Accepted
  - lastTransitionTime: "2024-01-01T00:00:00Z"
    reason: ReconcileSuccess
    status: "True"
    type: Synced
  - lastTransitionTime: "2024-01-01T00:00:00Z"
    reason: Available
    status: "True"
    type: Ready
"""


def test_inference_class_example_renders_ready_and_accepted():
    result = render(EXAMPLE)
    assert result.exit_code == 0, result.stderr
    assert result.stdout == EXPECTED_CLASS
    assert result.stderr == ""


def test_full_xr_shows_the_schema_defaults_and_context_document(tmp_path):
    docs = documents(render(EXAMPLE, "-x", "-c", "-r", "--context-values", "tier=1"))
    xr, selected, context = docs
    gke = xr["spec"]["provisioning"]["gke"]
    assert gke["diskSizeGb"] == 100  # XRD default applied before the function ran
    assert xr["spec"]["devices"][0]["claim"] == "DRA"
    assert xr["spec"]["devices"][0]["count"] == 1
    # -x merges the reconciled XR into the input: its spec keeps the references recorded.
    assert xr["spec"]["crossplane"] == {"resourceRefs": []}
    assert xr["metadata"] == yaml.safe_load(EXAMPLE.read_text())["metadata"]
    assert selected == {
        "apiVersion": "render.crossplane.io/v1beta1",
        "kind": "Result",
        "severity": "Normal",
        "reason": "SelectComposition",
        "message": "Successfully selected composition: inferenceclasses.modelplane.ai",
    }
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
    # The XR's UID is render's fake one: uuid5(nil, "test.modelplane.ai/v1, Kind=Widget\0\0w1").
    # Each name is generateName + sha256(UID + resource name)[:12], the references are sorted
    # by apiVersion, kind and name, and the conditions are the reconciler's.
    assert (
        result.stdout
        == """---
apiVersion: test.modelplane.ai/v1
kind: Widget
metadata:
  name: w1
spec:
  crossplane:
    resourceRefs:
    - apiVersion: v1
      kind: ConfigMap
      name: w1-b076e803887b
    - apiVersion: v1
      kind: ConfigMap
      name: w1-d46e4792c603
status:
  conditions:
  - lastTransitionTime: "2024-01-01T00:00:00Z"
    reason: WatchCircuitClosed
    status: "True"
    type: Responsive
  - lastTransitionTime: "2024-01-01T00:00:00Z"
    reason: ReconcileSuccess
    status: "True"
    type: Synced
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
  name: w1-d46e4792c603
  ownerReferences:
  - apiVersion: test.modelplane.ai/v1
    blockOwnerDeletion: true
    controller: true
    kind: Widget
    name: w1
    uid: bc670706-d258-59c8-8e92-796d31cb59fc
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
  name: w1-b076e803887b
  ownerReferences:
  - apiVersion: test.modelplane.ai/v1
    blockOwnerDeletion: true
    controller: true
    kind: Widget
    name: w1
    uid: bc670706-d258-59c8-8e92-796d31cb59fc
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
    ready = _condition(documents(render(xr, comp, "--functions", functions))[0], "Ready")
    assert ready["message"] == "Unready resources: a, b, c, and 2 more"
    ready = _condition(documents(render(xr, comp, "--functions", functions))[0], "Ready")
    assert (ready["status"], ready["reason"]) == ("True", "Available")
    assert "message" not in ready


def _condition(doc: dict[str, Any], type_: str) -> dict[str, Any]:
    (found,) = [c for c in doc["status"]["conditions"] if c["type"] == type_]
    return found


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
    xr_doc, cm, *results = documents(render(xr, comp, "--functions", functions, "-r"))
    assert xr_doc["metadata"] == {"name": "w", "namespace": "team-a"}
    assert cm["metadata"]["namespace"] == "team-a"
    assert cm["metadata"]["name"] == "cm"
    assert "generateName" not in cm["metadata"]
    # A namespaced XR's references carry no namespace; the override is a warning event.
    assert xr_doc["spec"]["crossplane"]["resourceRefs"] == [
        {"apiVersion": "v1", "kind": "ConfigMap", "name": "cm"}
    ]
    assert results[-1] == {
        "apiVersion": "render.crossplane.io/v1beta1",
        "kind": "Result",
        "severity": "Warning",
        "reason": "NamespaceOverridden",
        "message": 'cannot create composed resource "cm" in namespace "elsewhere", using XR '
        'namespace "team-a" instead',
    }


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
    # Synced from a function is Crossplane's own type: dropped. The later Checked replaces the
    # earlier one. The reconciler sets Responsive first, and Synced and Ready last.
    assert types == [
        ("Responsive", "True", "WatchCircuitClosed"),
        ("Checked", "True", "Late"),
        ("Synced", "True", "ReconcileSuccess"),
        ("Ready", "True", "Available"),
    ]
    # -r prints the reconciler's events, function results among them.
    result_api = {"apiVersion": "render.crossplane.io/v1beta1", "kind": "Result"}
    assert results == [
        {
            **result_api,
            "severity": "Normal",
            "reason": "SelectComposition",
            "message": "Successfully selected composition: widgets",
        },
        {
            **result_api,
            "severity": "Normal",
            "reason": "ComposeResources",
            "message": 'Pipeline step "first": first says hi',
        },
        {
            **result_api,
            "severity": "Warning",
            "reason": "ComposeResources",
            "message": 'Pipeline step "second": second warns',
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
# The one reconcile crossplane render v2.3+ runs (its reconciler's behaviour, modelled)

RESULT_API = {"apiVersion": "render.crossplane.io/v1beta1", "kind": "Result"}
# uuid5(nil, "test.modelplane.ai/v1, Kind=Widget\0\0w1"): render's UID for widget("w1").
W1_UID = "bc670706-d258-59c8-8e92-796d31cb59fc"


def test_uid_names_and_references_are_what_crossplane_render_prints():
    """Values the real crossplane render v2.5 (core v2.3.3) printed for this input."""
    cache = ROOT / "examples" / "cache"
    xr, *composed = documents(render(cache / "cache.yaml", "-e", cache / "clusters.yaml"))
    by_name = {d["metadata"]["annotations"]["crossplane.io/composition-resource-name"]: d
               for d in composed}  # fmt: skip
    hydrate = by_name["hydrate-eks-us-east"]["metadata"]
    assert hydrate["name"] == "llama-70b-6d035dbdb10f"
    assert hydrate["ownerReferences"][0]["uid"] == "d86c9155-7085-5a6c-9c22-543a9aa96165"
    refs = xr["spec"]["crossplane"]["resourceRefs"]
    assert refs == sorted(refs, key=lambda r: r["apiVersion"] + r["kind"] + r["name"])
    assert {r["name"] for r in refs} == {d["metadata"]["name"] for d in composed}
    assert "uid" not in xr["metadata"]  # the XR document is the reconciler's status write


def test_functions_see_the_xr_the_reconciler_holds(serve, files):
    function = Scripted(passthrough)
    functions = serve(compose=function)
    xr = files("xr.yaml", widget("w1"))
    comp = files("comp.yaml", composition("compose"))
    first, second = config_map("b-cm"), config_map("a-cm")
    for body, name in ((first, "b"), (second, "a")):
        body["metadata"]["annotations"] = {"crossplane.io/composition-resource-name": name}
    obs = files("observed.yaml", first, second)
    documents(render(xr, comp, "-o", obs, "--functions", functions))
    (request,) = function.requests
    held = to_plain(request.observed.composite.resource)
    assert held["metadata"] == {
        "name": "w1",
        "uid": W1_UID,
        "resourceVersion": "999",
        "labels": {"crossplane.io/composite": "w1"},
    }
    assert held["spec"]["crossplane"] == {
        "compositionRef": {"name": "widgets"},
        # One reference per observed object, in file order.
        "resourceRefs": [
            {"apiVersion": "v1", "kind": "ConfigMap", "name": "b-cm"},
            {"apiVersion": "v1", "kind": "ConfigMap", "name": "a-cm"},
        ],
    }
    assert held["status"]["conditions"] == [
        {
            "type": "Responsive",
            "status": "True",
            "lastTransitionTime": "2024-01-01T00:00:00Z",
            "reason": "WatchCircuitClosed",
        }
    ]
    assert sorted(request.observed.resources) == ["a", "b"]


def test_observed_resource_another_xr_controls_is_not_observed(serve, files):
    def compose(req, _n):
        rsp = response.to(req)
        add(rsp, "cm", config_map())
        return rsp

    function = Scripted(compose)
    functions = serve(compose=function)
    taken = config_map("taken")
    taken["metadata"]["annotations"] = {"crossplane.io/composition-resource-name": "cm"}
    taken["metadata"]["ownerReferences"] = [
        {"apiVersion": XR_API, "kind": XR_KIND, "name": "other", "uid": "1", "controller": True}
    ]
    xr = files("xr.yaml", widget("w1"))
    comp = files("comp.yaml", composition("compose"))
    obs = files("observed.yaml", taken)
    _, cm = documents(render(xr, comp, "-o", obs, "--functions", functions))
    assert list(function.requests[0].observed.resources) == []
    # Not observed, so named afresh: generateName plus the hash of the fake UID and "cm".
    assert cm["metadata"]["name"] == child_name("w1-", W1_UID, "cm")


def test_cluster_scoped_xr_references_namespaced_resources_with_their_namespace(serve, files):
    def compose(req, _n):
        rsp = response.to(req)
        for key, namespace in (("one", "team-b"), ("two", "team-a")):
            body = config_map("same")
            body["metadata"]["namespace"] = namespace
            add(rsp, key, body)
        return rsp

    functions = serve(compose=Scripted(compose))
    xr = files("xr.yaml", widget())
    comp = files("comp.yaml", composition("compose"))
    (xr_doc, *_) = documents(render(xr, comp, "--functions", functions))
    assert xr_doc["spec"]["crossplane"]["resourceRefs"] == [
        {"apiVersion": "v1", "kind": "ConfigMap", "name": "same", "namespace": "team-a"},
        {"apiVersion": "v1", "kind": "ConfigMap", "name": "same", "namespace": "team-b"},
    ]


def test_events_come_in_the_reconcilers_order(serve, files):
    def compose(req, _n):
        rsp = response.to(req)
        add(rsp, "zed", config_map(), ready=False)
        add(rsp, "abe", config_map(), ready=False)
        add(rsp, "fine", config_map())
        rsp.results.append(fnv1.Result(message="odd", reason="Odd"))  # severity unspecified
        response.normal(rsp, "done")
        return rsp

    functions = serve(compose=Scripted(compose))
    xr = files("xr.yaml", widget())
    comp = files("comp.yaml", composition("compose"))
    _, _, _, _, *results = documents(render(xr, comp, "--functions", functions, "-r"))
    assert results == [
        {**RESULT_API, "severity": "Normal", "reason": "SelectComposition",
         "message": "Successfully selected composition: widgets"},
        {**RESULT_API, "severity": "Warning", "reason": "Odd",
         "message": 'Pipeline step "compose" returned a result of unknown severity (assuming '
                    "warning): odd"},
        {**RESULT_API, "severity": "Normal", "reason": "ComposeResources",
         "message": 'Pipeline step "compose": done'},
        # The reconciler walks a Go map here; render walks the names in order.
        {**RESULT_API, "severity": "Normal", "reason": "ComposeResources",
         "message": 'Composed resource "abe" is not yet ready'},
        {**RESULT_API, "severity": "Normal", "reason": "ComposeResources",
         "message": 'Composed resource "zed" is not yet ready'},
    ]  # fmt: skip


def test_the_xrs_own_composition_ref_is_selected_without_an_event(serve, files):
    functions = serve(compose=Scripted(passthrough))
    chosen = widget(crossplane={"compositionRef": {"name": "widgets"}})
    xr = files("xr.yaml", chosen)
    comp = files("comp.yaml", composition("compose"))
    assert documents(render(xr, comp, "--functions", functions, "-r"))[1:] == []


def test_paused_xr_is_only_marked_paused(serve, files):
    function = Scripted(passthrough)
    functions = serve(compose=function)
    paused = widget("w1", size=2)
    paused["metadata"]["annotations"] = {"crossplane.io/paused": "true"}
    xr = files("xr.yaml", paused)
    comp = files("comp.yaml", composition("compose"))
    xr_doc, event = documents(render(xr, comp, "--functions", functions, "-r", "-c"))
    assert function.requests == []
    # The XR as render stored it, status written by the reconciler.
    assert xr_doc["metadata"]["uid"] == W1_UID
    assert xr_doc["metadata"]["resourceVersion"] == "999"
    assert xr_doc["spec"] == {"size": 2}
    assert [(c["type"], c["status"], c["reason"], c.get("message"))
            for c in xr_doc["status"]["conditions"]] == [
        ("Responsive", "True", "WatchCircuitClosed", None),
        ("Synced", "False", "ReconcilePaused",
         "Reconciliation (including deletion) is paused via the pause annotation"),
    ]  # fmt: skip
    assert event == {**RESULT_API, "severity": "Normal", "reason": "ReconciliationPaused",
                     "message": "Reconciliation is paused via the pause annotation"}  # fmt: skip


def test_deleted_xr_is_not_composed(serve, files):
    function = Scripted(passthrough)
    functions = serve(compose=function)
    deleted = widget("w1")
    deleted["metadata"]["deletionTimestamp"] = "2024-05-01T00:00:00Z"
    deleted["metadata"]["generation"] = 4
    xr = files("xr.yaml", deleted)
    comp = files("comp.yaml", composition("compose"))
    (xr_doc,) = documents(render(xr, comp, "--functions", functions))
    assert function.requests == []
    assert [(c["type"], c["status"], c["reason"], c.get("observedGeneration"))
            for c in xr_doc["status"]["conditions"]] == [
        ("Responsive", "True", "WatchCircuitClosed", 4),
        ("Ready", "False", "Deleting", 4),
        ("Synced", "True", "ReconcileSuccess", 4),
    ]  # fmt: skip


def test_full_xr_merges_maps_and_replaces_lists(serve, files):
    def compose(req, _n):
        rsp = response.to(req)
        rsp.desired.composite.resource.update({"status": {"phase": "Up", "tags": ["new"]}})
        return rsp

    functions = serve(compose=Scripted(compose))
    full = widget("w1", size=2, crossplane={"resourceRefs": [{"name": "old"}]})
    full["metadata"]["labels"] = {"team": "a"}
    full["status"] = {"tags": ["old", "older"], "kept": True,
                      "conditions": [{"type": "Custom", "status": "True", "reason": "Was",
                                      "lastTransitionTime": "2020-01-01T00:00:00Z"}]}  # fmt: skip
    xr = files("xr.yaml", full)
    comp = files("comp.yaml", composition("compose"))
    (xr_doc,) = documents(render(xr, comp, "--functions", functions, "-x"))
    assert xr_doc["metadata"] == {"name": "w1", "labels": {"team": "a"}}
    assert xr_doc["spec"] == {"size": 2, "crossplane": {"resourceRefs": []}}
    assert xr_doc["status"]["tags"] == ["new"]
    assert xr_doc["status"]["kept"] is True
    assert xr_doc["status"]["phase"] == "Up"
    # The XR's own conditions survive the reconcile; every time is pinned.
    assert [(c["type"], c["lastTransitionTime"]) for c in xr_doc["status"]["conditions"]] == [
        ("Custom", "2024-01-01T00:00:00Z"),
        ("Responsive", "2024-01-01T00:00:00Z"),
        ("Synced", "2024-01-01T00:00:00Z"),
        ("Ready", "2024-01-01T00:00:00Z"),
    ]


def test_composed_conditions_are_pinned_and_a_bare_status_gets_null_conditions(serve, files):
    def compose(req, _n):
        rsp = response.to(req)
        bare = config_map()
        bare["status"] = {"phase": "Pending"}
        add(rsp, "bare", bare)
        timed = config_map()
        timed["status"] = {"conditions": [{"type": "X", "status": "True", "reason": "Y",
                                           "lastTransitionTime": "2030-01-01T00:00:00Z",
                                           "extra": "dropped"}]}  # fmt: skip
        add(rsp, "timed", timed)
        return rsp

    functions = serve(compose=Scripted(compose))
    xr = files("xr.yaml", widget())
    comp = files("comp.yaml", composition("compose"))
    _, bare, timed = documents(render(xr, comp, "--functions", functions))
    assert bare["status"] == {"phase": "Pending", "conditions": None}
    assert timed["status"]["conditions"] == [
        {"type": "X", "status": "True", "reason": "Y", "lastTransitionTime": "2024-01-01T00:00:00Z"}
    ]


def test_no_context_document_when_the_last_step_returns_no_context(serve, files):
    functions = serve(bare=Scripted(lambda req, n: fnv1.RunFunctionResponse(desired=req.desired)))
    xr = files("xr.yaml", widget())
    comp = files("comp.yaml", composition("bare"))
    assert [d["kind"] for d in documents(render(xr, comp, "--functions", functions, "-c"))] == [
        "Widget"
    ]


def test_generated_name_that_is_not_a_dns_subdomain_is_refused(serve, files):
    def compose(req, _n):
        rsp = response.to(req)
        add(rsp, "cm", config_map())
        return rsp

    functions = serve(compose=Scripted(compose))
    xr = files("xr.yaml", widget("Big"))
    comp = files("comp.yaml", composition("compose"))
    result = render(xr, comp, "--functions", functions)
    assert result.exit_code == 1
    assert result.stdout == ""
    assert 'cannot apply composed resource "cm" because it has an invalid name "Big-' in (
        result.stderr
    )


def test_child_name_keeps_63_characters_and_one_dash():
    long = "a" * 70
    assert child_name(long, "uid", "x") == "a" * 50 + "-" + child_name("", "uid", "x")
    assert child_name("p", "uid", "x") == "p-" + child_name("", "uid", "x")
    assert len(child_name("", "uid", "x")) == 12


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
        "modelplane: error: cannot render composite resource: cannot run Composition pipeline step "
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
        "modelplane: error: cannot render composite resource: cannot run Composition pipeline step "
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
    assert 'cannot run Composition pipeline step "slow": rpc error: code = DeadlineExceeded' in (
        result.stderr
    )


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
        "modelplane: error: cannot render composite resource: cannot run Composition pipeline step "
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


def test_extra_resources_are_required_resources_too(serve, files):
    """v2.3+ loads --extra-resources into the same store as -e: bootstrap lookups see them."""

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
    (boot,) = last.required_resources["boot"].items
    (item,) = last.required_resources["asked"].items
    assert boot.resource["data"]["value"] == item.resource["data"]["value"] == "a"


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
    selected = {"crossplane": {"compositionRef": {"name": "widgets"}}}
    assert xr_doc["status"]["seen"] == {"size": 3, **selected}
    (plain,) = documents(render(xr, comp, functions))
    assert plain["status"]["seen"] == selected
    definition["spec"]["versions"][0]["name"] = "v2"
    files("xrd.yaml", definition)
    _fails(
        render(xr, comp, functions, "--xrd", xrd_file),
        "the specified API version 'v1' does not exist in the XRD",
    )


def _padding(mib: float) -> dict[str, Any]:
    """An observed composed resource of about ``mib`` MiB (a ConfigMap of the cache's)."""
    body = config_map("pad", x="x" * int(mib * 1024 * 1024))
    body["metadata"]["namespace"] = "ml-team"  # the cache's: a namespaced XR looks only there
    body["metadata"]["annotations"] = {"crossplane.io/composition-resource-name": "pad"}
    return body


@pytest.mark.parametrize(("mib", "outcome"), [(2.5, "quiet"), (3.3, "warned"), (4.2, "refused")])
def test_render_warns_near_the_4_mib_limit_and_fails_past_it_as_the_real_plane_does(
    files, mib, outcome
):
    """A cache whose request nears the 4 MiB its function receives is rendered with a
    RequestNearLimit result; past the limit render fails as Crossplane's call would."""
    cache = ROOT / "examples" / "cache" / "cache-public.yaml"
    clusters = ROOT / "examples" / "cache" / "clusters.yaml"
    observed = files("observed.yaml", _padding(mib))
    result = render(cache, "-e", clusters, "-o", observed, "-r")
    if outcome == "refused":
        assert result.exit_code == 1
        assert "rpc error: code = ResourceExhausted" in result.stderr
        assert "vs. 4194304" in result.stderr
        return
    near = [
        doc for doc in documents(result)
        if doc.get("kind") == "Result" and doc.get("reason") == "RequestNearLimit"
    ]  # fmt: skip
    assert len(near) == (outcome == "warned")
    if near:
        assert near[0]["severity"] == "Warning"
        assert f"was {mib:.1f} MiB of the 4 MiB it receives" in near[0]["message"]
        assert "this ModelCache stops reconciling" in near[0]["message"]
