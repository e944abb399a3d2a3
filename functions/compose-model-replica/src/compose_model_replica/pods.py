"""Pod templates for engine members (model-replica.md §6.2, §6.5, §8).

The user owns image, command and args: they pass through verbatim. Modelplane adds only the
pool pin, the GPU toleration, the DRA claim, shared memory, the cache mount, the serving port
and probe, and (gangs only) ``MODELPLANE_LEADER_ADDRESS``.
"""

from __future__ import annotations

import dataclasses
from typing import Any

from modelplane_common.cache_naming import CACHE_MOUNT_PATH, CACHE_VOLUME_NAME
from modelplane_schemas.generated.modelplane_ai.v1alpha1.modelreplica import Container, Member

JSON = dict[str, Any]

POOL_LABEL = "modelplane.ai/pool"
SERVING_LABEL = "modelplane.ai/serving"
WORKLOAD_LABEL = "modelplane.ai/workload"
LWS_ROLE_LABEL = "modelplane.ai/lws-role"
# User labels in these domains are dropped: they steer Services, InferencePools and the LWS
# controller, and a user copy on a worker pod would put a follower behind the serving Service.
RESERVED_LABEL_PREFIXES = ("modelplane.ai/", "llm-d.ai/", "leaderworkerset.sigs.k8s.io/")

ENGINE_CONTAINER = "engine"
CLAIM_NAME = "devices"
SERVING_PORT = 8000
SHM_VOLUME = "dshm"
SHM_PATH = "/dev/shm"
LEADER_ADDRESS_ENV = "MODELPLANE_LEADER_ADDRESS"
# LWS prepends LWS_LEADER_ADDRESS to every gang container, so this expands to the leader's DNS
# name while user commands name only Modelplane's variable.
LEADER_ADDRESS_VALUE = "$(LWS_LEADER_ADDRESS)"
GPU_TOLERATION = {"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}


def readiness_probe(port: int) -> JSON:
    return {
        "httpGet": {"path": "/health", "port": port},
        "initialDelaySeconds": 30,
        "periodSeconds": 10,
    }


@dataclasses.dataclass(frozen=True)
class PodOptions:
    """What the backend decided about one member's pods."""

    labels: dict[str, str]  # Modelplane-owned pod labels (win over the user's)
    serving: bool  # Standalone or Leader: port 8000 and readiness probe
    gang: bool  # member of a Leader/Worker engine: leader address injected
    claim_template: str | None  # ResourceClaimTemplate name; None for a claimless member
    cache_claim: str | None  # ModelCache PVC name; None without modelCacheRef


def _user_env(container: Container) -> list[JSON]:
    return [entry.model_dump(mode="json", exclude_none=True) for entry in container.env or []]


def engine_container(container: Container, options: PodOptions) -> JSON:
    """The single ``engine`` container of a member pod."""
    out: JSON = {"name": ENGINE_CONTAINER, "image": container.image}
    if container.command is not None:
        out["command"] = list(container.command)
    if container.args:
        out["args"] = list(container.args)
    env = _user_env(container)
    if options.gang:
        env = [{"name": LEADER_ADDRESS_ENV, "value": LEADER_ADDRESS_VALUE}, *env]
    if env:
        out["env"] = env
    if options.serving:
        out["ports"] = [{"containerPort": SERVING_PORT}]
    if options.claim_template is not None:
        # One entry for the whole claim, never one per request; never nvidia.com/gpu limits.
        out["resources"] = {"claims": [{"name": CLAIM_NAME}]}
    mounts = [{"name": SHM_VOLUME, "mountPath": SHM_PATH}]
    if options.cache_claim is not None:
        # Read-write on purpose: engines write lock, tokenizer and compile files next to weights.
        mounts.append({"name": CACHE_VOLUME_NAME, "mountPath": CACHE_MOUNT_PATH})
    out["volumeMounts"] = mounts
    if options.serving:
        out["readinessProbe"] = readiness_probe(SERVING_PORT)
    return out


def _pod_metadata(member: Member, labels: dict[str, str]) -> JSON:
    user = member.template.metadata
    user_labels = {
        k: v
        for k, v in ((user.labels if user else None) or {}).items()
        if not k.startswith(RESERVED_LABEL_PREFIXES)
    }
    metadata: JSON = {}
    merged = user_labels | labels
    if merged:
        metadata["labels"] = merged
    if user is not None and user.annotations:
        metadata["annotations"] = dict(user.annotations)
    return metadata


def pod_template(member: Member, options: PodOptions) -> JSON:
    """A PodTemplateSpec for every pod of ``member``; ``metadata`` omitted when empty."""
    spec: JSON = {
        "nodeSelector": {POOL_LABEL: member.nodePoolName},
        "tolerations": [dict(GPU_TOLERATION)],
    }
    if options.claim_template is not None:
        spec["resourceClaims"] = [
            {"name": CLAIM_NAME, "resourceClaimTemplateName": options.claim_template}
        ]
    pull_secrets = member.template.spec.imagePullSecrets or []
    if pull_secrets:
        spec["imagePullSecrets"] = [{"name": secret.name} for secret in pull_secrets]
    volumes: list[JSON] = [{"name": SHM_VOLUME, "emptyDir": {"medium": "Memory"}}]
    if options.cache_claim is not None:
        volumes.append(
            {"name": CACHE_VOLUME_NAME, "persistentVolumeClaim": {"claimName": options.cache_claim}}
        )
    spec["volumes"] = volumes
    (container,) = member.template.spec.containers
    spec["containers"] = [engine_container(container, options)]
    template: JSON = {}
    metadata = _pod_metadata(member, options.labels)
    if metadata:
        template["metadata"] = metadata
    template["spec"] = spec
    return template


def mentions_cache(container: Container) -> bool:
    """Whether the user pointed the engine at the cache mount in ``command`` or ``args``."""
    words = [*(container.command or []), *(container.args or [])]
    return any(CACHE_MOUNT_PATH in word for word in words)
