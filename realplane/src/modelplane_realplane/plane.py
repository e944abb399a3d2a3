"""One real control plane on this machine: ``up`` starts it, ``down`` stops it.

etcd, kube-apiserver (TLS, RBAC, an admin token), kube-controller-manager, Crossplane core
(``--package-runtime=External``, mTLS to functions), provider-kubernetes and provider-helm out
of cluster, a local OCI registry, and every Modelplane function started from its image in an
isolated root. Each listens on its own 127.0.0.1 port; what ``up`` started is recorded in
``<run>/state.json`` so ``down`` (from any process) stops exactly that. See design/realplane.md.
"""

from __future__ import annotations

import base64
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import yaml
from compose_inference_gateway import resources as inference_gateway
from compose_serving_stack import resources as serving_stack

from modelplane_realplane import charts, images, pki, processes, workload
from modelplane_realplane.build import binary
from modelplane_realplane.clusters import (
    Plane,
    http_ok,
    module_dir,
    start_kubernetes,
    wait_established,
)
from modelplane_realplane.paths import REPOSITORY, RUN

NAMESPACE = "crossplane-system"
# The gateway controllers Modelplane's GatewayClasses name (Traefik on the control plane,
# Envoy Gateway on workload clusters); the stand-ins answer for them (design/realplane.md).
GATEWAY_CONTROLLERS = (inference_gateway.GATEWAY_CONTROLLER, serving_stack.ENVOY_CONTROLLER)
SERVICE_ACCOUNT_DIR = Path("/var/run/secrets/kubernetes.io/serviceaccount")


# -------------------------------------------------------------------------------------------
# up


def up(run: Path = RUN, with_functions: bool = True, kubernetes_only: bool = False,
       with_workload: bool = True) -> Plane:  # fmt: skip
    """Start a fresh plane in ``run``; on any failure stop what was started and re-raise.
    ``kubernetes_only``: etcd, kube-apiserver and kube-controller-manager alone (an API
    server to judge admission against, up in seconds). ``with_workload``: the workload
    cluster (workload.py) and the stand-ins for what its charts' controllers would do."""
    existing = Plane.load(run)
    if existing is not None and any(processes.alive(pid) for pid in existing.pids.values()):
        raise processes.ComponentError(
            f"a plane is already running from {run}: stop it with `uv run realplane down`"
        )
    if run.exists():
        shutil.rmtree(run)
    (run / "pki").mkdir(parents=True)
    names = ("etcd", "etcd-peer", "kube-apiserver", "kube-controller-manager",
             "crossplane-metrics", "crossplane-health", "crossplane-webhook",
             "provider-kubernetes-health",
             "registry")  # fmt: skip
    plane = Plane(run=run, token="", ports={name: processes.free_port() for name in names})
    _make_pki(plane)
    plane.save()
    try:
        start_kubernetes(plane)
        if kubernetes_only:
            return plane
        _start_crossplane(plane)
        _start_chart_host(plane)
        _start_providers(plane)
        _start_registry(plane)
        if with_functions:
            _start_functions(plane)
            _start_runtime(plane)
        if with_workload:
            for prefix in workload.WORKLOADS:
                workload.start(plane, prefix)
            _start_standins(plane)
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


def _start_crossplane(plane: Plane) -> None:
    client = plane.client()
    client.apply({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": NAMESPACE}})
    core = str(binary("crossplane-core"))
    crds = module_dir("crossplane-core") / "cluster" / "crds"
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
        core, "core", "start", "--package-runtime=External",
        # Usage protection: the webhook refuses deleting what a Usage protects.
        f"--webhook-port={plane.ports['crossplane-webhook']}",
        f"--tls-server-certs-dir={plane.run / 'webhook-tls'}",
        f"--tls-client-certs-dir={plane.run / 'crossplane-tls-client'}",
        f"--xpkg-cache-dir={plane.run / 'xpkg-cache'}",
        f"--metrics-port={plane.ports['crossplane-metrics']}", f"--health-probe-port={health}",
        "--poll-interval=15s", *crossplane_args(),
    ], env)  # fmt: skip
    plane.ready("crossplane", lambda: http_ok(f"http://127.0.0.1:{health}/readyz"), timeout=120)
    source = module_dir("crossplane-core") / "cluster" / "webhookconfigurations" / "usage.yaml"
    for hook in usage_webhooks(source, f"https://127.0.0.1:{plane.ports['crossplane-webhook']}",
                               (plane.pki / "ca.crt").read_bytes()):  # fmt: skip
        client.apply(hook)


CROSSPLANE_VALUES = REPOSITORY / "docs" / "crossplane-values.yaml"


def crossplane_args() -> list[str]:
    """The arguments docs/crossplane-values.yaml gives Crossplane's pod, so the real plane runs
    Crossplane as the install does."""
    values = yaml.safe_load(CROSSPLANE_VALUES.read_text()) or {}
    return [str(argument) for argument in values.get("args") or []]


PROVIDERS = REPOSITORY / "docs" / "manifests" / "providers.yaml"


def runtime_args(provider: str) -> list[str]:
    """The arguments docs/manifests/providers.yaml gives ``provider``'s container through its
    DeploymentRuntimeConfig, so the real plane runs the provider as the install does."""
    documents = [d for d in yaml.safe_load_all(PROVIDERS.read_text()) if d]
    providers = [d for d in documents if d["kind"] == "Provider"]
    config = next((d["spec"].get("runtimeConfigRef") for d in providers
                   if d["metadata"]["name"] == provider), None)  # fmt: skip
    if not config:
        return []
    runtime = next(d for d in documents if d["kind"] == "DeploymentRuntimeConfig"
                   and d["metadata"]["name"] == config["name"])  # fmt: skip
    template = ((runtime["spec"].get("deploymentTemplate") or {}).get("spec") or {}).get(
        "template") or {}  # fmt: skip
    containers = (template.get("spec") or {}).get("containers") or []
    return [str(a) for c in containers if c.get("name") == "package-runtime"
            for a in c.get("args") or []]  # fmt: skip


def usage_webhooks(source: Path, base_url: str, ca: bytes) -> list[dict[str, Any]]:
    """Crossplane's webhook configurations (read from the pinned module), reaching the core
    process by URL instead of through its Service."""
    hooks = [d for d in yaml.safe_load_all(source.read_text()) if d]
    bundle = base64.b64encode(ca).decode()
    for hook in hooks:
        for entry in hook["webhooks"]:
            path = entry["clientConfig"]["service"]["path"]
            entry["clientConfig"] = {"url": base_url + path, "caBundle": bundle}
    return hooks


def _provider_crds(name: str) -> list[dict[str, Any]]:
    """A built provider's CRDs, conversion webhooks turned off: out of cluster there is no
    Service to convert through, and Modelplane composes only one version of each kind."""
    crds = []
    for path in sorted((module_dir(name) / "package" / "crds").glob("*.yaml")):
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
        wait_established(client, crd["metadata"]["name"])
    env = {"KUBECONFIG": str(plane.kubeconfig),
           "TLS_SERVER_CERTS_DIR": str(plane.run / "webhook-tls"),
           # rest.InClusterConfig, for ProviderConfigs of source InjectedIdentity
           "KUBERNETES_SERVICE_HOST": "127.0.0.1",
           "KUBERNETES_SERVICE_PORT": str(plane.ports["kube-apiserver"]),
           # the chart host's certificate, as if the public repositories had signed it
           "SSL_CERT_FILE": str(plane.pki / "ca.crt")}  # fmt: skip
    health = plane.ports["provider-kubernetes-health"]
    plane.start("provider-kubernetes", _as_pod(plane, [
        str(binary("provider-kubernetes")), f"--health-probe-bind-addr=127.0.0.1:{health}",
        *runtime_args("provider-kubernetes"),
    ]), env)  # fmt: skip
    plane.ready("provider-kubernetes", lambda: http_ok(f"http://127.0.0.1:{health}/readyz"))
    # provider-helm serves no probe; with --debug it logs each kind its controllers' gate has
    # found served, the namespaced Release among them once it is connected and watching.
    plane.start("provider-helm", _as_pod(plane, [str(binary("provider-helm")), "--debug"]), env)
    log = plane.logs / "provider-helm.log"
    plane.ready("provider-helm", lambda: "helm.m.crossplane.io/v1beta1, Kind=Release"
                in log.read_text(errors="replace"))  # fmt: skip


def _as_pod(plane: Plane, command: list[str]) -> list[str]:
    """``command`` in a private mount namespace that looks, to it, like a provider's pod: a
    service-account token where rest.InClusterConfig reads it, a /tmp of its own, and a
    resolv.conf naming the wildcard DNS server, so the public chart repositories' hosts reach
    the local chart host (charts.py)."""
    identity = plane.run / "serviceaccount"
    identity.mkdir(exist_ok=True)
    (identity / "token").write_text(plane.token)
    shutil.copy(plane.pki / "ca.crt", identity / "ca.crt")
    (identity / "namespace").write_text(NAMESPACE)
    resolv = plane.run / "resolv.conf"
    resolv.write_text("nameserver 127.0.0.1\n")
    tmp = plane.run / "provider-tmp"
    tmp.mkdir(exist_ok=True)
    # An empty mount point on the host; only the namespace sees the token mounted on it.
    SERVICE_ACCOUNT_DIR.mkdir(parents=True, exist_ok=True)
    script = (f'mount --bind "{resolv}" /etc/resolv.conf && mount --bind "{tmp}" /tmp && '
              f'mount --bind "{identity}" "{SERVICE_ACCOUNT_DIR}" && exec "$@"')  # fmt: skip
    return ["unshare", "--mount", "--propagation", "private", "sh", "-c", script, "pod", *command]


def _start_chart_host(plane: Plane) -> None:
    """The public chart repositories, served from this machine (charts.py)."""
    pinned = charts.pinned_charts()
    charts.issue_chart_host_cert(plane.pki, charts.hosts(pinned))
    plane.start("chart-host", [sys.executable, "-m", "modelplane_realplane.charts",
                               "--run-dir", str(plane.run), "--port", "443"])  # fmt: skip
    plane.ready("chart-host", lambda: processes.port_open(443), timeout=30)
    plane.start("wildcard-dns", [sys.executable, "-m", "modelplane_realplane.wildcarddns"])
    log = plane.logs / "wildcard-dns.log"
    plane.ready("wildcard-dns", lambda: "answering" in log.read_text(), timeout=30)


def _start_standins(plane: Plane) -> None:
    """What the workload cluster's storage and both clusters' gateway controllers would do
    (fleet.py): volumes for claims, addresses and conditions for Gateways and routes."""
    plane.start("standins", [
        sys.executable, "-m", "modelplane_realplane.fleet",
        "--kubeconfig", str(plane.kubeconfig),
        *(f"--kubeconfig={plane.kubeconfig_of(prefix)}" for prefix in workload.WORKLOADS),
        *(f"--gateway-controller={name}" for name in GATEWAY_CONTROLLERS),
    ])  # fmt: skip
    log = plane.logs / "standins.log"
    plane.ready("standins", lambda: log.is_file() and log.stat().st_size > 0, timeout=30)


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
    plane.ready("registry", lambda: http_ok(f"http://{plane.registry}/v2/"))


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
