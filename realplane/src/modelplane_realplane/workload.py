"""The workload cluster: a second real Kubernetes that schedules like a GPU cluster.

Its own etcd, kube-apiserver, kube-controller-manager and kube-scheduler; kwok stands in for
the kubelets of the Nodes the harness creates (fleet.py), so pods the real scheduler binds
become Running and Ready without containers. The LeaderWorkerSet controller joins once the
``lws`` chart has installed its CRD, as the chart's Deployment would; its webhooks are served
on 127.0.0.1 and registered by URL. See design/realplane.md.
"""

from __future__ import annotations

import base64
import copy
from typing import Any

import yaml

from modelplane_realplane import clusters as planes
from modelplane_realplane import processes
from modelplane_realplane.build import binary

WORKLOAD = "workload-"
# A second workload cluster, for what needs two: a drain moves replicas to another cluster.
SECOND = "workload2-"
WORKLOADS = (WORKLOAD, SECOND)
PORTS = (
    "etcd", "etcd-peer", "kube-apiserver", "kube-controller-manager", "kube-scheduler", "kwok",
    "lws-webhook", "lws-metrics", "lws-health",
)  # fmt: skip
LWS_NAMESPACE = "lws-system"
LWS_CRD = "leaderworkersets.leaderworkerset.x-k8s.io"


def start(plane: planes.Plane, prefix: str = WORKLOAD) -> None:
    """Start a workload cluster beside ``plane`` (its ports and processes prefixed)."""
    for name in PORTS:
        plane.ports[prefix + name] = processes.free_port()
    planes.start_kubernetes(plane, prefix)
    kubeconfig = str(plane.kubeconfig_of(prefix))
    scheduler = prefix + "kube-scheduler"
    plane.start(scheduler, [
        str(binary("kube-scheduler")), f"--kubeconfig={kubeconfig}",
        f"--authentication-kubeconfig={kubeconfig}", f"--authorization-kubeconfig={kubeconfig}",
        "--leader-elect=false", "--bind-address=127.0.0.1",
        f"--secure-port={plane.ports[scheduler]}", "--v=1",
    ])  # fmt: skip
    plane.ready(scheduler, lambda: processes.port_open(plane.ports[scheduler]))
    stages = planes.module_dir("kwok") / "kustomize" / "stage"
    configs = [
        *sorted((stages / "node" / "fast").glob("*.yaml")),
        *sorted((stages / "node" / "heartbeat-with-lease").glob("*.yaml")),
        *sorted((stages / "pod" / "fast").glob("*.yaml")),
    ]
    configs = [path for path in configs if path.name != "kustomization.yaml"]
    kwok = prefix + "kwok"
    plane.start(kwok, [
        str(binary("kwok")), f"--kubeconfig={kubeconfig}",
        "--manage-nodes-with-annotation-selector=kwok.x-k8s.io/node=fake",
        f"--server-address=127.0.0.1:{plane.ports[kwok]}", "--node-ip=127.0.0.1",
        # kubelet's lease; without it the node lifecycle controller marks the nodes NotReady
        "--node-lease-duration-seconds=40",
        *(f"--config={path}" for path in configs),
    ])  # fmt: skip
    plane.ready(kwok, lambda: processes.port_open(plane.ports[kwok]), timeout=60)
    start_lws(plane, prefix)


def start_lws(plane: planes.Plane, prefix: str = WORKLOAD) -> None:
    """The LeaderWorkerSet controller, started as the ``lws`` release's Deployment would be:
    its webhooks registered (by URL, served on 127.0.0.1), and the process itself waiting, like
    an init container, until the release has installed the LeaderWorkerSet CRD."""
    client = plane.client(prefix)
    port = plane.ports[prefix + "lws-webhook"]
    health = plane.ports[prefix + "lws-health"]
    config = {
        "apiVersion": "config.lws.x-k8s.io/v1alpha1",
        "kind": "Configuration",
        "leaderElection": {"leaderElect": False},
        "internalCertManagement": {"enable": False},
        "webhook": {"port": port, "host": "127.0.0.1", "certDir": str(plane.run / "webhook-tls")},
        "metrics": {"bindAddress": f"127.0.0.1:{plane.ports[prefix + 'lws-metrics']}"},
        "health": {"healthProbeBindAddress": f"127.0.0.1:{health}"},
    }
    path = plane.run / f"{prefix}lws-config.yaml"
    path.write_text(yaml.safe_dump(config))
    for webhook in lws_webhooks(f"https://127.0.0.1:{port}", (plane.pki / "ca.crt").read_bytes()):
        client.apply(webhook)
    kubeconfig = str(plane.kubeconfig_of(prefix))
    wait_for_crd = (
        f'until "{binary("kubectl")}" --kubeconfig="{kubeconfig}" wait --for=condition=Established'
        f" crd/{LWS_CRD} --timeout=30s >/dev/null 2>&1; do sleep 1; done; "
        f'exec "{binary("lws")}" --config="{path}"'
    )
    plane.start(prefix + "lws", ["sh", "-c", wait_for_crd],
                {"KUBECONFIG": kubeconfig, "POD_NAMESPACE": LWS_NAMESPACE})  # fmt: skip


def lws_webhooks(base_url: str, ca: bytes) -> list[dict[str, Any]]:
    """The LWS release's webhook configurations, reaching the controller by URL.

    Read from the pinned module (config/webhook), with the pod webhook narrowed to LWS pods as
    the release's patch does, so other pods never depend on this controller being up."""
    source = planes.module_dir("lws") / "config" / "webhook"
    documents = [d for d in yaml.safe_load_all((source / "manifests.yaml").read_text()) if d]
    bundle = base64.b64encode(ca).decode()
    webhooks = []
    for original in documents:
        document = copy.deepcopy(original)
        kind = document["kind"]
        document["metadata"] = {"name": f"lws-{kind.lower()}"}
        for webhook in document["webhooks"]:
            path = webhook["clientConfig"]["service"]["path"]
            webhook["clientConfig"] = {"url": base_url + path, "caBundle": bundle}
            if path.endswith("-v1-pod"):
                webhook["objectSelector"] = {"matchExpressions": [
                    {"key": "leaderworkerset.sigs.k8s.io/name", "operator": "Exists"}]}  # fmt: skip
        webhooks.append(document)
    return webhooks


def kubeconfig_secret(plane: planes.Plane, name: str, namespace: str,
                      prefix: str = WORKLOAD) -> dict[str, Any]:  # fmt: skip
    """The Secret a platform team keeps a workload cluster's kubeconfig in."""
    document = planes.kubeconfig_document(plane, prefix, inline=True)
    return {
        "apiVersion": "v1",
        "kind": "Secret",
        "metadata": {"name": name, "namespace": namespace},
        "type": "Opaque",
        "stringData": {"kubeconfig": yaml.safe_dump(document)},
    }
