"""The package runtime Crossplane defers to under ``--package-runtime=External``.

Crossplane then starts no Deployment for a Function and sets no endpoint; its function runner
fails with "active FunctionRevision … has an empty status.endpoint" until something does. This
process is that something for the plane: every active FunctionRevision of a function the plane
runs gets ``status.endpoint`` (the function's mTLS port on 127.0.0.1) and ``RuntimeHealthy``
once that port answers, as the Deployment runtime would once its pod is ready, and the
name of a Secret holding its serving certificate (``status.tlsServerSecretName``), which
Crossplane's establisher waits for. A revision of a
function the plane does not run is marked ``RuntimeHealthy=False`` saying so.

Run as ``python -m modelplane_realplane.runtime <run dir>``; ``realplane up`` starts it.
"""

from __future__ import annotations

import base64
import datetime
import sys
import time
from pathlib import Path
from typing import Any

from modelplane_realplane import processes
from modelplane_realplane.kubeapi import ApiError, Client, condition
from modelplane_realplane.plane import NAMESPACE, Plane

PARENT_LABEL = "pkg.crossplane.io/package"
FUNCTION_PREFIX = "modelplane-modelplane"  # <repository>_<function> as Crossplane names it


def function_of(revision: dict[str, Any]) -> str:
    """The Modelplane function a FunctionRevision runs (compose-x), from its parent's name."""
    parent = (revision["metadata"].get("labels") or {}).get(PARENT_LABEL, "")
    return parent.removeprefix(FUNCTION_PREFIX)


def desired_status(revision: dict[str, Any], ports: dict[str, int]) -> dict[str, Any] | None:
    """The status patch a revision needs, or None when it already has it."""
    if revision.get("spec", {}).get("desiredState") != "Active":
        return None
    port = ports.get(function_of(revision))
    now = datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
    current = condition(revision, "RuntimeHealthy") or {}
    if port is None:
        wanted = {"type": "RuntimeHealthy", "status": "False", "reason": "UnhealthyPackageRevision",
                  "message": "the real plane runs no function for this package"}  # fmt: skip
        endpoint = revision.get("status", {}).get("endpoint", "")
    elif not processes.port_open(port):
        wanted = {"type": "RuntimeHealthy", "status": "False", "reason": "UnhealthyPackageRevision",
                  "message": f"the function is not answering on 127.0.0.1:{port}"}  # fmt: skip
        endpoint = f"127.0.0.1:{port}"
    else:
        wanted = {"type": "RuntimeHealthy", "status": "True", "reason": "HealthyPackageRevision"}
        endpoint = f"127.0.0.1:{port}"
    status = revision.get("status", {})
    secret = tls_secret_name(revision)
    same = all(current.get(key) == value for key, value in wanted.items())
    if same and status.get("endpoint") == endpoint and status.get("tlsServerSecretName") == secret:
        return None
    conditions = [c for c in status.get("conditions") or [] if c.get("type") != "RuntimeHealthy"]
    conditions.append({**wanted, "lastTransitionTime": now})
    return {"endpoint": endpoint, "conditions": conditions, "tlsServerSecretName": secret}


def tls_secret_name(revision: dict[str, Any]) -> str:
    """The Secret holding the function's serving certificate, as the Deployment runtime names
    it; Crossplane's revision establisher waits for it before it installs the package."""
    return f"{(revision['metadata'].get('labels') or {}).get(PARENT_LABEL, '')}-tls-server"


def ensure_tls_secret(client: Client, revision: dict[str, Any], pki: Path) -> None:
    data = {key: base64.b64encode((pki / source).read_bytes()).decode()
            for key, source in (("tls.crt", "serving.crt"), ("tls.key", "serving.key"),
                                ("ca.crt", "ca.crt"))}  # fmt: skip
    client.apply({
        "apiVersion": "v1", "kind": "Secret", "type": "kubernetes.io/tls",
        "metadata": {"name": tls_secret_name(revision), "namespace": NAMESPACE}, "data": data,
    })  # fmt: skip


def reconcile(client: Client, ports: dict[str, int], pki: Path) -> int:
    """One pass over every FunctionRevision; how many were patched."""
    patched = 0
    for revision in client.list("pkg.crossplane.io/v1", "FunctionRevision"):
        status = desired_status(revision, ports)
        if status is None:
            continue
        try:
            ensure_tls_secret(client, revision, pki)
            client.patch_status("pkg.crossplane.io/v1", "FunctionRevision",
                                revision["metadata"]["name"], status)  # fmt: skip
        except ApiError as error:
            if error.code not in (404, 409):
                raise
            continue
        patched += 1
        print(f"set {revision['metadata']['name']} endpoint {status['endpoint']}", flush=True)
    return patched


def main(run: str) -> None:
    plane = Plane.load(Path(run))
    if plane is None:
        sys.exit(f"no plane state in {run}")
    client = plane.client()
    print(f"watching FunctionRevisions for {len(plane.functions)} functions", flush=True)
    while True:
        try:
            reconcile(client, plane.functions, plane.pki)
        except (ApiError, OSError) as error:
            print(f"reconcile failed, retrying: {error}", flush=True)
        time.sleep(1)


if __name__ == "__main__":
    main(sys.argv[1])
