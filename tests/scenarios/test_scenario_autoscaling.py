"""The autoscaling recipe drives the quickstart (docs/operations.md "Autoscaling").

`modelplane simulate` runs no Prometheus and no KEDA, so this scenario plays both, each from
what the simulated world really holds:

- Prometheus: on every workload cluster, the PodMonitors the ServingStack composed select the
  running pods of the Deployments Modelplane composed there (labels, namespace, the engine's
  declared port, as prometheus-operator's generated relabelling does); each target exports
  ``vllm:num_requests_waiting`` labelled with the served model name, as vLLM does (from the
  engine's args). The test chooses how many requests wait on each replica.
- KEDA + the HorizontalPodAutoscaler: evaluate the recipe's query, then ask for
  ``ceil(value / threshold)`` replicas (the AverageValue target, with the HPA's 10% tolerance),
  within ``minReplicaCount..maxReplicaCount``, written to ``spec.replicas`` as the scale
  subresource does.
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

import pytest
import yaml
from modelplane.controlplane import ControlPlane, session
from modelplane.kube import condition_status, lookup
from scenario_world import conditions, converge, endpoints, replica_name, replicas

ROOT = Path(__file__).resolve().parents[2]
QUICKSTART = ROOT / "examples" / "quickstart"
RECIPE = ROOT / "docs" / "manifests" / "keda-autoscaling.yaml"
HPA_TOLERANCE = 0.1  # kube-controller-manager's --horizontal-pod-autoscaler-tolerance default
WAITING = "vllm:num_requests_waiting"

JSON = dict[str, Any]
Series = dict[str, str]


# --- the workload clusters' Prometheus --------------------------------------------------------


def served_model_name(args: list[str]) -> str | None:
    """vLLM's ``model_name`` label: --served-model-name (its first name), else --model, else
    the positional model of ``vllm serve``."""
    flags: dict[str, str] = {}
    positional: list[str] = []
    words = iter(args)
    for word in words:
        if word.startswith("--"):
            name, equals, value = word.partition("=")
            flags[name] = value if equals else next(words, "")
        else:
            positional.append(word)
    if flags.get("--served-model-name"):
        return flags["--served-model-name"].split()[0]
    if flags.get("--model"):
        return flags["--model"]
    return positional[1] if positional[:1] == ["serve"] and len(positional) > 1 else None


def _selects(selector: JSON, labels: Mapping[str, str]) -> bool:
    if any(labels.get(k) != v for k, v in (selector.get("matchLabels") or {}).items()):
        return False
    for expression in selector.get("matchExpressions") or []:
        key, operator = expression["key"], expression["operator"]
        values = expression.get("values") or []
        if operator == "Exists" and key not in labels:
            return False
        if operator == "DoesNotExist" and key in labels:
            return False
        if operator == "In" and labels.get(key) not in values:
            return False
        if operator == "NotIn" and labels.get(key) in values:
            return False
    return True


def _in_namespace(monitor: JSON, namespace: str) -> bool:
    selector = monitor["spec"].get("namespaceSelector") or {}
    if selector.get("any"):
        return True
    return namespace in (selector.get("matchNames") or [monitor["metadata"]["namespace"]])


def _kept(endpoint: JSON, meta: Mapping[str, str]) -> bool:
    for rule in endpoint.get("relabelings") or []:
        value = (rule.get("separator") or ";").join(meta.get(s, "") for s in rule["sourceLabels"])
        matched = re.fullmatch(rule.get("regex", "(.*)"), value) is not None
        if rule.get("action", "replace").lower() == "keep" and not matched:
            return False
        if rule.get("action", "replace").lower() == "drop" and matched:
            return False
    return True


def _remote(plane: ControlPlane) -> Iterator[tuple[str, JSON, JSON]]:
    """(cluster, manifest, live remote object) of every Ready provider-kubernetes Object."""
    resolver = plane.discovery()[1]
    for obj in plane.list(kind="Object"):
        manifest = lookup(obj, ".spec.forProvider.manifest")
        live = lookup(obj, ".status.atProvider.manifest")
        cluster = resolver.cluster_of(obj)
        if cluster and isinstance(live, dict) and condition_status(obj, "Ready") == "True":
            yield cluster, manifest, live


def scrape(plane: ControlPlane, waiting: Mapping[str, float]) -> list[tuple[Series, float]]:
    """Every ``vllm:num_requests_waiting`` series the workload clusters' Prometheus holds;
    ``waiting`` is the queue of each replica (by name), split over its running pods."""
    remote = list(_remote(plane))
    series = []
    for cluster, monitor, _ in remote:
        if monitor["kind"] != "PodMonitor":
            continue
        for where, manifest, live in remote:
            if where != cluster or manifest["kind"] != "Deployment":
                continue
            namespace = manifest["metadata"]["namespace"]
            template = manifest["spec"]["template"]
            labels = template["metadata"].get("labels") or {}
            running = int((live.get("status") or {}).get("readyReplicas") or 0)
            if not _in_namespace(monitor, namespace) or not _selects(
                monitor["spec"]["selector"], labels
            ):
                continue
            for endpoint in monitor["spec"]["podMetricsEndpoints"]:
                for container in template["spec"]["containers"]:
                    for _port in container.get("ports") or []:
                        meta = {"__meta_kubernetes_pod_container_name": container["name"]}
                        model = served_model_name(container.get("args") or [])
                        if not _kept(endpoint, meta) or model is None:
                            continue
                        target = {"namespace": namespace, "model_name": model}
                        for label in monitor["spec"].get("podTargetLabels") or []:
                            if label in labels:
                                target[re.sub(r"[^a-zA-Z0-9_]", "_", label)] = labels[label]
                        replica = labels.get("modelplane.ai/serving", "")
                        for pod in range(running):
                            pod_series = {**target, "pod": f"{manifest['metadata']['name']}-{pod}"}
                            series.append((pod_series, waiting.get(replica, 0) / running))
    return series


def evaluate(query: str, series: list[tuple[Series, float]]) -> float:
    """The recipe's query, ``sum(<metric>{label="value", ...})``, over the scraped series."""
    found = re.fullmatch(r"sum\(\s*([a-zA-Z_:][a-zA-Z0-9_:]*)\s*\{([^}]*)\}\s*\)", query.strip())
    assert found, f'the scenario evaluates sum(metric{{label="value"}}) only, not {query!r}'
    metric, matchers = found.groups()
    wanted = dict(re.findall(r'([a-zA-Z_][a-zA-Z0-9_]*)\s*=\s*"([^"]*)"', matchers))
    assert metric == WAITING, "the scenario's engines export vllm:num_requests_waiting"
    return sum(v for labels, v in series if all(labels.get(k) == x for k, x in wanted.items()))


# --- KEDA and the HorizontalPodAutoscaler -----------------------------------------------------


def desired_replicas(recipe: JSON, value: float, current: int) -> int:
    """What the HPA KEDA creates asks for: an AverageValue target of ``threshold`` per replica."""
    (trigger,) = recipe["spec"]["triggers"]
    assert trigger.get("metricType", "AverageValue") == "AverageValue"
    threshold = float(trigger["metadata"]["threshold"])
    desired = current
    if current == 0 or abs(value / (threshold * current) - 1) > HPA_TOLERANCE:
        desired = math.ceil(value / threshold)
    return max(recipe["spec"]["minReplicaCount"], min(recipe["spec"]["maxReplicaCount"], desired))


def autoscale(plane: ControlPlane, recipe: JSON, waiting: Mapping[str, float]) -> JSON:
    """One KEDA poll: the query's value, then the HPA's write through the scale subresource."""
    target = recipe["spec"]["scaleTargetRef"]
    namespace = recipe["metadata"]["namespace"]
    deployment = plane.find(target["kind"], target["name"], namespace)
    assert deployment is not None
    current = int(lookup(deployment, ".status.replicas.total") or 0)  # statusReplicasPath
    (trigger,) = recipe["spec"]["triggers"]
    value = evaluate(trigger["metadata"]["query"], scrape(plane, waiting))
    desired = desired_replicas(recipe, value, current)
    if desired != deployment["spec"]["replicas"]:  # specReplicasPath
        plane.patch(
            plane.key(target["kind"], target["name"], namespace), {"spec": {"replicas": desired}}
        )
    return {"query": value, "current": current, "desired": desired}


# --- the scenario ---------------------------------------------------------------------------


@pytest.fixture(scope="module")
def quickstart() -> Iterator[ControlPlane]:
    with session(QUICKSTART) as plane:
        converge(plane)
        yield plane


def test_the_recipe_scales_the_quickstart_down_when_idle_and_up_under_load(
    quickstart: ControlPlane,
):
    plane, recipe = quickstart, yaml.safe_load(RECIPE.read_text())
    name = recipe["spec"]["scaleTargetRef"]["name"]
    first, second = sorted(replicas(plane, name))

    # Both replicas' engines are scraped, labelled with the model the quickstart serves.
    series = scrape(plane, {})
    assert {(s["modelplane_ai_serving"], s["model_name"]) for s, _ in series} == {
        (first, "Qwen/Qwen3-8B"),
        (second, "Qwen/Qwen3-8B"),
    }

    # Idle: nothing waits; the HPA asks for ceil(0 / 8) = 0, held at minReplicaCount.
    assert autoscale(plane, recipe, {}) == {"query": 0, "current": 2, "desired": 1}
    converge(plane)
    (kept,) = replicas(plane, name)
    assert kept == replica_name(name, "lab", 0)  # the scheduler keeps index 0
    assert plane.find("ModelDeployment", name, "ml-team")["status"]["replicas"] == {
        "total": 1,
        "ready": 1,
    }

    # Load: 20 requests queue on the one replica; ceil(20 / 8) = 3, but this lab fits 2.
    # (The HPA's scale-up adds at most 4 pods or 100% per 15 s by default; 1 -> 3 is within.)
    assert autoscale(plane, recipe, {kept: 20}) == {"query": 20, "current": 1, "desired": 3}
    converge(plane)
    deployment = plane.find("ModelDeployment", name, "ml-team")
    assert deployment["status"]["replicas"] == {"total": 2, "ready": 2}
    assert conditions(deployment)["ReplicasScheduled"][:2] == ("False", "InsufficientCapacity")
    added = set(replicas(plane, name)) - {kept}
    assert len(added) == 1
    assert set(endpoints(plane, name)) == {kept} | added
    # The new replica's engine is scraped too: the queue now splits over both.
    (new,) = added
    assert {s["modelplane_ai_serving"] for s, _ in scrape(plane, {})} == {kept, new}
    assert autoscale(plane, recipe, {kept: 10, new: 10}) == {
        "query": 20,
        "current": 2,
        "desired": 3,
    }

    # The queue drains to 12 over two replicas: ceil(12 / 8) = 2, what runs.
    assert autoscale(plane, recipe, {kept: 6, new: 6}) == {"query": 12, "current": 2, "desired": 2}
    converge(plane)
    deployment = plane.find("ModelDeployment", name, "ml-team")
    assert deployment["status"]["replicas"] == {"total": 2, "ready": 2}
    assert condition_status(deployment, "Ready") == "True"
    assert set(replicas(plane, name)) == {kept, new}


def test_served_model_name_follows_vllm():
    assert served_model_name(["--model=Qwen/Qwen3-8B", "--max-model-len=8192"]) == "Qwen/Qwen3-8B"
    assert served_model_name(["--model", "/models/q", "--served-model-name", "qwen"]) == "qwen"
    assert served_model_name(["serve", "Qwen/Qwen3-8B"]) == "Qwen/Qwen3-8B"
