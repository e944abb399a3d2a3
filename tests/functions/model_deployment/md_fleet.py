"""Builders for fleets, deployments and replicas used by the scheduler and function tests."""

from __future__ import annotations

import copy
from typing import Any

from compose_model_deployment import names, scheduler

GPU_SELECTOR = 'device.driver == "gpu.nvidia.com"'
NIC_SELECTOR = 'device.attributes["nic.nvidia.com"].linkType == "infiniband"'
NAMESPACE = "ml-team"


def gpu(count: int = 1, architecture: str = "Hopper", memory: str = "80Gi") -> dict[str, Any]:
    return {
        "name": "gpu",
        "claim": "DRA",
        "driver": "gpu.nvidia.com",
        "deviceClassName": "gpu.nvidia.com",
        "count": count,
        "attributes": {"architecture": {"string": architecture}},
        "capacity": {"memory": {"value": memory}},
    }


def nic(claim: str = "Synthetic", count: int = 8) -> dict[str, Any]:
    device = {
        "name": "nic",
        "claim": claim,
        "driver": "nic.nvidia.com",
        "count": count,
        "attributes": {"linkType": {"string": "infiniband"}},
    }
    if claim == "DRA":
        device["deviceClassName"] = "nic.nvidia.com"
    return device


def pool(name: str = "p", nodes: int = 2, *devices: dict[str, Any], **extra: Any) -> dict:
    return {"name": name, "nodes": nodes, "devices": list(devices) or [gpu()], **extra}


def cluster(
    name: str,
    *pools: dict[str, Any],
    ready: bool = True,
    gateway: str | None = "203.0.113.10",
    provider: str | None = "pc",
    labels: dict[str, str] | None = None,
    taints: list[dict[str, str]] | None = None,
    grace: str | None = None,
    not_ready_since: str | None = None,
) -> dict[str, Any]:
    ready_condition = {"type": "Ready", "status": "True" if ready else "False"}
    if not_ready_since:
        ready_condition["lastTransitionTime"] = not_ready_since
    status: dict[str, Any] = {
        "conditions": [ready_condition],
        "gpuPools": list(pools) if pools else [pool()],
    }
    if gateway:
        status["gateway"] = {"address": gateway}
    if provider:
        status["providerConfigRef"] = {"name": provider}
    body: dict[str, Any] = {
        "apiVersion": "modelplane.ai/v1alpha1",
        "kind": "InferenceCluster",
        "metadata": {"name": name, "labels": labels or {}},
        "status": status,
    }
    if taints or grace:
        body["spec"] = {"taints": taints or []} | ({"failoverGracePeriod": grace} if grace else {})
    return body


def template() -> dict[str, Any]:
    return {"spec": {"containers": [{"name": "engine", "image": "vllm/vllm-openai:v0.11.0"}]}}


def node_selector(*selectors: str, count: int = 1, name: str = "gpu") -> dict[str, Any]:
    return {
        "devices": [{"name": name, "count": count, "selectors": [{"cel": s} for s in selectors]}]
    }


def standalone(
    name: str = "main", *selectors: str, count: int = 1, copies: int = 1, **extra: Any
) -> dict[str, Any]:
    member = {
        "role": "Standalone",
        "nodeSelector": node_selector(*(selectors or (GPU_SELECTOR,)), count=count),
        "template": template(),
    }
    return {"name": name, "copies": copies, "members": [member], **extra}


def gang(
    name: str = "main",
    nodes: int = 1,
    leader: dict[str, Any] | None = None,
    worker: dict[str, Any] | None = None,
    copies: int = 1,
    claimless_leader: bool = False,
    **extra: Any,
) -> dict[str, Any]:
    """Leader + Worker, each claiming one GPU unless other node selectors are given."""
    lead: dict[str, Any] = {"role": "Leader", "template": template()}
    if not claimless_leader:
        lead["nodeSelector"] = leader or node_selector(GPU_SELECTOR)
    work = {
        "role": "Worker",
        "worker": {"nodes": nodes},
        "nodeSelector": worker or node_selector(GPU_SELECTOR),
        "template": template(),
    }
    return {"name": name, "copies": copies, "members": [lead, work], **extra}


def spec(replicas: int = 1, *engines: dict[str, Any], **extra: Any) -> dict[str, Any]:
    body = {"replicas": replicas, "engines": list(engines) or [standalone()], **extra}
    if any(m.get("role") == "Worker" for e in body["engines"] for m in e["members"]):
        body.setdefault("modelCacheRef", {"name": "weights"})
    return body


def replica(
    deployment: dict[str, Any],
    cluster_name: str,
    index: int,
    pools: str | list[str] = "p",
    name: str | None = None,
    namespace: str = NAMESPACE,
    deployment_name: str = "m",
    ready: bool = False,
    device_class: str = "gpu.nvidia.com",
) -> dict[str, Any]:
    """A ModelReplica as the scheduler would have stamped it: every member of engine i on
    pools[i], deviceRequests for every member with a nodeSelector."""
    pins = [pools] * len(deployment["engines"]) if isinstance(pools, str) else pools
    engines = []
    for engine, pin in zip(deployment["engines"], pins, strict=True):
        members = []
        for member in engine["members"]:
            out: dict[str, Any] = {"role": member["role"], "nodePoolName": pin}
            if member.get("nodeSelector"):
                out["deviceRequests"] = [
                    {
                        "name": d["name"],
                        "deviceClassName": device_class,
                        "count": d.get("count", 1),
                        "selectors": copy.deepcopy(d["selectors"]),
                    }
                    for d in member["nodeSelector"]["devices"]
                ]
            if "worker" in member:
                out["worker"] = dict(member["worker"])
            out["template"] = copy.deepcopy(member["template"])
            members.append(out)
        engines.append(
            {"name": engine["name"], "copies": engine.get("copies", 1), "members": members}
        )
    body: dict[str, Any] = {
        "apiVersion": "modelplane.ai/v1alpha1",
        "kind": "ModelReplica",
        "metadata": {
            "name": name or names.replica_name(deployment_name, cluster_name, index),
            "namespace": namespace,
            "labels": names.labels(deployment_name, cluster_name, index),
        },
        "spec": {"clusterName": cluster_name, "engines": engines},
    }
    if ready:
        body["status"] = {"conditions": [{"type": "Ready", "status": "True"}]}
    return body


def run(
    deployment: dict[str, Any],
    clusters: list[dict[str, Any]],
    replicas: list[dict[str, Any]] = (),  # type: ignore[assignment]
    name: str = "m",
    namespace: str = NAMESPACE,
    now: str | None = None,
    serving: tuple[str, ...] = (),
) -> scheduler.Schedule:
    parsed = scheduler.parse_deployment(name, namespace, deployment)
    scheduler.compile_selectors(parsed)
    return scheduler.schedule(
        parsed,
        [scheduler.parse_cluster(c) for c in clusters],
        [r for r in map(scheduler.parse_replica, replicas) if r is not None],
        now=scheduler.parse_time(now),
        serving=frozenset(serving),
    )


def where(result: scheduler.Schedule) -> list[str]:
    """``cluster/index`` of every desired replica, in output order."""
    return [f"{p.cluster}/{p.index}" for p in result.placements]


def pools_of(result: scheduler.Schedule) -> list[list[str]]:
    return [[e.pool for e in p.engines] for p in result.placements]
