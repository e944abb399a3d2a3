"""What the workload cluster's Prometheus scrapes of the engines Modelplane runs there.

One PodMonitor per cluster selects every serving pod of every ModelReplica (any namespace) by
the label compose-model-replica puts on them, and scrapes the ``engine`` container's declared
port at ``/metrics``: vLLM always serves its metrics there, SGLang with ``--enable-metrics``.
Selecting by container rather than by port number keeps a prefill/decode decode pod right:
its engine listens on another port while the routing sidecar owns the serving port.

kube-prometheus-stack's Prometheus picks the PodMonitor up because the release's values set
``podMonitorSelectorNilUsesHelmValues: false`` and an empty ``podMonitorNamespaceSelector``
(``resources._prometheus_values``): every PodMonitor in every namespace, no release label.
"""

from __future__ import annotations

from modelplane_common.plain import JSON
from modelplane_schemas.generated.monitoring_coreos_com.v1 import podmonitor as pm

KEY_ENGINE_MONITOR = "engine-pod-monitor"
KEY_PROMETHEUS = "prometheus"  # the kube-prometheus-stack Release (resources.release_specs)
MONITOR_NAME = "modelplane-engines"
# The release namespace of kube-prometheus-stack; it exists once that Release is Ready.
MONITOR_NAMESPACE = "monitoring"
# Set by compose-model-replica on Standalone and Leader pods (value: the replica's name);
# workers of a gang never carry it, so they are not scraped.
SERVING_LABEL = "modelplane.ai/serving"
ENGINE_CONTAINER = "engine"
METRICS_PATH = "/metrics"


def engine_pod_monitor(namespace: str = MONITOR_NAMESPACE) -> JSON:
    """The PodMonitor, with series labelled by replica (``modelplane_ai_serving``)."""
    monitor = pm.PodMonitor(
        metadata={
            "name": MONITOR_NAME,
            "namespace": namespace,
            "labels": {"app.kubernetes.io/managed-by": "modelplane"},
        },
        spec=pm.Spec(
            selector=pm.Selector(
                matchExpressions=[pm.MatchExpression(key=SERVING_LABEL, operator="Exists")]
            ),
            namespaceSelector=pm.NamespaceSelector(any=True),
            # The operator turns the label into a target label, its name sanitised.
            podTargetLabels=[SERVING_LABEL],
            podMetricsEndpoints=[
                pm.PodMetricsEndpoint(
                    path=METRICS_PATH,
                    # No port filter: the pod role yields one target per declared container
                    # port, and this keeps only the engine's (one port, wherever it listens).
                    relabelings=[
                        pm.Relabeling(
                            action="keep",
                            sourceLabels=["__meta_kubernetes_pod_container_name"],
                            regex=ENGINE_CONTAINER,
                        )
                    ],
                )
            ],
        ),
    )
    return monitor.model_dump(mode="json", exclude_none=True)
