"""The autoscaling recipe asks Prometheus for what the quickstart's engines really export.

vLLM serves ``vllm:*`` gauges on ``/metrics`` labelled ``model_name`` = the served model name
(``--served-model-name``, else ``--model``); the ServingStack's PodMonitor adds ``namespace``.
A recipe naming a model or metric nothing exports would never scale anything, silently.
"""

from __future__ import annotations

import re
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parents[2]
RECIPE = ROOT / "docs" / "manifests" / "keda-autoscaling.yaml"
QUICKSTART = ROOT / "examples" / "quickstart"
OPERATIONS = ROOT / "docs" / "operations.md"
# Scheduler-state gauges every vLLM release of the quickstart's era exports (vLLM's
# "Production Metrics" page).
VLLM_GAUGES = {"vllm:num_requests_waiting", "vllm:num_requests_running"}


def _recipe() -> dict:
    return yaml.safe_load(RECIPE.read_text())


def _matchers(query: str) -> tuple[str, dict[str, str]]:
    found = re.search(r"([a-zA-Z_:][a-zA-Z0-9_:]*)\{([^}]*)\}", query)
    assert found, f"no selector in {query!r}"
    metric, body = found.groups()
    return metric, dict(re.findall(r'([a-zA-Z_][a-zA-Z0-9_]*)\s*=\s*"([^"]*)"', body))


def _flag(args: list[str], name: str) -> str | None:
    for index, word in enumerate(args):
        if word == name and index + 1 < len(args):
            return args[index + 1]
        if word.startswith(f"{name}="):
            return word.partition("=")[2]
    return None


def _quickstart_deployment(name: str) -> dict:
    for path in sorted(QUICKSTART.glob("*.yaml")):
        for doc in yaml.safe_load_all(path.read_text()):
            if doc and doc.get("kind") == "ModelDeployment" and doc["metadata"]["name"] == name:
                return doc
    raise AssertionError(f"examples/quickstart has no ModelDeployment {name}")


def test_recipe_queries_a_vllm_metric_for_the_model_the_quickstart_serves():
    recipe = _recipe()
    (trigger,) = recipe["spec"]["triggers"]
    metric, labels = _matchers(trigger["metadata"]["query"])
    assert metric in VLLM_GAUGES
    deployment = _quickstart_deployment(recipe["spec"]["scaleTargetRef"]["name"])
    assert labels.get("namespace") == deployment["metadata"]["namespace"]
    assert recipe["metadata"]["namespace"] == deployment["metadata"]["namespace"]
    (engine,) = deployment["spec"]["engines"]
    served = set()
    for member in engine["members"]:
        for container in member["template"]["spec"]["containers"]:
            args = container.get("args") or []
            served.add(
                (_flag(args, "--served-model-name") or "").split(" ")[0] or _flag(args, "--model")
            )
    assert served == {labels.get("model_name")}, (served, labels)


def test_recipe_states_the_hpa_target_the_docs_compute_with():
    (trigger,) = _recipe()["spec"]["triggers"]
    assert trigger["metricType"] == "AverageValue"
    assert float(trigger["metadata"]["threshold"]) > 0


def test_operations_page_shows_the_recipe_query_verbatim():
    (trigger,) = _recipe()["spec"]["triggers"]
    assert trigger["metadata"]["query"] in OPERATIONS.read_text()
