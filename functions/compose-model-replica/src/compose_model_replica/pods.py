"""Pod templates for engine members (model-replica.md §6.2, §6.5, §8; design/engines.md).

The user owns image, command, args and the pod settings the template accepts (resources,
volumes, security contexts, probes): they pass through verbatim. Modelplane adds the pool pin,
the GPU toleration, the DRA claim, a bounded shared memory, the cache mount, the serving port
(where the engine really listens), (gangs only) ``MODELPLANE_LEADER_ADDRESS``, and defaults
for what the user left unset: CPU and memory requests, a startup probe that tolerates a long
model load, and a readiness probe. A default never replaces what the user set.
"""

from __future__ import annotations

import dataclasses
from typing import Any

from modelplane_common.cache_naming import CACHE_MOUNT_PATH, CACHE_VOLUME_NAME
from modelplane_common.engines import HEALTH_PATH, EngineFacts, engine_facts
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
SERVING_PORT_NAME = "http"
SHM_VOLUME = "dshm"
SHM_PATH = "/dev/shm"
# Bounded, because an unbounded memory-backed /dev/shm can take the node's memory; 8Gi covers
# NCCL and NIXL buffers of an 8-GPU engine. template.spec.shmSize overrides it.
DEFAULT_SHM_SIZE = "8Gi"
# Requests only (Burstable QoS, first to survive node memory pressure after Guaranteed pods);
# small enough for the smallest GPU nodes. No default limits: a limit OOM-kills a loading engine.
DEFAULT_REQUESTS = {"cpu": "2", "memory": "8Gi"}
# Up to an hour of model loading (360 x 10 s) before the kubelet restarts the engine.
STARTUP_PERIOD_SECONDS = 10
STARTUP_FAILURE_THRESHOLD = 360
LEADER_ADDRESS_ENV = "MODELPLANE_LEADER_ADDRESS"
# LWS prepends LWS_LEADER_ADDRESS to every gang container, so this expands to the leader's DNS
# name while user commands name only Modelplane's variable.
LEADER_ADDRESS_VALUE = "$(LWS_LEADER_ADDRESS)"
GPU_TOLERATION = {"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}
# AMD GPU nodes are commonly tainted amd.com/gpu; added only for claims of AMD's DeviceClass,
# so NVIDIA engines' pods stay as they were (design/amd-gpus.md).
AMD_DEVICE_CLASS = "gpu.amd.com"
AMD_GPU_TOLERATION = {"key": "amd.com/gpu", "operator": "Exists", "effect": "NoSchedule"}


def readiness_probe(port: int) -> JSON:
    return {
        "httpGet": {"path": HEALTH_PATH, "port": port},
        "initialDelaySeconds": 30,
        "periodSeconds": 10,
    }


def startup_probe(port: int) -> JSON:
    return {
        "httpGet": {"path": HEALTH_PATH, "port": port},
        "periodSeconds": STARTUP_PERIOD_SECONDS,
        "failureThreshold": STARTUP_FAILURE_THRESHOLD,
    }


def container_facts(container: Container) -> EngineFacts:
    return engine_facts(container.image, container.command, container.args)


@dataclasses.dataclass(frozen=True)
class PodOptions:
    """What the backend decided about one member's pods."""

    labels: dict[str, str]  # Modelplane-owned pod labels (win over the user's)
    serving: bool  # Standalone or Leader: the engine's serving port and probes
    gang: bool  # member of a Leader/Worker engine: leader address injected
    claim_template: str | None  # ResourceClaimTemplate name; None for a claimless member
    cache_claim: str | None  # ModelCache PVC name; None without modelCacheRef


def _dump(model: Any) -> Any:
    return model.model_dump(mode="json", exclude_none=True) if model is not None else None


def _user_env(container: Container) -> list[JSON]:
    return [_dump(entry) for entry in container.env or []]


def _resources(container: Container, claimed: bool) -> JSON:
    """The user's requests and limits, default requests for what neither names, and the claim."""
    user = _dump(container.resources) or {}
    requests = dict(user.get("requests") or {})
    limits = dict(user.get("limits") or {})
    for name, value in DEFAULT_REQUESTS.items():
        # A limit alone makes the API server default the request to it; never add a larger one.
        if name not in requests and name not in limits:
            requests[name] = value
    out: JSON = {"requests": requests}
    if limits:
        out["limits"] = limits
    if claimed:
        # One entry for the whole claim, never one per request; never nvidia.com/gpu limits.
        out["claims"] = [{"name": CLAIM_NAME}]
    return out


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
    port = container_facts(container).port
    if options.serving:
        out["ports"] = [{"name": SERVING_PORT_NAME, "containerPort": port}]
    out["resources"] = _resources(container, options.claim_template is not None)
    mounts = [{"name": SHM_VOLUME, "mountPath": SHM_PATH}]
    if options.cache_claim is not None:
        # Read-write on purpose: engines write lock, tokenizer and compile files next to weights.
        mounts.append({"name": CACHE_VOLUME_NAME, "mountPath": CACHE_MOUNT_PATH})
    mounts.extend(_dump(mount) for mount in container.volumeMounts or [])
    out["volumeMounts"] = mounts
    if container.securityContext is not None:
        out["securityContext"] = _dump(container.securityContext)
    startup = _dump(container.startupProbe)
    readiness = _dump(container.readinessProbe)
    if options.serving:
        startup = startup or startup_probe(port)
        readiness = readiness or readiness_probe(port)
    if startup:
        out["startupProbe"] = startup
    if readiness:
        out["readinessProbe"] = readiness
    if container.livenessProbe is not None:
        out["livenessProbe"] = _dump(container.livenessProbe)
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
    tolerations = [dict(GPU_TOLERATION)]
    if any(r.deviceClassName == AMD_DEVICE_CLASS for r in member.deviceRequests or []):
        tolerations.append(dict(AMD_GPU_TOLERATION))
    spec: JSON = {"nodeSelector": {POOL_LABEL: member.nodePoolName}, "tolerations": tolerations}
    if options.claim_template is not None:
        spec["resourceClaims"] = [
            {"name": CLAIM_NAME, "resourceClaimTemplateName": options.claim_template}
        ]
    pull_secrets = member.template.spec.imagePullSecrets or []
    if pull_secrets:
        spec["imagePullSecrets"] = [{"name": secret.name} for secret in pull_secrets]
    pod = member.template.spec
    if pod.securityContext is not None:
        spec["securityContext"] = _dump(pod.securityContext)
    shm_size = _dump(pod.shmSize) if pod.shmSize is not None else DEFAULT_SHM_SIZE
    volumes: list[JSON] = [
        {"name": SHM_VOLUME, "emptyDir": {"medium": "Memory", "sizeLimit": shm_size}}
    ]
    if options.cache_claim is not None:
        volumes.append(
            {"name": CACHE_VOLUME_NAME, "persistentVolumeClaim": {"claimName": options.cache_claim}}
        )
    volumes.extend(_dump(volume) for volume in pod.volumes or [])
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
