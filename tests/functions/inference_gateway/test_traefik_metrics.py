"""The scale-from-zero wake-up signal (docs/operations.md "Scaling to zero"): Traefik exports
per-router metrics, and an optional PodMonitor lets a control-plane Prometheus scrape them.
Through real gRPC, the XRD schema and `modelplane simulate`."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
import yaml
from compose_inference_gateway.fn import InferenceGatewayFunction
from modelplane import repo
from modelplane.controlplane import session
from modelplane.kube import condition_status
from modelplane.validation import defaulted, validate_object
from modelplane_common.serving import run_function
from modelplane_common.testing import desired_resources, make_request, observe, ready_status

MONITOR_KEY = "traefik-pod-monitor"
PODMONITOR_CRD = repo.root() / "schemas" / "crds-extra" / "monitoring.coreos.com_podmonitors.yaml"


def gateway(pod_monitor: dict | None = None) -> dict:
    traefik = {"podMonitor": pod_monitor} if pod_monitor is not None else {}
    xr = defaulted(
        {
            "apiVersion": "modelplane.ai/v1alpha1",
            "kind": "InferenceGateway",
            "metadata": {"name": "default"},
            "spec": {"traefik": traefik},
        }
    )
    return xr


def run(xr: dict, observed: dict | None = None) -> dict:
    assert validate_object(xr) == []
    rsp = run_function(InferenceGatewayFunction(), make_request(xr, observed))
    desired = desired_resources(rsp)
    for key, body in desired.items():
        assert validate_object(body, source=key) == [], (key, validate_object(body))
    return desired


def healthy(body: dict) -> dict:
    if body["kind"] == "CustomResourceDefinition":
        established = {"type": "Established", "status": "True", "reason": "InitialNamesAccepted"}
        seen = observe(body, {"conditions": [established]})
        seen["metadata"]["name"] = body["metadata"]["name"]
        return seen
    return observe(body, ready_status())


def converge(xr: dict, observed: dict | None = None) -> dict:
    observed = dict(observed or {})
    for _ in range(4):
        observed = {k: observed.get(k) or healthy(v) for k, v in run(xr, observed).items()}
    return observed


def test_traefik_always_exports_router_metrics() -> None:
    observed = converge(gateway())
    values = observed["traefik"]["spec"]["forProvider"]["values"]
    # The chart's key (traefik chart 40.2.0 values.yaml: metrics.prometheus.addRoutersLabels,
    # "Enable metrics on routers. Default: false").
    assert values["metrics"] == {"prometheus": {"addRoutersLabels": True}}
    assert MONITOR_KEY not in observed  # off unless asked for


def test_an_enabled_pod_monitor_scrapes_traefik_once_it_runs() -> None:
    xr = gateway({"enabled": True, "labels": {"release": "prometheus"}})
    first = run(xr)
    assert MONITOR_KEY not in first  # Traefik's namespace does not exist yet
    observed = converge(xr)
    monitor = observed[MONITOR_KEY]
    assert (monitor["apiVersion"], monitor["kind"]) == ("monitoring.coreos.com/v1", "PodMonitor")
    assert monitor["metadata"]["namespace"] == "traefik-system"
    assert monitor["metadata"]["labels"] == {
        "app.kubernetes.io/managed-by": "modelplane",
        "release": "prometheus",
    }
    assert monitor["spec"] == {
        "selector": {"matchLabels": {"app.kubernetes.io/name": "traefik"}},
        "namespaceSelector": {"matchNames": ["traefik-system"]},
        "podMetricsEndpoints": [{"port": "metrics", "path": "/metrics"}],
    }


def test_turning_the_pod_monitor_off_removes_only_it() -> None:
    observed = converge(gateway({"enabled": True}))
    desired = run(gateway({"enabled": False}), observed)
    assert set(desired) == set(observed) - {MONITOR_KEY}


def test_the_xrd_names_a_bad_label() -> None:
    for labels, field in (
        ({"release": "not ok!"}, "spec.traefik.podMonitor.labels.release"),
        ({"bad key!": "x"}, "spec.traefik.podMonitor.labels keys must be Kubernetes label keys"),
    ):
        problems = " ".join(
            str(p) for p in validate_object(gateway({"enabled": True, "labels": labels}))
        )
        assert field in problems, problems


@pytest.mark.timeout(600)
def test_simulated_gateway_with_a_pod_monitor_converges(tmp_path: Path) -> None:
    """On a control plane whose Prometheus Operator CRDs are installed (the CRD applied here)."""
    shutil.copy(PODMONITOR_CRD, tmp_path / "podmonitor-crd.yaml")
    xr = {"apiVersion": "modelplane.ai/v1alpha1", "kind": "InferenceGateway",
          "metadata": {"name": "default"},
          "spec": {"traefik": {"loadBalancer": "MetalLB",
                               "metallb": {"addressPool": "172.18.255.200-172.18.255.250"},
                               "podMonitor": {"enabled": True,
                                              "labels": {"release": "prometheus"}}}}}  # fmt: skip
    (tmp_path / "gateway.yaml").write_text(yaml.safe_dump(xr))
    with session(tmp_path) as plane:
        assert plane.run(max_rounds=40).converged
        gw = plane.find("InferenceGateway", "default")
        assert condition_status(gw, "Ready") == "True", gw["status"]
        (monitor,) = plane.list(kind="PodMonitor", namespace="traefik-system")
        assert monitor["metadata"]["labels"]["release"] == "prometheus"
