"""A function's console script serving on a free loopback port (tests start them so).

A free port is only free when it is chosen: between that and the script's bind, which waits
for the interpreter to start, another process may take it (the real plane starts its
components beside the tests). The script then exits; ``serve_script`` starts it again on
another port rather than waiting for a channel that never becomes ready.
"""

from __future__ import annotations

import socket
import subprocess
import time
from collections.abc import Sequence
from typing import Any

import grpc

HOST = "127.0.0.1"
ATTEMPTS = 3


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind((HOST, 0))
        return sock.getsockname()[1]


def launch(command: Sequence[str], port: int, **popen: Any) -> subprocess.Popen[Any]:
    """``command --address HOST:port``, started (``popen``: Popen's keyword arguments)."""
    return subprocess.Popen([*command, "--address", f"{HOST}:{port}"], **popen)


def serving(process: subprocess.Popen[Any], port: int, timeout: float = 60) -> bool:
    """True once ``port`` accepts a gRPC channel while ``process`` still runs; False when
    ``process`` exits first (it could not bind) or ``timeout`` passes."""
    deadline = time.monotonic() + timeout
    with grpc.insecure_channel(f"{HOST}:{port}") as channel:
        ready = grpc.channel_ready_future(channel)
        while time.monotonic() < deadline:
            try:
                ready.result(timeout=0.5)
            except grpc.FutureTimeoutError:
                if process.poll() is not None:
                    return False
                continue
            # Ready, but maybe another server that took the port: ours would have exited.
            time.sleep(0.2)
            return process.poll() is None
    return False


def serve_script(
    command: Sequence[str], timeout: float = 60, **popen: Any
) -> tuple[subprocess.Popen[Any], int]:
    """``command`` serving on a free port: the process and the port. Started again on another
    port when it could not bind the first; RuntimeError after ``ATTEMPTS``."""
    for _ in range(ATTEMPTS):
        port = free_port()
        process = launch(command, port, **popen)
        if serving(process, port, timeout):
            return process, port
        stop(process)
    raise RuntimeError(f"{command[0]} did not serve on any of {ATTEMPTS} free ports")


def stop(process: subprocess.Popen[Any]) -> None:
    process.terminate()
    try:
        process.wait(timeout=30)
    except subprocess.TimeoutExpired:
        process.kill()
        process.wait(timeout=30)
