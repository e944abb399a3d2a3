"""Replica names, desired-resource keys and labels (spec model-deployment §4.8)."""

from __future__ import annotations

import hashlib

from modelplane_common.naming import CLUSTER_LABEL, MAX_NAME_LENGTH

_HASH_LENGTH = 5

DEPLOYMENT_LABEL = "modelplane.ai/deployment"
INDEX_LABEL = "modelplane.ai/replica-index"


def opaque_name(visible: str, *discriminators: str) -> str:
    """``<visible cut to 57, trailing '-' stripped>-<5 hex of sha256 of all parts joined>``.

    Unlike ``child_name`` only ``visible`` is readable: cluster and index live in labels.
    """
    digest = hashlib.sha256("-".join((visible, *discriminators)).encode()).hexdigest()
    prefix = visible[: MAX_NAME_LENGTH - _HASH_LENGTH - 1].rstrip("-")
    return f"{prefix}-{digest[:_HASH_LENGTH]}"


def replica_name(deployment: str, cluster: str, index: int) -> str:
    """Shared by a replica's ModelReplica and its ModelEndpoint."""
    return opaque_name(deployment, cluster, str(index))


def replica_key(cluster: str, index: int) -> str:
    return f"replica-{cluster}-{index}"


def endpoint_key(cluster: str, index: int) -> str:
    return f"endpoint-{cluster}-{index}"


def labels(deployment: str, cluster: str, index: int) -> dict[str, str]:
    return {DEPLOYMENT_LABEL: deployment, CLUSTER_LABEL: cluster, INDEX_LABEL: str(index)}
