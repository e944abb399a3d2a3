"""What compose-model-cache puts on each workload cluster (model-cache.md §6).

Everything here is plain data: the PVC, the hydration Job and its script, and the
provider-kubernetes Objects that carry them to the cluster.
"""

from __future__ import annotations

import shlex

from modelplane_common.cache_naming import (
    CACHE_LABEL,
    cache_hydration_job_name,
    cache_pvc_name,
)
from modelplane_common.managed import validated
from modelplane_common.naming import CACHE_CLUSTER_LABEL
from modelplane_common.plain import JSON, Variant
from modelplane_common.tenancy import remote_namespace
from modelplane_schemas.generated.kubernetes_m_crossplane_io.v1alpha1.object import Object

OBJECT_API_VERSION = "kubernetes.m.crossplane.io/v1alpha1"
HYDRATION_IMAGE = "python:3.11-slim"
HYDRATION_MOUNT = "/mnt/artifact"
COMPLETION_MARKER = f"{HYDRATION_MOUNT}/.modelplane-hydrated"
TOKEN_ENV = "HF_TOKEN"
DEFAULT_TOKEN_KEY = "HF_TOKEN"
PVC_BOUND_QUERY = 'object.status.phase == "Bound"'
# A Job has no conditions until it finishes; without has() the query fails instead of saying
# "not yet" (provider-kubernetes reports "no such key: conditions").
JOB_COMPLETE_QUERY = (
    "has(object.status.conditions) && "
    'object.status.conditions.exists(c, c.type == "Complete" && c.status == "True")'
)
# Everything except Delete: dropping the Job Object orphans the remote Job, whose own TTL
# then removes it together with its pod (model-cache.md §9.2).
JOB_MANAGEMENT_POLICIES = ["Observe", "Create", "Update", "LateInitialize"]


def pvc_key(cluster: str, *, moved: bool = False) -> str:
    """The PVC's key on ``cluster``; ``moved`` is the key of a PVC composed in the tenant's own
    namespace while the one from before D10 still occupies the plain key (cache_compose)."""
    return f"{MOVED_PREFIX if moved else ''}pvc-{cluster}"


def job_key(cluster: str, *, moved: bool = False) -> str:
    return f"{MOVED_PREFIX if moved else ''}hydrate-{cluster}"


MOVED_PREFIX = "ns-"


def persistent_volume_claim(
    namespace: str, cache_name: str, storage_class: str, size_gib: int
) -> JSON:
    return {
        "apiVersion": "v1",
        "kind": "PersistentVolumeClaim",
        "metadata": {
            "name": cache_pvc_name(namespace, cache_name),
            "namespace": remote_namespace(namespace),
            "labels": {CACHE_LABEL: cache_name},
        },
        "spec": {
            "accessModes": ["ReadWriteMany"],
            "storageClassName": storage_class,
            "resources": {"requests": {"storage": f"{size_gib}Gi"}},
        },
    }


def hydration_script(repo: str, revision: str | None) -> str:
    """The one shell string the hydration container runs (model-cache.md §6.4).

    ``set -e`` first and the marker last: a download that fails or is cut off never writes
    the marker, so the next run resumes the download instead of serving truncated weights.
    The marker, not a non-empty directory, decides whether to skip (lost+found and partial
    files must not count as done).
    """
    download = f"hf download {shlex.quote(repo)}"
    if revision:
        download += f" --revision {shlex.quote(revision)}"
    download += f" --local-dir {HYDRATION_MOUNT}"
    return "; ".join(
        [
            "set -e",
            f"if [ -f {COMPLETION_MARKER} ]; then echo 'already hydrated, skipping'; exit 0; fi",
            "pip install --quiet huggingface_hub",
            download,
            f"touch {COMPLETION_MARKER}",
        ]
    )


def token_env(auth_secret: JSON | None) -> list[JSON]:
    """The token reaches the pod only as a reference to a Secret on the workload cluster."""
    if not auth_secret:
        return []
    return [
        {
            "name": TOKEN_ENV,
            "valueFrom": {
                "secretKeyRef": {
                    "name": auth_secret["name"],
                    "key": auth_secret.get("key") or DEFAULT_TOKEN_KEY,
                }
            },
        }
    ]


def hydration_job(
    namespace: str, cache_name: str, repo: str, revision: str | None, auth_secret: JSON | None
) -> JSON:
    labels = {CACHE_LABEL: cache_name}
    return {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {
            "name": cache_hydration_job_name(namespace, cache_name),
            "namespace": remote_namespace(namespace),
            "labels": dict(labels),
        },
        "spec": {
            "backoffLimit": 3,
            "ttlSecondsAfterFinished": 180,
            "template": {
                "metadata": {"labels": dict(labels)},
                "spec": {
                    "restartPolicy": "OnFailure",
                    "volumes": [
                        {
                            "name": "artifact",
                            "persistentVolumeClaim": {
                                "claimName": cache_pvc_name(namespace, cache_name)
                            },
                        }
                    ],
                    "containers": [
                        {
                            "name": "hydrate",
                            "image": HYDRATION_IMAGE,
                            "command": ["/bin/sh", "-c", hydration_script(repo, revision)],
                            "env": token_env(auth_secret),
                            "volumeMounts": [{"name": "artifact", "mountPath": HYDRATION_MOUNT}],
                        }
                    ],
                },
            },
        },
    }


class Wrapper:
    """provider-kubernetes Objects carrying one ``manifest`` to many clusters, each to the
    cluster's ClusterProviderConfig.

    The label lets the InferenceCluster see which tenants stage caches on it, and compose
    their namespace there (D10). The Objects differ only in the label's value and the
    provider config's name: they are Variants of the first (encoded once in the response),
    and only the first is validated against the Object schema, which leaves both strings
    free."""

    def __init__(self, manifest: JSON, cel_query: str, *, job: bool) -> None:
        self._manifest = manifest
        self._cel_query = cel_query
        self._job = job
        self._base: JSON | None = None

    def __call__(self, cluster: str, provider_config: str) -> JSON:
        if self._base is None:
            self._base = validated(Object, self._body(cluster, provider_config))
        leaves = ((_LABEL_PATH, cluster), (_PROVIDER_CONFIG_PATH, provider_config))
        return Variant(self._base, leaves)

    def _body(self, cluster: str, provider_config: str) -> JSON:
        spec: JSON = {
            "providerConfigRef": {"kind": "ClusterProviderConfig", "name": provider_config},
            "readiness": {"policy": "DeriveFromCelQuery", "celQuery": self._cel_query},
            "forProvider": {"manifest": self._manifest},
            # Watched, not polled every 30 s while unready: a staged cache is Ready sooner.
            "watch": True,
        }
        if self._job:
            spec["managementPolicies"] = list(JOB_MANAGEMENT_POLICIES)
        return {
            "apiVersion": OBJECT_API_VERSION,
            "kind": "Object",
            "metadata": {"labels": {CACHE_CLUSTER_LABEL: cluster}},
            "spec": spec,
        }


_LABEL_PATH = ("metadata", "labels", CACHE_CLUSTER_LABEL)
_PROVIDER_CONFIG_PATH = ("spec", "providerConfigRef", "name")
