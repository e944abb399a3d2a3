"""Start, watch and stop the plane's local processes.

Every process starts in a session of its own, so stopping it kills its whole process group
(a function's ``unshare`` and the function inside its PID namespace included). Its output goes
to ``<run>/logs/<name>.log``; a component that does not come up raises ``ComponentError``
with the end of that log, so the failure is visible wherever the harness was called from.
"""

from __future__ import annotations

import contextlib
import os
import random
import signal
import socket
import subprocess
import time
from collections.abc import Callable
from pathlib import Path


class ComponentError(Exception):
    """A component exited or did not become ready; the message carries its log's tail."""


def _ephemeral_range() -> tuple[int, int]:
    try:
        low, high = Path("/proc/sys/net/ipv4/ip_local_port_range").read_text().split()
        return int(low), int(high)
    except (OSError, ValueError):
        return 32768, 60999


class PortAllocator:
    """Ports for components, taken in turn from ``low``..``high`` (from ``start``) and never
    from the kernel's ephemeral range: a port the kernel picked for us from there can go to
    an outgoing connection before the component binds it, minutes later for the slower ones,
    and the component then fails with "address already in use". No port is handed out twice,
    since several components are given ports before any of them binds."""

    def __init__(self, low: int, high: int, start: int) -> None:
        self._low, self._high, self._next = low, high, start
        self._handed_out: set[int] = set()

    def take(self) -> int:
        ephemeral = _ephemeral_range()
        for _ in range(self._high - self._low):
            port = self._next
            self._next = self._low + (port + 1 - self._low) % (self._high - self._low)
            if port in self._handed_out or ephemeral[0] <= port <= ephemeral[1]:
                continue
            with socket.socket() as probe:
                try:
                    probe.bind(("127.0.0.1", port))
                except OSError:
                    continue
            self._handed_out.add(port)
            return port
        raise ComponentError(f"no free port on 127.0.0.1 in {self._low}-{self._high}")


_PORTS = PortAllocator(20000, 32000, start=random.randrange(20000, 32000))


def free_port() -> int:
    """A port free on 127.0.0.1 now, outside the ephemeral range, not handed out before."""
    return _PORTS.take()


def log_tail(log: Path, lines: int = 40) -> str:
    if not log.is_file():
        return "(no log)"
    return "\n".join(log.read_text(errors="replace").splitlines()[-lines:])


def start(name: str, command: list[str], logs: Path, env: dict[str, str] | None = None,
          cwd: Path | None = None) -> int:  # fmt: skip
    """Start ``command`` in a new session; its pid."""
    logs.mkdir(parents=True, exist_ok=True)
    with (logs / f"{name}.log").open("ab") as out:
        process = subprocess.Popen(
            command,
            stdin=subprocess.DEVNULL,
            stdout=out,
            stderr=subprocess.STDOUT,
            env={**os.environ, **(env or {})},
            cwd=cwd,
            start_new_session=True,
        )
    return process.pid


def alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    with contextlib.suppress(OSError):
        # A zombie child of this process counts as gone.
        stat = Path(f"/proc/{pid}/stat").read_text()
        if stat.rsplit(")", 1)[1].split()[0] == "Z":
            with contextlib.suppress(ChildProcessError):
                os.waitpid(pid, os.WNOHANG)
            return False
    return True


def group_members(pgid: int) -> list[int]:
    """Live pids whose process group is ``pgid`` (a function in its PID namespace included)."""
    members = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            fields = (entry / "stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        if int(fields[2]) == pgid and fields[0] != "Z":
            members.append(int(entry.name))
    return members


def stop(pid: int, grace: float = 10) -> None:
    """SIGTERM the process group, then SIGKILL whatever is left after ``grace`` seconds."""
    for sig, wait_for in ((signal.SIGTERM, grace), (signal.SIGKILL, 10.0)):
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(pid, sig)
        deadline = time.monotonic() + wait_for
        while time.monotonic() < deadline:
            with contextlib.suppress(ChildProcessError):
                os.waitpid(pid, os.WNOHANG)
            if not group_members(pid):
                return
            time.sleep(0.1)


def wait_ready(name: str, pid: int, log: Path, check: Callable[[], bool],
               timeout: float) -> None:  # fmt: skip
    """Wait until ``check()`` holds; fail at once if the process exits."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if not alive(pid):
            raise ComponentError(f"{name} exited before it was ready; its log ({log}):\n"
                                  f"{log_tail(log)}")  # fmt: skip
        try:
            if check():
                return
        except OSError:
            pass
        time.sleep(0.3)
    raise ComponentError(f"{name} was not ready after {timeout:.0f} s; its log ({log}):\n"
                          f"{log_tail(log)}")  # fmt: skip


def port_open(port: int) -> bool:
    with socket.socket() as probe:
        probe.settimeout(0.5)
        return probe.connect_ex(("127.0.0.1", port)) == 0
