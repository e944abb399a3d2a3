"""Building RunFunctionRequests from plain dicts and reading responses back (for tests).

Pairs with ``serving.run_function``: tests speak plain manifests, the wire speaks protobuf.
"""

from __future__ import annotations

import hashlib
import importlib
import json
from collections.abc import Mapping, Sequence

from crossplane.function.proto.v1 import run_function_pb2 as fnv1

from modelplane_common import capacity_summary as cs
from modelplane_common.plain import JSON, to_plain, to_struct


def make_request(
    xr: JSON,
    observed: Mapping[str, JSON] | None = None,
    required: Mapping[str, Sequence[JSON]] | None = None,
    desired: Mapping[str, JSON] | None = None,
) -> fnv1.RunFunctionRequest:
    """A request with the observed XR and composed resources and the resolved requirements.

    A key absent from ``required`` is "not resolved yet"; an empty list is "nothing found".
    """
    return fnv1.RunFunctionRequest(
        observed=fnv1.State(
            composite=fnv1.Resource(resource=to_struct(xr)),
            resources={
                k: fnv1.Resource(resource=to_struct(v)) for k, v in (observed or {}).items()
            },
        ),
        desired=fnv1.State(
            resources={k: fnv1.Resource(resource=to_struct(v)) for k, v in (desired or {}).items()}
        ),
        required_resources={
            key: fnv1.Resources(items=[fnv1.Resource(resource=to_struct(o)) for o in objs])
            for key, objs in (required or {}).items()
        },
    )


def desired_resources(rsp: fnv1.RunFunctionResponse) -> dict[str, JSON]:
    return {key: to_plain(r.resource) for key, r in rsp.desired.resources.items()}


def desired_ready(rsp: fnv1.RunFunctionResponse) -> dict[str, bool | None]:
    names = {fnv1.READY_TRUE: True, fnv1.READY_FALSE: False}
    return {key: names.get(r.ready) for key, r in rsp.desired.resources.items()}


def desired_status(rsp: fnv1.RunFunctionResponse) -> JSON:
    return to_plain(rsp.desired.composite.resource).get("status") or {}


def conditions(rsp: fnv1.RunFunctionResponse) -> dict[str, tuple[str, str, str]]:
    """Custom conditions by type: (status True/False/Unknown, reason, message)."""
    status = {
        fnv1.STATUS_CONDITION_TRUE: "True",
        fnv1.STATUS_CONDITION_FALSE: "False",
    }
    return {c.type: (status.get(c.status, "Unknown"), c.reason, c.message) for c in rsp.conditions}


def results(rsp: fnv1.RunFunctionResponse) -> list[tuple[str, str]]:
    """Results as (severity name, message)."""
    return [(fnv1.Severity.Name(r.severity), r.message) for r in rsp.results]


def observe(body: JSON, status: JSON | None = None, name: str | None = None) -> JSON:
    """What Crossplane would observe after applying ``body`` (and a provider writing status)."""
    metadata = {**(body.get("metadata") or {}), "uid": "uid-" + (name or "x")}
    if name:
        metadata["name"] = name
    observed = {**body, "metadata": metadata}
    if status is not None:
        observed["status"] = status
    return observed


def ready_status(**extra: object) -> JSON:
    """A status with condition Ready=True, plus ``extra`` fields."""
    return {"conditions": [{"type": "Ready", "status": "True", "reason": "Available"}], **extra}


def function_results(documents: Sequence[Mapping[str, object]]) -> list[dict[str, object]]:
    """The functions' own results among the reconciler's events ``render -r`` prints, each
    message without its ``Pipeline step "<step>": `` prefix."""
    prefix = 'Pipeline step "'
    return [
        {**d, "message": str(d["message"]).split('": ', 1)[1]}
        for d in documents
        if d.get("kind") == "Result" and str(d.get("message", "")).startswith(prefix)
    ]


def validate_against_model(body: Mapping[str, object]) -> None:
    """``model_validate`` a manifest against the generated model of its kind (from the CRD or
    XRD ``modelplane generate`` read): unknown fields and wrong types raise."""
    group, version = str(body["apiVersion"]).split("/")
    package = group.replace(".", "_").replace("-", "_")
    module = importlib.import_module(
        f"modelplane_schemas.generated.{package}.{version}.{str(body['kind']).lower()}"
    )
    getattr(module, str(body["kind"])).model_validate(body)


def fleet_required(
    clusters: Sequence[JSON],
    replicas: Sequence[JSON] = (),
    observed: Mapping[str, JSON] | None = None,
) -> dict[str, list[JSON]]:
    """What compose-model-deployment reads of a fleet given as InferenceClusters (with their
    published ``status.gpuPools``) and ModelReplicas: each cluster's capacity summary as
    compose-inference-cluster composes it, every summary at once (a small fleet), one
    InferenceClass per distinct device list, and each cluster by name, including the clusters
    ``replicas`` and ``observed`` name that ``clusters`` lacks (found empty: deleted)."""
    classes: dict[str, JSON] = {}
    summaries = []
    by_name: dict[str, list[JSON]] = {}
    for cluster in clusters:
        name = str((cluster.get("metadata") or {}).get("name", ""))
        status = cluster.get("status") if isinstance(cluster.get("status"), dict) else {}
        on_it = [r for r in replicas if (r.get("spec") or {}).get("clusterName") == name]
        content = cs.summary(cluster, status, on_it)
        raw_pools = status.get("gpuPools") if isinstance(status.get("gpuPools"), list) else []
        for view, raw in zip(content["status"].get("gpuPools") or [], raw_pools, strict=False):
            devices = raw.get("devices") if isinstance(raw, dict) else None
            if devices is None:
                view["className"] = ""
                continue
            key = json.dumps(devices, sort_keys=True)
            klass = "class-" + hashlib.sha256(key.encode()).hexdigest()[:10]
            view["className"] = klass
            classes.setdefault(
                klass,
                {
                    "apiVersion": "modelplane.ai/v1alpha1",
                    "kind": "InferenceClass",
                    "metadata": {"name": klass},
                    "spec": {"devices": devices},
                },
            )
        labels = (cluster.get("metadata") or {}).get("labels") or {}
        summary = cs.configmap(name, labels, content)
        summaries.append(summary)
        by_name[f"cluster.{name}"] = [cluster]
        by_name[f"capacity.{name}"] = [summary]
    for body in [*replicas, *(observed or {}).values()]:
        name = str((body.get("spec") or {}).get("clusterName") or "")
        if name and f"cluster.{name}" not in by_name:
            by_name[f"cluster.{name}"] = []
            by_name[f"capacity.{name}"] = []
    return {"inference-classes": list(classes.values()), "capacity-all": summaries, **by_name}
