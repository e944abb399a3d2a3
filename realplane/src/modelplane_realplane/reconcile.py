"""The examples, reconciled for real: applied with kubectl, judged on both clusters.

For one example directory: the workload cluster gets the nodes the example's InferenceClusters
describe (fleet.py: kwok nodes, ResourceSlices, the storage class); the directory is applied
with the real ``kubectl apply`` exactly as its README tells a user to, the placeholder
kubeconfig Secret swapped for the workload cluster's real one; then ``problems`` is polled
until nothing is left to say. Nothing is patched by hand. See design/realplane.md.
"""

from __future__ import annotations

import dataclasses
import shutil
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import yaml
from compose_inference_cluster.tenants import TENANT_OF_LABEL
from modelplane_common.naming import CACHE_CLUSTER_LABEL, CLUSTER_LABEL

from modelplane_realplane import fleet, simparity, workload
from modelplane_realplane.build import binary
from modelplane_realplane.clusters import Plane
from modelplane_realplane.kubeapi import ApiError, Client, condition, is_true

# Progress goes to the process's own stderr: the examples reconcile in a background thread
# while other tests run, and a test that swaps sys.stdout (click's CliRunner) must not capture
# these lines as its command's output.
_PROGRESS = sys.__stderr__
EXAMPLES = ("quickstart", "multi-node", "disaggregated", "canary")
OBJECT_APIS = ("kubernetes.m.crossplane.io/v1alpha1", "kubernetes.crossplane.io/v1alpha2")
RELEASE_API = "helm.m.crossplane.io/v1beta1"


@dataclasses.dataclass
class Outcome:
    example: str
    ready: bool
    seconds: float
    problems: list[str]


# -------------------------------------------------------------------------------------------
# applying


def prepared_copy(plane: Plane, example: Path, into: Path) -> Path:
    """``example`` copied to ``into``, each placeholder kubeconfig Secret overwritten with the
    workload cluster's real kubeconfig, as the examples' READMEs tell a user to."""
    target = into / example.name
    if target.exists():
        shutil.rmtree(target)
    shutil.copytree(example, target)
    for path in sorted(target.rglob("*.y*ml")):
        documents = [d for d in yaml.safe_load_all(path.read_text()) if d]
        secrets = [d for d in documents if d.get("kind") == "Secret"
                   and "kubeconfig" in (d.get("stringData") or {})]  # fmt: skip
        if not secrets:
            continue
        real = [
            workload.kubeconfig_secret(plane, d["metadata"]["name"], d["metadata"]["namespace"])
            if d in secrets else d
            for d in documents
        ]  # fmt: skip
        path.write_text(yaml.safe_dump_all(real, sort_keys=False))
    return target


def kubectl(plane: Plane, *args: str, cluster: str = "", check: bool = True) -> str:
    done = subprocess.run(
        [str(binary("kubectl")), f"--kubeconfig={plane.kubeconfig_of(cluster)}", *args],
        capture_output=True, text=True, timeout=300, check=False,
    )  # fmt: skip
    if check and done.returncode != 0:
        raise RuntimeError(f"kubectl {' '.join(args)} failed:\n{done.stdout}{done.stderr}")
    return done.stdout + done.stderr


def install_fleet(plane: Plane, example: Path) -> dict[str, list[dict[str, Any]]]:
    """The nodes and devices the example's adopted clusters already have."""
    client = plane.client(workload.WORKLOAD)
    fleets = fleet.fleet_for_example(example)
    for objects in fleets.values():
        fleet.apply_objects(client, objects)
    return fleets


def apply(plane: Plane, example: Path, work: Path) -> None:
    """As the example's README says: its namespaces first (kubectl applies a directory in
    file-name order), then the whole directory."""
    copy = prepared_copy(plane, example, work)
    if (copy / "namespaces.yaml").is_file():
        kubectl(plane, "apply", "-f", str(copy / "namespaces.yaml"))
    kubectl(plane, "apply", "-f", str(copy))


# -------------------------------------------------------------------------------------------
# judging


def xr_kinds(client: Client) -> list[tuple[str, str]]:
    """(apiVersion, kind) of every Modelplane composite resource the plane serves."""
    kinds = []
    for xrd in client.list("apiextensions.crossplane.io/v2", "CompositeResourceDefinition"):
        spec = xrd["spec"]
        served = [v["name"] for v in spec["versions"] if v.get("referenceable")]
        kinds.append((f"{spec['group']}/{served[0]}", spec["names"]["kind"]))
    return kinds


def _say(obj: dict[str, Any], *types: str) -> list[str]:
    metadata = obj["metadata"]
    where = f"{obj['kind']} {metadata.get('namespace', '-')}/{metadata['name']}"
    said = []
    for kind in types:
        found = condition(obj, kind)
        if found is None or found.get("status") != "True":
            detail = "no condition" if found is None else (
                f"{found.get('reason')}: {found.get('message', '')}".strip())  # fmt: skip
            said.append(f"{where}: {kind} is not True ({detail[:300]})")
    return said


def control_plane_problems(client: Client) -> list[str]:
    problems = []
    for api_version, kind in xr_kinds(client):
        for xr in client.list(api_version, kind):
            problems += _say(xr, "Ready", "Synced")
    for api_version in OBJECT_APIS:
        try:
            objects = client.list(api_version, "Object")
        except (ApiError, KeyError):
            continue
        for obj in objects:
            problems += _say(obj, "Synced", "Ready")
        problems += tenant_namespace_problems(objects)
    for release in client.list(RELEASE_API, "Release"):
        problems += _say(release, "Synced", "Ready")
    return problems


def tenant_namespace_problems(objects: list[dict[str, Any]]) -> list[str]:
    """Each namespace a replica's or cache's Object deploys into on a cluster has that
    cluster's own namespace Object (D10). Its replicas may be up before it: the namespace may
    still be on the workload cluster from an earlier example (those Objects never delete it),
    and the InferenceCluster learns of a new tenant only on its next poll."""
    used, composed = set(), set()
    for obj in objects:
        labels = obj["metadata"].get("labels") or {}
        manifest = ((obj.get("spec") or {}).get("forProvider") or {}).get("manifest") or {}
        namespace = (manifest.get("metadata") or {}).get("namespace")
        cluster = labels.get(CLUSTER_LABEL) or labels.get(CACHE_CLUSTER_LABEL)
        if cluster and namespace and namespace != "default":
            used.add((cluster, namespace))
        if TENANT_OF_LABEL in labels and manifest.get("kind") == "Namespace":
            composed.add((labels[TENANT_OF_LABEL], manifest["metadata"].get("name")))
    return [f"InferenceCluster {cluster}: no namespace Object for tenant {tenant} yet"
            for cluster, tenant in sorted(used - composed)]  # fmt: skip


def _remote_manifests(client: Client) -> list[dict[str, Any]]:
    manifests = []
    for api_version in OBJECT_APIS:
        try:
            objects = client.list(api_version, "Object")
        except (ApiError, KeyError):
            continue
        manifests += [o["spec"]["forProvider"]["manifest"] for o in objects]
    return manifests


def workload_problems(control: Client, remotes: list[Client]) -> list[str]:
    """Every Deployment and LeaderWorkerSet Modelplane composed is up (on whichever workload
    cluster it went to), its pods Running on nodes of the pool they ask for, their
    ResourceClaims allocated from devices of those nodes."""
    problems = []
    for manifest in _remote_manifests(control):
        kind, metadata = manifest.get("kind"), manifest.get("metadata") or {}
        where = f"{kind} {metadata.get('namespace')}/{metadata.get('name')} (workload cluster)"
        if kind in ("Deployment", "LeaderWorkerSet"):
            found = next((f for f in (_get(r, manifest) for r in remotes) if f), None)
            if found is None:
                problems.append(f"{where}: missing")
            elif not is_true(found, "Available"):
                problems.append(f"{where}: not Available ({_status_line(found)})")
    for remote in remotes:
        nodes = {n["metadata"]["name"]: n for n in remote.list("v1", "Node")}
        pods = {(p["metadata"]["namespace"], p["metadata"]["name"]): p
                for p in remote.list("v1", "Pod")}  # fmt: skip
        for pod in pods.values():
            problems += _pod_problems(pod, nodes)
        published = {(s["spec"]["pool"]["name"], s["spec"]["driver"], d["name"])
                     for s in remote.list("resource.k8s.io/v1", "ResourceSlice")
                     for d in s["spec"].get("devices") or []}  # fmt: skip
        for claim in remote.list("resource.k8s.io/v1", "ResourceClaim"):
            problems += _claim_problems(claim, pods, published)
    return problems


def _claim_problems(claim: dict[str, Any], pods: dict[tuple[str, str], dict[str, Any]],
                    published: set[tuple[str, str, str]]) -> list[str]:  # fmt: skip
    """Allocated, from devices published on the node its pod runs on."""
    metadata, status = claim["metadata"], claim.get("status") or {}
    where = f"ResourceClaim {metadata['namespace']}/{metadata['name']}"
    results = ((status.get("allocation") or {}).get("devices") or {}).get("results") or []
    if not results:
        return [f"{where}: not allocated"]
    nodes = {(pods.get((metadata["namespace"], r.get("name", ""))) or {}).get("spec", {})
             .get("nodeName") for r in status.get("reservedFor") or []}  # fmt: skip
    wrong = [
        r for r in results
        if (r.get("pool"), r.get("driver"), r.get("device")) not in published
        or r.get("pool") not in nodes
    ]  # fmt: skip
    if wrong:
        return [f"{where}: devices {wrong} are not on its pod's node {sorted(map(str, nodes))}"]
    return []


def _pod_problems(pod: dict[str, Any], nodes: dict[str, dict[str, Any]]) -> list[str]:
    metadata, spec, status = pod["metadata"], pod["spec"], pod.get("status") or {}
    where = f"Pod {metadata['namespace']}/{metadata['name']} (workload cluster)"
    if status.get("phase") == "Succeeded":
        return []
    if status.get("phase") != "Running" or not is_true(pod, "Ready"):
        reason = "; ".join(f"{c.get('type')}={c.get('status')} {c.get('message', '')}"
                           for c in status.get("conditions") or [])  # fmt: skip
        return [f"{where}: {status.get('phase')} ({reason[:300]})"]
    node = nodes.get(spec.get("nodeName", ""))
    wanted = spec.get("nodeSelector") or {}
    labels = (node or {}).get("metadata", {}).get("labels") or {}
    wrong = {k: v for k, v in wanted.items() if labels.get(k) != v}
    return [f"{where}: on node {spec.get('nodeName')} lacking {wrong}"] if wrong else []


def _get(client: Client, manifest: dict[str, Any]) -> dict[str, Any] | None:
    metadata = manifest["metadata"]
    try:
        found: dict[str, Any] = client.get(manifest["apiVersion"], manifest["kind"],
                                           metadata["name"], metadata.get("namespace"))  # fmt: skip
    except (ApiError, KeyError):
        return None
    return found


def _status_line(obj: dict[str, Any]) -> str:
    status = obj.get("status") or {}
    conditions = ", ".join(f"{c.get('type')}={c.get('status')}"
                           for c in status.get("conditions") or [])  # fmt: skip
    replicas = {k: v for k, v in status.items() if "eplicas" in k}
    return f"{replicas} {conditions}"


def routing_problems(control: Client) -> list[str]:
    """Each ModelService's HTTPRoute routes to every Ready ModelEndpoint its selectors match."""
    problems = []
    api = "modelplane.ai/v1alpha1"
    services = control.list(api, "ModelService")
    if not services:
        return []
    endpoints = control.list(api, "ModelEndpoint")
    routes = control.list("gateway.networking.k8s.io/v1", "HTTPRoute")
    for service in services:
        namespace, name = service["metadata"]["namespace"], service["metadata"]["name"]
        wanted = set()
        for entry in service["spec"].get("endpoints") or []:
            labels = (entry.get("selector") or {}).get("matchLabels") or {}
            for endpoint in endpoints:
                mine = endpoint["metadata"].get("labels") or {}
                if (endpoint["metadata"]["namespace"] == namespace and is_true(endpoint, "Ready")
                        and all(mine.get(k) == v for k, v in labels.items())):  # fmt: skip
                    backend = (endpoint.get("status") or {}).get("routing") or {}
                    wanted.add(backend.get("backendName"))
        routed = {
            ref.get("name")
            for route in routes
            if route["metadata"].get("namespace") == namespace
            and (route["metadata"].get("labels") or {}).get("crossplane.io/composite") == name
            for rule in route["spec"].get("rules") or []
            for ref in rule.get("backendRefs") or []
        }
        if wanted - routed:
            problems.append(f"ModelService {namespace}/{name}: its HTTPRoute does not route to "
                            f"Ready endpoints' backends {sorted(wanted - routed)}")  # fmt: skip
    return problems


def problems(plane: Plane) -> list[str]:
    control = plane.client()
    remotes = [plane.client(prefix) for prefix in workload.WORKLOADS
               if prefix + "kube-apiserver" in plane.ports]  # fmt: skip
    return (control_plane_problems(control) + routing_problems(control)
            + workload_problems(control, remotes))  # fmt: skip


def converge(plane: Plane, example: Path, work: Path, timeout: float = 600) -> Outcome:
    """Apply ``example`` and wait until nothing is wrong on either cluster."""
    install_fleet(plane, example)
    started = time.monotonic()
    apply(plane, example, work)
    left: list[str] = ["not observed yet"]
    clean = 0  # consecutive polls that found nothing wrong: two make convergence
    while time.monotonic() - started < timeout:
        try:
            left = problems(plane)
        except (ApiError, OSError, KeyError) as error:  # KeyError: a kind not served yet
            left = [f"cannot observe: {error!r}"]
        clean = 0 if left else clean + 1
        if clean == 2:
            break
        time.sleep(2)
    return Outcome(example.name, not left, round(time.monotonic() - started, 1), left)


# -------------------------------------------------------------------------------------------
# deleting

# What an ML team deletes first, then what a platform team deletes (Usages protect the rest).
DELETION_ORDER = (
    ("ModelDeployment",),
    ("ModelService", "ModelEndpoint", "ModelCache"),
    ("InferenceCluster", "InferenceGateway", "InferenceClass"),
)
# Remote kinds a composed object may leave behind; Helm keeps a chart's CRDs by design.
REMOTE_KINDS = (
    ("apps/v1", "Deployment"), ("leaderworkerset.x-k8s.io/v1", "LeaderWorkerSet"),
    ("v1", "Service"), ("v1", "PersistentVolumeClaim"), ("batch/v1", "Job"),
    ("resource.k8s.io/v1", "ResourceClaimTemplate"), ("v1", "Pod"),
    ("gateway.networking.k8s.io/v1", "HTTPRoute"), ("gateway.networking.k8s.io/v1", "Gateway"),
)  # fmt: skip


def inventory(client: Client, kinds: tuple[tuple[str, str], ...] = REMOTE_KINDS,
              with_uid: bool = False) -> set[str]:  # fmt: skip
    """``Kind namespace/name`` (and `` uid``) of every object of ``kinds`` (the built-in
    ``kubernetes`` Service aside)."""
    found = set()
    for api_version, kind in kinds:
        try:
            items = client.list(api_version, kind)
        except (ApiError, KeyError):
            continue
        for item in items:
            metadata = item["metadata"]
            if kind == "Service" and metadata["name"] == "kubernetes":
                continue
            uid = f" {metadata['uid']}" if with_uid else ""
            found.add(f"{kind} {metadata.get('namespace', '-')}/{metadata['name']}{uid}")
    return found


def _mine(manifests: list[dict[str, Any]], kinds: tuple[str, ...]) -> list[dict[str, Any]]:
    return [m for m in manifests if m.get("kind") in kinds
            and str(m.get("apiVersion", "")).startswith("modelplane.ai/")]  # fmt: skip


@dataclasses.dataclass
class Deletion:
    clean: bool
    seconds: float
    left: list[str]
    refused: list[str]  # deletions Usage protection refused at first (then replayed)
    gone: dict[str, float]  # "Kind name" (and "replica Objects") -> seconds until gone
    order_ok: bool  # each InferenceCluster outlived every Object its replicas made


def delete(plane: Plane, example: Path, timeout: float = 300) -> Deletion:
    """Delete what ``example`` applied, one request after the other in ``DELETION_ORDER``
    (as a user would), with Usage protection on; then watch everything go."""
    control = plane.client()
    targets = [m for kinds in DELETION_ORDER for m in _mine(fleet.read_manifests(example), kinds)]
    started = time.monotonic()
    refused = []
    for obj in targets:
        metadata = obj["metadata"]
        try:
            control.delete(obj["apiVersion"], obj["kind"], metadata["name"],
                           metadata.get("namespace"))  # fmt: skip
        except ApiError as error:  # Usage protection: replayed once the Usage is gone
            refused.append(f"{obj['kind']} {metadata['name']}: {error}"[:300])
    remotes = [plane.client(prefix) for prefix in workload.WORKLOADS
               if prefix + "kube-apiserver" in plane.ports]  # fmt: skip
    gone: dict[str, float] = {}
    deadline = time.monotonic() + timeout
    while True:
        elapsed = round(time.monotonic() - started, 1)
        for obj in targets:
            label = f"{obj['kind']} {obj['metadata']['name']}"
            if label not in gone and _get(control, obj) is None:
                gone[label] = elapsed
        if "replica Objects" not in gone and not _replica_objects(control):
            gone["replica Objects"] = elapsed
        left = control_plane_leftovers(control) + sorted(
            item for remote in remotes for item in inventory(remote)
        )
        if (not left and len(gone) == len(targets) + 1) or time.monotonic() > deadline:
            break
        time.sleep(2)
    clusters = [t for t in gone if t.startswith("InferenceCluster ")]
    order_ok = all(gone[c] >= gone.get("replica Objects", float("inf")) for c in clusters)
    return Deletion(not left, round(time.monotonic() - started, 1), left, refused, gone,
                    order_ok)  # fmt: skip


def _replica_objects(client: Client) -> list[dict[str, Any]]:
    """Objects a ModelReplica composed (labelled with the cluster they are on)."""
    return [o for o in client.list(OBJECT_APIS[0], "Object")
            if "modelplane.ai/cluster" in (o["metadata"].get("labels") or {})]  # fmt: skip


def control_plane_leftovers(client: Client) -> list[str]:
    left = []
    for api_version, kind in xr_kinds(client):
        left += [f"{kind} {x['metadata']['name']}" for x in client.list(api_version, kind)]
    for api_version in (*OBJECT_APIS, RELEASE_API):
        for kind in ("Object", "Release"):
            try:
                items = client.list(api_version, kind)
            except (ApiError, KeyError):
                continue
            left += [f"{kind} {i['metadata'].get('namespace')}/{i['metadata']['name']}"
                     for i in items]  # fmt: skip
    return left


def remove_fleet(plane: Plane, fleets: dict[str, list[dict[str, Any]]]) -> None:
    client = plane.client(workload.WORKLOAD)
    for objects in fleets.values():
        for obj in reversed(objects):
            metadata = obj["metadata"]
            client.delete(obj["apiVersion"], obj["kind"], metadata["name"],
                          metadata.get("namespace"))  # fmt: skip


# -------------------------------------------------------------------------------------------
# one example, start to finish


@dataclasses.dataclass
class ExampleContext:
    example: Path
    work: Path
    simulations: simparity.Simulations | None = None

    def simulated_objects(self, directory: Path) -> list[dict[str, Any]]:
        if self.simulations is None:
            return simparity.simulated_objects(directory)
        return self.simulations.objects(directory)


@dataclasses.dataclass
class ExampleRun:
    outcome: Outcome
    differences: list[str]  # simulate against the real plane (simparity.py)
    deletion: Deletion
    operations: Any = None  # operations.Operations, for the example operated on


Operate = Callable[[Plane, ExampleContext], Any]


def run_example(plane: Plane, example: Path, work: Path, operate: Operate | None = None,
                simulations: simparity.Simulations | None = None) -> ExampleRun:  # fmt: skip
    """Apply, converge, compare with simulate, operate (optionally), delete, clear the fleet.
    ``simulations`` may already be running simulate on the example (and on what ``operate``
    simulates)."""
    context = ExampleContext(example, work, simulations)
    fleets = fleet.fleet_for_example(example)
    outcome = converge(plane, example, work)
    print(
        f"{example.name}: converged={outcome.ready} in {outcome.seconds} s",
        file=_PROGRESS,
        flush=True,
    )
    control = plane.client()
    simulated = simparity.snapshot(context.simulated_objects(example))
    differences = simparity.differences(simulated, simparity.real(control, xr_kinds(control)))
    operated = None
    if operate is not None and outcome.ready:
        operated = operate(plane, context)
    deletion = delete(plane, example)
    print(
        f"{example.name}: deleted clean={deletion.clean} in {deletion.seconds} s",
        file=_PROGRESS,
        flush=True,
    )
    for cleanup in getattr(operated, "after_deletion", []):
        cleanup()
    remove_fleet(plane, fleets)
    return ExampleRun(outcome, differences, deletion, operated)
