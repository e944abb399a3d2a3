"""The real-plane tier: real Kubernetes and Crossplane judge Modelplane (design/realplane.md).

Where Go (or root, which running function images needs) is missing, every test here says why
it did not run; under CI=true the same absence fails the run instead.
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Iterator

import pytest
from modelplane_realplane import build, install, plane, report
from modelplane_realplane.paths import RUN


def missing_prerequisite() -> str | None:
    if shutil.which("go") is None:
        return "Go is not installed: the real plane is built from Go modules (README)"
    if os.geteuid() != 0:
        return "running function images in isolated roots needs root (unshare, chroot)"
    missing = [tool for tool in ("openssl", "unshare", "chroot", "docker-registry", "debootstrap")
               if shutil.which(tool) is None]  # fmt: skip
    if missing:
        return f"missing {', '.join(missing)} (apt-get install docker-registry debootstrap)"
    return None


def require_real_plane() -> None:
    reason = missing_prerequisite()
    if reason is None:
        return
    if os.environ.get("CI"):
        pytest.fail(f"CI must run the real-plane tier: {reason}")
    pytest.skip(f"real-plane tier did not run: {reason}")


@pytest.fixture(scope="session")
def built() -> list[build.Outcome]:
    """Every real component, built where missing (cached under _output/realplane/bin)."""
    require_real_plane()
    return build.build()


@pytest.fixture(scope="session")
def real_plane(built: list[build.Outcome]) -> Iterator[install.Running]:
    """A real control plane with Modelplane installed by Crossplane's package manager."""
    report.start()
    started = plane.up(RUN)
    try:
        yield install.Running(started, install.install(started))
    finally:
        left = plane.down(RUN)
        assert not left, f"processes left running: {left}"
