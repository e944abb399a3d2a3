"""``modelplane simulate`` measured against the real plane, example by example.

Both sides are reduced to what a user reads: which resources each Modelplane XR composed
(kind, namespace, name), which remote manifests the provider-kubernetes Objects carry (kind,
namespace, name), and each XR's conditions (type, status, reason). ``differences`` lists
what one side has and the other lacks; each is fixed or explained in design/simulate.md,
whose list ``documented`` reads so a test keeps both honest.
"""

from __future__ import annotations

import collections
import concurrent.futures
import dataclasses
import os
import re
import subprocess
import sys
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import yaml

from modelplane_realplane.kubeapi import ApiError, Client
from modelplane_realplane.paths import REPOSITORY

MODELPLANE_GROUPS = ("modelplane.ai", "infrastructure.modelplane.ai")
OBJECT_APIS = ("kubernetes.m.crossplane.io/v1alpha1", "kubernetes.crossplane.io/v1alpha2")
DESIGN = REPOSITORY / "design" / "simulate.md"
# Conditions only the real Crossplane writes, about its own machinery rather than the XR.
CROSSPLANE_ONLY = {"Responsive"}
# The normal case said out loud, present only after a transient the real plane's timing
# produces (a composed resource seen before its provider wrote Ready; a replica's readiness not
# yet known to its deployment); absent means the same.
NORMAL = {("ReadinessKnown", "True"), ("EndpointsHeld", "False")}
# A composed resource the function does not name gets <XR name>-<12 hex> from Crossplane.
GENERATED = re.compile(r"-[0-9a-f]{12}$")


@dataclasses.dataclass
class Snapshot:
    composed: set[str] = dataclasses.field(default_factory=set)  # "XRKind ns/name -> Kind name"
    remote: set[str] = dataclasses.field(default_factory=set)  # "Kind ns/name"
    conditions: set[str] = dataclasses.field(default_factory=set)  # "XRKind ns/name: T=S (R)"


def _is_xr(obj: dict[str, Any]) -> bool:
    group = str(obj.get("apiVersion", "")).split("/", 1)[0]
    return group in MODELPLANE_GROUPS and obj.get("kind") != "InferenceClass"


def _where(obj: dict[str, Any]) -> str:
    metadata = obj.get("metadata") or {}
    return f"{obj.get('kind')} {metadata.get('namespace') or '-'}/{metadata.get('name')}"


def snapshot(objects: list[dict[str, Any]]) -> Snapshot:
    """The comparable view of a converged control plane's objects."""
    found = Snapshot()
    for obj in objects:
        if _is_xr(obj):
            where = _where(obj)
            refs = ((obj.get("spec") or {}).get("crossplane") or {}).get("resourceRefs") or []
            names = collections.Counter(
                f"{ref.get('kind')} {GENERATED.sub('-<generated>', str(ref.get('name')))}"
                for ref in refs
            )
            found.composed |= {f"{where} -> {name}" + (f" (x{count})" if count > 1 else "")
                               for name, count in names.items()}  # fmt: skip
            for condition in (obj.get("status") or {}).get("conditions") or []:
                pair = (condition.get("type"), condition.get("status"))
                if pair[0] in CROSSPLANE_ONLY or pair in NORMAL:
                    continue
                kind, status = condition.get("type"), condition.get("status")
                found.conditions.add(f"{where}: {kind}={status} ({condition.get('reason')})")
        elif obj.get("apiVersion") in OBJECT_APIS and obj.get("kind") == "Object":
            manifest = ((obj.get("spec") or {}).get("forProvider") or {}).get("manifest") or {}
            found.remote.add(_where(manifest))
    return found


def simulated(example: Path) -> Snapshot:
    """What ``modelplane simulate -o yaml`` converges ``example`` to."""
    return snapshot(simulated_objects(example))


def simulated_objects(example: Path, env: dict[str, str] | None = None) -> list[dict[str, Any]]:
    """Every object ``modelplane simulate -o yaml`` prints for ``example``."""
    done = subprocess.run(
        [str(Path(sys.executable).parent / "modelplane"), "simulate", "-o", "yaml", str(example)],
        capture_output=True, text=True, timeout=600, check=False, env=env,
    )  # fmt: skip
    objects = [d for d in yaml.safe_load_all(done.stdout) if isinstance(d, dict)]
    if not objects:
        raise RuntimeError(f"simulate {example} printed nothing:\n{done.stderr[-2000:]}")
    return objects


class Simulations:
    """``modelplane simulate`` of several directories, one after the other in the background
    (about one core), so that the real plane's waits hide them."""

    def __init__(self, directories: Iterable[Path]) -> None:
        self._pool = concurrent.futures.ThreadPoolExecutor(max_workers=1)
        # The environment as it is now: other tests may change os.environ meanwhile.
        env = dict(os.environ)
        self._started = {d: self._pool.submit(simulated_objects, d, env) for d in directories}

    def objects(self, directory: Path) -> list[dict[str, Any]]:
        started = self._started.get(directory)
        return started.result() if started else simulated_objects(directory)

    def snapshot(self, directory: Path) -> Snapshot:
        return snapshot(self.objects(directory))

    def close(self) -> None:
        self._pool.shutdown(cancel_futures=True)


def real(client: Client, xr_kinds: list[tuple[str, str]]) -> Snapshot:
    """The real control plane's view, read from the API server."""
    objects: list[dict[str, Any]] = []
    for api_version, kind in xr_kinds:
        objects += client.list(api_version, kind)
    for api_version in OBJECT_APIS:
        try:
            objects += client.list(api_version, "Object")
        except (ApiError, KeyError):
            continue
    return snapshot(objects)


def differences(simulated: Snapshot, real: Snapshot) -> list[str]:
    """One line per difference: ``only simulate: ...`` or ``only real: ...``."""
    lines = []
    for field in ("composed", "remote", "conditions"):
        ours, theirs = getattr(simulated, field), getattr(real, field)
        lines += [f"only simulate: {field}: {item}" for item in sorted(ours - theirs)]
        lines += [f"only real: {field}: {item}" for item in sorted(theirs - ours)]
    return lines


def documented() -> dict[str, list[str]]:
    """example -> the differences design/simulate.md explains (its "Measured against the real
    plane" table: one row per difference, the example in the first column, the difference in
    backticks in the second)."""
    text = DESIGN.read_text()
    section = text.split("## Measured against the real plane", 1)
    if len(section) < 2:
        return {}
    found: dict[str, list[str]] = {}
    for match in re.finditer(r"^\| *([\w-]+) *\| *`([^`]+)` *\|", section[1], re.M):
        found.setdefault(match.group(1), []).append(match.group(2))
    return found
