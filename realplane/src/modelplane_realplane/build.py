"""Build every real component that is missing or out of date, and nothing else.

A binary is current when the stamp beside it records the same inputs: the go.mod and go.sum it
was built from, the package, the ldflags and the Go version. Builds use ``CGO_ENABLED=0`` and
keep Go's module and build caches (the machine's own), so a warm run builds nothing.
"""

from __future__ import annotations

import contextlib
import dataclasses
import fcntl
import hashlib
import json
import os
import shutil
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

from modelplane_realplane.components import COMPONENTS, Component
from modelplane_realplane.paths import BIN


class BuildError(Exception):
    """A component did not build; the message carries Go's output."""


@dataclasses.dataclass(frozen=True)
class Outcome:
    name: str
    version: str
    built: bool  # False: it was already current
    seconds: float


def go_version() -> str:
    go = shutil.which("go")
    if go is None:
        raise BuildError("Go is not installed: the real plane is built from Go modules")
    return subprocess.run([go, "env", "GOVERSION"], capture_output=True, text=True,
                          check=True).stdout.strip()  # fmt: skip


def _fingerprint(component: Component, go: str) -> str:
    module = component.go_mod.parent
    digest = hashlib.sha256()
    for part in (
        (module / "go.mod").read_bytes(),
        (module / "go.sum").read_bytes(),
        component.package.encode(),
        component.ldflags().encode(),
        go.encode(),
    ):
        digest.update(hashlib.sha256(part).digest())
    return digest.hexdigest()


def _stamp(name: str) -> Path:
    return BIN / f".{name}.stamp"


def is_current(component: Component, go: str) -> bool:
    stamp = _stamp(component.name)
    return (
        (BIN / component.name).is_file()
        and stamp.is_file()
        and json.loads(stamp.read_text()).get("fingerprint") == _fingerprint(component, go)
    )


@contextlib.contextmanager
def _one_builder() -> Iterator[None]:
    """One build at a time on this machine: both test workers may ask for the same binary, and
    two ``go build -o X.new`` would write one file at once."""
    BIN.mkdir(parents=True, exist_ok=True)
    with (BIN / ".build.lock").open("w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        yield


def build(names: list[str] | None = None, log: bool = True) -> list[Outcome]:
    """Build the named components (all by default) that are not current."""
    go = go_version()
    wanted = [c for c in COMPONENTS if names is None or c.name in names]
    with _one_builder():
        return [_build_one(component, go, log) for component in wanted]


def _build_one(component: Component, go: str, log: bool) -> Outcome:
    started = time.monotonic()
    if is_current(component, go):
        return Outcome(component.name, component.version, False, 0.0)
    if log:
        print(f"building {component.name} {component.version}", flush=True)
    target = BIN / component.name
    env = {**os.environ, "CGO_ENABLED": "0", "GOFLAGS": "-mod=mod -buildvcs=false"}
    command = [
        "go", "build", "-trimpath", "-pgo=off", "-ldflags", component.ldflags(),
        "-o", str(target) + ".new", component.package,
    ]  # fmt: skip
    done = subprocess.run(command, cwd=component.go_mod.parent, env=env,
                          capture_output=True, text=True, check=False)  # fmt: skip
    if done.returncode != 0:
        raise BuildError(f"{component.name} did not build:\n{done.stdout}{done.stderr}")
    os.replace(str(target) + ".new", target)
    seconds = time.monotonic() - started
    _stamp(component.name).write_text(json.dumps({
        "fingerprint": _fingerprint(component, go), "version": component.version,
        "seconds": round(seconds, 1),
    }))  # fmt: skip
    if log:
        print(f"built {component.name} in {seconds:.0f} s", flush=True)
    return Outcome(component.name, component.version, True, seconds)


def binary(name: str) -> Path:
    """The built binary, or a BuildError saying how to build it."""
    path = BIN / name
    if not path.is_file():
        raise BuildError(f"{path} is missing: run `uv run realplane build`")
    return path
