"""Every function's command line, as a user (or Crossplane's Development runtime) starts it.

``<function-name> --insecure --address HOST:PORT [--tls-certs-dir DIR] [--debug]`` must serve
RunFunction over gRPC; a wrong flag is a usage error, never a traceback.
"""

from __future__ import annotations

import socket
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import grpc
import pytest
from crossplane.function.proto.v1 import run_function_pb2 as fnv1
from crossplane.function.proto.v1 import run_function_pb2_grpc as grpcv1
from crossplane.function.proto.v1beta1 import run_function_pb2 as fnv1beta1
from crossplane.function.proto.v1beta1 import run_function_pb2_grpc as grpcv1beta1
from modelplane_common import served_script

ROOT = Path(__file__).resolve().parents[2]
FUNCTIONS = sorted(p.name for p in (ROOT / "functions").iterdir() if p.is_dir())
BIN = Path(sys.executable).parent  # the workspace virtualenv's scripts
QUIET = {"stdout": subprocess.DEVNULL, "stderr": subprocess.DEVNULL}


def _run(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(BIN / FUNCTIONS[0]), *args], capture_output=True, text=True, timeout=60, check=False
    )


@pytest.fixture(scope="module")
def started() -> Iterator[dict[str, int]]:
    """Every function started at once (start-up dominates), each on its own port; one whose
    port was taken before it could bind is started again on another (served_script)."""
    ports = {name: served_script.free_port() for name in FUNCTIONS}
    processes = {
        name: served_script.launch(_serve_command(name), port, **QUIET)
        for name, port in ports.items()
    }
    try:
        for name in FUNCTIONS:
            if not served_script.serving(processes[name], ports[name]):
                served_script.stop(processes[name])
                processes[name], ports[name] = served_script.serve_script(
                    _serve_command(name), **QUIET
                )
        yield ports
    finally:
        for process in processes.values():
            served_script.stop(process)


def _serve_command(name: str) -> list[str]:
    return [str(BIN / name), "--insecure", "--debug"]


@pytest.mark.parametrize("name", FUNCTIONS)
def test_function_serves_run_function(started: dict[str, int], name: str):
    request = fnv1.RunFunctionRequest()
    request.observed.composite.resource.update(
        {"apiVersion": "example.org/v1", "kind": "Unexpected", "metadata": {"name": "x"}}
    )
    with grpc.insecure_channel(f"127.0.0.1:{started[name]}") as channel:
        grpc.channel_ready_future(channel).result(timeout=60)
        response = grpcv1.FunctionRunnerServiceStub(channel).RunFunction(request, timeout=30)
    # Whatever it makes of an XR it does not know, it answers and deletes nothing.
    assert isinstance(response, fnv1.RunFunctionResponse)
    assert len(response.desired.resources) == 0


def test_an_unknown_flag_is_a_usage_error():
    done = _run("--bogus")
    assert done.returncode == 2
    assert "No such option '--bogus'" in done.stderr
    assert f"Usage: {FUNCTIONS[0]} [OPTIONS]" in done.stderr
    assert "Traceback" not in done.stderr


def test_neither_insecure_nor_certificates_is_a_usage_error():
    done = _run("--address", f"127.0.0.1:{served_script.free_port()}")
    assert done.returncode == 2
    assert "give --insecure or --tls-certs-dir DIR" in done.stderr
    assert "Traceback" not in done.stderr


def test_tls_certs_dir_is_accepted_and_missing_certificates_are_named(tmp_path: Path):
    done = _run(
        "--tls-certs-dir", str(tmp_path), "--address", f"127.0.0.1:{served_script.free_port()}"
    )
    assert done.returncode == 1
    assert "Error: cannot run function:" in done.stderr
    assert str(tmp_path) in done.stderr
    assert "Traceback" not in done.stderr


def test_help_lists_the_standard_flags():
    done = _run("--help")
    assert done.returncode == 0
    for flag in ("--insecure", "--address", "--tls-certs-dir", "--debug"):
        assert flag in done.stdout


def _padded(size: int) -> fnv1.RunFunctionRequest:
    """A request for an XR the function does not know, padded to about ``size`` bytes by a
    resolved requirement."""
    request = fnv1.RunFunctionRequest()
    request.observed.composite.resource.update(
        {"apiVersion": "example.org/v1", "kind": "Unexpected", "metadata": {"name": "x"}}
    )
    item = request.required_resources["pad"].items.add()
    item.resource.update({"apiVersion": "v1", "kind": "ConfigMap", "data": {"x": "x" * size}})
    return request


def _size_warnings(response: fnv1.RunFunctionResponse) -> list[str]:
    return [
        r.message
        for r in response.results
        if r.severity == fnv1.SEVERITY_WARNING and r.message.startswith("this reconcile's request")
    ]


def test_a_function_warns_near_the_limit_it_runs_with_and_refuses_past_it():
    """Started with --max-recv-message-size 1 (MiB), compose-model-cache answers a 0.9 MiB
    request with a warning naming its size, that limit and what the cache's requests grow
    with; a request past the limit is refused before it runs, as Crossplane would see it.
    v1beta1 is still served."""
    process, port = served_script.serve_script(
        [str(BIN / "compose-model-cache"), "--insecure", "--max-recv-message-size", "1"], **QUIET
    )
    try:
        with grpc.insecure_channel(f"127.0.0.1:{port}") as channel:
            stub = grpcv1.FunctionRunnerServiceStub(channel)
            assert _size_warnings(stub.RunFunction(_padded(500 * 1024), timeout=30)) == []
            (warning,) = _size_warnings(stub.RunFunction(_padded(900 * 1024), timeout=30))
            assert warning.startswith(
                "this reconcile's request to compose-model-cache was 0.9 MiB of the 1 MiB it "
                "receives; past that Crossplane's calls are refused (ResourceExhausted) and "
                "this Unexpected stops reconciling, keeping what it composed. It grows with "
                "the clusters the cache is staged on"
            ), warning
            with pytest.raises(grpc.RpcError) as refused:
                stub.RunFunction(_padded(1100 * 1024), timeout=30)
            assert refused.value.code() == grpc.StatusCode.RESOURCE_EXHAUSTED
            beta = fnv1beta1.RunFunctionRequest.FromString(_padded(10).SerializeToString())
            answer = grpcv1beta1.FunctionRunnerServiceStub(channel).RunFunction(beta, timeout=30)
            assert isinstance(answer, fnv1beta1.RunFunctionResponse)
    finally:
        served_script.stop(process)


def test_a_script_that_cannot_bind_its_port_is_told_apart_from_one_still_starting():
    """The port another process took between choosing and binding: the script exits, and the
    tests' start-up helper says so at once (and starts it elsewhere) instead of waiting out
    its timeout."""
    with socket.socket() as holder:
        holder.bind(("127.0.0.1", 0))
        holder.listen()
        port = holder.getsockname()[1]
        process = served_script.launch(_serve_command(FUNCTIONS[0]), port, **QUIET)
        try:
            assert not served_script.serving(process, port, timeout=120)
            assert process.poll() == 1
        finally:
            served_script.stop(process)
