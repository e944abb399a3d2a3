"""Cluster-edge routing of a replica (model-replica.md §9, §10).

Routing only adds objects or edits serving pod templates; it never removes a workload.
``Unified`` fronts every engine's serving pods with one Service and HTTPRoute. ``PrefillDecode``
decorates the two phase engines and puts an InferencePool with an endpoint picker behind the
HTTPRoute instead.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from typing import Any

from modelplane_common.engines import PhasePorts

from compose_model_replica import names
from compose_model_replica.backends import LWS_KIND, EngineObjects, serving_template
from compose_model_replica.pods import (
    ENGINE_CONTAINER,
    SERVING_LABEL,
    SERVING_PORT_NAME,
    SHM_PATH,
    readiness_probe,
)

JSON = dict[str, Any]

GATEWAY_NAME = "inference-gateway"
GATEWAY_NAMESPACE = "modelplane-system"
SERVICE_PORT = 80

ROLE_LABEL = "llm-d.ai/role"
INFERENCE_SERVING_LABEL = "llm-d.ai/inference-serving"
APP_LABEL = "app"

SIDECAR_NAME = "pd-sidecar"
SIDECAR_IMAGE = "ghcr.io/llm-d/llm-d-routing-sidecar:v0.8.0"
PICKER_IMAGE = "ghcr.io/llm-d/llm-d-inference-scheduler:v0.8.0"
PICKER_GRPC_PORT = 9002
PICKER_HEALTH_PORT = 9003
PICKER_CONFIG_FILE = "pd-epp-config.yaml"
DECODE_ENGINE_PORT_NAME = "engine"
DEFAULT_BLOCK_SIZE = 16
NIXL_HOST_ENV = "VLLM_NIXL_SIDE_CHANNEL_HOST"
NIXL_PORT_ENV = "VLLM_NIXL_SIDE_CHANNEL_PORT"
NIXL_PORT = "5557"


def _metadata(name: str, namespace: str) -> JSON:
    return {"name": name, "namespace": namespace}


def http_route(replica: str, namespace: str, backend: JSON, timeouts: JSON) -> JSON:
    """The route from the workload cluster's gateway; it strips ``/<ns>/<replica>/``.

    ``timeouts`` is always stated: unset, Envoy Gateway would cut every response, streamed
    or not, at Envoy's 15 s route default (modelplane_common.route_timeouts)."""
    return {
        "apiVersion": "gateway.networking.k8s.io/v1",
        "kind": "HTTPRoute",
        "metadata": _metadata(replica, namespace),
        "spec": {
            "parentRefs": [{"name": GATEWAY_NAME, "namespace": GATEWAY_NAMESPACE}],
            "rules": [
                {
                    "matches": [
                        {"path": {"type": "PathPrefix", "value": f"/{namespace}/{replica}/"}}
                    ],
                    "filters": [
                        {
                            "type": "URLRewrite",
                            "urlRewrite": {
                                "path": {"type": "ReplacePrefixMatch", "replacePrefixMatch": "/"}
                            },
                        }
                    ],
                    "backendRefs": [backend],
                    "timeouts": dict(timeouts),
                }
            ],
        },
    }


def unified(replica: str, namespace: str, timeouts: JSON) -> dict[str, JSON]:
    """One Service and HTTPRoute in front of every engine's serving pods."""
    service = {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": _metadata(replica, namespace),
        "spec": {
            "selector": {SERVING_LABEL: replica},
            # By name: each engine's pods listen where that engine really listens.
            "ports": [{"port": SERVICE_PORT, "targetPort": SERVING_PORT_NAME}],
        },
    }
    route = http_route(replica, namespace, {"name": replica, "port": SERVICE_PORT}, timeouts)
    return {names.SERVICE_KEY: service, names.ROUTE_KEY: route}


# --------------------------------------------------------------------------------------------
# Reading engine settings from the user's args (never editing them)


def flag_value(args: Iterable[str], flags: tuple[str, ...]) -> int | None:
    """The first integer given to any of ``flags`` as ``--flag N`` or ``--flag=N``.

    Unparsable values are skipped, so ``--port=auto --port 8002`` gives 8002.
    """
    words = list(args)
    for index, word in enumerate(words):
        value: str | None = None
        for flag in flags:
            if word == flag and index + 1 < len(words):
                value = words[index + 1]
            elif word.startswith(f"{flag}="):
                value = word[len(flag) + 1 :]
        if value is None:
            continue
        try:
            return int(value)
        except ValueError:
            continue
    return None


def block_size(args: Iterable[str]) -> int:
    """The engine's KV block size: vLLM ``--block-size`` or SGLang ``--page-size``, else 16."""
    size = flag_value(args, ("--block-size", "--page-size"))
    return size if size is not None and size > 0 else DEFAULT_BLOCK_SIZE


# --------------------------------------------------------------------------------------------
# PrefillDecode


def _engine_container(template: JSON) -> JSON:
    return next(c for c in template["spec"]["containers"] if c["name"] == ENGINE_CONTAINER)


def _add_nixl(template: JSON) -> None:
    """NIXL needs a memory-backed /dev/shm and the pod IP as its side-channel host, in every
    pod that holds KV cache: the serving pod and, in a gang, every follower."""
    spec = template["spec"]
    container = _engine_container(template)
    mounts = container.setdefault("volumeMounts", [])
    if not any(m.get("mountPath") == SHM_PATH for m in mounts):
        spec.setdefault("volumes", []).append(
            {"name": "nixl-shm", "emptyDir": {"medium": "Memory"}}
        )
        mounts.append({"name": "nixl-shm", "mountPath": SHM_PATH})
    env = container.setdefault("env", [])
    present = {entry.get("name") for entry in env}
    if NIXL_HOST_ENV not in present:
        env.append(
            {"name": NIXL_HOST_ENV, "valueFrom": {"fieldRef": {"fieldPath": "status.podIP"}}}
        )
    if NIXL_PORT_ENV not in present:
        env.append({"name": NIXL_PORT_ENV, "value": NIXL_PORT})


def _decorate(workload: JSON, replica: str, role: str) -> None:
    template = serving_template(workload)
    labels = template.setdefault("metadata", {}).setdefault("labels", {})
    labels.update({ROLE_LABEL: role, INFERENCE_SERVING_LABEL: "true", APP_LABEL: replica})
    _add_nixl(template)
    if workload["kind"] == LWS_KIND:
        _add_nixl(workload["spec"]["leaderWorkerTemplate"]["workerTemplate"])


def _rename_engine_port(template: JSON) -> None:
    """The decode pod's serving port name belongs to the sidecar; the engine keeps its number."""
    for port in _engine_container(template).get("ports", []):
        port["name"] = DECODE_ENGINE_PORT_NAME


def _sidecar(listen_port: int, engine_port: int) -> JSON:
    return {
        "name": SIDECAR_NAME,
        "image": SIDECAR_IMAGE,
        "args": [
            f"--port={listen_port}",
            "--secure-proxy=false",
            "--kv-connector=nixlv2",
            f"--vllm-port={engine_port}",
        ],
        "ports": [{"name": SERVING_PORT_NAME, "containerPort": listen_port}],
        "readinessProbe": readiness_probe(listen_port),
    }


def picker_config(block_tokens: int) -> JSON:
    """The endpoint picker's config. Explicit values where defaults would silently never
    disaggregate: ``nonCachedTokens: 0`` disables the decider and ``autoTune`` zeroes the block
    size. No ``prepareDataPlugins`` gate: the pinned picker crash-loops on it."""
    profile_tail = [
        {"pluginRef": "max-score-picker"},
        {"pluginRef": "prefix-cache-scorer", "weight": 2},
        {"pluginRef": "queue-scorer", "weight": 1},
    ]
    return {
        "apiVersion": "inference.networking.x-k8s.io/v1alpha1",
        "kind": "EndpointPickerConfig",
        "plugins": [
            {
                "type": "approx-prefix-cache-producer",
                "parameters": {
                    "autoTune": False,
                    "blockSizeTokens": block_tokens,
                    "maxPrefixBlocksToMatch": 256,
                    "lruCapacityPerServer": 31250,
                },
            },
            {"type": "prefix-cache-scorer"},
            {"type": "disagg-headers-handler"},
            {"type": "queue-scorer"},
            {"type": "prefill-filter"},
            {"type": "decode-filter"},
            {"type": "max-score-picker"},
            {"type": "prefix-based-pd-decider", "parameters": {"nonCachedTokens": 16}},
            {
                "type": "disagg-profile-handler",
                "parameters": {"deciders": {"prefill": "prefix-based-pd-decider"}},
            },
        ],
        "schedulingProfiles": [
            {"name": "prefill", "plugins": [{"pluginRef": "prefill-filter"}, *profile_tail]},
            {"name": "decode", "plugins": [{"pluginRef": "decode-filter"}, *profile_tail]},
        ],
    }


def picker_objects(replica: str, namespace: str, block_tokens: int) -> dict[str, JSON]:
    """The endpoint picker: RBAC, config, Deployment and Service, all named ``<replica>-epp``."""
    picker = names.picker_name(replica)
    pool = names.pool_name(replica)
    reads = ["get", "watch", "list"]
    config = json.dumps(picker_config(block_tokens), indent=2)
    service_account, role, binding, config_map, deployment, service = names.PICKER_KEYS
    return {
        service_account: {
            "apiVersion": "v1",
            "kind": "ServiceAccount",
            "metadata": _metadata(picker, namespace),
        },
        role: {
            "apiVersion": "rbac.authorization.k8s.io/v1",
            "kind": "Role",
            "metadata": _metadata(picker, namespace),
            "rules": [
                {"apiGroups": [""], "resources": ["pods"], "verbs": reads},
                {
                    "apiGroups": ["inference.networking.k8s.io"],
                    "resources": ["inferencepools"],
                    "verbs": reads,
                },
                {
                    "apiGroups": ["inference.networking.x-k8s.io"],
                    "resources": ["inferenceobjectives"],
                    "verbs": reads,
                },
            ],
        },
        binding: {
            "apiVersion": "rbac.authorization.k8s.io/v1",
            "kind": "RoleBinding",
            "metadata": _metadata(picker, namespace),
            "subjects": [{"kind": "ServiceAccount", "name": picker, "namespace": namespace}],
            "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": picker},
        },
        # JSON is YAML, and needs no YAML emitter in the function.
        config_map: {
            "apiVersion": "v1",
            "kind": "ConfigMap",
            "metadata": _metadata(picker, namespace),
            "data": {PICKER_CONFIG_FILE: config + "\n"},
        },
        deployment: {
            "apiVersion": "apps/v1",
            "kind": "Deployment",
            "metadata": _metadata(picker, namespace),
            "spec": {
                "replicas": 1,
                "selector": {"matchLabels": {APP_LABEL: picker}},
                "template": {
                    "metadata": {"labels": {APP_LABEL: picker}},
                    "spec": {
                        "serviceAccountName": picker,
                        "containers": [
                            {
                                "name": "epp",
                                "image": PICKER_IMAGE,
                                "args": [
                                    f"--pool-name={pool}",
                                    f"--pool-namespace={namespace}",
                                    "--pool-group=inference.networking.k8s.io",
                                    f"--config-file=/config/{PICKER_CONFIG_FILE}",
                                    f"--grpc-port={PICKER_GRPC_PORT}",
                                ],
                                "ports": [
                                    {"name": "grpc", "containerPort": PICKER_GRPC_PORT},
                                    {"name": "grpc-health", "containerPort": PICKER_HEALTH_PORT},
                                ],
                                "volumeMounts": [{"name": "config", "mountPath": "/config"}],
                            }
                        ],
                        "volumes": [{"name": "config", "configMap": {"name": picker}}],
                    },
                },
            },
        },
        service: {
            "apiVersion": "v1",
            "kind": "Service",
            "metadata": _metadata(picker, namespace),
            "spec": {
                "selector": {APP_LABEL: picker},
                "ports": [
                    {
                        "name": "grpc-ext-proc",
                        "port": PICKER_GRPC_PORT,
                        "targetPort": PICKER_GRPC_PORT,
                        "appProtocol": "http2",
                    }
                ],
            },
        },
    }


def inference_pool(replica: str, namespace: str, port: int) -> JSON:
    return {
        "apiVersion": "inference.networking.k8s.io/v1",
        "kind": "InferencePool",
        "metadata": _metadata(names.pool_name(replica), namespace),
        "spec": {
            "selector": {"matchLabels": {APP_LABEL: replica, INFERENCE_SERVING_LABEL: "true"}},
            "targetPorts": [{"number": port}],
            "endpointPickerRef": {
                "name": names.picker_name(replica),
                "port": {"number": PICKER_GRPC_PORT},
                "failureMode": "FailOpen",
            },
        },
    }


def prefill_decode(
    replica: str,
    namespace: str,
    engines: list[EngineObjects],
    ports: PhasePorts,
    timeouts: JSON,
) -> dict[str, JSON]:
    """Decorate the phase engines in place; the pool, picker and route.

    Engines are identified by ``phase``, never by name. ``ports`` are already checked
    (``modelplane_common.engines``): the decode engine does not listen on the pool's port,
    which its sidecar takes.
    """
    prefill = next(e for e in engines if e.engine.phase == "Prefill")
    decode = next(e for e in engines if e.engine.phase == "Decode")

    _decorate(prefill.workload, replica, "prefill")
    _decorate(decode.workload, replica, "decode")
    decode_template = serving_template(decode.workload)
    _rename_engine_port(decode_template)
    decode_template["spec"]["containers"].append(_sidecar(ports.pool, ports.decode))
    decode_args = _engine_container(decode_template).get("args") or []

    objects = {names.POOL_KEY: inference_pool(replica, namespace, ports.pool)}
    objects.update(picker_objects(replica, namespace, block_size(decode_args)))
    backend = {
        "group": "inference.networking.k8s.io",
        "kind": "InferencePool",
        "name": names.pool_name(replica),
    }
    objects[names.ROUTE_KEY] = http_route(replica, namespace, backend, timeouts)
    return objects
