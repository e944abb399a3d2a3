"""A cluster of real Kubernetes processes, and the record of what one ``up`` started.

``Plane`` is that record (ports, pids, the admin token; saved as ``<run>/state.json``);
``start_kubernetes`` starts one cluster's etcd, kube-apiserver and kube-controller-manager,
for the control plane (prefix "") or the workload cluster (prefix ``workload-``).
"""

from __future__ import annotations

import base64
import dataclasses
import functools
import json
import subprocess
import urllib.request
from pathlib import Path
from typing import Any

import yaml

from modelplane_realplane import processes
from modelplane_realplane.build import binary
from modelplane_realplane.components import BY_NAME
from modelplane_realplane.kubeapi import Client, is_true, wait
from modelplane_realplane.paths import RUN


@dataclasses.dataclass
class Plane:
    """What one ``up`` started: where it listens, how to authenticate, which pids to stop."""

    run: Path
    token: str
    ports: dict[str, int]
    pids: dict[str, int] = dataclasses.field(default_factory=dict)
    functions: dict[str, int] = dataclasses.field(default_factory=dict)  # function -> port

    @property
    def server(self) -> str:
        return self.server_of("")

    def server_of(self, cluster: str) -> str:
        return f"https://127.0.0.1:{self.ports[cluster + 'kube-apiserver']}"

    @property
    def registry(self) -> str:
        return f"127.0.0.1:{self.ports['registry']}"

    @property
    def pki(self) -> Path:
        return self.run / "pki"

    @property
    def logs(self) -> Path:
        return self.run / "logs"

    @property
    def kubeconfig(self) -> Path:
        return self.kubeconfig_of("")

    def kubeconfig_of(self, cluster: str) -> Path:
        return self.run / f"{cluster}kubeconfig"

    def client(self, cluster: str = "") -> Client:
        """A client of the control plane, or of the workload cluster (``WORKLOAD``)."""
        return Client(self.server_of(cluster), self.token, self.pki / "ca.crt")

    def save(self) -> None:
        (self.run / "state.json").write_text(json.dumps(dataclasses.asdict(self), default=str))

    @classmethod
    def load(cls, run: Path = RUN) -> Plane | None:
        state = run / "state.json"
        if not state.is_file():
            return None
        data = json.loads(state.read_text())
        data["run"] = Path(data["run"])
        return cls(**data)

    def start(self, name: str, command: list[str], env: dict[str, str] | None = None) -> int:
        pid = processes.start(name, command, self.logs, env)
        self.pids[name] = pid
        self.save()
        return pid

    def ready(self, name: str, check: Any, timeout: float = 90) -> None:
        processes.wait_ready(name, self.pids[name], self.logs / f"{name}.log", check, timeout)


def kubeconfig_document(plane: Plane, cluster: str = "", inline: bool = False) -> dict[str, Any]:
    """An admin kubeconfig for the control plane (``cluster`` "") or the workload cluster
    (``WORKLOAD``); ``inline`` embeds the CA, as a kubeconfig kept in a Secret must."""
    name = cluster.rstrip("-") or "realplane"
    ca = plane.pki / "ca.crt"
    trust = ({"certificate-authority-data": base64.b64encode(ca.read_bytes()).decode()}
             if inline else {"certificate-authority": str(ca)})  # fmt: skip
    return {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [{"name": name, "cluster": {"server": plane.server_of(cluster), **trust}}],
        "users": [{"name": "admin", "user": {"token": plane.token}}],
        "contexts": [{"name": name, "context": {"cluster": name, "user": "admin"}}],
        "current-context": name,
    }


def start_kubernetes(plane: Plane, cluster: str = "") -> None:
    """etcd, kube-apiserver and kube-controller-manager of one cluster: the control plane
    (``cluster`` "") or the workload cluster (``WORKLOAD``), each process and port prefixed."""
    ports, pki_dir = plane.ports, plane.pki
    etcd = f"http://127.0.0.1:{ports[cluster + 'etcd']}"
    peer = f"http://127.0.0.1:{ports[cluster + 'etcd-peer']}"
    member = cluster.rstrip("-") or "realplane"
    plane.start(cluster + "etcd", [
        str(binary("etcd")), f"--name={member}", f"--data-dir={plane.run / (cluster + 'etcd')}",
        f"--listen-client-urls={etcd}", f"--advertise-client-urls={etcd}",
        f"--listen-peer-urls={peer}", f"--initial-advertise-peer-urls={peer}",
        f"--initial-cluster={member}={peer}", "--unsafe-no-fsync", "--log-level=warn",
    ])  # fmt: skip
    plane.ready(cluster + "etcd", lambda: http_ok(f"{etcd}/health"), timeout=60)

    port = ports[cluster + "kube-apiserver"]
    plane.start(cluster + "kube-apiserver", [
        str(binary("kube-apiserver")), f"--etcd-servers={etcd}",
        "--bind-address=127.0.0.1", "--advertise-address=127.0.0.1", f"--secure-port={port}",
        f"--cert-dir={plane.run / (cluster + 'apiserver-certs')}",
        f"--tls-cert-file={pki_dir / 'serving.crt'}",
        f"--tls-private-key-file={pki_dir / 'serving.key'}",
        f"--client-ca-file={pki_dir / 'ca.crt'}", f"--token-auth-file={pki_dir / 'tokens.csv'}",
        "--authorization-mode=RBAC", "--allow-privileged=true",
        "--service-cluster-ip-range=10.0.0.0/24", "--endpoint-reconciler-type=none",
        f"--service-account-issuer=https://127.0.0.1:{port}",
        f"--service-account-key-file={pki_dir / 'sa.pub'}",
        f"--service-account-signing-key-file={pki_dir / 'sa.key'}",
        "--enable-priority-and-fairness=false", "--v=1",
    ])  # fmt: skip
    client = plane.client(cluster)
    plane.ready(cluster + "kube-apiserver", client.ready, timeout=120)
    kubeconfig = plane.kubeconfig_of(cluster)
    kubeconfig.write_text(yaml.safe_dump(kubeconfig_document(plane, cluster)))

    manager = cluster + "kube-controller-manager"
    plane.start(manager, [
        str(binary("kube-controller-manager")), f"--kubeconfig={kubeconfig}",
        f"--authentication-kubeconfig={kubeconfig}",
        f"--authorization-kubeconfig={kubeconfig}",
        "--leader-elect=false", "--bind-address=127.0.0.1", f"--secure-port={ports[manager]}",
        f"--service-account-private-key-file={pki_dir / 'sa.key'}",
        f"--root-ca-file={pki_dir / 'ca.crt'}", "--use-service-account-credentials=false",
        "--v=1",
    ])  # fmt: skip
    plane.ready(manager, lambda: processes.port_open(ports[manager]))


@functools.cache
def module_dir(component: str) -> Path:
    """The upstream module's source in Go's module cache (for CRDs shipped beside the code)."""
    spec = BY_NAME[component]
    done = subprocess.run(
        ["go", "list", "-m", "-f", "{{.Dir}}", spec.upstream],
        cwd=spec.go_mod.parent, capture_output=True, text=True, check=True,
    )  # fmt: skip
    return Path(done.stdout.strip())


def http_ok(url: str) -> bool:
    try:
        with urllib.request.urlopen(url, timeout=3) as answer:
            return bool(answer.status == 200)
    except OSError:
        return False


def wait_established(client: Client, crd: str, timeout: float = 60) -> None:
    wait(
        f"CRD {crd} Established",
        lambda: is_true(client.get("apiextensions.k8s.io/v1", "CustomResourceDefinition", crd),
                        "Established"),
        timeout,
    )  # fmt: skip
