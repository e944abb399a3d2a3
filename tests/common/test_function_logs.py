"""Function logs: one info line per request, decisions at debug, JSON or text, and never a
Secret's data (a log pipeline is not a secret store)."""

from __future__ import annotations

import base64
import io
import json
import subprocess
import sys
from pathlib import Path

import grpc
import pytest
import yaml
from crossplane.function.proto.v1 import run_function_pb2 as fnv1
from crossplane.function.proto.v1 import run_function_pb2_grpc as grpcv1
from modelplane.pipeline import repository_functions
from modelplane_common import served_script
from modelplane_common.function import CompositionFunction, Outcome, Request
from modelplane_common.plain import to_struct
from modelplane_common.runtime import configure_logging

ROOT = Path(__file__).resolve().parents[2]
BIN = Path(sys.executable).parent
CANARY = "s3cr3t-canary-7f0c"
ENCODED = base64.b64encode(CANARY.encode()).decode()
SECRET = {
    "apiVersion": "v1",
    "kind": "Secret",
    "metadata": {"name": "canary", "namespace": "modelplane-system"},
    "data": {"kubeconfig": ENCODED, "token": ENCODED},
    "stringData": {"password": CANARY},
}


def _with_secrets(req: fnv1.RunFunctionRequest) -> fnv1.RunFunctionRequest:
    """``req`` with a canary Secret observed, in every required-resource answer, and as a
    credential."""
    req = fnv1.RunFunctionRequest.FromString(req.SerializeToString())
    req.observed.resources["canary-secret"].resource.update(SECRET)
    for selector in req.required_resources.values():
        selector.items.append(fnv1.Resource(resource=to_struct(SECRET)))
    req.credentials["canary"].credential_data.data["kubeconfig"] = CANARY.encode()
    return req


def _captured(run: callable, log_format: str) -> str:  # type: ignore[valid-type]
    stream = io.StringIO()
    configure_logging(debug=True, log_format=log_format, stream=stream)
    try:
        run()
    finally:
        configure_logging(debug=False)
    return stream.getvalue()


@pytest.mark.parametrize("log_format", ["json", "text"])
def test_no_secret_data_reaches_any_log_line(recorded_requests, log_format):
    requests = {name: _with_secrets(req) for name, req in recorded_requests.items()}
    functions = repository_functions()

    def run_all() -> None:
        for name, req in requests.items():
            functions[name].load()().run(req)

    output = _captured(run_all, log_format)
    # Every function logged its request (the check below could not pass by logging nothing).
    assert output.count("RunFunction") == len(requests) == len(functions)
    assert CANARY not in output
    assert ENCODED not in output


class _Leaky(CompositionFunction):
    """A function whose bug puts a Secret's value into the exception text."""

    name = "leaky"

    def compose(self, request: Request) -> Outcome:
        raise ValueError(f"cannot parse kubeconfig {request.observed['canary-secret']['data']}")


def test_a_failing_function_logs_the_error_type_and_frames_not_its_text():
    req = _with_secrets(fnv1.RunFunctionRequest())
    answer: list[fnv1.RunFunctionResponse] = []
    output = _captured(lambda: answer.append(_Leaky().run(req)), "json")
    lines = [json.loads(line) for line in output.splitlines()]
    assert [(line["msg"], line["level"]) for line in lines] == [
        ("compose failed", "error"),
        ("RunFunction", "info"),
    ]
    assert lines[0]["error"] == "ValueError" and "in compose" in lines[0]["trace"]
    assert lines[1]["outcome"] == "error"
    assert CANARY not in output and ENCODED not in output
    assert answer[0].results[0].severity == fnv1.SEVERITY_FATAL  # Crossplane still hears why


def _serve_one_request(*flags: str) -> list[str]:
    """Start compose-inference-class with ``flags``, send it one request for the l4 example
    InferenceClass (tag "t-1"), stop it and return what it printed."""
    process, port = served_script.serve_script(
        [str(BIN / "compose-inference-class"), "--insecure", *flags],
        stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True,
    )  # fmt: skip
    xr = yaml.safe_load((ROOT / "examples/platform/inferenceclass-l4.yaml").read_text())
    req = fnv1.RunFunctionRequest(
        meta=fnv1.RequestMeta(tag="t-1"),
        observed=fnv1.State(composite=fnv1.Resource(resource=to_struct(xr))),
    )
    try:
        with grpc.insecure_channel(f"127.0.0.1:{port}") as channel:
            grpcv1.FunctionRunnerServiceStub(channel).RunFunction(req, timeout=30)
    finally:
        process.terminate()
        out, _ = process.communicate(timeout=30)
    return out.splitlines()


def test_each_request_is_one_json_info_line_with_xr_tag_outcome_and_duration():
    lines = [json.loads(line) for line in _serve_one_request()]
    assert [line["msg"] for line in lines] == ["serving", "RunFunction"]  # no debug lines
    request = lines[1]
    assert request["level"] == "info"
    assert request["function"] == "compose-inference-class"
    assert request["xr"] == "InferenceClass/gke-l4-1x-g2"
    assert request["tag"] == "t-1"
    assert request["outcome"] == "ok"
    assert isinstance(request["duration_ms"], float)


def test_debug_adds_the_decisions_and_text_is_readable():
    lines = _serve_one_request("--debug", "--log-format", "text")
    assert any("RunFunction" in line and "outcome=ok" in line for line in lines), lines
    assert any("[debug" in line and "condition" in line for line in lines), lines
