"""The ServingStack's PodMonitor: every engine Modelplane runs on the cluster is scraped.

Through real gRPC (compose-serving-stack), validated against prometheus-operator's PodMonitor
CRD, and matched against the pods `modelplane render` composes for the example replicas.
"""

from __future__ import annotations

import re

import pytest
import yaml
from click.testing import CliRunner
from compose_serving_stack.fn import ServingStackFunction
from modelplane.main import cli
from modelplane.repo import root
from modelplane.validation import defaulted, validate_object
from modelplane_common.naming import child_name
from modelplane_common.serving import run_function
from modelplane_common.testing import (
    desired_ready,
    desired_resources,
    make_request,
    observe,
    ready_status,
)

ROOT = root()
NS = "modelplane-system"
NAME = child_name("lab", "serving-stack")
PC_NAME = child_name(NAME, "cluster")
STACK = defaulted(
    {
        "apiVersion": "infrastructure.modelplane.ai/v1alpha1",
        "kind": "ServingStack",
        "metadata": {"name": NAME, "namespace": NS},
        "spec": {
            "secrets": [{"type": "Kubeconfig", "name": "lab-kubeconfig", "key": "kubeconfig"}]
        },
    }
)

KEY = "engine-pod-monitor"


def run(observed: dict | None = None):
    """compose-serving-stack over gRPC; every composed body and wrapped manifest validates."""
    rsp = run_function(ServingStackFunction(), make_request(STACK, observed))
    for key, body in desired_resources(rsp).items():
        assert validate_object(body, source=key) == [], key
        manifest = (body.get("spec") or {}).get("forProvider", {}).get("manifest")
        if manifest is not None:
            assert validate_object(manifest, source=key) == [], key
    return rsp


def installed(prometheus_ready: bool) -> dict:
    """The stack's first remote round observed, the kube-prometheus-stack Release Ready or not."""
    configs = {k: observe(v) for k, v in desired_resources(run()).items()}
    desired = desired_resources(run(configs))
    observed = {k: observe(v, ready_status()) for k, v in desired.items()}
    if not prometheus_ready:
        observed["prometheus"] = observe(desired["prometheus"])
    return observed


def monitor_of(desired: dict) -> dict:
    return desired[KEY]["spec"]["forProvider"]["manifest"]


def test_no_pod_monitor_before_prometheus_installs_its_crd():
    """The PodMonitor kind exists only once kube-prometheus-stack is installed."""
    assert KEY not in desired_resources(run(installed(prometheus_ready=False)))


def test_pod_monitor_on_the_workload_cluster_once_prometheus_is_ready():
    rsp = run(installed(prometheus_ready=True))
    body = desired_resources(rsp)[KEY]
    assert body["kind"] == "Object"
    assert body["spec"]["providerConfigRef"] == {"kind": "ProviderConfig", "name": PC_NAME}
    assert body["metadata"]["labels"] == {"modelplane.ai/resource": KEY}
    assert desired_ready(rsp)[KEY] is False  # not observed yet
    manifest = monitor_of(desired_resources(rsp))
    assert (manifest["apiVersion"], manifest["kind"]) == ("monitoring.coreos.com/v1", "PodMonitor")
    assert manifest["metadata"]["namespace"] == "monitoring"
    assert validate_object(manifest, source=KEY) == []
    spec = manifest["spec"]
    assert spec["namespaceSelector"] == {"any": True}
    assert spec["selector"] == {
        "matchExpressions": [{"key": "modelplane.ai/serving", "operator": "Exists"}]
    }
    assert spec["podTargetLabels"] == ["modelplane.ai/serving"]
    (endpoint,) = spec["podMetricsEndpoints"]
    assert endpoint["path"] == "/metrics"
    # No port filter (a decode engine does not listen on 8000): the engine container's port.
    assert not {"port", "portNumber", "targetPort"} & set(endpoint)
    assert endpoint["relabelings"] == [
        {
            "action": "keep",
            "sourceLabels": ["__meta_kubernetes_pod_container_name"],
            "regex": "engine",
        }
    ]


def test_pod_monitor_stays_when_prometheus_turns_not_ready():
    desired = desired_resources(run(installed(prometheus_ready=True)))
    observed = {k: observe(v, ready_status()) for k, v in desired.items()}
    observed["prometheus"] = observe(desired["prometheus"])  # e.g. a chart upgrade in progress
    again = desired_resources(run(observed))
    assert again[KEY]["spec"] == desired[KEY]["spec"]


def test_prometheus_selects_pod_monitors_without_the_release_label():
    """kube-prometheus-stack's Prometheus selects only PodMonitors labelled with its release
    unless told otherwise; the stack's values tell it to take every one, in every namespace."""
    desired = desired_resources(run(installed(prometheus_ready=True)))
    spec = desired["prometheus"]["spec"]["forProvider"]["values"]["prometheus"]["prometheusSpec"]
    assert spec["podMonitorSelectorNilUsesHelmValues"] is False
    assert "podMonitorSelector" not in spec
    assert spec["podMonitorNamespaceSelector"] == {}
    assert "release" not in (monitor_of(desired)["metadata"].get("labels") or {})


# --- against what compose-model-replica composes ------------------------------------------


def _pod_templates(example: str) -> list[dict]:
    """Pod templates of every workload `modelplane render` composes for an example replica."""
    replicas = ROOT / "examples" / "replica"
    result = CliRunner().invoke(
        cli, ["render", str(replicas / f"{example}.yaml"), "-e", str(replicas / "clusters.yaml")]
    )
    assert result.exit_code == 0, result.output
    templates = []
    for body in yaml.safe_load_all(result.stdout):
        manifest = ((body or {}).get("spec") or {}).get("forProvider", {}).get("manifest") or {}
        spec = manifest.get("spec") or {}
        if manifest.get("kind") == "Deployment":
            templates.append(spec["template"])
        elif manifest.get("kind") == "LeaderWorkerSet":
            group = spec["leaderWorkerTemplate"]
            templates += [t for t in (group.get("leaderTemplate"), group["workerTemplate"]) if t]
    return templates


def _scraped_ports(monitor: dict, template: dict) -> list[int]:
    """The ports Prometheus scrapes on a pod of ``template``: the pod role yields one target
    per declared container port; the monitor's selector and keep relabelings filter them."""
    labels = (template.get("metadata") or {}).get("labels") or {}
    for expression in monitor["spec"]["selector"]["matchExpressions"]:
        assert expression["operator"] == "Exists"
        if expression["key"] not in labels:
            return []
    (endpoint,) = monitor["spec"]["podMetricsEndpoints"]
    ports = []
    for container in template["spec"]["containers"]:
        meta = {"__meta_kubernetes_pod_container_name": container["name"]}
        for port in container.get("ports") or []:
            if all(
                re.fullmatch(r["regex"], ";".join(meta[s] for s in r["sourceLabels"]))
                for r in endpoint["relabelings"]
                if r["action"] == "keep"
            ):
                ports.append(port["containerPort"])
    return ports


def _engine_ports(template: dict) -> list[int]:
    return [
        port["containerPort"]
        for container in template["spec"]["containers"]
        if container["name"] == "engine"
        for port in container.get("ports") or []
    ]


@pytest.mark.parametrize("example", ["standalone", "prefill-decode", "coordinator-leader"])
def test_every_serving_engine_a_replica_composes_is_scraped_on_its_own_port(example: str):
    """Each serving pod (Standalone, Leader, prefill, decode) is one target: its engine's port.
    Gang workers carry no serving label; the decode pod's routing sidecar is not scraped."""
    monitor = monitor_of(desired_resources(run(installed(prometheus_ready=True))))
    templates = _pod_templates(example)
    assert templates, "the replica composed no workload"
    serving = 0
    for template in templates:
        labels = (template.get("metadata") or {}).get("labels") or {}
        scraped = _scraped_ports(monitor, template)
        if "modelplane.ai/serving" in labels:
            serving += 1
            assert len(_engine_ports(template)) == 1
            assert scraped == _engine_ports(template)
        else:
            assert scraped == []
    assert serving >= 1
    if example == "prefill-decode":
        (decode,) = [t for t in templates if len(t["spec"]["containers"]) > 1]
        (sidecar,) = [c for c in decode["spec"]["containers"] if c["name"] != "engine"]
        sidecar_ports = {p["containerPort"] for p in sidecar["ports"]}
        assert not sidecar_ports & set(_scraped_ports(monitor, decode))


def test_the_pod_monitor_schema_refuses_a_broken_monitor_naming_the_field():
    """The CRD the simulator and `modelplane validate` check composed PodMonitors against."""
    manifest = monitor_of(desired_resources(run(installed(prometheus_ready=True))))
    manifest["spec"]["podMetricsEndpoints"][0]["portNumber"] = 0
    manifest["spec"]["podMetricsEndpoints"][0]["relabelings"][0]["action"] = "Retain"
    problems = " ".join(str(p) for p in validate_object(manifest, source="monitor.yaml"))
    assert "spec.podMetricsEndpoints[0].portNumber" in problems
    assert "spec.podMetricsEndpoints[0].relabelings[0].action" in problems
