"""Day-two operations on the real plane, on the converged quickstart example.

* scale: ``kubectl scale`` the ModelDeployment down to one replica and back, converging each
  time (the scale subresource, the scheduler, the remote Deployments following);
* drain: taint the InferenceCluster ``NoExecute`` and record, every few seconds, how many
  replicas are Ready and routed (the ModelService's HTTPRoute backends); the drain must never
  leave the model unserved. With one cluster the replicas have nowhere to go: the drain is
  blocked and they keep serving, which is what a user must see;
* restore: every Modelplane object's status wiped (a backup restored without status), then the
  example re-applied with kubectl; nothing on the workload cluster may be deleted or created.
"""

from __future__ import annotations

import dataclasses
import time
from typing import Any

from modelplane_realplane import reconcile, workload
from modelplane_realplane.clusters import Plane
from modelplane_realplane.kubeapi import ApiError, Client, is_true

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
    notes: list[str] = dataclasses.field(default_factory=list)


def run(plane: Plane, context: reconcile.ExampleContext) -> Operations:
    done = Operations()
    done.scale = _scale(plane, done.notes)
    done.drain_series = _drain(plane)
    done.drain_min_serving = min((int(p["serving"]) for p in done.drain_series), default=0)
    done.restore_untouched = _restore(plane, context, done.notes)
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
        except (ApiError, OSError) as error:
            left = [str(error)]
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
