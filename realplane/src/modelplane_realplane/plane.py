"""One real control plane on this machine: ``up`` starts it, ``down`` stops it.

etcd, kube-apiserver (TLS, RBAC, an admin token), kube-controller-manager, Crossplane core
(``--package-runtime=External``, mTLS to functions), provider-kubernetes and provider-helm out
of cluster, a local OCI registry, and every Modelplane function started from its image in an
isolated root. Each listens on its own 127.0.0.1 port; what ``up`` started is recorded in
``<run>/state.json`` so ``down`` (from any process) stops exactly that. See design/realplane.md.
"""

from __future__ import annotations

import dataclasses
import functools
import json
import os
import shutil
import subprocess
import sys
import time
import urllib.request
from pathlib import Path
from typing import Any

import yaml

from modelplane_realplane import images, pki, processes
from modelplane_realplane.build import binary
from modelplane_realplane.components import BY_NAME
from modelplane_realplane.kubeapi import Client, is_true, wait
from modelplane_realplane.paths import RUN

NAMESPACE = "crossplane-system"


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
        return f"https://127.0.0.1:{self.ports['kube-apiserver']}"

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
        return self.run / "kubeconfig"

    def client(self) -> Client:
        return Client(self.server, self.token, self.pki / "ca.crt")

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


# -------------------------------------------------------------------------------------------
# up


def up(run: Path = RUN, with_functions: bool = True, kubernetes_only: bool = False) -> Plane:
    """Start a fresh plane in ``run``; on any failure stop what was started and re-raise.
    ``kubernetes_only``: etcd, kube-apiserver and kube-controller-manager alone (an API
    server to judge admission against, up in seconds)."""
    existing = Plane.load(run)
    if existing is not None and any(processes.alive(pid) for pid in existing.pids.values()):
        raise processes.ComponentError(
            f"a plane is already running from {run}: stop it with `uv run realplane down`"
        )
    if run.exists():
        shutil.rmtree(run)
    (run / "pki").mkdir(parents=True)
    names = ("etcd", "etcd-peer", "kube-apiserver", "kube-controller-manager",
             "crossplane-metrics", "crossplane-health", "provider-kubernetes-health",
             "registry")  # fmt: skip
    plane = Plane(run=run, token="", ports={name: processes.free_port() for name in names})
    _make_pki(plane)
    plane.save()
    try:
        _start_kubernetes(plane)
        if kubernetes_only:
            return plane
        _start_crossplane(plane)
        _start_providers(plane)
        _start_registry(plane)
        if with_functions:
            _start_functions(plane)
            _start_runtime(plane)
    except BaseException:
        down(run)
        raise
    return plane


def _make_pki(plane: Plane) -> None:
    directory = plane.pki
    pki.make_ca(directory)
    pki.issue(directory, "serving", "127.0.0.1", server=True, client=False)
    pki.issue(directory, "crossplane-client", "crossplane", server=False, client=True)
    pki.service_account_keys(directory)
    plane.token = pki.admin_token(directory)
    # Crossplane core reads its client certificate for dialling functions from one folder.
    client = plane.run / "crossplane-tls-client"
    client.mkdir()
    for source, target in (("ca.crt", "ca.crt"), ("crossplane-client.crt", "tls.crt"),
                           ("crossplane-client.key", "tls.key")):  # fmt: skip
        shutil.copy(directory / source, client / target)
    webhook = plane.run / "webhook-tls"
    webhook.mkdir()
    shutil.copy(directory / "serving.crt", webhook / "tls.crt")
    shutil.copy(directory / "serving.key", webhook / "tls.key")


def _write_kubeconfig(plane: Plane) -> None:
    config = {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [{"name": "realplane", "cluster": {
            "server": plane.server, "certificate-authority": str(plane.pki / "ca.crt")}}],
        "users": [{"name": "admin", "user": {"token": plane.token}}],
        "contexts": [{"name": "realplane", "context": {"cluster": "realplane", "user": "admin"}}],
        "current-context": "realplane",
    }  # fmt: skip
    plane.kubeconfig.write_text(yaml.safe_dump(config))


def _start_kubernetes(plane: Plane) -> None:
    ports, pki_dir = plane.ports, plane.pki
    etcd = f"http://127.0.0.1:{ports['etcd']}"
    peer = f"http://127.0.0.1:{ports['etcd-peer']}"
    plane.start("etcd", [
        str(binary("etcd")), "--name=realplane", f"--data-dir={plane.run / 'etcd'}",
        f"--listen-client-urls={etcd}", f"--advertise-client-urls={etcd}",
        f"--listen-peer-urls={peer}", f"--initial-advertise-peer-urls={peer}",
        f"--initial-cluster=realplane={peer}", "--unsafe-no-fsync", "--log-level=warn",
    ])  # fmt: skip
    plane.ready("etcd", lambda: _http_ok(f"{etcd}/health"), timeout=60)

    port = ports["kube-apiserver"]
    plane.start("kube-apiserver", [
        str(binary("kube-apiserver")), f"--etcd-servers={etcd}",
        "--bind-address=127.0.0.1", "--advertise-address=127.0.0.1", f"--secure-port={port}",
        f"--cert-dir={plane.run / 'apiserver-certs'}",
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
    client = plane.client()
    plane.ready("kube-apiserver", client.ready, timeout=120)
    _write_kubeconfig(plane)

    plane.start("kube-controller-manager", [
        str(binary("kube-controller-manager")), f"--kubeconfig={plane.kubeconfig}",
        f"--authentication-kubeconfig={plane.kubeconfig}",
        f"--authorization-kubeconfig={plane.kubeconfig}",
        "--leader-elect=false", "--bind-address=127.0.0.1",
        f"--secure-port={ports['kube-controller-manager']}",
        f"--service-account-private-key-file={pki_dir / 'sa.key'}",
        f"--root-ca-file={pki_dir / 'ca.crt'}", "--use-service-account-credentials=false",
        "--v=1",
    ])  # fmt: skip
    plane.ready("kube-controller-manager",
                lambda: processes.port_open(ports["kube-controller-manager"]))  # fmt: skip


def _start_crossplane(plane: Plane) -> None:
    client = plane.client()
    client.apply({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": NAMESPACE}})
    core = str(binary("crossplane-core"))
    crds = _module_dir("crossplane-core") / "cluster" / "crds"
    env = {"KUBECONFIG": str(plane.kubeconfig), "POD_NAMESPACE": NAMESPACE}
    # Through the environment: kong spells some of these flags oddly (--cr-ds-path).
    init_env = {"CRDS_PATH": str(crds), "ENABLE_WEBHOOKS": "false",
                "TLS_CA_SECRET_NAME": "crossplane-root-ca",
                "TLS_CLIENT_SECRET_NAME": "crossplane-tls-client"}  # fmt: skip
    # init applies the core CRDs and at once uses one of them (the Lock); until discovery
    # catches up it fails with "no matches for kind", and a second run finds it. It is
    # idempotent, as it is for every Crossplane pod start.
    for _attempt in range(5):
        init = subprocess.run(
            [core, "core", "init"], env={**os.environ, **env, **init_env},
            capture_output=True, text=True, timeout=180, check=False,
        )  # fmt: skip
        with (plane.logs / "crossplane-init.log").open("a") as log:
            log.write(init.stdout + init.stderr)
        if init.returncode == 0:
            break
        time.sleep(2)
    if init.returncode != 0:
        raise processes.ComponentError(
            "crossplane core init failed:\n"
            + processes.log_tail(plane.logs / "crossplane-init.log")
        )
    health = plane.ports["crossplane-health"]
    # Crossplane tees each fetched package into this cache; without the folder every unpack
    # fails with "io: read/write on closed pipe".
    (plane.run / "xpkg-cache").mkdir()
    plane.start("crossplane", [
        core, "core", "start", "--package-runtime=External", "--enable-webhooks=false",
        f"--tls-client-certs-dir={plane.run / 'crossplane-tls-client'}",
        f"--xpkg-cache-dir={plane.run / 'xpkg-cache'}",
        f"--metrics-port={plane.ports['crossplane-metrics']}", f"--health-probe-port={health}",
        "--poll-interval=15s",
    ], env)  # fmt: skip
    plane.ready("crossplane", lambda: _http_ok(f"http://127.0.0.1:{health}/readyz"), timeout=120)


def _provider_crds(name: str) -> list[dict[str, Any]]:
    """A built provider's CRDs, conversion webhooks turned off: out of cluster there is no
    Service to convert through, and Modelplane composes only one version of each kind."""
    crds = []
    for path in sorted((_module_dir(name) / "package" / "crds").glob("*.yaml")):
        crd = yaml.safe_load(path.read_text())
        crd["spec"]["conversion"] = {"strategy": "None"}
        crds.append(crd)
    return crds


def _start_providers(plane: Plane) -> None:
    client = plane.client()
    crds = _provider_crds("provider-kubernetes") + _provider_crds("provider-helm")
    for crd in crds:
        client.apply(crd)
    for crd in crds:
        _wait_established(client, crd["metadata"]["name"])
    env = {"KUBECONFIG": str(plane.kubeconfig),
           "TLS_SERVER_CERTS_DIR": str(plane.run / "webhook-tls")}  # fmt: skip
    health = plane.ports["provider-kubernetes-health"]
    plane.start("provider-kubernetes", [
        str(binary("provider-kubernetes")), f"--health-probe-bind-addr=127.0.0.1:{health}",
    ], env)  # fmt: skip
    plane.ready("provider-kubernetes", lambda: _http_ok(f"http://127.0.0.1:{health}/readyz"))
    # provider-helm serves no probe; with --debug it logs each kind its controllers' gate has
    # found served, the namespaced Release among them once it is connected and watching.
    plane.start("provider-helm", [str(binary("provider-helm")), "--debug"], env)
    log = plane.logs / "provider-helm.log"
    plane.ready("provider-helm", lambda: "helm.m.crossplane.io/v1beta1, Kind=Release"
                in log.read_text(errors="replace"))  # fmt: skip


def _start_registry(plane: Plane) -> None:
    registry = shutil.which("docker-registry")
    if registry is None:
        raise processes.ComponentError(
            "docker-registry is missing: apt-get install docker-registry (Debian's package)"
        )
    config = {
        "version": 0.1,
        "log": {"level": "warn"},
        "storage": {"filesystem": {"rootdirectory": str(plane.run / "registry")},
                    "delete": {"enabled": True}},
        "http": {"addr": plane.registry},
    }  # fmt: skip
    path = plane.run / "registry.yaml"
    path.write_text(yaml.safe_dump(config))
    plane.start("registry", [registry, "serve", str(path)])
    plane.ready("registry", lambda: _http_ok(f"http://{plane.registry}/v2/"))


def _start_functions(plane: Plane) -> None:
    tarballs = images.ensure_amd64()
    base = images.unpack_base(tarballs, plane.run / "roots")
    for name, tarball in tarballs.items():
        port = processes.free_port()
        root = images.unpack_function(base, tarball, plane.run / "roots" / name, plane.pki)
        plane.functions[name] = port
        plane.start(f"function-{name}", images.command(root, tarball, port),
                    {"TLS_SERVER_CERTS_DIR": "/tls/server"})  # fmt: skip
    for name, port in plane.functions.items():
        plane.ready(f"function-{name}", lambda port=port: processes.port_open(port), timeout=60)


def _start_runtime(plane: Plane) -> None:
    """The package runtime Crossplane defers to (--package-runtime=External)."""
    plane.start("function-runtime", [sys.executable, "-m", "modelplane_realplane.runtime",
                                     str(plane.run)])  # fmt: skip
    log = plane.logs / "function-runtime.log"
    plane.ready("function-runtime", lambda: "watching" in log.read_text(), timeout=30)


# -------------------------------------------------------------------------------------------
# down


def down(run: Path = RUN) -> list[str]:
    """Stop every process ``up`` started from ``run``, newest first; names of any left."""
    plane = Plane.load(run)
    if plane is None:
        return []
    for pid in reversed(list(plane.pids.values())):
        processes.stop(pid)
    left = [name for name, pid in plane.pids.items() if processes.group_members(pid)]
    plane.pids = {name: plane.pids[name] for name in left}
    plane.save()
    return left


# -------------------------------------------------------------------------------------------
# helpers


@functools.cache
def _module_dir(component: str) -> Path:
    """The upstream module's source in Go's module cache (for CRDs shipped beside the code)."""
    spec = BY_NAME[component]
    done = subprocess.run(
        ["go", "list", "-m", "-f", "{{.Dir}}", spec.upstream],
        cwd=spec.go_mod.parent, capture_output=True, text=True, check=True,
    )  # fmt: skip
    return Path(done.stdout.strip())


def _http_ok(url: str) -> bool:
    try:
        with urllib.request.urlopen(url, timeout=3) as answer:
            return bool(answer.status == 200)
    except OSError:
        return False


def _wait_established(client: Client, crd: str, timeout: float = 60) -> None:
    wait(
        f"CRD {crd} Established",
        lambda: is_true(client.get("apiextensions.k8s.io/v1", "CustomResourceDefinition", crd),
                        "Established"),
        timeout,
    )  # fmt: skip
