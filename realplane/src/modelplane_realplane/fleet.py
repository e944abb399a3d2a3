"""What an adopted GPU cluster already has, built from an example's manifests.

An ``InferenceCluster`` of source ``Existing`` describes nodes an operator already runs: each
``spec.nodePools[]`` entry names an ``InferenceClass`` and a node count. On a real plane they
are kwok Nodes (annotated ``kwok.x-k8s.io/node: fake``) carrying what a real GPU node carries
(pool label, GPU feature labels, the ``nvidia.com/gpu`` taint, machine-sized capacity) and the
DRA ``ResourceSlice``s their drivers would publish. Two stand-ins play parts no process here
can: a volume provisioner for the cache StorageClass, and a Gateway controller's data plane
(addresses and status, as the controller writes them once its proxy is up). Run them with
``python -m modelplane_realplane.fleet --kubeconfig K [--kubeconfig K2] --gateway-controller
NAME...``.
"""

from __future__ import annotations

import argparse
import base64
import datetime
import hashlib
import re
import signal
import sys
import tempfile
import threading
import uuid
from collections.abc import Callable, Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

import yaml
from modelplane_common.quantity import Quantity, QuantityError

from modelplane_realplane.kubeapi import ApiError, Client

JSON = dict[str, Any]
Labels = Mapping[str, Mapping[str, str]]  # namespace -> its labels
MODELPLANE_API = "modelplane.ai/v1alpha1"
DRA_API = "resource.k8s.io/v1"
GATEWAY_GROUP = "gateway.networking.k8s.io"
GATEWAY_API = f"{GATEWAY_GROUP}/v1"
POOL_LABEL = "modelplane.ai/pool"  # compose_model_replica.pods.POOL_LABEL
KWOK_ANNOTATION = "kwok.x-k8s.io/node"
GPU_DRIVER = "gpu.nvidia.com"  # the NVIDIA DRA chart installs this driver's DeviceClass
GPU_TAINT = {"key": "nvidia.com/gpu", "value": "present", "effect": "NoSchedule"}
STANDIN_PROVISIONER = "modelplane.realplane/stand-in"
PROVISIONED_BY = "pv.kubernetes.io/provisioned-by"
VOLUME_ROOT = "/var/lib/realplane"
ENVOY_CONTROLLER = "gateway.envoyproxy.io/gatewayclass-controller"
_DATACENTER_GPU = Quantity.parse("40Gi")
_NOT_LABEL = re.compile(r"[^A-Za-z0-9_.-]+")


# -------------------------------------------------------------------------------------------
# Fleet: pure functions of the manifests


def read_manifests(directory: Path | str) -> list[JSON]:
    """Every YAML document in the ``.yaml``/``.yml`` files under ``directory``, by path."""
    found: list[JSON] = []
    for path in sorted(Path(directory).rglob("*")):
        if path.is_file() and path.suffix in (".yaml", ".yml"):
            found.extend(d for d in yaml.safe_load_all(path.read_text()) if isinstance(d, dict))
    return found


def _modelplane(manifests: Iterable[JSON], kind: str) -> list[JSON]:
    return [o for o in manifests if o.get("apiVersion") == MODELPLANE_API and o.get("kind") == kind]


def _named(manifests: Iterable[JSON], kind: str, name: str) -> JSON:
    for obj in _modelplane(manifests, kind):
        if obj["metadata"]["name"] == name:
            return obj
    raise ValueError(f"no {kind} named {name!r} in the manifests")


def _gpu(cls: JSON) -> tuple[int, Quantity | None, JSON] | None:
    """(count, memory of one GPU, device entry) for the class's first gpu.nvidia.com entry."""
    for device in cls["spec"].get("devices") or []:
        if device.get("driver") == GPU_DRIVER:
            try:
                memory = Quantity.parse(str(device["capacity"]["memory"]["value"]))
            except (KeyError, TypeError, QuantityError):
                memory = None
            return int(device.get("count", 1)), memory, device
    return None


def node_resources(cls: JSON) -> dict[str, str]:
    """Capacity (= allocatable) of a node of the class. An InferenceClass carries no cpu or
    memory (only devices and, for cloud pools, a machine type and disk size), so the rule
    follows its GPUs as the clouds' GPU machine shapes do:

    * data-centre GPUs (>= 40Gi each: A100, H100, H200, B200): 26 cpu, 230Gi memory and 750Gi
      local SSD per GPU; 8 GPUs make 208 cpu / 1840Gi (~1.8Ti) / 6000Gi (a3-highgpu-8g);
    * smaller GPUs (L4, A10, T4, or memory not given): 1 GPU 8 cpu / 32Gi (g2-standard-8),
      n GPUs 12n cpu / 48n Gi (g2-standard-24/48/96), a 100Gi boot disk;
    * no GPU: 8 cpu / 32Gi / 100Gi.

    A provisioning block's ``diskSizeGb`` sizes ephemeral-storage; pods is kubelet's 110.
    """
    count, memory, _ = _gpu(cls) or (0, None, None)
    if count and memory is not None and memory.compare(_DATACENTER_GPU) >= 0:
        cpu, mem, disk = 26 * count, 230 * count, 750 * count
    elif count > 1:
        cpu, mem, disk = 12 * count, 48 * count, 100
    else:
        cpu, mem, disk = 8, 32, 100
    for cloud in (cls["spec"].get("provisioning") or {}).values():
        disk = cloud.get("diskSizeGb", disk) if isinstance(cloud, dict) else disk
    return {"cpu": str(cpu), "memory": f"{mem}Gi", "ephemeral-storage": f"{disk}Gi",
            "pods": "110"}  # fmt: skip


def gpu_labels(cls: JSON) -> dict[str, str]:
    """The labels GPU feature discovery and NFD put on a node with the class's GPUs."""
    count, memory, device = _gpu(cls) or (0, None, {})
    if not count:
        return {}
    labels = {"nvidia.com/gpu.present": "true", "nvidia.com/gpu.count": str(count),
              "feature.node.kubernetes.io/pci-10de.present": "true"}  # fmt: skip
    if memory is not None:
        labels["nvidia.com/gpu.memory"] = str(memory.as_integer() // 2**20)  # MiB
    attributes = device.get("attributes") or {}
    for key, label in (("productName", "gpu.product"), ("architecture", "gpu.family")):
        value = (attributes.get(key) or {}).get("string")
        if isinstance(value, str) and value:
            value = value if key == "productName" else value.lower()
            labels[f"nvidia.com/{label}"] = _NOT_LABEL.sub("-", value)[:63].strip("-_.")
    return labels


def node(cluster: str, pool: JSON, index: int, cls: JSON) -> JSON:
    """Node ``<cluster>-<pool>-<index>`` as the operator's pool and kwok present it."""
    name = f"{cluster}-{pool['name']}-{index}"
    labels = {POOL_LABEL: pool["name"], "kubernetes.io/hostname": name,
              "kubernetes.io/os": "linux", "kubernetes.io/arch": "amd64", "type": "kwok",
              **gpu_labels(cls)}  # fmt: skip
    resources = node_resources(cls)
    return {
        "apiVersion": "v1", "kind": "Node",
        "metadata": {"name": name, "labels": labels, "annotations": {KWOK_ANNOTATION: "fake"}},
        "spec": {"taints": [dict(GPU_TAINT)] if _gpu(cls) else []},
        "status": {"capacity": resources, "allocatable": dict(resources)},
    }  # fmt: skip


def _local(key: str, driver: str) -> str:
    """An attribute or capacity name as its driver publishes it: an unqualified name is in
    the driver's domain, so ``<driver>/x`` is written ``x``; other domains stay qualified."""
    domain, slash, name = key.rpartition("/")
    return name if slash and domain == driver else key


def _device(node_name: str, entry: JSON, index: int) -> JSON:
    driver = entry["driver"]
    attributes = {_local(k, driver): dict(v) for k, v in (entry.get("attributes") or {}).items()}
    if driver == GPU_DRIVER:  # what NVIDIA's driver adds; its DeviceClass selects type 'gpu'
        serial = uuid.UUID(bytes=hashlib.sha256(f"{node_name}/{index}".encode()).digest()[:16])
        attributes = {"type": {"string": "gpu"}, "index": {"int": index},
                      "uuid": {"string": f"GPU-{serial}"}, **attributes}  # fmt: skip
    capacity = {_local(k, driver): {"value": str(v["value"])}
                for k, v in (entry.get("capacity") or {}).items()}  # fmt: skip
    return {"name": f"{entry['name']}-{index}", "attributes": attributes, "capacity": capacity}


def resource_slices(node_name: str, cls: JSON) -> list[JSON]:
    """A slice per driver of the class (Synthetic entries too), its pool named after the node;
    devices ``<entry name>-<i>``."""
    by_driver: dict[str, list[JSON]] = {}
    for entry in cls["spec"].get("devices") or []:
        devices = by_driver.setdefault(entry["driver"], [])
        devices.extend(_device(node_name, entry, i) for i in range(int(entry.get("count", 1))))
    return [{
        "apiVersion": DRA_API, "kind": "ResourceSlice",
        "metadata": {"name": f"{node_name}-{driver}"},
        "spec": {"driver": driver, "nodeName": node_name, "devices": devices,
                 "pool": {"name": node_name, "generation": 0, "resourceSliceCount": 1}},
    } for driver, devices in by_driver.items()]  # fmt: skip


def device_classes(cls: JSON) -> list[JSON]:
    """A DeviceClass for each driver but gpu.nvidia.com (whose class NVIDIA's chart installs),
    named as the entry's ``deviceClassName``, else the driver."""
    found = {(e.get("deviceClassName") or e["driver"]): e["driver"]
             for e in cls["spec"].get("devices") or [] if e["driver"] != GPU_DRIVER}  # fmt: skip
    return [{"apiVersion": DRA_API, "kind": "DeviceClass", "metadata": {"name": name},
             "spec": {"selectors": [{"cel": {"expression": f"device.driver == '{driver}'"}}]}}
            for name, driver in found.items()]  # fmt: skip


def storage_class(name: str) -> JSON:
    return {"apiVersion": "storage.k8s.io/v1", "kind": "StorageClass", "metadata": {"name": name},
            "provisioner": STANDIN_PROVISIONER, "reclaimPolicy": "Delete",
            "volumeBindingMode": "Immediate", "allowVolumeExpansion": True}  # fmt: skip


SYSTEM_NODES = 2


def cluster_objects(manifests: Sequence[JSON], cluster_name: str) -> list[JSON]:
    """What Existing cluster ``cluster_name`` already has, in apply order: DeviceClasses, the
    cache StorageClass (when the cluster names one), Nodes, ResourceSlices."""
    spec = _named(manifests, "InferenceCluster", cluster_name).get("spec") or {}
    classes: dict[str, JSON] = {}
    nodes: list[JSON] = []
    slices: list[JSON] = []
    for pool in spec.get("nodePools") or []:
        cls = _named(manifests, "InferenceClass", pool["className"])
        for index in range(int(pool.get("nodeCount", 1))):
            nodes.append(node(cluster_name, pool, index, cls))
            slices.extend(resource_slices(nodes[-1]["metadata"]["name"], cls))
        classes |= {c["metadata"]["name"]: c for c in device_classes(cls)}
    nodes += [system_node(cluster_name, index) for index in range(SYSTEM_NODES)]
    cache = ((spec.get("cluster") or {}).get("existing") or {}).get("cache") or {}
    storage = [storage_class(cache["storageClassName"])] if cache.get("storageClassName") else []
    return [*classes.values(), *storage, *nodes, *slices]


def system_node(cluster: str, index: int) -> JSON:
    """A node of the cluster's system pool: every real cluster has CPU nodes without the GPU
    taint, where controllers and jobs such as a cache's hydration run."""
    name = f"{cluster}-system-{index}"
    resources = {"cpu": "8", "memory": "32Gi", "ephemeral-storage": "100Gi", "pods": "110"}
    labels = {"kubernetes.io/hostname": name, "kubernetes.io/os": "linux",
              "kubernetes.io/arch": "amd64", "type": "kwok"}  # fmt: skip
    return {
        "apiVersion": "v1", "kind": "Node",
        "metadata": {"name": name, "labels": labels, "annotations": {KWOK_ANNOTATION: "fake"}},
        "spec": {},
        "status": {"capacity": resources, "allocatable": dict(resources)},
    }  # fmt: skip


def fleet_for_example(directory: Path | str) -> dict[str, list[JSON]]:
    """Cluster name -> its objects, for every Existing InferenceCluster under ``directory``."""
    manifests = read_manifests(directory)
    clusters = _modelplane(manifests, "InferenceCluster")
    names = [c["metadata"]["name"] for c in clusters
             if (c.get("spec") or {}).get("cluster", {}).get("source") == "Existing"]  # fmt: skip
    return {name: cluster_objects(manifests, name) for name in names}


def apply_objects(client: Client, objects: Iterable[JSON]) -> None:
    """Server-side apply in order. A Node keeps the status it is created with; the status
    subresource sets it on later applies. Slices are owned by their Node, as a kubelet
    plugin's are, so deleting a Node collects them."""
    uids: dict[str, str] = {}
    for obj in objects:
        owner = uids.get(obj["spec"]["nodeName"]) if obj["kind"] == "ResourceSlice" else None
        metadata = obj["metadata"] if owner is None else {**obj["metadata"], "ownerReferences": [
            {"apiVersion": "v1", "kind": "Node", "name": obj["spec"]["nodeName"], "uid": owner,
             "controller": True}]}  # fmt: skip
        applied = client.apply({**obj, "metadata": metadata}, manager="realplane-fleet")
        if obj["kind"] == "Node":
            uids[obj["metadata"]["name"]] = applied["metadata"]["uid"]
            client.patch_status("v1", "Node", obj["metadata"]["name"], obj["status"])


# -------------------------------------------------------------------------------------------
# Stand-in volume provisioner


def _log(message: str) -> None:
    # The process's own stderr: this runs in a background thread while tests swap sys.stdout.
    print(message, file=sys.__stderr__, flush=True)


def list_all(client: Client, api_version: str, kind: str) -> list[JSON]:
    """Every object of a namespaced kind in all namespaces (``Client.list`` reads one)."""
    return list(client.list(api_version, kind))


def volume_for(claim: JSON, storage: JSON) -> JSON:
    """The PersistentVolume a provisioner makes for ``claim``: a hostPath under
    /var/lib/realplane, pre-bound to the claim (kube-controller-manager completes the bind)."""
    meta, spec = claim["metadata"], claim["spec"]
    volume: JSON = {
        "apiVersion": "v1", "kind": "PersistentVolume",
        "metadata": {"name": f"pvc-{meta['uid']}",
                     "annotations": {PROVISIONED_BY: STANDIN_PROVISIONER}},
        "spec": {
            "capacity": {"storage": spec["resources"]["requests"]["storage"]},
            "accessModes": list(spec.get("accessModes") or ["ReadWriteOnce"]),
            "persistentVolumeReclaimPolicy": storage.get("reclaimPolicy", "Delete"),
            "storageClassName": storage["metadata"]["name"],
            "volumeMode": spec.get("volumeMode", "Filesystem"),
            "hostPath": {"path": f"{VOLUME_ROOT}/{meta['uid']}", "type": "DirectoryOrCreate"},
            "claimRef": {"apiVersion": "v1", "kind": "PersistentVolumeClaim",
                         "namespace": meta["namespace"], "name": meta["name"], "uid": meta["uid"]},
        },
    }  # fmt: skip
    if storage.get("mountOptions"):
        volume["spec"]["mountOptions"] = list(storage["mountOptions"])
    return volume


def provision_volumes(client: Client) -> int:
    """A volume for each Pending claim of a stand-in StorageClass; how many were created."""
    classes = {s["metadata"]["name"]: s for s in client.list("storage.k8s.io/v1", "StorageClass")
               if s.get("provisioner") == STANDIN_PROVISIONER}  # fmt: skip
    created = 0
    for claim in list_all(client, "v1", "PersistentVolumeClaim"):
        storage = classes.get(claim["spec"].get("storageClassName") or "")
        phase = (claim.get("status") or {}).get("phase", "Pending")
        if storage is None or claim["spec"].get("volumeName") or phase != "Pending":
            continue
        volume = volume_for(claim, storage)
        try:
            client.create(volume)
        except ApiError as error:
            if error.code == 409:  # made on an earlier pass, not bound yet
                continue
            raise
        created += 1
        _log(f"{client.server}: created PersistentVolume {volume['metadata']['name']} for "
             f"{claim['metadata']['namespace']}/{claim['metadata']['name']}")  # fmt: skip
    return created


# -------------------------------------------------------------------------------------------
# Stand-in gateway data plane


def _conditions(wanted: Iterable[tuple[str, bool, str, str]], generation: int,
                current: Iterable[JSON] | None) -> list[JSON]:  # fmt: skip
    """metav1.Conditions (type, ok, reason, message); one whose status is unchanged keeps
    its lastTransitionTime, so an unchanged object compares equal."""
    before = {c.get("type"): c for c in current or []}
    now = datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
    out = []
    for kind, ok, reason, message in wanted:
        status, old = "True" if ok else "False", before.get(kind) or {}
        since = old.get("lastTransitionTime") if old.get("status") == status else None
        out.append({"type": kind, "status": status, "reason": reason, "message": message,
                    "observedGeneration": generation,
                    "lastTransitionTime": since or now})  # fmt: skip
    return out


def _points_at(ref: JSON, route: JSON, gateway: JSON) -> bool:
    meta, namespace = gateway["metadata"], route["metadata"]["namespace"]
    return (ref.get("group", GATEWAY_GROUP) == GATEWAY_GROUP
            and ref.get("kind", "Gateway") == "Gateway" and ref.get("name") == meta["name"]
            and ref.get("namespace", namespace) == meta["namespace"])  # fmt: skip


def _allows(listener: JSON, ref: JSON, route: JSON, gateway: JSON, namespaces: Labels) -> bool:
    """Whether ``listener`` of ``gateway`` takes ``route`` through its parentRef ``ref``."""
    if ref.get("sectionName", listener["name"]) != listener["name"] \
            or ref.get("port", listener.get("port")) != listener.get("port"):  # fmt: skip
        return False
    allowed = listener.get("allowedRoutes") or {}
    if allowed.get("kinds") and not any(k.get("kind") == "HTTPRoute" for k in allowed["kinds"]):
        return False
    where = allowed.get("namespaces") or {}
    namespace = route["metadata"]["namespace"]
    if where.get("from", "Same") == "Same":
        return namespace == gateway["metadata"]["namespace"]
    if where.get("from") == "Selector":  # matchLabels only; Modelplane's Gateways allow All
        wanted = (where.get("selector") or {}).get("matchLabels") or {}
        return all(namespaces.get(namespace, {}).get(k) == v for k, v in wanted.items())
    return True


def gateway_status(gateway: JSON, routes: Sequence[JSON], address: str,
                   namespaces: Labels) -> JSON:  # fmt: skip
    """The status a controller writes once the Gateway's proxy serves at ``address``."""
    generation = gateway["metadata"].get("generation", 1)
    current = gateway.get("status") or {}
    before = {item.get("name"): item.get("conditions") for item in current.get("listeners") or []}
    listeners = []
    for listener in gateway["spec"].get("listeners") or []:
        attached = sum(1 for route in routes if any(
            _points_at(ref, route, gateway) and _allows(listener, ref, route, gateway, namespaces)
            for ref in route["spec"].get("parentRefs") or []))  # fmt: skip
        listeners.append({
            "name": listener["name"], "attachedRoutes": attached,
            "supportedKinds": [{"group": GATEWAY_GROUP, "kind": "HTTPRoute"}],
            "conditions": _conditions([
                ("Accepted", True, "Accepted", "Listener is accepted"),
                ("Programmed", True, "Programmed", "Listener is programmed"),
                ("ResolvedRefs", True, "ResolvedRefs", "Listener references are resolved"),
            ], generation, before.get(listener["name"])),
        })  # fmt: skip
    return {"addresses": [{"type": "IPAddress", "value": address}], "listeners": listeners,
            "conditions": _conditions([("Accepted", True, "Accepted", "Gateway is accepted"),
                                       ("Programmed", True, "Programmed", "Gateway is programmed")],
                                      generation, current.get("conditions"))}  # fmt: skip


def route_parents(route: JSON, gateways: Mapping[str, JSON], namespaces: Labels) -> list[JSON]:
    """``route``'s ``status.parents``: an entry per parentRef at one of ``gateways``
    (``<namespace>/<name>`` -> ``{"gateway": ..., "controller": its controllerName}``);
    other controllers' entries stay as they are."""
    current = (route.get("status") or {}).get("parents") or []
    ours: list[JSON] = []
    for ref in route["spec"].get("parentRefs") or []:
        for entry in gateways.values():
            gateway, controller = entry["gateway"], entry["controller"]
            if not _points_at(ref, route, gateway):
                continue
            accepted = any(_allows(listener, ref, route, gateway, namespaces)
                           for listener in gateway["spec"].get("listeners") or [])  # fmt: skip
            old = next((p for p in current if p.get("parentRef") == ref
                        and p.get("controllerName") == controller), {})  # fmt: skip
            ours.append({"parentRef": dict(ref), "controllerName": controller,
                         "conditions": _conditions([
                ("Accepted", accepted, "Accepted" if accepted else "NotAllowedByListeners",
                 "Route is accepted" if accepted else "No listener of the Gateway allows it"),
                ("ResolvedRefs", True, "ResolvedRefs", "Resolved all the object references"),
            ], route["metadata"].get("generation", 1), old.get("conditions"))})  # fmt: skip
    mine = {g["controller"] for g in gateways.values()}
    return [p for p in current if p.get("controllerName") not in mine] + ours


def stable_address(gateway: JSON) -> str:
    """A made-up, stable address per Gateway in 198.18.0.0/15 (benchmarking, never routed)."""
    digest = hashlib.sha256(str(gateway["metadata"].get("uid")).encode()).digest()
    return f"198.{18 + digest[0] % 2}.{digest[1]}.{1 + digest[2] % 254}"


def program_gateways(client: Client, controllers: Iterable[str],
                     address_for: Callable[[JSON], str] = stable_address) -> int:  # fmt: skip
    """Status for each GatewayClass of ``controllers``, its Gateways and the HTTPRoutes on
    them, written only where it differs; how many status writes were made."""
    try:
        classes = client.list(GATEWAY_API, "GatewayClass")
        gateways = list_all(client, GATEWAY_API, "Gateway")
        routes = list_all(client, GATEWAY_API, "HTTPRoute")
    except KeyError:
        return 0  # the Gateway API CRDs are not installed yet
    except ApiError as error:
        if error.code == 404:
            return 0
        raise
    names = set(controllers)
    ours = {c["metadata"]["name"]: c["spec"]["controllerName"] for c in classes
            if c["spec"].get("controllerName") in names}  # fmt: skip
    writes = 0

    def write(kind: str, obj: JSON, status: JSON) -> None:
        nonlocal writes
        if all((obj.get("status") or {}).get(key) == value for key, value in status.items()):
            return
        meta = obj["metadata"]
        client.patch_status(GATEWAY_API, kind, meta["name"], status, meta.get("namespace"))
        writes += 1
        where = f"{meta['namespace']}/" if meta.get("namespace") else ""
        _log(f"{client.server}: set {kind} {where}{meta['name']} status")

    for cls in (c for c in classes if c["metadata"]["name"] in ours):
        accepted = [("Accepted", True, "Accepted", "GatewayClass is accepted")]
        before = (cls.get("status") or {}).get("conditions")
        generation = cls["metadata"].get("generation", 1)
        write("GatewayClass", cls, {"conditions": _conditions(accepted, generation, before)})
    mine = {f"{g['metadata']['namespace']}/{g['metadata']['name']}":
            {"gateway": g, "controller": ours[g["spec"]["gatewayClassName"]]}
            for g in gateways if g["spec"].get("gatewayClassName") in ours}  # fmt: skip
    if not mine:
        return writes
    namespaces = {n["metadata"]["name"]: n["metadata"].get("labels") or {}
                  for n in client.list("v1", "Namespace")}  # fmt: skip
    for entry in mine.values():
        gateway = entry["gateway"]
        write("Gateway", gateway, gateway_status(gateway, routes, address_for(gateway), namespaces))
    for route in routes:
        parents = route_parents(route, mine, namespaces)
        if parents != ((route.get("status") or {}).get("parents") or []):
            write("HTTPRoute", route, {"parents": parents})
    return writes


# -------------------------------------------------------------------------------------------
# The process


def run_standins(clients: Sequence[Client], controllers: Iterable[str],
                 stop_event: threading.Event, interval: float = 1.0,
                 address_for: Callable[[JSON], str] = stable_address) -> None:  # fmt: skip
    """Provision volumes and program gateways on every cluster until ``stop_event`` is set."""
    names = set(controllers)
    while not stop_event.is_set():
        for client in clients:
            try:
                provision_volumes(client)
                program_gateways(client, names, address_for)
            except (ApiError, OSError) as error:
                _log(f"{client.server}: pass failed, retrying: {error}")
        stop_event.wait(interval)


def client_from_kubeconfig(path: Path | str) -> Client:
    """A Client for a kubeconfig's current context: server, CA (file or data), bearer token."""
    path = Path(path)
    config = yaml.safe_load(path.read_text())

    def entry(section: str, name: str) -> JSON:
        return next(e[section[:-1]] for e in config[section] if e["name"] == name)

    context = entry("contexts", config["current-context"])
    cluster, user = entry("clusters", context["cluster"]), entry("users", context["user"])
    if cluster.get("certificate-authority-data"):
        with tempfile.NamedTemporaryFile("wb", suffix=".crt", delete=False) as ca:
            ca.write(base64.b64decode(cluster["certificate-authority-data"]))
        ca_file = Path(ca.name)
    else:
        ca_file = path.parent / cluster["certificate-authority"]  # absolute stays absolute
    token = user.get("token") or Path(user["tokenFile"]).read_text().strip()
    return Client(cluster["server"], token, ca_file)


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser("python -m modelplane_realplane.fleet")
    parser.add_argument("--kubeconfig", action="append", required=True, help="one per cluster")
    parser.add_argument(
        "--gateway-controller",
        action="extend",
        nargs="+",
        default=[],
        help=f"controllerName to answer for (default {ENVOY_CONTROLLER})",
    )
    parser.add_argument("--interval", type=float, default=1.0)
    args = parser.parse_args(argv)
    clients = [client_from_kubeconfig(path) for path in args.kubeconfig]
    controllers = args.gateway_controller or [ENVOY_CONTROLLER]
    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    signal.signal(signal.SIGINT, lambda *_: stop.set())
    _log(f"watching {len(clients)} clusters for {', '.join(controllers)}")
    run_standins(clients, controllers, stop, args.interval)


if __name__ == "__main__":
    main()
