"""The real components: which Go module builds each binary, at the version its go.mod pins.

Each upstream project pins its own ``k8s.io/*`` versions, so each is built from a small go.mod
of its own under ``realplane/go/<module>/``. That go.mod's ``require`` line is the only place a
version is written; everything else (build stamps, the report) reads it from there.
"""

from __future__ import annotations

import dataclasses
import re
from pathlib import Path

GO_ROOT = Path(__file__).resolve().parents[2] / "go"


@dataclasses.dataclass(frozen=True)
class Component:
    """One binary built from one upstream Go package."""

    name: str  # the binary's name under _output/realplane/bin
    module_dir: str  # realplane/go/<module_dir>
    upstream: str  # the upstream module whose version is pinned
    package: str  # the main package built
    # -ldflags -X stamps; {version} is the pinned version, {minor} its minor number
    stamps: tuple[str, ...] = ()

    @property
    def go_mod(self) -> Path:
        return GO_ROOT / self.module_dir / "go.mod"

    @property
    def version(self) -> str:
        return pinned_version(self.go_mod, self.upstream)

    def ldflags(self) -> str:
        version = self.version
        minor = version.split(".")[1]
        flags = ["-s", "-w"]
        flags += ["-X " + stamp.format(version=version, minor=minor) for stamp in self.stamps]
        return " ".join(flags)


_KUBE_STAMPS = (
    "k8s.io/component-base/version.gitVersion={version}",
    "k8s.io/component-base/version.gitMajor=1",
    "k8s.io/component-base/version.gitMinor={minor}",
)


# Both providers would bind controller-runtime's default metrics address, :8080, and one of
# them has no flag for it; an ephemeral loopback port keeps them (and a second plane) apart.
_EPHEMERAL_METRICS = ("sigs.k8s.io/controller-runtime/pkg/metrics/server.DefaultBindAddress="
                      "127.0.0.1:0",)  # fmt: skip


def _kube(name: str) -> Component:
    return Component(name, "kubernetes", "k8s.io/kubernetes", f"k8s.io/kubernetes/cmd/{name}",
                     _KUBE_STAMPS)  # fmt: skip


COMPONENTS: tuple[Component, ...] = (
    Component("etcd", "etcd", "go.etcd.io/etcd/server/v3", "go.etcd.io/etcd/server/v3"),
    _kube("kube-apiserver"),
    _kube("kube-controller-manager"),
    _kube("kube-scheduler"),
    _kube("kubectl"),  # for people using the plane; the harness speaks HTTP itself
    Component(
        "crossplane-core",
        "crossplane",
        "github.com/crossplane/crossplane/v2",
        "github.com/crossplane/crossplane/v2/cmd/crossplane",
        ("github.com/crossplane/crossplane-runtime/v2/pkg/version.version={version}",),
    ),
    Component(
        "crossplane",
        "crossplane-cli",
        "github.com/crossplane/cli/v2",
        "github.com/crossplane/cli/v2/cmd/crossplane",
        ("github.com/crossplane/crossplane-runtime/v2/pkg/version.version={version}",),
    ),
    Component(
        "provider-kubernetes",
        "provider-kubernetes",
        "github.com/crossplane-contrib/provider-kubernetes",
        "github.com/crossplane-contrib/provider-kubernetes/cmd/provider",
        _EPHEMERAL_METRICS,
    ),
    Component(
        "provider-helm",
        "provider-helm",
        "github.com/crossplane-contrib/provider-helm",
        "github.com/crossplane-contrib/provider-helm/cmd/provider",
        _EPHEMERAL_METRICS,
    ),
    # The workload cluster's stand-in kubelets, and the controller of multi-node gangs.
    Component("kwok", "kwok", "sigs.k8s.io/kwok", "sigs.k8s.io/kwok/cmd/kwok"),  # stamped upstream
    Component(
        "lws",
        "lws",
        "sigs.k8s.io/lws",
        "sigs.k8s.io/lws/cmd",
        ("sigs.k8s.io/lws/pkg/version.GitVersion={version}",),
    ),
)

BY_NAME = {component.name: component for component in COMPONENTS}


def pinned_version(go_mod: Path, module: str) -> str:
    """The version ``go_mod`` requires ``module`` at."""
    match = re.search(rf"^\s*(?:require\s+)?{re.escape(module)}\s+(v\S+)", go_mod.read_text(), re.M)
    if match is None:
        raise LookupError(f"{go_mod} does not require {module}")
    return match.group(1)


def versions() -> dict[str, str]:
    """Component name -> pinned version, for the report."""
    return {component.name: component.version for component in COMPONENTS}
