"""Day-two operations on the real plane, on the converged quickstart example.

* scale: ``kubectl scale`` the ModelDeployment down to one replica, converging (the scale
  subresource, the scheduler, the remote Deployments following); back to two after the race;
* race: at one replica, which frees one of the cluster's two L4s, two tenants
  each apply a one-replica deployment at the same moment (one ``kubectl apply``). Crossplane
  reconciles them concurrently, each from its own view of the fleet (issue 23, item 3): exactly
  one may run there; the other must end ``ReplicasScheduled=False`` (InsufficientCapacity) with
  nothing left Pending on the workload cluster, and the replica that served before is never
  touched. ``modelplane simulate`` of the same files must place one and refuse the other.
  Once the racers are gone, the deployment is scaled back to two (the scale's second half);
* drain: a second InferenceCluster (``lab-b``, the same pool on the second workload cluster)
  joins; ``lab`` is tainted ``NoExecute`` until every replica serves from ``lab-b``, then
  ``lab-b`` until they are all back; every 3 s the replicas Ready and the endpoints served (Ready
  and routed by the ModelService's HTTPRoute) are recorded. The model must never be unserved.
  Then ``lab-b`` is deleted again;
* restore: every Modelplane object's status wiped (a backup restored without status), then the
  example re-applied with kubectl; nothing on the workload cluster may be deleted or created;
* unplaceable: a hand-written ModelReplica claiming a GPU no node of its pool has
  (tests/data/unplaceable-replica.yaml); the real scheduler leaves its pod Pending, and
  ``modelplane simulate`` of the same files must report the replica the same way.
"""

from __future__ import annotations

import copy
import dataclasses
import shutil
import time
from pathlib import Path
from typing import Any

import yaml

from modelplane_realplane import fleet, kubeapi, reconcile, simparity, workload
from modelplane_realplane.clusters import Plane
from modelplane_realplane.kubeapi import ApiError, Client, is_true
from modelplane_realplane.paths import REPOSITORY

EXAMPLE = "quickstart"
DEPLOYMENT = ("ml-team", "qwen3-8b")
SERVICE = ("ml-team", "chat")
CLUSTER = "lab"
SECOND_CLUSTER = "lab-b"  # the same pool again, on the second workload cluster
API = "modelplane.ai/v1alpha1"
RESTORE_WATCH = 15.0  # seconds the workload cluster is watched after a restore
TAINT = {"key": "modelplane.ai/maintenance", "effect": "NoExecute"}


@dataclasses.dataclass
class Operations:
    scale: bool = False
    drain_min_serving: int = 0
    drain_series: list[dict[str, Any]] = dataclasses.field(default_factory=list)
    drain_moved: bool = False
    # run once the example is deleted (what must outlive its stack: a kubeconfig, nodes)
    after_deletion: list[Any] = dataclasses.field(default_factory=list)
    restore_untouched: bool = False
    unplaceable: dict[str, Any] = dataclasses.field(default_factory=dict)
    race: dict[str, Any] = dataclasses.field(default_factory=dict)
    notes: list[str] = dataclasses.field(default_factory=list)
    seconds: dict[str, float] = dataclasses.field(default_factory=dict)  # per operation


def run(plane: Plane, context: reconcile.ExampleContext) -> Operations:
    done = Operations()
    clock = time.monotonic()

    def lap(step: str) -> None:
        nonlocal clock
        done.seconds[step] = round(time.monotonic() - clock, 1)
        clock = time.monotonic()

    # The race needs the one free L4 that scaling down leaves, so it runs between the scale's
    # two halves (a full scale cycle of its own would cost a minute of CI).
    done.scale = _scale(plane, 1, done.notes)
    lap("scale down")
    done.race = _race(plane, context, done.notes)
    lap("race")
    done.scale &= _scale(plane, 2, done.notes)
    lap("scale up")
    done.drain_series = _drain(plane, context, done.notes, done.after_deletion)
    done.drain_min_serving = min((int(p["serving"]) for p in done.drain_series), default=0)
    done.drain_moved = not any(n.startswith("drain ") for n in done.notes) and bool(
        done.drain_series
    )
    lap("drain")
    done.restore_untouched = _restore(plane, context, done.notes)
    lap("restore")
    done.unplaceable = _unplaceable(plane, context, done.notes)
    lap("unplaceable")
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


def _scale(plane: Plane, replicas: int, notes: list[str]) -> bool:
    remote = plane.client(workload.WORKLOAD)
    namespace, name = DEPLOYMENT
    reconcile.kubectl(plane, "scale", "modeldeployment", name, "-n", namespace,
                      f"--replicas={replicas}")  # fmt: skip
    return _settle(plane, f"scale to {replicas}",
                   lambda: len(_engine_deployments(remote)) == replicas, notes)  # fmt: skip


RACERS = ("race-a", "race-b")  # two tenants' namespaces, each with a deployment RACER
RACER = "racer"
RACE_TIMEOUT = 420.0


def racer_documents(example: Path) -> list[dict[str, Any]]:
    """Each tenant's namespace and its one-replica copy of the example's deployment."""
    (template,) = [m for m in fleet.read_manifests(example) if m.get("kind") == "ModelDeployment"]
    documents: list[dict[str, Any]] = []
    for namespace in RACERS:
        racer = copy.deepcopy(template)
        racer["metadata"] = {"name": RACER, "namespace": namespace}
        racer["spec"]["replicas"] = 1
        documents += [{"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": namespace}},
                      racer]  # fmt: skip
    return documents


def race_scenario(example: Path, work: Path) -> Path:
    """The example, scaled to one replica, and the two racers in one directory, for simulate."""
    together = work / f"{example.name}-race"
    if not together.exists():
        shutil.copytree(example, together)
        deployment = together / "deployment.yaml"
        scaled = yaml.safe_load(deployment.read_text())
        scaled["spec"]["replicas"] = 1
        deployment.write_text(yaml.safe_dump(scaled))
        (together / "racers.yaml").write_text(yaml.safe_dump_all(racer_documents(example)))
    return together


def _pending_pods(remote: Client) -> list[str]:
    return sorted(
        f"{pod['metadata'].get('namespace')}/{pod['metadata']['name']}"
        for pod in remote.list("v1", "Pod")
        if any(c.get("type") == "PodScheduled" and c.get("status") == "False"
               for c in (pod.get("status") or {}).get("conditions") or [])
    )  # fmt: skip


def race_outcome(objects: list[dict[str, Any]]) -> dict[str, Any]:
    """Of the racers among ``objects`` (the control plane's, or simulate's): which run (a
    ModelReplica Ready), and each one's ReplicasScheduled (status, reason)."""
    running = sorted(
        o["metadata"]["namespace"] for o in objects
        if o.get("kind") == "ModelReplica" and o["metadata"].get("namespace") in RACERS
        and (o["metadata"].get("labels") or {}).get("modelplane.ai/deployment") == RACER
        and is_true(o, "Ready")
    )  # fmt: skip
    scheduled = {}
    for o in objects:
        if o.get("kind") == "ModelDeployment" and o["metadata"].get("namespace") in RACERS:
            condition = kubeapi.condition(o, "ReplicasScheduled") or {}
            scheduled[o["metadata"]["namespace"]] = [condition.get("status"),
                                                     condition.get("reason")]  # fmt: skip
    return {"running": running, "scheduled": dict(sorted(scheduled.items()))}


def settled_race(outcome: dict[str, Any]) -> bool:
    """One racer runs; the other is refused for want of capacity."""
    refused = [ns for ns, (status, reason) in outcome["scheduled"].items()
               if (status, reason) == ("False", "InsufficientCapacity")]  # fmt: skip
    return len(outcome["running"]) == 1 and refused == [
        n for n in RACERS if n not in outcome["running"]
    ]


def _race(plane: Plane, context: reconcile.ExampleContext, notes: list[str]) -> dict[str, Any]:
    """The two racers at one replica of the example's deployment (``run`` scaled it down),
    until they settle; then they are deleted, and their namespaces."""
    control, remote = plane.client(), plane.client(workload.WORKLOAD)
    namespace, _ = DEPLOYMENT
    kept = {r["metadata"]["name"]: r["metadata"]["uid"]
            for r in control.list(API, "ModelReplica", namespace)}  # fmt: skip
    racers = context.work / "racers.yaml"
    racers.write_text(yaml.safe_dump_all(racer_documents(context.example)))
    reconcile.kubectl(plane, "apply", "-f", str(racers))  # both at once
    started = time.monotonic()
    pending_seen: dict[str, float] = {}  # pod -> seconds after the apply it was first Pending
    outcome: dict[str, Any] = {}
    pending: list[str] = []
    while time.monotonic() - started < RACE_TIMEOUT:
        try:
            now = round(time.monotonic() - started, 1)
            pending = _pending_pods(remote)
            for pod in pending:
                pending_seen.setdefault(pod, now)
            objects = [*control.list(API, "ModelReplica"), *control.list(API, "ModelDeployment")]
            outcome = race_outcome(objects)
            if settled_race(outcome) and not pending:
                break
        except (ApiError, OSError, KeyError) as error:
            outcome = {"error": repr(error)}
        time.sleep(2)
    else:
        notes.append(f"race: not settled after {RACE_TIMEOUT:.0f} s: {outcome}")
    seconds = round(time.monotonic() - started, 1)
    events = [e.get("reason") for ns in RACERS for e in control.list("v1", "Event", ns)
              if (e.get("involvedObject") or {}).get("kind") == "ModelDeployment"]  # fmt: skip
    untouched = {r["metadata"]["name"]: r["metadata"]["uid"]
                 for r in control.list(API, "ModelReplica", namespace)} == kept  # fmt: skip
    simulated = race_outcome(context.simulated_objects(race_scenario(context.example,
                                                                     context.work)))  # fmt: skip
    # The racers go as a user must delete them: the deployments, then, once their replicas
    # and Objects are gone, the namespaces. An Object in a terminating namespace cannot be
    # deleted (provider-kubernetes cannot record its provider config's use there), so it and
    # its remote workload would stay for ever (docs/operations.md).
    for racer_namespace in RACERS:
        control.delete(API, "ModelDeployment", RACER, racer_namespace)
    _wait_racers_gone(control, notes)
    for racer_namespace in RACERS:
        control.delete("v1", "Namespace", racer_namespace)
    return {"real": outcome, "simulated": simulated, "seconds": seconds,
            "pending_seen": pending_seen, "pending_left": pending, "untouched": untouched,
            "lost_race_event": "LostCapacityRace" in events}  # fmt: skip


def _wait_racers_gone(control: Client, notes: list[str], timeout: float = 240) -> None:
    deadline = time.monotonic() + timeout
    left: list[str] = []
    while time.monotonic() < deadline:
        left = [f"{kind} {ns}/{o['metadata']['name']}" for ns in RACERS
                for api, kind in ((API, "ModelDeployment"), (API, "ModelReplica"),
                                  (reconcile.OBJECT_APIS[0], "Object"))
                for o in control.list(api, kind, ns)]  # fmt: skip
        if not left:
            return
        time.sleep(2)
    notes.append(f"race: the racers were not gone after {timeout:.0f} s: {left[:5]}")


def serving(control: Client) -> dict[str, Any]:
    """Replicas Ready, where they run, and how many are served: Ready endpoints whose backend
    the ModelService's HTTPRoute routes to."""
    namespace, name = DEPLOYMENT
    replicas = [
        r
        for r in control.list(API, "ModelReplica", namespace)
        if (r["metadata"].get("labels") or {}).get("modelplane.ai/deployment") == name
    ]
    ready_backends = {
        ((e.get("status") or {}).get("routing") or {}).get("backendName")
        for e in control.list(API, "ModelEndpoint", namespace)
        if is_true(e, "Ready")
        and (e["metadata"].get("labels") or {}).get("modelplane.ai/deployment") == name
    }
    routed = {
        ref.get("name")
        for route in control.list("gateway.networking.k8s.io/v1", "HTTPRoute", SERVICE[0])
        if (route["metadata"].get("labels") or {}).get("crossplane.io/composite") == SERVICE[1]
        for rule in route["spec"].get("rules") or []
        for ref in rule.get("backendRefs") or []
    }
    return {
        "ready": sum(is_true(r, "Ready") for r in replicas),
        "serving": len(ready_backends & routed),
        "clusters": sorted(str(r["spec"].get("clusterName")) for r in replicas),
    }


def _second_cluster(plane: Plane, example: Path) -> tuple[list[dict[str, Any]], list[Any]]:
    """The example's InferenceCluster again, as ``lab-b`` on the second workload cluster:
    (what to apply on the control plane, the nodes and devices it has)."""
    manifests = fleet.read_manifests(example)
    first = next(m for m in manifests if m.get("kind") == "InferenceCluster")
    second = copy.deepcopy(first)
    second["metadata"] = {"name": SECOND_CLUSTER, "labels": first["metadata"].get("labels", {})}
    secret = f"{SECOND_CLUSTER}-kubeconfig"
    second["spec"]["cluster"]["existing"]["secretRef"]["name"] = secret
    documents = [workload.kubeconfig_secret(plane, secret, "modelplane-system", workload.SECOND),
                 second]  # fmt: skip
    return documents, fleet.cluster_objects([*manifests, second], SECOND_CLUSTER)


def _taint(control: Client, cluster: str, taints: list[dict[str, Any]]) -> None:
    control.request("PATCH", control.path(API, "InferenceCluster", None, cluster),
                    {"spec": {"taints": taints or None}},
                    content_type="application/merge-patch+json")  # fmt: skip


def _move(plane: Plane, source: str, target: str, series: list[dict[str, Any]], *,
          timeout: float = 300, every: float = 3) -> bool:  # fmt: skip
    """Taint ``source`` NoExecute and sample until every replica serves from ``target``."""
    control = plane.client()
    _taint(control, source, [TAINT])
    started, done = time.monotonic(), False
    while time.monotonic() - started < timeout and not done:
        try:
            sample = serving(control)
        except (ApiError, OSError, KeyError) as error:
            sample = {"error": repr(error), "ready": 0, "serving": 0, "clusters": []}
        sample = {"t": round(time.monotonic() - started, 1), "from": source, **sample}
        series.append(sample)
        wanted = len(sample["clusters"]) or 1
        done = set(sample["clusters"]) == {target} and sample["serving"] >= wanted
        time.sleep(every)
    _taint(control, source, [])
    return done


def _drain(plane: Plane, context: reconcile.ExampleContext, notes: list[str],
           cleanups: list[Any]) -> list[dict[str, Any]]:  # fmt: skip
    """Drain ``lab`` onto a second cluster and back, sampling what serves every 3 s."""
    control, second = plane.client(), plane.client(workload.SECOND)
    documents, objects = _second_cluster(plane, context.example)
    fleet.apply_objects(second, objects)
    for document in documents:
        control.apply(document)
    series: list[dict[str, Any]] = []
    if _settle(plane, "a second cluster", lambda: True, notes):
        for source, target in ((CLUSTER, SECOND_CLUSTER), (SECOND_CLUSTER, CLUSTER)):
            if not _move(plane, source, target, series):
                notes.append(f"drain {source} -> {target}: replicas did not all move")
    # Deleted with the example (whose deletion waits until its stack is gone from both
    # clusters); its kubeconfig and nodes only after that: the stack needs them to uninstall.
    try:
        control.delete(API, "InferenceCluster", SECOND_CLUSTER)
    except ApiError as error:  # Usage protection: replayed once its replicas' Objects are gone
        notes.append(f"deleting {SECOND_CLUSTER} refused at first: {error}"[:300])

    def after_deletion() -> None:
        for obj in reversed(objects):
            second.delete(obj["apiVersion"], obj["kind"], obj["metadata"]["name"])
        control.delete("v1", "Secret", f"{SECOND_CLUSTER}-kubeconfig", "modelplane-system")

    cleanups.append(after_deletion)
    return series


def remote_uids(remote: Client) -> set[str]:
    """``Kind ns/name uid`` of what Modelplane made on the workload cluster (pods aside: they
    belong to their controllers; a restore must leave those controllers untouched)."""
    kinds = tuple(k for k in reconcile.REMOTE_KINDS if k[1] != "Pod")
    return reconcile.inventory(remote, kinds, with_uid=True)


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
    # Watched for a while, not read once: every function runs again on status-less XRs (two
    # settling TTLs at least) and anything it got wrong would show as a changed UID.
    changed: set[str] = set()
    watched_until = time.monotonic() + RESTORE_WATCH
    while time.monotonic() < watched_until:
        changed |= before ^ remote_uids(remote)
        time.sleep(3)
    settled = _settle(plane, "after restore", lambda: True, notes)
    changed |= before ^ remote_uids(remote)
    if changed:
        notes.append(f"restore changed the workload cluster: {sorted(changed)}")
    return settled and not changed


UNPLACEABLE = REPOSITORY / "tests" / "data" / "unplaceable-replica.yaml"


def unplaceable_scenario(example: Path, work: Path) -> Path:
    """The example and the unplaceable replica in one directory, for simulate."""
    together = work / f"{example.name}-unplaceable"
    if not together.exists():
        shutil.copytree(example, together)
        shutil.copy(UNPLACEABLE, together / UNPLACEABLE.name)
    return together


def replica_conditions(replica: dict[str, Any]) -> list[str]:
    return sorted(f"{c.get('type')}={c.get('status')} ({c.get('reason')})"
                  for c in (replica.get("status") or {}).get("conditions") or []
                  if c.get("type") not in simparity.CROSSPLANE_ONLY
                  and (c.get("type"), c.get("status")) not in simparity.NORMAL)  # fmt: skip


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
    objects = context.simulated_objects(unplaceable_scenario(context.example, context.work))
    simulated = next((replica_conditions(o) for o in objects if o.get("kind") == "ModelReplica"
                      and o["metadata"]["name"] == name), [])  # fmt: skip
    # Deleted with the example, which waits until its Objects are gone everywhere.
    reconcile.kubectl(plane, "delete", "-f", str(UNPLACEABLE), "--wait=false")
    return {"pending": message, "real": real, "simulated": simulated,
            "agree": bool(message) and real == simulated}  # fmt: skip
