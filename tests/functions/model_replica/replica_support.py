"""Shared helpers for the compose-model-replica tests (imported via this folder's conftest)."""

from __future__ import annotations

import copy
import functools
from pathlib import Path
from typing import Any

import jsonschema
import pydantic
import yaml
from crossplane.function.proto.v1 import run_function_pb2 as fnv1
from kubernetes_validate import utils as kv_utils
from modelplane import validation
from modelplane_common.plain import to_plain, to_struct
from modelplane_schemas.generated.kubernetes_m_crossplane_io.v1alpha1.object import Object

JSON = dict[str, Any]

ROOT = Path(__file__).resolve().parents[3]
EXAMPLES = ROOT / "examples" / "replica"
GOLDEN = Path(__file__).resolve().parent / "golden"
# resource.k8s.io/v1 (DRA GA) first ships in Kubernetes 1.34; workload clusters run 1.35+.
DRA_KUBERNETES_VERSION = "1.34"

_READY = {fnv1.READY_TRUE: "True", fnv1.READY_FALSE: "False", fnv1.READY_UNSPECIFIED: None}
_STATUS = {
    fnv1.STATUS_CONDITION_TRUE: "True",
    fnv1.STATUS_CONDITION_FALSE: "False",
    fnv1.STATUS_CONDITION_UNKNOWN: "Unknown",
}


def load_docs(path: Path) -> list[JSON]:
    return [d for d in yaml.safe_load_all(path.read_text()) if d]


def example(name: str) -> JSON:
    """An example replica, defaulted as the API server stores it."""
    (xr,) = load_docs(EXAMPLES / f"{name}.yaml")
    return validation.defaulted(xr)


def cluster(name: str) -> JSON:
    return next(c for c in load_docs(EXAMPLES / "clusters.yaml") if c["metadata"]["name"] == name)


def ready_cluster(name: str = "gke-us-central", provider_config: str | None = None) -> JSON:
    found = copy.deepcopy(cluster("gke-us-central"))
    found["metadata"]["name"] = name
    if provider_config is not None:
        found["status"]["providerConfigRef"]["name"] = provider_config
    return found


STAGED = "staged"


def staged_cache(xr: JSON, phase: str = "Ready") -> JSON:
    """The ModelCache ``xr`` names, reporting ``phase`` on the replica's cluster."""
    return {
        "apiVersion": "modelplane.ai/v1alpha1",
        "kind": "ModelCache",
        "metadata": {
            "name": xr["spec"]["modelCacheRef"]["name"],
            "namespace": xr["metadata"].get("namespace", "default"),
        },
        "status": {"clusters": [{"name": xr["spec"]["clusterName"], "phase": phase}]},
    }


def request(
    xr: JSON,
    clusters: list[JSON] | None,
    observed: dict[str, JSON] | None = None,
    caches: list[JSON] | str | None = STAGED,
) -> fnv1.RunFunctionRequest:
    """A RunFunctionRequest; ``clusters`` None means the requirement is not resolved yet.

    A replica with a ``modelCacheRef`` gets its cache staged on its cluster (``STAGED``), the
    ``caches`` given, or (None) no answer to that requirement yet."""
    req = fnv1.RunFunctionRequest(
        observed=fnv1.State(
            composite=fnv1.Resource(resource=to_struct(xr)),
            resources={
                key: fnv1.Resource(resource=to_struct(obj)) for key, obj in (observed or {}).items()
            },
        )
    )
    if clusters is not None:
        req.required_resources["cluster"].CopyFrom(
            fnv1.Resources(items=[fnv1.Resource(resource=to_struct(c)) for c in clusters])
        )
    if (xr.get("spec") or {}).get("modelCacheRef") and caches is not None:
        items = [staged_cache(xr)] if caches == STAGED else caches
        req.required_resources["model-cache"].CopyFrom(
            fnv1.Resources(items=[fnv1.Resource(resource=to_struct(c)) for c in items])
        )
    return req


def summarize(rsp: fnv1.RunFunctionResponse) -> JSON:
    """The parts of a response a golden file records."""
    return {
        "composite_ready": _READY[rsp.desired.composite.ready],
        "resources": {
            key: {"ready": _READY[r.ready], "object": to_plain(r.resource)}
            for key, r in sorted(rsp.desired.resources.items())
        },
        "conditions": [
            {
                "type": c.type,
                "status": _STATUS[c.status],
                "reason": c.reason,
                **({"message": c.message} if c.HasField("message") else {}),
            }
            for c in rsp.conditions
        ],
        "results": [
            {
                "severity": fnv1.Severity.Name(r.severity).removeprefix("SEVERITY_"),
                **({"reason": r.reason} if r.HasField("reason") else {}),
                "message": r.message,
            }
            for r in rsp.results
        ],
    }


def requirements(rsp: fnv1.RunFunctionResponse) -> JSON:
    return {
        key: {
            "apiVersion": s.api_version,
            "kind": s.kind,
            "matchName": s.match_name,
            **({"namespace": s.namespace} if s.namespace else {}),
        }
        for key, s in rsp.requirements.resources.items()
    }


# --------------------------------------------------------------------------------------------
# Schema validation: what the API servers (control plane and workload cluster) would say


@functools.cache
def _dra_validator() -> jsonschema.protocols.Validator:
    """kubernetes-validate's strict ResourceClaimTemplate schema at DRA_KUBERNETES_VERSION."""
    from referencing import Registry, Resource  # noqa: PLC0415 - kubernetes-validate's dep

    directory = f"kubernetes-json-schema/v{DRA_KUBERNETES_VERSION}.0-local-strict"
    schema = kv_utils.schema_contents(
        f"{directory}/resourceclaimtemplate-resource-v1.json", DRA_KUBERNETES_VERSION
    )
    definitions = kv_utils.schema_contents(f"{directory}/_definitions.json", DRA_KUBERNETES_VERSION)
    registry = Resource.from_contents(definitions) @ (Resource.from_contents(schema) @ Registry())
    return jsonschema.Draft202012Validator(schema, registry=registry)


def manifest_problems(manifest: JSON) -> list[str]:
    """Problems the workload cluster's API server would report for a remote manifest.

    CRD kinds: their generated models; core kinds: kubernetes-validate's strict schemas (via
    ``modelplane validate``'s engine), except resource.k8s.io/v1, which is newer than the
    version that engine pins.
    """
    if manifest.get("apiVersion") == "resource.k8s.io/v1" and manifest.get("kind") == (
        "ResourceClaimTemplate"
    ):
        return [
            f"ResourceClaimTemplate: {'.'.join(map(str, e.absolute_path))}: {e.message}"
            for e in _dra_validator().iter_errors(manifest)
        ]
    return [str(p) for p in validation.validate_object(manifest)]


def object_problems(obj: JSON) -> list[str]:
    """Problems with a composed provider-kubernetes Object and the manifest it wraps."""
    problems: list[str] = []
    try:
        Object.model_validate(obj)
    except pydantic.ValidationError as err:
        problems.append(f"Object: {err}")
    manifest = ((obj.get("spec") or {}).get("forProvider") or {}).get("manifest")
    if not isinstance(manifest, dict):
        return [*problems, "Object: spec.forProvider.manifest missing"]
    return problems + manifest_problems(manifest)


def manifest_of(obj: JSON) -> JSON:
    return obj["spec"]["forProvider"]["manifest"]


# --------------------------------------------------------------------------------------------
# Observed state as provider-kubernetes reports it


def observed_object(
    desired: JSON,
    *,
    name: str,
    created: bool = True,
    ready: bool = False,
    remote_status: JSON | None = None,
    synced_error: str | None = None,
) -> JSON:
    """The observed Object for a desired one: named, with the remote copy and conditions."""
    obj = copy.deepcopy(desired)
    obj["metadata"] = {"name": name, "namespace": "ml-team"}
    status: JSON = {"conditions": []}
    if created:
        remote = copy.deepcopy(manifest_of(desired))
        remote["metadata"]["uid"] = f"uid-{name}"
        if remote_status is not None:
            remote["status"] = remote_status
        status["atProvider"] = {"manifest": remote}
    status["conditions"].append(
        {
            "type": "Ready",
            "status": "True" if ready else "False",
            "reason": "Available" if ready else "Unavailable",
            "lastTransitionTime": "2026-01-01T00:00:00Z",
        }
    )
    status["conditions"].append(
        {
            "type": "Synced",
            "status": "False" if synced_error else "True",
            "reason": "ReconcileError" if synced_error else "ReconcileSuccess",
            **({"message": synced_error} if synced_error else {}),
            "lastTransitionTime": "2026-01-01T00:00:00Z",
        }
    )
    obj["status"] = status
    return obj
