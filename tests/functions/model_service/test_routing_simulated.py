"""Routing end to end in the in-process control plane: endpoints, service, gateway, Traefik.

Every reconcile calls compose-model-endpoint, compose-model-service and
compose-inference-gateway over real gRPC; the simulated providers create what they compose.
"""

from __future__ import annotations

from pathlib import Path

from modelplane.controlplane import session
from modelplane.kube import condition_status

NS = "ml-team"
MANIFESTS = """
apiVersion: modelplane.ai/v1alpha1
kind: InferenceGateway
metadata: {name: default}
spec: {}
---
apiVersion: modelplane.ai/v1alpha1
kind: ModelService
metadata: {name: chat, namespace: ml-team}
spec:
  endpoints:
  - weight: 95
    selector: {matchLabels: {modelplane.ai/deployment: qwen-demo}}
  - weight: 5
    selector: {matchLabels: {modelplane.ai/deployment: qwen-canary}}
"""


def endpoint(name: str, deployment: str, address: str, namespace: str = NS) -> str:
    return f"""
apiVersion: modelplane.ai/v1alpha1
kind: ModelEndpoint
metadata:
  name: {name}
  namespace: {namespace}
  labels: {{modelplane.ai/deployment: {deployment}}}
spec:
  url: http://{address}/{namespace}/{name}/v1
  rewritePath: /{namespace}/{name}/
"""


def route_refs(plane) -> list[tuple[str, int]]:
    (route,) = plane.list("gateway.networking.k8s.io/v1", "HTTPRoute", namespace=NS)
    refs = route["spec"]["rules"][0].get("backendRefs") or []
    services = {
        s["metadata"]["name"]: s["metadata"]["labels"]["modelplane.ai/model-endpoint"]
        for s in plane.list("v1", "Service")
        if "modelplane.ai/model-endpoint" in (s["metadata"].get("labels") or {})
    }
    return [(services[r["name"]], r["weight"]) for r in refs]


def test_canary_service_serves_and_keeps_serving_when_an_endpoint_goes(tmp_path: Path):
    (tmp_path / "routing.yaml").write_text(
        "---".join(
            [
                MANIFESTS,
                endpoint("qwen-demo-9c1e0", "qwen-demo", "198.51.100.7"),
                endpoint("qwen-demo-e41b7", "qwen-demo", "198.51.100.23"),
                endpoint("qwen-canary-30f5a", "qwen-canary", "198.51.100.7"),
                # Same labels in another namespace: must never receive traffic.
                endpoint("qwen-demo-aaaaa", "qwen-demo", "192.0.2.66", namespace="team-b"),
            ]
        )
    )
    with session(tmp_path) as plane:
        assert plane.run(max_rounds=30).converged
        service = plane.find("ModelService", "chat", NS)
        assert condition_status(service, "Ready") == "True"
        assert condition_status(service, "RoutingReady") == "True"
        address = plane.find("InferenceGateway", "default")["status"]["address"]
        assert service["status"]["address"] == f"http://{address}/{NS}/chat"
        assert route_refs(plane) == [
            ("qwen-demo-9c1e0", 48),
            ("qwen-demo-e41b7", 47),
            ("qwen-canary-30f5a", 5),
        ]
        for name in ("qwen-demo-9c1e0", "qwen-canary-30f5a"):
            me = plane.find("ModelEndpoint", name, NS)
            assert me["status"]["routing"]["backendName"]

        # A replica is withdrawn: the service keeps routing to the rest.
        plane.delete(plane.key("ModelEndpoint", "qwen-demo-9c1e0", NS))
        assert plane.run(max_rounds=30).converged
        assert route_refs(plane) == [("qwen-demo-e41b7", 19), ("qwen-canary-30f5a", 1)]
        service = plane.find("ModelService", "chat", NS)
        assert condition_status(service, "Ready") == "True"
