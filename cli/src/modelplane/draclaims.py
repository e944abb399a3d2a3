"""What kube-scheduler does with a simulated workload's device claims.

A pod that asks, through a ResourceClaimTemplate, for devices no node of its pool has stays
Pending on a real cluster (``cannot allocate all claims``), so its Deployment or
LeaderWorkerSet never becomes Available. ``simulate`` used to report it Ready. Here the pool's
devices come from the InferenceCluster that owns the provider config (its ``gpuPools``
status, as the InferenceClasses declare them), and each request of each claim is judged with
the DRA CEL dialect the scheduler of Modelplane uses (``modelplane_common.dracel``).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from modelplane_common import dracel

JSON = dict[str, Any]
POOL_LABEL = "modelplane.ai/pool"


def pod_specs(manifest: JSON) -> list[JSON]:
    """The pod specs a Deployment or LeaderWorkerSet manifest runs."""
    spec = manifest.get("spec") or {}
    if manifest.get("kind") == "Deployment":
        templates = [spec.get("template")]
    elif manifest.get("kind") == "LeaderWorkerSet":
        group = spec.get("leaderWorkerTemplate") or {}
        templates = [group.get("leaderTemplate"), group.get("workerTemplate")]
    else:
        return []
    return [t["spec"] for t in templates if isinstance(t, dict) and isinstance(t.get("spec"), dict)]


def _pool_devices(cluster: JSON, pool: str) -> list[JSON] | None:
    for entry in (cluster.get("status") or {}).get("gpuPools") or []:
        if isinstance(entry, dict) and entry.get("name") == pool:
            return [d for d in entry.get("devices") or [] if isinstance(d, dict)]
    return None


def _request_fits(request: JSON, devices: list[JSON]) -> bool:
    """Whether one node of the pool holds enough devices for ``request``: every device of an
    entry is alike, so an entry either matches all its ``count`` devices or none."""
    exactly = request.get("exactly") or request
    wanted = int(exactly.get("count") or 1)
    selectors = []
    for selector in exactly.get("selectors") or []:
        expression = ((selector or {}).get("cel") or {}).get("expression")
        if expression:
            try:
                selectors.append(dracel.compile_selector(expression))
            except dracel.SelectorCompileError:
                return False
    found = 0
    for entry in devices:
        if exactly.get("deviceClassName") not in (None, entry.get("deviceClassName")):
            continue
        device = dracel.cel_device(entry.get("driver"), entry.get("attributes"),
                                   entry.get("capacity"))  # fmt: skip
        if all(dracel.matches(selector, device) for selector in selectors):
            found += int(entry.get("count") or 1)
    return found >= wanted


def unschedulable(manifest: JSON, config: str, world: Callable[[str], list[JSON]]) -> str | None:
    """The scheduler's reason a pod of ``manifest`` (sent through provider config ``config``)
    stays Pending for its device claims, or None when it can be placed or cannot be judged."""
    clusters = [
        c for c in world("InferenceCluster")
        if ((c.get("status") or {}).get("providerConfigRef") or {}).get("name") == config
    ]  # fmt: skip
    if not clusters:
        return None
    templates = {}
    for obj in world("Object"):
        sent = ((obj.get("spec") or {}).get("forProvider") or {}).get("manifest") or {}
        ref = ((obj.get("spec") or {}).get("providerConfigRef") or {}).get("name")
        if sent.get("kind") == "ResourceClaimTemplate" and ref == config:
            metadata = sent.get("metadata") or {}
            templates[(metadata.get("namespace"), metadata.get("name"))] = sent
    namespace = (manifest.get("metadata") or {}).get("namespace")
    for pod in pod_specs(manifest):
        devices = _pool_devices(clusters[0], str((pod.get("nodeSelector") or {}).get(POOL_LABEL)))
        if devices is None:
            continue
        for claim in pod.get("resourceClaims") or []:
            template = templates.get((namespace, claim.get("resourceClaimTemplateName")))
            if template is None:
                continue
            requests = (((template.get("spec") or {}).get("spec") or {}).get("devices")
                        or {}).get("requests") or []  # fmt: skip
            if not all(_request_fits(r, devices) for r in requests if isinstance(r, dict)):
                return "0/1 nodes are available: 1 cannot allocate all claims."
    return None
