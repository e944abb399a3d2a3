"""Day-two operations on the real plane, on the converged quickstart example.

* scale: ``kubectl scale`` the ModelDeployment down to one replica and back, converging each
  time (the scale subresource, the scheduler, the remote Deployments following);
* drain: taint the InferenceCluster ``NoExecute`` and record, every few seconds, how many
  replicas are Ready and routed (the ModelService's HTTPRoute backends); the drain must never
  leave the model unserved. With one cluster the replicas have nowhere to go: the drain is
  blocked and they keep serving, which is what a user must see;
* restore: every Modelplane object's status wiped (a backup restored without status), then the
  example re-applied with kubectl; nothing on the workload cluster may be deleted or created;
* unplaceable: a hand-written ModelReplica claiming a GPU no node of its pool has
  (tests/data/unplaceable-replica.yaml); the real scheduler leaves its pod Pending, and
  ``modelplane simulate`` of the same files must report the replica the same way.
"""

from __future__ import annotations

import dataclasses
import shutil
import tempfile
import time
from pathlib import Path
from typing import Any

import yaml

from modelplane_realplane import reconcile, simparity, workload
from modelplane_realplane.clusters import Plane
from modelplane_realplane.kubeapi import ApiError, Client, is_true
from modelplane_realplane.paths import REPOSITORY

EXAMPLE = "quickstart"
DEPLOYMENT = ("ml-team", "qwen3-8b")
SERVICE = ("ml-team", "chat")
CLUSTER = "lab"
API = "modelplane.ai/v1alpha1"
TAINT = {"key": "modelplane.ai/maintenance", "effect": "NoExecute"}


@dataclasses.dataclass
class Operations:
    scale: bool = False
    drain_min_serving: int = 0
    drain_series: list[dict[str, float | int]] = dataclasses.field(default_factory=list)
    restore_untouched: bool = False
    unplaceable: dict[str, Any] = dataclasses.field(default_factory=dict)
    notes: list[str] = dataclasses.field(default_factory=list)


def run(plane: Plane, context: reconcile.ExampleContext) -> Operations:
    done = Operations()
    done.scale = _scale(plane, done.notes)
    done.drain_series = _drain(plane)
    done.drain_min_serving = min((int(p["serving"]) for p in done.drain_series), default=0)
    done.restore_untouched = _restore(plane, context, done.notes)
    done.unplaceable = _unplaceable(plane, context, done.notes)
    return done


def _engine_deployments(remote: Client) -> list[str]:
    return [d["metadata"]["name"] for d in remote.list("apps/v1", "Deployment")
            if d["metadata"]["name"].startswith(DEPLOYMENT[1] + "-")]  # fmt: skip


def _settle(plane: Plane, what: str, check: Any, notes: list[str], timeout: float = 240) -> bool:
    """Wait until nothing is wrong on either cluster and ``check()`` holds."""
    deadline = time.monotonic() + timeout
    left: list[str] = []
    while time.monotonic() < deadline:
        try:
            left = reconcile.problems(plane)
            if not left and check():
                return True
        except (ApiError, OSError, KeyError) as error:
            left = [repr(error)]
        time.sleep(2)
    notes.append(f"{what}: not settled after {timeout:.0f} s: {left[:5]}")
    return False


def _scale(plane: Plane, notes: list[str]) -> bool:
    remote = plane.client(workload.WORKLOAD)
    namespace, name = DEPLOYMENT
    ok = True
    for replicas in (1, 2):
        reconcile.kubectl(plane, "scale", "modeldeployment", name, "-n", namespace,
                          f"--replicas={replicas}")  # fmt: skip
        ok &= _settle(plane, f"scale to {replicas}",
                      lambda n=replicas: len(_engine_deployments(remote)) == n, notes)  # fmt: skip
    return ok


def serving(control: Client) -> tuple[int, int]:
    """(replicas Ready, backends the ModelService's HTTPRoute routes to)."""
    namespace, name = DEPLOYMENT
    replicas = [
        r
        for r in control.list(API, "ModelReplica", namespace)
        if (r["metadata"].get("labels") or {}).get("modelplane.ai/deployment") == name
    ]
    ready = sum(is_true(r, "Ready") for r in replicas)
    routed = 0
    for route in control.list("gateway.networking.k8s.io/v1", "HTTPRoute", SERVICE[0]):
        if (route["metadata"].get("labels") or {}).get("crossplane.io/composite") == SERVICE[1]:
            routed += sum(len(rule.get("backendRefs") or []) for rule in route["spec"]["rules"])
    return ready, routed


def _drain(plane: Plane, seconds: float = 45, every: float = 3) -> list[dict[str, float | int]]:
    control = plane.client()
    cluster = control.get(API, "InferenceCluster", CLUSTER)
    control.request(
        "PATCH", control.path(API, "InferenceCluster", None, CLUSTER),
        {"spec": {"taints": [*(cluster["spec"].get("taints") or []), TAINT]}},
        content_type="application/merge-patch+json",
    )  # fmt: skip
    series = []
    started = time.monotonic()
    while time.monotonic() - started < seconds:
        ready, routed = serving(control)
        series.append({"t": round(time.monotonic() - started, 1), "ready": ready,
                       "routed": routed, "serving": min(ready, routed)})  # fmt: skip
        time.sleep(every)
    control.request(
        "PATCH", control.path(API, "InferenceCluster", None, CLUSTER),
        {"spec": {"taints": cluster["spec"].get("taints")}},
        content_type="application/merge-patch+json",
    )  # fmt: skip
    return series


def remote_uids(remote: Client) -> set[str]:
    """``Kind ns/name uid`` of what Modelplane made on the workload cluster."""
    found = set()
    for api_version, kind in reconcile.REMOTE_KINDS:
        try:
            items = remote.list(api_version, kind)
        except (ApiError, KeyError):
            continue
        for item in items:
            metadata = item["metadata"]
            if kind == "Pod" or (kind == "Service" and metadata["name"] == "kubernetes"):
                continue  # pods belong to their controllers; a restore must not touch those
            found.add(f"{kind} {metadata.get('namespace')}/{metadata['name']} {metadata['uid']}")
    return found


def _restore(plane: Plane, context: reconcile.ExampleContext, notes: list[str]) -> bool:
    control, remote = plane.client(), plane.client(workload.WORKLOAD)
    _settle(plane, "before restore", lambda: True, notes)
    before = remote_uids(remote)
    for api_version, kind in reconcile.xr_kinds(control):
        for xr in control.list(api_version, kind):
            metadata = xr["metadata"]
            control.request(
                "PATCH",
                control.path(api_version, kind, metadata.get("namespace"), metadata["name"])
                + "/status",
                {"status": None},
                content_type="application/merge-patch+json",
            )  # fmt: skip
    reconcile.apply(plane, context.example, context.work)
    settled = _settle(plane, "after restore", lambda: True, notes)
    after = remote_uids(remote)
    if before != after:
        notes.append(f"restore changed the workload cluster: gone {sorted(before - after)}, "
                     f"new {sorted(after - before)}")  # fmt: skip
    return settled and before == after


UNPLACEABLE = REPOSITORY / "tests" / "data" / "unplaceable-replica.yaml"


def replica_conditions(replica: dict[str, Any]) -> list[str]:
    return sorted(f"{c.get('type')}={c.get('status')} ({c.get('reason')})"
                  for c in (replica.get("status") or {}).get("conditions") or []
                  if c.get("type") not in simparity.CROSSPLANE_ONLY)  # fmt: skip


def _pending_message(remote: Client, replica: str) -> str | None:
    for pod in remote.list("v1", "Pod"):
        if pod["metadata"]["name"].startswith(replica + "-"):
            for condition in (pod.get("status") or {}).get("conditions") or []:
                if condition.get("type") == "PodScheduled" and condition.get("status") == "False":
                    return str(condition.get("message", ""))
    return None


def _unplaceable(plane: Plane, context: reconcile.ExampleContext,
                 notes: list[str]) -> dict[str, Any]:  # fmt: skip
    """The scenario simulate used to accept: real and simulated verdicts on the replica."""
    document = yaml.safe_load(UNPLACEABLE.read_text())
    namespace, name = document["metadata"]["namespace"], document["metadata"]["name"]
    control, remote = plane.client(), plane.client(workload.WORKLOAD)
    reconcile.kubectl(plane, "apply", "-f", str(UNPLACEABLE))
    real: list[str] = []
    message = None
    deadline = time.monotonic() + 180
    while time.monotonic() < deadline:
        try:
            replica = control.get(API, "ModelReplica", name, namespace)
            message = _pending_message(remote, name)
            real = replica_conditions(replica)
            if message and any(c.startswith("ModelReady=False") for c in real):
                time.sleep(5)  # let the conditions settle, then read them once more
                real = replica_conditions(control.get(API, "ModelReplica", name, namespace))
                break
        except (ApiError, KeyError):
            pass
        time.sleep(2)
    with tempfile.TemporaryDirectory() as scratch:
        together = Path(scratch) / "scenario"
        shutil.copytree(context.example, together)
        shutil.copy(UNPLACEABLE, together / UNPLACEABLE.name)
        objects = simparity.simulated_objects(together)
    simulated = next((replica_conditions(o) for o in objects if o.get("kind") == "ModelReplica"
                      and o["metadata"]["name"] == name), [])  # fmt: skip
    reconcile.kubectl(plane, "delete", "-f", str(UNPLACEABLE), "--wait=true")
    _settle(plane, "after the unplaceable replica", lambda: True, notes)
    return {"pending": message, "real": real, "simulated": simulated,
            "agree": bool(message) and real == simulated}  # fmt: skip
