"""DRA ResourceClaimTemplates for claiming members (model-replica.md §7).

DRA creates one claim per pod from the template, so every copy and every follower gets devices
of its own. Only ``claim: DRA`` devices ever reach a replica; Synthetic ones steer placement
only and are enforced by the pool pin.
"""

from __future__ import annotations

from typing import Any

from modelplane_schemas.generated.modelplane_ai.v1alpha1.modelreplica import DeviceRequest

JSON = dict[str, Any]

# Fleet-scheduling facts (GPUs per node, inter-node fabric) live under this domain. No DRA
# driver publishes them, so a selector naming them could never be satisfied on the cluster.
MODELPLANE_DOMAIN = "modelplane.ai"


def driver_selectors(request: DeviceRequest) -> list[str]:
    """The request's CEL expressions a DRA driver can check, in order."""
    return [
        selector.cel
        for selector in request.selectors or []
        if selector.cel is not None and MODELPLANE_DOMAIN not in selector.cel
    ]


def _device_request(request: DeviceRequest) -> JSON:
    exactly: JSON = {"deviceClassName": request.deviceClassName, "count": request.count or 1}
    selectors = driver_selectors(request)
    if selectors:
        exactly["selectors"] = [{"cel": {"expression": cel}} for cel in selectors]
    return {"name": request.name, "exactly": exactly}


def claim_template(name: str, namespace: str, requests: list[DeviceRequest]) -> JSON:
    """A ``resource.k8s.io/v1`` ResourceClaimTemplate with one request per device request."""
    return {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "ResourceClaimTemplate",
        "metadata": {"name": name, "namespace": namespace},
        "spec": {"spec": {"devices": {"requests": [_device_request(r) for r in requests]}}},
    }
