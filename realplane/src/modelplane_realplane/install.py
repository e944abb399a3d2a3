"""Install Modelplane on a running plane as a platform team would (docs/install.md).

Packages are built with the real ``crossplane xpkg build`` (each function's image tarball
embedded), pushed with ``crossplane xpkg push`` to the plane's registry, and installed by
Crossplane's package manager: the Configuration with ``skipDependencyResolution`` (its
providers run out of cluster; their CRDs come from the built providers' modules) and one
Function per function, named as the Configuration's dependency would install it.
"""

from __future__ import annotations

import concurrent.futures
import dataclasses
import subprocess
import time
from pathlib import Path
from typing import Any

import yaml
from modelplane import package as packaging

from modelplane_realplane import images
from modelplane_realplane.build import binary
from modelplane_realplane.kubeapi import Client, condition, is_true, wait
from modelplane_realplane.paths import REPOSITORY
from modelplane_realplane.plane import Plane
from modelplane_realplane.runtime import FUNCTION_PREFIX

VERSION = "v0.1.0"
PKG = "pkg.crossplane.io/v1"
XRD = "apiextensions.crossplane.io/v2"


class InstallError(Exception):
    """Something the real package manager refused or never finished; the message says what."""


@dataclasses.dataclass
class Installed:
    xrds: int = 0
    xrds_established: int = 0
    compositions: int = 0
    functions: int = 0
    functions_healthy: int = 0
    mrap_accepted: bool = False
    seconds: float = 0.0
    problems: list[str] = dataclasses.field(default_factory=list)

    def figures(self) -> dict[str, int]:
        return {"xrds_established": self.xrds_established, "xrds": self.xrds,
                "compositions": self.compositions, "functions_healthy": self.functions_healthy,
                "functions": self.functions}  # fmt: skip


@dataclasses.dataclass(frozen=True)
class Running:
    """A plane with Modelplane installed on it."""

    plane: Plane
    installed: Installed


def _crossplane(*args: str) -> str:
    done = subprocess.run([str(binary("crossplane")), *args], capture_output=True, text=True,
                          check=False, timeout=600)  # fmt: skip
    if done.returncode != 0:
        raise InstallError(f"crossplane {' '.join(args)} failed:\n{done.stdout}{done.stderr}")
    return done.stdout


# Packages built and pushed at once: each build is mostly waiting on its disk and the registry.
BUILDERS = 4


def build_and_push(plane: Plane) -> dict[str, str]:
    """Build every package with ``crossplane xpkg build`` and push it; name -> reference."""
    out = plane.run / "xpkg"
    empty = out / "empty"
    empty.mkdir(parents=True, exist_ok=True)
    repository = f"{plane.registry}/modelplane/modelplane"

    def function_package(name: str) -> str:
        target = out / f"{name}-amd64.xpkg"
        _crossplane(
            "xpkg", "build", f"--package-root={REPOSITORY / 'functions' / name / 'package'}",
            f"--embed-runtime-image-tarball={images.tarball(name)}",
            f"--examples-root={empty}", "-o", str(target),
        )  # fmt: skip
        reference = f"{repository}_{name}:{VERSION}"
        _crossplane("xpkg", "push", "-f", str(target), reference)
        return reference

    def configuration_package() -> str:
        root = out / "configuration"
        root.mkdir()
        (root / "crossplane.yaml").write_bytes(
            (REPOSITORY / "package" / "crossplane.yaml").read_bytes()
        )
        subprocess.run(["cp", "-R", str(REPOSITORY / "apis"), str(root / "apis")], check=True)
        target = out / "modelplane.xpkg"
        _crossplane("xpkg", "build", f"--package-root={root}",
                    f"--examples-root={REPOSITORY / 'examples'}", "-o", str(target))  # fmt: skip
        reference = f"{repository}:{VERSION}"
        _crossplane("xpkg", "push", "-f", str(target), reference)
        return reference

    with concurrent.futures.ThreadPoolExecutor(BUILDERS, thread_name_prefix="xpkg") as pool:
        futures = {name: pool.submit(function_package, name) for name in packaging.functions()}
        futures["configuration"] = pool.submit(configuration_package)
        return {name: future.result() for name, future in futures.items()}


def _manifests(path: Path) -> list[dict[str, Any]]:
    return [doc for doc in yaml.safe_load_all(path.read_text()) if doc]


def install(plane: Plane, timeout: float = 600) -> Installed:
    """Push, install and wait until everything is established, or report what is not."""
    started = time.monotonic()
    client = plane.client()
    pushed = build_and_push(plane)
    manifests = REPOSITORY / "docs" / "manifests"
    for doc in _manifests(manifests / "namespace.yaml") + _manifests(
        manifests / "crossplane-rbac.yaml"
    ):
        client.apply(doc)
    for name in packaging.functions():
        client.apply({
            "apiVersion": PKG, "kind": "Function",
            "metadata": {"name": f"{FUNCTION_PREFIX}{name}"},
            "spec": {"package": pushed[name], "skipDependencyResolution": True},
        })  # fmt: skip
    configuration = _manifests(manifests / "configuration.yaml")[0]
    configuration["spec"]["package"] = pushed["configuration"]
    configuration["spec"]["skipDependencyResolution"] = True
    client.apply(configuration)
    result = _wait_installed(client, timeout)
    result.seconds = time.monotonic() - started
    return result


def _expected_xrds() -> list[str]:
    names = []
    for path in sorted((REPOSITORY / "apis").glob("*/definition.yaml")):
        names.append(yaml.safe_load(path.read_text())["metadata"]["name"])
    return names


def _expected_compositions() -> list[str]:
    names = []
    for path in sorted((REPOSITORY / "apis").glob("*/composition.yaml")):
        names.append(yaml.safe_load(path.read_text())["metadata"]["name"])
    return names


def observe(client: Client) -> Installed:
    result = Installed()
    xrds = {x["metadata"]["name"]: x for x in client.list(XRD, "CompositeResourceDefinition")}
    for name in _expected_xrds():
        result.xrds += 1
        if name in xrds and is_true(xrds[name], "Established"):
            result.xrds_established += 1
        else:
            found = condition(xrds.get(name, {}), "Established") or {}
            result.problems.append(f"XRD {name} not Established: {found.get('message', 'absent')}")
    # Crossplane's composition controller revisions every Composition it accepts.
    revised = {
        (r["metadata"].get("labels") or {}).get("crossplane.io/composition-name")
        for r in client.list("apiextensions.crossplane.io/v1", "CompositionRevision")
    }
    for name in _expected_compositions():
        if name in revised:
            result.compositions += 1
        else:
            result.problems.append(f"Composition {name} not installed or not revisioned")
    functions = {f["metadata"]["name"]: f for f in client.list(PKG, "Function")}
    for name in packaging.functions():
        result.functions += 1
        found = functions.get(f"{FUNCTION_PREFIX}{name}", {})
        if is_true(found, "Healthy") and is_true(found, "Installed"):
            result.functions_healthy += 1
        else:
            result.problems.append(f"Function {FUNCTION_PREFIX}{name} not Healthy: "
                                   f"{_conditions(found)}")  # fmt: skip
    policies = client.list("apiextensions.crossplane.io/v1alpha1",
                           "ManagedResourceActivationPolicy")  # fmt: skip
    result.mrap_accepted = bool(policies) and all(_accepted(p) for p in policies)
    if not result.mrap_accepted:
        result.problems.append("ManagedResourceActivationPolicy not accepted: "
                               + "; ".join(_conditions(p) for p in policies))  # fmt: skip
    configuration = client.get(PKG, "Configuration", "modelplane")
    if not (is_true(configuration, "Installed") and is_true(configuration, "Healthy")):
        result.problems.append(f"Configuration modelplane: {_conditions(configuration)}")
    return result


def _accepted(policy: dict[str, Any]) -> bool:
    conditions = (policy.get("status") or {}).get("conditions") or []
    return bool(conditions) and all(c.get("status") == "True" for c in conditions)


def _conditions(obj: dict[str, Any]) -> str:
    entries = (obj.get("status") or {}).get("conditions") or []
    if not entries:
        return "no conditions"
    return ", ".join(
        f"{c.get('type')}={c.get('status')}" + (f" ({c['message']})" if c.get("message") else "")
        for c in entries
    )


def _wait_installed(client: Client, timeout: float) -> Installed:
    last: list[Installed] = []

    def done() -> bool:
        last[:] = [observe(client)]
        return not last[0].problems

    try:
        wait("Modelplane installed", done, timeout, every=2)
    except TimeoutError:
        if not last:
            raise
    return last[0]
