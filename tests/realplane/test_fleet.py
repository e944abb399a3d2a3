"""What an adopted cluster already has (fleet.py), judged without Go or an API server: the
objects against Kubernetes 1.34's schemas, the examples' device selectors against the devices
published, and the two stand-ins against an in-memory cluster."""

from __future__ import annotations

import base64
import copy
import shutil
import threading
from pathlib import Path
from typing import Any

import kubernetes_validate
import pytest
import yaml
from compose_model_replica import pods
from modelplane_common import dracel
from modelplane_realplane import fleet, pki
from modelplane_realplane.kubeapi import ApiError
from modelplane_schemas.generated.gateway_networking_k8s_io.v1 import gateway as gateway_model
from modelplane_schemas.generated.gateway_networking_k8s_io.v1 import gatewayclass as class_model
from modelplane_schemas.generated.gateway_networking_k8s_io.v1 import httproute as route_model

JSON = dict[str, Any]
EXAMPLES = Path(__file__).resolve().parents[2] / "examples"
ALL = ("quickstart", "multi-node", "disaggregated", "canary")
KUBERNETES = "1.34"  # resource.k8s.io/v1 (DRA GA) first ships in 1.34
# The DeviceClass the NVIDIA DRA chart installs for gpu.nvidia.com.
NVIDIA_CLASS = (
    "device.driver == 'gpu.nvidia.com' && device.attributes['gpu.nvidia.com'].type == 'gpu'"
)


def of_kind(objects: list[JSON], kind: str) -> list[JSON]:
    """Objects of ``kind``; for Node, the GPU pools' nodes (the system pool aside)."""
    found = [o for o in objects if o["kind"] == kind]
    if kind == "Node":
        found = [n for n in found if pods.POOL_LABEL in n["metadata"]["labels"]]
    return found


def cel_device(slice_: JSON, device: JSON) -> dracel.CelDevice:
    return dracel.cel_device(slice_["spec"]["driver"], device.get("attributes"),
                             device.get("capacity"))  # fmt: skip


def selected(expression: str, slice_: JSON, device: JSON) -> bool:
    return dracel.matches(dracel.compile_selector(expression), cel_device(slice_, device))


# -------------------------------------------------------------------------------------------
# The fleets


def test_quickstart_is_two_single_l4_nodes() -> None:
    fleets = fleet.fleet_for_example(EXAMPLES / "quickstart")
    assert list(fleets) == ["lab"]
    objects = fleets["lab"]
    nodes = of_kind(objects, "Node")
    assert [n["metadata"]["name"] for n in nodes] == ["lab-l4-0", "lab-l4-1"]
    for node in nodes:
        labels = node["metadata"]["labels"]
        assert node["metadata"]["annotations"] == {"kwok.x-k8s.io/node": "fake"}
        assert labels[pods.POOL_LABEL] == "l4"
        assert labels["kubernetes.io/hostname"] == node["metadata"]["name"]
        assert labels["type"] == "kwok"
        assert labels["nvidia.com/gpu.product"] == "NVIDIA-L4"
        assert labels["nvidia.com/gpu.count"] == "1"
        assert labels["nvidia.com/gpu.memory"] == "23034"
        assert labels["nvidia.com/gpu.family"] == "ada-lovelace"
        capacity = node["status"]["capacity"]
        assert capacity == {"cpu": "8", "memory": "32Gi", "ephemeral-storage": "100Gi",
                            "pods": "110"}  # fmt: skip
        assert node["status"]["allocatable"] == capacity
        assert not any(key.startswith("nvidia.com/") for key in capacity)  # devices are DRA
    slices = of_kind(objects, "ResourceSlice")
    assert [(s["spec"]["nodeName"], s["spec"]["driver"]) for s in slices] == [
        ("lab-l4-0", "gpu.nvidia.com"), ("lab-l4-1", "gpu.nvidia.com")]  # fmt: skip
    (device,) = slices[0]["spec"]["devices"]
    assert device["name"] == "gpu-0"
    assert device["attributes"]["productName"] == {"string": "NVIDIA L4"}
    assert device["attributes"]["architecture"] == {"string": "Ada Lovelace"}
    assert device["capacity"] == {"memory": {"value": "23034Mi"}}
    assert slices[0]["spec"]["pool"] == {"name": "lab-l4-0", "generation": 0,
                                         "resourceSliceCount": 1}  # fmt: skip
    assert not of_kind(objects, "DeviceClass")  # the NVIDIA chart's gpu.nvidia.com serves
    assert not of_kind(objects, "StorageClass")  # lab names no cache StorageClass


def test_multi_node_is_two_8xh200_nodes_with_an_infiniband_fabric() -> None:
    objects = fleet.fleet_for_example(EXAMPLES / "multi-node")["lab-h200"]
    nodes = of_kind(objects, "Node")
    assert [n["metadata"]["name"] for n in nodes] == ["lab-h200-h200-ib-0", "lab-h200-h200-ib-1"]
    for node in nodes:
        assert node["metadata"]["labels"][pods.POOL_LABEL] == "h200-ib"
        assert node["metadata"]["labels"]["nvidia.com/gpu.count"] == "8"
        assert node["metadata"]["labels"]["nvidia.com/gpu.product"] == "NVIDIA-H200"
        assert node["status"]["capacity"]["cpu"] == "208"
        assert node["status"]["capacity"]["memory"] == "1840Gi"
    slices = of_kind(objects, "ResourceSlice")
    assert sorted(
        (s["spec"]["nodeName"], s["spec"]["driver"], len(s["spec"]["devices"])) for s in slices
    ) == [
        ("lab-h200-h200-ib-0", "gpu.nvidia.com", 8),
        ("lab-h200-h200-ib-0", "nic.nvidia.com", 8),
        ("lab-h200-h200-ib-1", "gpu.nvidia.com", 8),
        ("lab-h200-h200-ib-1", "nic.nvidia.com", 8),
    ]
    gpus = next(s for s in slices if s["spec"]["driver"] == "gpu.nvidia.com")["spec"]["devices"]
    assert [d["name"] for d in gpus] == [f"gpu-{i}" for i in range(8)]
    assert gpus[3]["attributes"]["cudaComputeCapability"] == {"version": "9.0.0"}
    assert gpus[3]["attributes"]["index"] == {"int": 3}
    assert len({d["attributes"]["uuid"]["string"] for d in gpus}) == 8
    nics = next(s for s in slices if s["spec"]["driver"] == "nic.nvidia.com")["spec"]["devices"]
    assert nics[0] == {"name": "ib-0", "attributes": {"linkType": {"string": "infiniband"}},
                       "capacity": {"bandwidth": {"value": "400G"}}}  # fmt: skip
    (device_class,) = of_kind(objects, "DeviceClass")
    assert device_class["metadata"]["name"] == "nic.nvidia.com"
    assert device_class["spec"]["selectors"] == [
        {"cel": {"expression": "device.driver == 'nic.nvidia.com'"}}]  # fmt: skip
    (storage,) = of_kind(objects, "StorageClass")
    assert storage["metadata"]["name"] == "cephfs-rwx"
    assert storage["provisioner"] == fleet.STANDIN_PROVISIONER
    assert storage["volumeBindingMode"] == "Immediate"


def test_other_examples() -> None:
    h100 = fleet.fleet_for_example(EXAMPLES / "disaggregated")["lab-h100"]
    assert len(of_kind(h100, "Node")) == 3
    assert of_kind(h100, "Node")[0]["status"]["capacity"]["cpu"] == "208"
    assert [len(s["spec"]["devices"]) for s in of_kind(h100, "ResourceSlice")] == [8, 8, 8]
    canary = fleet.fleet_for_example(EXAMPLES / "canary")["lab-l4"]
    assert [n["metadata"]["name"] for n in of_kind(canary, "Node")] == [
        "lab-l4-l4-0", "lab-l4-l4-1", "lab-l4-l4-2"]  # fmt: skip


def test_every_cluster_has_an_untainted_system_pool() -> None:
    """Jobs that tolerate no GPU taint (a cache's hydration) need CPU nodes, as every real
    cluster has."""
    for example in ALL:
        for name, objects in fleet.fleet_for_example(EXAMPLES / example).items():
            system = [o for o in objects if o["kind"] == "Node"
                      and pods.POOL_LABEL not in o["metadata"]["labels"]]  # fmt: skip
            assert [n["metadata"]["name"] for n in system] == [f"{name}-system-0",
                                                               f"{name}-system-1"]  # fmt: skip
            assert all(not n["spec"].get("taints") for n in system)


def test_nodes_take_modelplane_pods() -> None:
    """A member pod's nodeSelector and toleration (pods.py) fit every node of its pool."""
    for example in ALL:
        for objects in fleet.fleet_for_example(EXAMPLES / example).values():
            for node in of_kind(objects, "Node"):
                pool = node["metadata"]["labels"][pods.POOL_LABEL]
                selector = {pods.POOL_LABEL: pool}
                assert selector.items() <= node["metadata"]["labels"].items()
                for taint in node["spec"]["taints"]:
                    assert taint["key"] == pods.GPU_TOLERATION["key"]
                    assert taint["effect"] == pods.GPU_TOLERATION["effect"]
                    assert pods.GPU_TOLERATION["operator"] == "Exists"


def test_every_object_is_valid_for_kubernetes_1_34() -> None:
    kinds = set()
    for example in ALL:
        for objects in fleet.fleet_for_example(EXAMPLES / example).values():
            for obj in objects:
                kubernetes_validate.validate(obj, KUBERNETES, strict=True)
                kinds.add(obj["kind"])
    assert kinds == {"Node", "ResourceSlice", "DeviceClass", "StorageClass"}


# -------------------------------------------------------------------------------------------
# Modelplane's selectors against the published devices


def requests(manifests: list[JSON]) -> list[tuple[str, JSON]]:
    """(deployment/member, devices[] entry) for every ModelDeployment member."""
    found = []
    for deployment in manifests:
        if deployment.get("kind") != "ModelDeployment":
            continue
        for engine in deployment["spec"]["engines"]:
            for member in engine["members"]:
                for request in (member.get("nodeSelector") or {}).get("devices") or []:
                    found.append((f"{deployment['metadata']['name']}/{member['role']}", request))
    return found


@pytest.mark.parametrize("example", ALL)
def test_each_request_is_satisfied_on_one_node(example: str) -> None:
    """Every device request of every ModelDeployment finds ``count`` devices on one node of
    the example's fleet that satisfy all its CEL selectors, judged by the scheduler's own CEL
    environment (modelplane_common.dracel)."""
    manifests = fleet.read_manifests(EXAMPLES / example)
    slices = [s for objects in fleet.fleet_for_example(EXAMPLES / example).values()
              for s in of_kind(objects, "ResourceSlice")]  # fmt: skip
    nodes = {s["spec"]["nodeName"] for s in slices}
    asked = requests(manifests)
    assert asked
    for member, request in asked:
        selectors = [s["cel"] for s in request.get("selectors") or []]
        fits = {node: 0 for node in nodes}
        for s in slices:
            for device in s["spec"]["devices"]:
                fits[s["spec"]["nodeName"]] += all(selected(cel, s, device) for cel in selectors)
        best = max(fits.values())
        assert best >= request.get("count", 1), f"{example} {member} {request['name']}"


@pytest.mark.parametrize("example", ALL)
def test_each_dra_device_is_claimable_through_its_device_class(example: str) -> None:
    """A class's DRA entry names a DeviceClass the NVIDIA chart (gpu.nvidia.com) or the fleet
    provides, and that class's selector takes the published devices."""
    manifests = fleet.read_manifests(EXAMPLES / example)
    for objects in fleet.fleet_for_example(EXAMPLES / example).values():
        classes = {c["metadata"]["name"]: c["spec"]["selectors"][0]["cel"]["expression"]
                   for c in of_kind(objects, "DeviceClass")}  # fmt: skip
        classes["gpu.nvidia.com"] = NVIDIA_CLASS
        for cls in (m for m in manifests if m.get("kind") == "InferenceClass"):
            for entry in cls["spec"]["devices"]:
                name = entry.get("deviceClassName")
                if entry.get("claim", "DRA") != "DRA":
                    continue
                assert name in classes, f"no DeviceClass {name} for {cls['metadata']['name']}"
                for s in of_kind(objects, "ResourceSlice"):
                    if s["spec"]["driver"] == entry["driver"]:
                        assert all(selected(classes[name], s, d) for d in s["spec"]["devices"])


# -------------------------------------------------------------------------------------------
# The stand-ins, against an in-memory API server


class FakeClient:
    """Enough of kubeapi.Client: list (one or all namespaces), create, patch_status."""

    server = "https://fake"

    def __init__(self, objects: list[JSON]) -> None:
        self.objects = [copy.deepcopy(o) for o in objects]
        self.writes: list[tuple[str, str]] = []

    def path(self, api_version: str, kind: str, namespace: str | None = None) -> str:
        return f"/{api_version}/namespaces/{namespace}/{kind}"

    def request(self, method: str, path: str) -> JSON:
        api_version, _, kind = path.strip("/").rpartition("/")
        return {"items": [o for o in self.objects
                          if o["apiVersion"] == api_version and o["kind"] == kind]}  # fmt: skip

    def list(self, api_version: str, kind: str, namespace: str | None = None) -> list[JSON]:
        return self.request("GET", f"/{api_version}/{kind}")["items"]

    def find(self, kind: str, name: str, namespace: str | None = None) -> JSON:
        return next(o for o in self.objects if o["kind"] == kind and o["metadata"]["name"] == name
                    and o["metadata"].get("namespace") == namespace)  # fmt: skip

    def create(self, obj: JSON) -> JSON:
        if any(o["kind"] == obj["kind"] and o["metadata"]["name"] == obj["metadata"]["name"]
               for o in self.objects):  # fmt: skip
            raise ApiError(409, {"message": "already exists"})
        self.objects.append(copy.deepcopy(obj))
        self.writes.append((obj["kind"], obj["metadata"]["name"]))
        return obj

    def patch_status(self, api_version: str, kind: str, name: str, status: JSON,
                     namespace: str | None = None) -> JSON:  # fmt: skip
        obj = self.find(kind, name, namespace)
        obj.setdefault("status", {}).update(copy.deepcopy(status))  # merge patch: lists replace
        self.writes.append((kind, name))
        return obj


def claim(name: str, storage_class: str, phase: str = "Pending") -> JSON:
    return {"apiVersion": "v1", "kind": "PersistentVolumeClaim",
            "metadata": {"name": name, "namespace": "ml-team", "uid": f"uid-{name}"},
            "spec": {"accessModes": ["ReadWriteMany"], "storageClassName": storage_class,
                     "resources": {"requests": {"storage": "1100Gi"}}},
            "status": {"phase": phase}}  # fmt: skip


def test_the_provisioner_makes_one_volume_per_pending_claim() -> None:
    other = {**fleet.storage_class("standard"), "provisioner": "ebs.csi.aws.com"}
    claims = [claim("kimi", "cephfs-rwx"), claim("bound", "cephfs-rwx", "Bound"),
              claim("ebs", "standard")]  # fmt: skip
    client = FakeClient([fleet.storage_class("cephfs-rwx"), other, *claims])
    assert fleet.provision_volumes(client) == 1  # type: ignore[arg-type]
    assert fleet.provision_volumes(client) == 0  # type: ignore[arg-type]
    volume = client.find("PersistentVolume", "pvc-uid-kimi")
    kubernetes_validate.validate(volume, KUBERNETES, strict=True)
    assert volume["spec"]["capacity"] == {"storage": "1100Gi"}
    assert volume["spec"]["accessModes"] == ["ReadWriteMany"]
    assert volume["spec"]["hostPath"]["path"] == "/var/lib/realplane/uid-kimi"
    assert volume["spec"]["claimRef"] == {"apiVersion": "v1", "kind": "PersistentVolumeClaim",
                                          "namespace": "ml-team", "name": "kimi",
                                          "uid": "uid-kimi"}  # fmt: skip
    assert volume["spec"]["storageClassName"] == "cephfs-rwx"


PENDING = {"conditions": [{"type": t, "status": "Unknown", "reason": "Pending",
                           "message": "Waiting for controller",
                           "lastTransitionTime": "1970-01-01T00:00:00Z"}
                          for t in ("Accepted", "Programmed")]}  # fmt: skip


def gateway_objects() -> list[JSON]:
    api = fleet.GATEWAY_API

    def route(name: str, *refs: JSON, parents: list[JSON] | None = None) -> JSON:
        obj = {"apiVersion": api, "kind": "HTTPRoute",
               "metadata": {"name": name, "namespace": "ml-team", "generation": 2},
               "spec": {"parentRefs": list(refs), "rules": [{"backendRefs": [
                   {"name": name, "port": 8000}]}]}}  # fmt: skip
        if parents is not None:
            obj["status"] = {"parents": parents}
        return obj

    ours = {"name": "inference-gateway", "namespace": "modelplane-system"}
    foreign = {"parentRef": {"name": "elsewhere"}, "controllerName": "example.com/other",
               "conditions": [{"type": "Accepted", "status": "True", "reason": "Accepted",
                               "message": "", "lastTransitionTime": "2025-01-01T00:00:00Z"}],
               }  # fmt: skip
    return [
        {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "ml-team"}},
        {"apiVersion": api, "kind": "GatewayClass", "metadata": {"name": "envoy", "generation": 1},
         "spec": {"controllerName": fleet.ENVOY_CONTROLLER}},
        {"apiVersion": api, "kind": "GatewayClass", "metadata": {"name": "other"},
         "spec": {"controllerName": "example.com/other"}},
        {"apiVersion": api, "kind": "Gateway",
         "metadata": {"name": "inference-gateway", "namespace": "modelplane-system",
                      "generation": 3, "uid": "8d2c"},
         "spec": {"gatewayClassName": "envoy", "listeners": [
             {"name": "http", "protocol": "HTTP", "port": 80,
              "allowedRoutes": {"namespaces": {"from": "All"}}},
             {"name": "local", "protocol": "HTTP", "port": 8080}]},
         "status": copy.deepcopy(PENDING)},
        {"apiVersion": api, "kind": "Gateway", "metadata": {"name": "elsewhere", "namespace": "x"},
         "spec": {"gatewayClassName": "other", "listeners": [
             {"name": "http", "protocol": "HTTP", "port": 80}]}},
        route("chat", ours, parents=[foreign]),
        route("wrong-section", {**ours, "sectionName": "local"}),
        route("foreign", {"name": "elsewhere", "namespace": "x"}),
    ]  # fmt: skip


def test_the_gateway_stand_in_programs_its_gateways_once() -> None:
    client = FakeClient(gateway_objects())
    writes = fleet.program_gateways(client, {fleet.ENVOY_CONTROLLER})  # type: ignore[arg-type]
    assert sorted(client.writes) == [
        ("Gateway", "inference-gateway"), ("GatewayClass", "envoy"),
        ("HTTPRoute", "chat"), ("HTTPRoute", "wrong-section")]  # fmt: skip
    assert writes == 4
    assert fleet.program_gateways(client, {fleet.ENVOY_CONTROLLER}) == 0  # type: ignore[arg-type]

    gateway = client.find("Gateway", "inference-gateway", "modelplane-system")
    gateway_model.Gateway.model_validate(gateway)
    status = gateway["status"]
    assert status["addresses"] == [{"type": "IPAddress", "value": fleet.stable_address(gateway)}]
    assert {(c["type"], c["status"], c["reason"], c["observedGeneration"])
            for c in status["conditions"]} == {("Accepted", "True", "Accepted", 3),
                                               ("Programmed", "True", "Programmed", 3)}  # fmt: skip
    http, local = status["listeners"]
    assert http["attachedRoutes"] == 1  # chat; wrong-section names the other listener
    assert local["attachedRoutes"] == 0  # Same namespace only, and the route is in ml-team
    assert http["supportedKinds"] == [{"group": "gateway.networking.k8s.io", "kind": "HTTPRoute"}]
    assert {c["type"] for c in http["conditions"]} == {"Accepted", "Programmed", "ResolvedRefs"}

    envoy = client.find("GatewayClass", "envoy")
    class_model.GatewayClass.model_validate(envoy)
    assert envoy["status"]["conditions"][0]["status"] == "True"
    assert "status" not in client.find("GatewayClass", "other")
    assert "status" not in client.find("Gateway", "elsewhere", "x")

    chat = client.find("HTTPRoute", "chat", "ml-team")
    route_model.HTTPRoute.model_validate(chat)
    foreign, ours = chat["status"]["parents"]
    assert foreign["controllerName"] == "example.com/other"  # left as it was
    assert ours["controllerName"] == fleet.ENVOY_CONTROLLER
    assert ours["parentRef"] == {"name": "inference-gateway", "namespace": "modelplane-system"}
    assert [(c["type"], c["status"], c["observedGeneration"]) for c in ours["conditions"]] == [
        ("Accepted", "True", 2), ("ResolvedRefs", "True", 2)]  # fmt: skip
    wrong = client.find("HTTPRoute", "wrong-section", "ml-team")["status"]["parents"][0]
    assert (wrong["conditions"][0]["status"], wrong["conditions"][0]["reason"]) == (
        "False", "NotAllowedByListeners")  # fmt: skip
    assert "status" not in client.find("HTTPRoute", "foreign", "ml-team")


def test_run_standins_until_stopped() -> None:
    client = FakeClient([*gateway_objects(), fleet.storage_class("cephfs-rwx"),
                         claim("kimi", "cephfs-rwx")])  # fmt: skip
    stop = threading.Event()
    timer = threading.Timer(0.3, stop.set)
    timer.start()
    fleet.run_standins([client], [fleet.ENVOY_CONTROLLER], stop, interval=0.05)  # type: ignore[list-item]
    timer.join()
    assert len(client.writes) == 5  # one volume and four statuses, each once


@pytest.mark.skipif(shutil.which("openssl") is None, reason="openssl makes the test CA")
def test_a_client_from_a_kubeconfig(tmp_path: Path) -> None:
    pki.make_ca(tmp_path / "pki")
    config = {"apiVersion": "v1", "kind": "Config", "current-context": "a",
              "clusters": [{"name": "c", "cluster": {"server": "https://127.0.0.1:6443",
                                                     "certificate-authority": "pki/ca.crt"}}],
              "users": [{"name": "u", "user": {"token": "secret"}}],
              "contexts": [{"name": "a", "context": {"cluster": "c", "user": "u"}}]}  # fmt: skip
    path = tmp_path / "kubeconfig"
    path.write_text(yaml.safe_dump(config))
    client = fleet.client_from_kubeconfig(path)
    assert (client.server, client.token) == ("https://127.0.0.1:6443", "secret")
    data = base64.b64encode((tmp_path / "pki" / "ca.crt").read_bytes()).decode()
    config["clusters"][0]["cluster"] = {"server": "https://127.0.0.1:7443",
                                        "certificate-authority-data": data}  # fmt: skip
    path.write_text(yaml.safe_dump(config))
    assert fleet.client_from_kubeconfig(path).server == "https://127.0.0.1:7443"
