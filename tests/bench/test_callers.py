"""bench/callers.py: both callers time real round trips to a served function and report a
refusal as gRPC's status, and ``auto`` picks Go where it is installed. Under CI Go is always
installed (the real-plane tier needs it), so the Go caller is always tried there."""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import grpc
import pytest
from crossplane.function.proto.v1 import run_function_pb2 as fnv1
from modelplane_common.plain import to_struct

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "bench"))
import callers  # noqa: E402 - bench/ is not a package


def _kinds() -> list[str]:
    if shutil.which("go") or os.environ.get("CI"):
        return ["go", "python"]
    return ["python"]


@pytest.fixture(scope="module")
def null_address() -> Iterator[str]:
    """bench/null_function.py served with a 1 MiB receive limit."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        address = f"127.0.0.1:{sock.getsockname()[1]}"
    process = subprocess.Popen(
        [sys.executable, str(ROOT / "bench" / "null_function.py"), address, "1"],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )
    channel = grpc.insecure_channel(address)
    try:
        grpc.channel_ready_future(channel).result(timeout=60)
        yield address
    finally:
        channel.close()
        process.terminate()
        process.wait(timeout=30)


def _request(size: int) -> bytes:
    xr = {"apiVersion": "modelplane.ai/v1alpha1", "kind": "X", "metadata": {"name": "x"}}
    xr["spec"] = {"padding": "x" * size}
    request = fnv1.RunFunctionRequest(
        observed=fnv1.State(composite=fnv1.Resource(resource=to_struct(xr)))
    )
    return request.SerializeToString()


@pytest.mark.parametrize("kind", _kinds())
def test_a_caller_times_round_trips_and_reports_a_refusal(kind: str, null_address: str):
    caller = callers.start(kind, [null_address], None)
    try:
        assert caller.name == kind
        caller.load(_request(1000))
        started = time.perf_counter()
        timed = [caller.call(0) for _ in range(3)]
        elapsed_ms = (time.perf_counter() - started) * 1000
        assert all(t > 0 for t in timed)
        assert sum(timed) <= elapsed_ms  # a round trip, not something longer
        caller.load(_request(2 * 1024 * 1024))  # over the servicer's 1 MiB
        with pytest.raises(callers.CallFailedError, match=r"^RESOURCE_EXHAUSTED: .*larger than"):
            caller.call(0)
        caller.load(_request(10))  # and the next call is answered again
        assert caller.call(0) > 0
    finally:
        caller.close()


def test_auto_takes_go_where_it_is_installed(monkeypatch: pytest.MonkeyPatch):
    assert callers.resolve("python") == "python"
    assert callers.resolve("auto") == ("go" if shutil.which("go") else "python")
    monkeypatch.setenv("PATH", "")
    assert callers.resolve("auto") == "python"
    with pytest.raises(RuntimeError, match="needs Go"):
        callers.build_go_caller()
