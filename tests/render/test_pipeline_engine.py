"""The shared pipeline engine through its Python API (what ``modelplane simulate`` calls)."""

from __future__ import annotations

import asyncio
import base64
from datetime import timedelta
from pathlib import Path

import pytest
import yaml
from click.testing import CliRunner
from crossplane.function import response
from crossplane.function.proto.v1 import run_function_pb2 as fnv1
from crossplane.function.proto.v1 import run_function_pb2_grpc as grpcv1
from modelplane.main import cli
from modelplane.pipeline import FunctionHost, PipelineError, run_pipeline
from modelplane_common.function import CompositionFunction
from modelplane_common.plain import to_plain
from modelplane_common.serving import BackgroundServer

XR = {"apiVersion": "test.modelplane.ai/v1", "kind": "Widget", "metadata": {"name": "w"}}


class Scripted(grpcv1.FunctionRunnerServiceServicer):
    def __init__(self, behaviour) -> None:
        self.behaviour = behaviour
        self.requests: list[fnv1.RunFunctionRequest] = []

    async def RunFunction(self, req, _context):
        self.requests.append(req)
        await asyncio.sleep(0)
        return self.behaviour(req, len(self.requests) - 1)


def pipeline(*names: str, **step_fields) -> dict:
    return {
        "apiVersion": "apiextensions.crossplane.io/v1",
        "kind": "Composition",
        "metadata": {"name": "widgets"},
        "spec": {
            "compositeTypeRef": {"apiVersion": XR["apiVersion"], "kind": XR["kind"]},
            "mode": "Pipeline",
            "pipeline": [
                {"step": n, "functionRef": {"name": n}, **step_fields.get(n, {})} for n in names
            ],
        },
    }


def cm(name: str, namespace: str | None = None, **labels: str) -> dict:
    metadata: dict = {"name": name, "labels": labels}
    if namespace:
        metadata["namespace"] = namespace
    return {"apiVersion": "v1", "kind": "ConfigMap", "metadata": metadata}


def test_fatal_error_keeps_what_earlier_steps_returned():
    def first(req, _n):
        rsp = response.to(req)
        rsp.conditions.append(
            fnv1.Condition(type="Checked", status=fnv1.STATUS_CONDITION_TRUE, reason="Fine")
        )
        response.warning(rsp, "careful")
        return rsp

    def second(req, _n):
        rsp = response.to(req)
        response.fatal(rsp, "broken")
        return rsp

    servicers = {"first": Scripted(first), "second": Scripted(second)}
    with FunctionHost(servicers=servicers) as host, pytest.raises(PipelineError) as raised:
        run_pipeline(host, pipeline("first", "second"), XR, {}, [])
    assert str(raised.value) == 'pipeline step "second" returned a fatal result: broken'
    assert raised.value.conditions == [{"type": "Checked", "status": "True", "reason": "Fine"}]
    assert raised.value.results == [
        {"step": "first", "severity": "SEVERITY_WARNING", "message": "careful"}
    ]


def test_result_carries_desired_state_readiness_and_smallest_ttl():
    def first(req, _n):
        rsp = response.to(req, ttl=timedelta(seconds=30))
        rsp.desired.resources["a"].resource.update({"apiVersion": "v1", "kind": "ConfigMap"})
        rsp.desired.resources["a"].ready = fnv1.READY_TRUE
        return rsp

    def second(req, _n):
        rsp = response.to(req, ttl=timedelta(seconds=0))
        rsp.desired.composite.resource.update({"status": {"replicas": 3}})
        rsp.desired.composite.ready = fnv1.READY_FALSE
        return rsp

    servicers = {"first": Scripted(first), "second": Scripted(second)}
    with FunctionHost(servicers=servicers) as host:
        result = run_pipeline(host, pipeline("first", "second"), XR, {}, [])
    assert result.ttl == 30
    assert result.composite_ready == "False"
    assert result.desired_composite == {"status": {"replicas": 3}}  # ints restored
    assert result.resources["a"].ready == "True"
    assert result.resources["a"].body == {"apiVersion": "v1", "kind": "ConfigMap"}


def _lookup(selector: dict, pool: list[dict], honour_namespaces: bool = True) -> list[str]:
    def ask(req, _n):
        rsp = response.to(req)
        target = rsp.requirements.resources["found"]
        target.api_version, target.kind = "v1", "ConfigMap"
        if "name" in selector:
            target.match_name = selector["name"]
        if "labels" in selector:
            target.match_labels.labels.update(selector["labels"])
        if "namespace" in selector:
            target.namespace = selector["namespace"]
        return rsp

    function = Scripted(ask)
    with FunctionHost(servicers={"ask": function}) as host:
        run_pipeline(host, pipeline("ask"), XR, {}, pool, honour_namespaces=honour_namespaces)
    last = function.requests[-1]
    return [
        "/".join(filter(None, [to_plain(i.resource)["metadata"].get("namespace"),
                               to_plain(i.resource)["metadata"]["name"]]))
        for i in last.required_resources["found"].items
    ]  # fmt: skip


POOL = [cm("x", "b", app="web"), cm("x", "a", app="web"), cm("y", "a", app="db"), cm("z")]


def test_match_name_honours_the_namespace_or_cluster_scope():
    assert _lookup({"name": "x", "namespace": "b"}, POOL) == ["b/x"]
    assert _lookup({"name": "x"}, POOL) == []  # a cluster-scoped Get finds no namespaced object
    assert _lookup({"name": "z"}, POOL) == ["z"]


def test_match_name_ignores_the_namespace_in_render_compatible_mode():
    assert len(_lookup({"name": "x", "namespace": "c"}, POOL, honour_namespaces=False)) == 1


def test_match_labels_lists_sorted_by_namespace_and_name():
    assert _lookup({"labels": {"app": "web"}}, POOL) == ["a/x", "b/x"]
    assert _lookup({"labels": {"app": "web"}, "namespace": "b"}, POOL) == ["b/x"]
    assert _lookup({"labels": {}}, POOL) == ["z", "a/x", "a/y", "b/x"]


def test_credentials_reach_the_function_and_a_missing_secret_fails():
    function = Scripted(lambda req, _n: response.to(req))
    credentials = {"creds": {"credentials": [
        {"name": "cloud", "source": "Secret",
         "secretRef": {"namespace": "crossplane-system", "name": "gcp"}},
        {"name": "none", "source": "None"},
    ]}}  # fmt: skip
    with FunctionHost(servicers={"creds": function}) as host:
        run_pipeline(
            host, pipeline("creds", **credentials), XR, {}, [],
            credentials={"crossplane-system/gcp": {"key": b"s3cret"}},
        )  # fmt: skip
        (request,) = function.requests
        assert dict(request.credentials["cloud"].credential_data.data) == {"key": b"s3cret"}
        assert "none" not in request.credentials
        with pytest.raises(PipelineError, match='cannot get credentials from secret "gcp"'):
            run_pipeline(host, pipeline("creds", **credentials), XR, {}, [])


def test_function_credentials_flag(tmp_path: Path):
    function = Scripted(lambda req, _n: response.to(req))
    server = BackgroundServer(function)
    target = server.start()
    try:
        (tmp_path / "fns.yaml").write_text(yaml.safe_dump({
            "apiVersion": "pkg.crossplane.io/v1", "kind": "Function",
            "metadata": {"name": "creds", "annotations": {
                "render.crossplane.io/runtime": "Development",
                "render.crossplane.io/runtime-development-target": target}},
        }))  # fmt: skip
        comp = pipeline("creds", creds={"credentials": [
            {"name": "cloud", "source": "Secret",
             "secretRef": {"namespace": "ns", "name": "gcp"}}]})  # fmt: skip
        (tmp_path / "comp.yaml").write_text(yaml.safe_dump(comp))
        (tmp_path / "xr.yaml").write_text(yaml.safe_dump(XR))
        secret = {
            "apiVersion": "v1", "kind": "Secret", "metadata": {"name": "gcp", "namespace": "ns"},
            "data": {"token": base64.b64encode(b"abc").decode()},
            "stringData": {"ignored": "yes"},
        }  # fmt: skip
        (tmp_path / "secrets.yaml").write_text(yaml.safe_dump(secret))
        result = CliRunner().invoke(cli, [
            "render", str(tmp_path / "xr.yaml"), str(tmp_path / "comp.yaml"),
            "--functions", str(tmp_path / "fns.yaml"),
            "--function-credentials", str(tmp_path / "secrets.yaml"),
        ])  # fmt: skip
    finally:
        server.stop()
    assert result.exit_code == 0, result.stderr
    (request,) = function.requests
    assert dict(request.credentials["cloud"].credential_data.data) == {"token": b"abc"}


def test_repository_functions_are_started_once_and_reused():
    composition = yaml.safe_load(
        (Path(__file__).resolve().parents[2] / "apis/inferenceclasses/composition.yaml").read_text()
    )
    xr = {
        "apiVersion": "modelplane.ai/v1alpha1",
        "kind": "InferenceClass",
        "metadata": {"name": "c"},
        "spec": {"devices": [{"name": "gpu", "driver": "d", "deviceClassName": "d"}]},
    }
    with FunctionHost() as host:
        first = run_pipeline(host, composition, xr, {}, [])
        servers = dict(host._servers)
        second = run_pipeline(host, composition, xr, {}, [])
        assert host._servers == servers and len(servers) == 1
    assert first == second
    assert first.composite_ready == "True"


def test_unknown_function_without_a_functions_file():
    with FunctionHost() as host, pytest.raises(PipelineError) as raised:
        run_pipeline(host, pipeline("compose-nothing"), XR, {}, [])
    assert str(raised.value).startswith(
        'cannot run Composition pipeline step "compose-nothing": '
        "unknown Function 'compose-nothing'"
    )


def test_functions_file_entries_are_checked():
    with pytest.raises(PipelineError, match="not a function: ConfigMap/x"):
        FunctionHost(functions=[cm("x")])
    bad_runtime = {
        "apiVersion": "pkg.crossplane.io/v1", "kind": "Function",
        "metadata": {"name": "f", "annotations": {"render.crossplane.io/runtime": "Podman"}},
    }  # fmt: skip
    with pytest.raises(PipelineError, match="unsupported value 'Podman'"):
        FunctionHost(functions=[bad_runtime])
    docker_elsewhere = {"apiVersion": "pkg.crossplane.io/v1", "kind": "Function",
                        "metadata": {"name": "function-patch-and-transform"}}  # fmt: skip
    with pytest.raises(PipelineError, match="cannot run the Docker runtime"):
        FunctionHost(functions=[docker_elsewhere])


def test_a_hosted_function_that_raises_fails_cleanly_and_logs_nothing_to_stdout(capfd):
    class Crashing(CompositionFunction):
        name = "crashing"

        def compose(self, request):
            raise ValueError("no such field")

    host = FunctionHost(servicers={"crashing": Crashing()})
    with host, pytest.raises(PipelineError) as raised:
        run_pipeline(host, pipeline("crashing"), XR, {}, [])
    assert str(raised.value) == (
        'pipeline step "crashing" returned a fatal result: '
        "crashing: internal error: ValueError: no such field"
    )
    out, _err = capfd.readouterr()
    assert out == ""  # render and simulate print their output there


def test_a_function_answers_to_its_installed_name_and_to_its_directory_name():
    """Compositions reference what a control plane installs (modelplane-modelplane<function>);
    tests and hand-started functions use the directory name. Both reach the same function, and
    a servicer registered under the short name replaces the installed one."""
    root = Path(__file__).resolve().parents[2]
    xr = yaml.safe_load((root / "examples/platform/inferenceclass-l4.yaml").read_text())
    req = fnv1.RunFunctionRequest()
    req.observed.composite.resource.update(xr)
    with FunctionHost() as host:
        installed = host.run_function("modelplane-modelplanecompose-inference-class", req)
        short = host.run_function("compose-inference-class", req)
    assert installed == short
    assert [c.type for c in installed.conditions] == ["Accepted"]

    replaced = Scripted(lambda r, _n: response.to(r))
    with FunctionHost(servicers={"compose-inference-class": replaced}) as host:
        host.run_function("modelplane-modelplanecompose-inference-class", req)
    assert len(replaced.requests) == 1


def _big(name: str, size: int, **labels: str) -> dict:
    return cm(name, "a", **labels) | {"data": {"blob": "x" * size}}


def test_a_request_over_4_mib_is_refused_as_the_deployed_function_refuses_it():
    """A function runs with the SDK's 4 MiB receive limit (its console script's default), so a
    requirement that resolves to more than that fails the step as it fails under Crossplane;
    render and simulate must not host it more leniently."""

    def ask(req, _n):
        rsp = response.to(req)
        target = rsp.requirements.resources["blobs"]
        target.api_version, target.kind = "v1", "ConfigMap"
        target.match_labels.labels.update({"app": "blob"})
        return rsp

    under = [_big(f"b{i}", 900 * 1024, app="blob") for i in range(4)]  # 3.5 MiB
    with FunctionHost(servicers={"ask": Scripted(ask)}) as host:
        run_pipeline(host, pipeline("ask"), XR, {}, under)
        with pytest.raises(PipelineError) as raised:
            run_pipeline(
                host, pipeline("ask"), XR, {}, [*under, _big("b4", 900 * 1024, app="blob")]
            )
    message = str(raised.value)
    assert message.startswith(
        'cannot run Composition pipeline step "ask": rpc error: code = ResourceExhausted'
    )
    assert "vs. 4194304" in message
    # simulate's host words it as the reconciler does (tests/realplane/test_message_limit.py):
    # Crossplane's PackagedFunctionRunner names the Function it could not run.
    over = [*under, _big("b4", 900 * 1024, app="blob")]
    with (
        FunctionHost(servicers={"ask": Scripted(ask)}, packaged=True) as host,
        pytest.raises(PipelineError) as raised,
    ):
        run_pipeline(host, pipeline("ask"), XR, {}, over)
    assert str(raised.value).startswith(
        'cannot run Composition pipeline step "ask": cannot run Function "ask": '
        "rpc error: code = ResourceExhausted desc = SERVER: Received message larger than max ("
    )


def test_a_response_over_4_mib_is_refused_as_crossplane_refuses_it():
    """Crossplane receives at most 4 MiB from a function (grpc-go's default)."""

    def compose(req, _n):
        rsp = response.to(req)
        for i in range(5):
            rsp.desired.resources[f"b{i}"].resource.update(_big(f"b{i}", 900 * 1024))
        return rsp

    with (
        FunctionHost(servicers={"big": Scripted(compose)}) as host,
        pytest.raises(PipelineError) as raised,
    ):
        run_pipeline(host, pipeline("big"), XR, {}, [])
    assert "code = ResourceExhausted" in str(raised.value)
