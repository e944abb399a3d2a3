"""Who makes bench/fleet_scale.py's timed calls: the Go caller (bench/caller), as Crossplane
calls a function, or this Python process.

Both send the request already encoded and keep the response as bytes, and both time only the
round trip. They differ in the client's own cost: Crossplane's is grpc-go's, which this Python
process cannot stand in for. ``auto`` takes Go where it is installed (built once into
``_output/bench``), otherwise Python, and every row says which one timed it.
"""

from __future__ import annotations

import contextlib
import os
import re
import shutil
import subprocess
import tempfile
import time
from pathlib import Path
from typing import Protocol

import grpc
from modelplane_common.serving import MIB, RUN_FUNCTION_SERVICE

ROOT = Path(__file__).resolve().parents[1]
CALLER_MODULE = ROOT / "bench" / "caller"
CALLER_BINARY = ROOT / "_output" / "bench" / "caller"
RUN_FUNCTION = f"/{RUN_FUNCTION_SERVICE}/RunFunction"
CALLERS = ("auto", "go", "python")


class CallFailedError(Exception):
    """A timed call the function refused or failed (gRPC's status code and message)."""


class Caller(Protocol):
    name: str

    def load(self, data: bytes) -> None:
        """The encoded request the next calls send."""

    def call(self, target: int) -> float:
        """One round trip to the ``target``th address, in milliseconds."""

    def close(self) -> None: ...


class PythonCaller:
    name = "python"

    def __init__(self, addresses: list[str], limit_mib: int | None) -> None:
        # A connection kept for the whole run: a long row never reconnects mid-call.
        options = [("grpc.client_idle_timeout_ms", 2**31 - 1)]
        options += [("grpc.max_receive_message_length", limit_mib * MIB)] if limit_mib else []
        self._channels = [grpc.insecure_channel(a, options=options) for a in addresses]
        self._calls = [c.unary_unary(RUN_FUNCTION) for c in self._channels]
        self._data = b""

    def load(self, data: bytes) -> None:
        self._data = data

    def call(self, target: int) -> float:
        start = time.perf_counter()
        try:
            self._calls[target](self._data, timeout=600)
        except grpc.RpcError as err:
            raise CallFailedError(f"{err.code().name}: {err.details()}") from None  # type: ignore[attr-defined]
        return (time.perf_counter() - start) * 1000

    def close(self) -> None:
        for channel in self._channels:
            channel.close()


def build_go_caller() -> Path:
    """``_output/bench/caller`` from bench/caller's pinned module (Go's caches make a rebuild
    a relink). Built under a name of its own and renamed into place, so a process building
    it beside another never runs a half-written binary."""
    go = shutil.which("go")
    if go is None:
        raise RuntimeError("the Go caller needs Go: install it, or pass --caller python")
    CALLER_BINARY.parent.mkdir(parents=True, exist_ok=True)
    building = CALLER_BINARY.with_name(f"{CALLER_BINARY.name}.{os.getpid()}")
    done = subprocess.run(
        [go, "build", "-trimpath", "-o", str(building), "."],
        cwd=CALLER_MODULE,
        env={**os.environ, "CGO_ENABLED": "0", "GOFLAGS": "-buildvcs=false"},
        capture_output=True,
        text=True,
        check=False,
    )
    if done.returncode != 0:
        building.unlink(missing_ok=True)
        raise RuntimeError(f"cannot build bench/caller: {done.stderr.strip()}")
    building.replace(CALLER_BINARY)
    return CALLER_BINARY


class GoCaller:
    name = "go"

    def __init__(self, addresses: list[str], limit_mib: int | None) -> None:
        flags = [f"-max-recv-mib={limit_mib}"] if limit_mib else []
        self._request = tempfile.NamedTemporaryFile(prefix="request-", suffix=".bin")  # noqa: SIM115 - closed in close()
        self._errors = tempfile.TemporaryFile()  # noqa: SIM115 - closed in close()
        self._process = subprocess.Popen(
            [str(build_go_caller()), *flags, *addresses],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=self._errors,
            text=True,
        )

    def _ask(self, line: str) -> str:
        assert self._process.stdin is not None and self._process.stdout is not None
        try:
            self._process.stdin.write(line + "\n")
            self._process.stdin.flush()
            answer = self._process.stdout.readline().strip()
        except OSError:
            answer = ""
        if not answer:
            try:
                code = self._process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                code = None
            self._errors.seek(0)
            said = self._errors.read().decode(errors="replace").strip()[-2000:]
            raise RuntimeError(f"bench/caller stopped (exit {code}) on {line!r}: {said}")
        return answer

    def load(self, data: bytes) -> None:
        self._request.seek(0)
        self._request.truncate()
        self._request.write(data)
        self._request.flush()
        answer = self._ask(f"load {self._request.name}")
        if answer != "ok":
            raise RuntimeError(f"bench/caller: {answer}")

    def call(self, target: int) -> float:
        answer = self._ask(f"call {target}")
        if answer.startswith("error "):
            code, _, message = answer.removeprefix("error ").partition(": ")
            if not re.fullmatch(r"[A-Z][A-Za-z]*", code):
                raise RuntimeError(f"bench/caller: {answer}")  # the protocol, not gRPC
            # grpc-go names a code ResourceExhausted, Python's client RESOURCE_EXHAUSTED.
            raise CallFailedError(f"{re.sub(r'(?<!^)(?=[A-Z])', '_', code).upper()}: {message}")
        return float(answer)

    def close(self) -> None:
        try:
            with contextlib.suppress(OSError):
                if self._process.stdin is not None:
                    self._process.stdin.close()
            try:
                self._process.wait(timeout=30)
            except subprocess.TimeoutExpired:
                self._process.kill()
                self._process.wait()
        finally:
            self._request.close()
            self._errors.close()


def resolve(choice: str) -> str:
    """``auto``: Go where it is installed, else Python."""
    if choice == "auto":
        return "go" if shutil.which("go") else "python"
    return choice


def start(choice: str, addresses: list[str], limit_mib: int | None) -> Caller:
    kind = resolve(choice)
    if kind == "go":
        return GoCaller(addresses, limit_mib)
    return PythonCaller(addresses, limit_mib)
