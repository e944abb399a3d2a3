"""Remote object names and desired-resource keys of a ModelReplica (model-replica.md §4.2, §5).

Every name is a pure function of the replica, so reconciles are stable. Only the serving
Service and the HTTPRoute use the bare replica name: a LeaderWorkerSet named like the Service
would lose its headless Service and deadlock its gang (§5.3). Workload names always end in a
5-hex hash, so they can equal neither the replica name nor ``<replica>-pool``/``-epp``.
"""

from __future__ import annotations

from modelplane_common.naming import MAX_NAME_LENGTH, child_name

SERVICE_KEY = "model-service"
ROUTE_KEY = "model-route"
POOL_KEY = "inference-pool"
PICKER_KEYS = (
    "epp-serviceaccount",
    "epp-role",
    "epp-rolebinding",
    "epp-config",
    "epp",
    "epp-service",
)


_WORKLOAD_KEY_PREFIX = "model-serving-"


def workload_key(engine: str) -> str:
    return f"{_WORKLOAD_KEY_PREFIX}{engine}"


def is_workload_key(key: str) -> bool:
    """Whether a desired-resource key is an engine workload (the only keys gating readiness)."""
    return key.startswith(_WORKLOAD_KEY_PREFIX)


def claim_key(engine: str, role: str) -> str:
    return f"resource-claim-{engine}-{role.lower()}"


def workload_name(replica: str, engine: str) -> str:
    """The engine's Deployment or LeaderWorkerSet."""
    return child_name(replica, engine)


def claim_template_name(replica: str, engine: str, role: str) -> str:
    """A claiming member's ResourceClaimTemplate (flat parts, not nested via the workload)."""
    return child_name(replica, engine, role.lower(), "devices")


def _suffixed(replica: str, suffix: str) -> str:
    # IC-2: readable while it fits, hashed (and still unique) when it would exceed 63.
    readable = f"{replica}-{suffix}"
    return readable if len(readable) <= MAX_NAME_LENGTH else child_name(replica, suffix)


def pool_name(replica: str) -> str:
    return _suffixed(replica, "pool")


def picker_name(replica: str) -> str:
    """Name of every endpoint-picker object (ServiceAccount ... Service)."""
    return _suffixed(replica, "epp")
