"""The fleet bench/fleet_scale.py measures against, as the API server would hold it.

N InferenceClusters of 4 pools each (every tenth tainted), 1,000 ModelDeployments of 10
replicas each (10,000 ModelReplicas, spread evenly over the clusters), one ModelCache per team
namespace staged on every cluster, the HTTPRoutes ModelServices compose, and the
provider-kubernetes Objects the measured cluster's function selects by label.

The shapes are the functions' own: ``status.gpuPools`` is what compose-inference-cluster's
``gpu_pools`` publishes for the InferenceClasses below, each deployment shape's ModelReplica is
what compose-model-deployment composes for it, and each replica's Objects and status are what
compose-model-replica composes for it (each run once, in-process, on a one-cluster fleet, then
stamped per cluster and index). Metadata carries what the API server and Crossplane add (uid,
resourceVersion, generation, finalizers, Crossplane's labels and owner references, and
``managedFields``: an apply and, with a status, a status update).
"""

from __future__ import annotations

import copy
import dataclasses
import hashlib
import io
import json
from collections.abc import Iterator
from typing import Any

from compose_inference_cluster import pools as cluster_pools
from compose_inference_cluster import resources as cluster_resources
from compose_model_deployment import names
from compose_model_deployment.fn import ModelDeploymentFunction
from compose_model_replica.fn import ModelReplicaFunction
from crossplane.function.proto.v1 import run_function_pb2 as fnv1
from modelplane.pipeline import ResourcePool, run_with_requirements
from modelplane_common import capacity_summary
from modelplane_common.cache_naming import CACHE_LABEL
from modelplane_common.function import CompositionFunction
from modelplane_common.naming import CACHE_CLUSTER_LABEL, CLUSTER_LABEL
from modelplane_common.plain import to_plain, to_struct
from modelplane_common.runtime import configure_logging
from modelplane_schemas.generated.modelplane_ai.v1alpha1 import inferencecluster as ic
from modelplane_schemas.generated.modelplane_ai.v1alpha1.inferenceclass import InferenceClass

JSON = dict[str, Any]
API = "modelplane.ai/v1alpha1"
OBJECT_API = "kubernetes.m.crossplane.io/v1alpha1"
GPU = "gpu.nvidia.com"
NAMESPACES = [f"team-{i}" for i in range(13)]
MEASURED_NAMESPACE = NAMESPACES[0]
CACHE = "weights"  # one per team namespace, staged on every cluster (no clusterSelector)
DEPLOYMENTS = 1000
REPLICAS_PER_DEPLOYMENT = 10
TAINTED_EVERY = 10
CREATED = "2026-11-20T09:00:00Z"
MEASURED_DEPLOYMENT = "llama-70b-pd"
TEMPLATE_CLUSTER = "template"


def _uid(*parts: str) -> str:
    digest = hashlib.sha256("/".join(parts).encode()).hexdigest()
    return f"{digest[:8]}-{digest[8:12]}-{digest[12:16]}-{digest[16:20]}-{digest[20:32]}"


def _suffix(*parts: str) -> str:
    return hashlib.sha256("/".join(parts).encode()).hexdigest()[:5]


def _meta(kind: str, name: str, namespace: str | None = None, **extra: Any) -> JSON:
    """Metadata as the API server returns it (``build`` adds managedFields)."""
    meta: JSON = {"name": name}
    if namespace:
        meta["namespace"] = namespace
    meta |= {
        "uid": _uid(kind, namespace or "", name),
        "resourceVersion": str(int(_suffix(kind, name), 16) + 100000),
        "generation": 3,
        "creationTimestamp": CREATED,
    }
    return meta | extra


def _conditions(*custom: tuple[str, str]) -> list[JSON]:
    """Crossplane's Synced and Ready, then the function's own conditions."""
    out = [
        {"type": kind, "status": "True", "reason": reason, "lastTransitionTime": CREATED}
        for kind, reason in (("Synced", "ReconcileSuccess"), ("Ready", "Available"), *custom)
    ]
    for entry in out:
        entry["observedGeneration"] = 3
    return out


def _crossplane_spec(composition: str, refs: list[tuple[str, str, str]]) -> JSON:
    """``spec.crossplane`` as Crossplane v2 writes it on an XR."""
    return {
        "compositionRef": {"name": composition},
        "compositionRevisionRef": {"name": f"{composition}-{_suffix(composition)}0a1"},
        "compositionUpdatePolicy": "Automatic",
        "resourceRefs": [
            {"apiVersion": api, "kind": kind, "name": name} for api, kind, name in refs
        ],
    }


# --- InferenceClasses and clusters -----------------------------------------------------------


def _gpu(architecture: str, product: str, memory: str, count: int, cc: str) -> JSON:
    return {
        "name": "gpu",
        "driver": GPU,
        "deviceClassName": GPU,
        "count": count,
        "attributes": {
            "architecture": {"string": architecture},
            "productName": {"string": product},
            "cudaComputeCapability": {"version": cc},
            "driverVersion": {"version": "580.82.7"},
        },
        "capacity": {"memory": {"value": memory}},
    }


IB_FABRIC = {
    "name": "fabric",
    "claim": "Synthetic",
    "driver": "nic.nvidia.com",
    "count": 8,
    "attributes": {"linkType": {"string": "infiniband"}},
    "capacity": {"bandwidth": {"value": "400G"}},
}

# pool name -> (class devices, nodes): sized so that 10,000 replicas fit at 100 clusters under
# today's whole-node accounting (about 25 replicas of each shape per cluster).
POOLS: dict[str, tuple[list[JSON], int]] = {
    "l4": ([_gpu("Ada Lovelace", "NVIDIA L4", "23034Mi", 1, "8.9.0")], 32),
    "a100": ([_gpu("Ampere", "NVIDIA A100-SXM4-80GB", "81920Mi", 8, "8.0.0")], 32),
    "h100-ib": ([_gpu("Hopper", "NVIDIA H100 80GB HBM3", "81559Mi", 8, "9.0.0"), IB_FABRIC], 96),
    "h200": ([_gpu("Hopper", "NVIDIA H200", "143771Mi", 8, "9.0.0")], 32),
}


def inference_classes() -> list[JSON]:
    return [
        {
            "apiVersion": API,
            "kind": "InferenceClass",
            "metadata": _meta("InferenceClass", name),
            "spec": {"description": f"{name} nodes", "devices": devices},
        }
        for name, (devices, _) in POOLS.items()
    ]


def _published_pools() -> list[JSON]:
    """``status.gpuPools`` exactly as compose-inference-cluster publishes it for POOLS."""
    classes = {c["metadata"]["name"]: InferenceClass.model_validate(c) for c in inference_classes()}
    pools = [
        ic.NodePool(name=name, className=name, nodeCount=nodes, maxNodeCount=nodes + 16)
        for name, (_, nodes) in POOLS.items()
    ]
    return cluster_pools.gpu_pools(pools, classes)


def _taints(i: int) -> list[JSON]:
    """Every tenth cluster, alternately cordoned (NoSchedule) and draining (NoExecute)."""
    if i < 0 or i % TAINTED_EVERY != TAINTED_EVERY - 1:
        return []
    effect = "NoSchedule" if (i // TAINTED_EVERY) % 2 else "NoExecute"
    return [
        {"key": "modelplane.ai/maintenance", "value": f"window-{i % 3}", "effect": effect},
        {"key": "example.com/dedicated", "value": "research", "effect": "NoSchedule"},
    ]


def cluster_name(i: int) -> str:
    return TEMPLATE_CLUSTER if i < 0 else f"cluster-{i:05}"


def cluster(i: int, published: list[JSON]) -> JSON:
    """One InferenceCluster (an Existing cluster; i < 0 is the template) with its status."""
    name = cluster_name(i)
    config = cluster_resources.provider_config_name(name)
    stack = cluster_resources.serving_stack_name(name)
    spec: JSON = {
        "cluster": {"source": "Existing", "existing": {"secretRef": {"name": f"{name}-kc"}}},
        "nodePools": [
            {
                "name": p["name"],
                "className": p["name"],
                "nodeCount": p["nodes"],
                "maxNodeCount": p.get("maxNodes"),
            }
            for p in published
        ],
        "failoverGracePeriod": "10m",
    }
    taints = _taints(i)
    if taints:
        spec["taints"] = taints
    spec["crossplane"] = _crossplane_spec(
        "inferenceclusters.modelplane.ai",
        [
            ("kubernetes.m.crossplane.io/v1alpha1", "ClusterProviderConfig", config),
            ("infrastructure.modelplane.ai/v1alpha1", "ServingStack", stack),
            ("protection.crossplane.io/v1beta1", "ClusterUsage", f"{name}-stack-uses-config"),
        ],
    )
    return {
        "apiVersion": API,
        "kind": "InferenceCluster",
        "metadata": _meta(
            "InferenceCluster",
            name,
            labels={"modelplane.ai/region": f"region-{max(i, 0) % 7}"},
            finalizers=["composite.apiextensions.crossplane.io"],
        ),
        "spec": spec,
        "status": {
            "conditions": _conditions(
                ("ClusterReady", "Available"),
                ("PoolsResolved", "Resolved"),
                ("BackendReady", "Available"),
            ),
            "namespace": cluster_resources.NAMESPACE,
            "providerConfigRef": {"name": config},
            "gateway": {"address": f"10.{max(i, 0) // 250 % 250}.{max(i, 0) % 250}.10"},
            "gpuPools": copy.deepcopy(published),
        },
    }


def provider_config(cluster_: JSON) -> JSON:
    """The ClusterProviderConfig compose-inference-cluster composes for ``cluster_``, as
    provider-kubernetes reports it (its users counted, deletion blocked while in use)."""
    name = cluster_["metadata"]["name"]
    config = cluster_resources.provider_config_name(name)
    return {
        "apiVersion": "kubernetes.m.crossplane.io/v1alpha1",
        "kind": "ClusterProviderConfig",
        "metadata": _meta(
            "ClusterProviderConfig",
            config,
            labels={"crossplane.io/composite": name},
            annotations={"crossplane.io/composition-resource-name": "cluster-provider-config"},
            ownerReferences=_owner("InferenceCluster", name, cluster_["metadata"]["uid"]),
            finalizers=["in-use.crossplane.io"],
        ),
        "spec": {
            "credentials": {
                "source": "Secret",
                "secretRef": {
                    "namespace": cluster_resources.NAMESPACE,
                    "name": f"{name}-kc",
                    "key": "kubeconfig",
                },
            }
        },
        "status": {"users": 40},
    }


# --- deployments and their replicas ---------------------------------------------------------


def _template(image: str) -> JSON:
    return {
        "metadata": {"labels": {"team": "ml"}},
        "spec": {
            "containers": [
                {
                    "name": "engine",
                    "image": image,
                    "args": ["--model=/mnt/models", "--max-model-len=32768"],
                    "env": [{"name": "HF_HOME", "value": "/mnt/models/.hf"}],
                    "resources": {"requests": {"cpu": "8", "memory": "64Gi"}},
                }
            ]
        },
    }


def _select(cel: str, count: int = 1, name: str = "gpu") -> JSON:
    return {"name": name, "count": count, "selectors": [{"cel": cel}]}


IMAGE = "vllm/vllm-openai:v0.11.0"
HOPPER = f'device.attributes["{GPU}"].architecture == "Hopper"'


def _standalone(*devices: JSON) -> JSON:
    return {
        "name": "main",
        "copies": 1,
        "members": [
            {
                "role": "Standalone",
                "nodeSelector": {"devices": list(devices)},
                "template": _template(IMAGE),
            }
        ],
    }


# The other deployments cycle through these shapes: one L4, two of an A100 node's eight, a whole
# H200 node, and a 2-node Hopper gang on the InfiniBand fabric with a claimless leader.
SHAPES: list[JSON] = [
    {
        "engines": [
            _standalone(_select(f'device.attributes["{GPU}"].architecture == "Ada Lovelace"'))
        ]
    },
    {"engines": [_standalone(_select(f'device.attributes["{GPU}"].architecture == "Ampere"', 2))]},
    {
        "engines": [
            _standalone(
                _select(f'device.capacity["{GPU}"].memory.compareTo(quantity("140Gi")) >= 0', 8)
            )
        ]
    },
    {
        "engines": [
            {
                "name": "main",
                "copies": 1,
                "members": [
                    {"role": "Leader", "template": _template(IMAGE)},
                    {
                        "role": "Worker",
                        "worker": {"nodes": 2},
                        "nodeSelector": {
                            "devices": [
                                _select(HOPPER, 8),
                                _select(
                                    'device.attributes["nic.nvidia.com"].linkType == "infiniband"',
                                    name="fabric",
                                ),
                            ]
                        },
                        "template": _template(IMAGE),
                    },
                ],
            }
        ]
    },
]

# The deployment compose-model-deployment is measured on (a new one: its first reconcile):
# a Standalone prefill claiming one GPU with at least 40Gi, and a decode gang as SHAPES[3].
MEASURED_SPEC: JSON = {
    "replicas": 4,
    "tolerations": [{"key": "example.com/dedicated", "operator": "Exists"}],
    "modelCacheRef": {"name": CACHE},
    "engines": [
        {
            "name": "prefill",
            "copies": 1,
            "members": [
                {
                    "role": "Standalone",
                    "nodeSelector": {
                        "devices": [
                            _select(
                                f'device.capacity["{GPU}"].memory.compareTo(quantity("40Gi")) >= 0'
                            )
                        ]
                    },
                    "template": _template(IMAGE),
                }
            ],
        },
        {**SHAPES[3]["engines"][0], "name": "decode"},
    ],
}


def deployment(name: str, namespace: str, spec: JSON) -> JSON:
    return {
        "apiVersion": API,
        "kind": "ModelDeployment",
        "metadata": _meta("ModelDeployment", name, namespace),
        "spec": {**spec, "modelCacheRef": {"name": CACHE}},
    }


def model_cache(namespace: str, clusters: list[str]) -> JSON:
    """The team's ModelCache (no clusterSelector), staged (Ready) on ``clusters``."""
    return {
        "apiVersion": API,
        "kind": "ModelCache",
        "metadata": _meta("ModelCache", CACHE, namespace),
        "spec": {
            "source": "HuggingFace",
            "huggingFace": {"repo": "meta-llama/Llama-3.3-70B-Instruct", "sizeGiB": 160},
        },
        "status": {
            "conditions": _conditions(("ClustersMatched", "Matched"), ("ArtifactReady", "Staged")),
            "summary": {"ready": f"{len(clusters)}/{len(clusters)}"},
            "clusters": [{"name": c, "phase": "Ready"} for c in clusters],
        },
    }


def _in_process(
    function: CompositionFunction, xr: JSON, objects: list[JSON]
) -> fnv1.RunFunctionResponse:
    """One reconcile of ``xr`` by ``function`` in this process, requirements resolved from
    ``objects`` (only to learn the shapes a function composes; never measured)."""
    request = fnv1.RunFunctionRequest(
        observed=fnv1.State(composite=fnv1.Resource(resource=to_struct(xr)))
    )
    return run_with_requirements(function.run, request, ResourcePool(objects))


@dataclasses.dataclass
class Shape:
    """What one deployment shape's replica looks like: the ModelReplica compose-model-deployment
    composes (on TEMPLATE_CLUSTER, index 0), the status compose-model-replica publishes, and
    the Objects it composes, by composition-resource name."""

    replica: JSON
    status: JSON
    objects: dict[str, JSON]


def learn_shapes() -> list[Shape]:
    # The in-process runs log each decision to stdout; this process prints only results.
    configure_logging(debug=False, stream=io.StringIO())
    published = _published_pools()
    template = cluster(-1, published)
    shapes = []
    for k, spec in enumerate(SHAPES):
        dep = deployment(f"shape-{k}", MEASURED_NAMESPACE, {"replicas": 1, **spec})
        pool = [
            *inference_classes(),
            template,
            *capacity_summaries([template], []),
            model_cache(MEASURED_NAMESPACE, [TEMPLATE_CLUSTER]),
        ]
        rsp = _in_process(ModelDeploymentFunction(), dep, pool)
        composed = [
            to_plain(r.resource)
            for key, r in rsp.desired.resources.items()
            if key.startswith("replica-")
        ]
        if len(composed) != 1:
            raise RuntimeError(f"shape {k}: compose-model-deployment placed {len(composed)}")
        replica = composed[0]
        replica["metadata"] = _meta(
            "ModelReplica",
            replica["metadata"]["name"],
            MEASURED_NAMESPACE,
            labels=replica["metadata"]["labels"],
        )
        out = _in_process(ModelReplicaFunction(), replica, pool)
        objects = {key: to_plain(r.resource) for key, r in out.desired.resources.items()}
        if not objects:
            raise RuntimeError(f"shape {k}: compose-model-replica composed nothing")
        status = to_plain(out.desired.composite.resource).get("status") or {}
        status["conditions"] = _conditions(
            *((c.type, c.reason) for c in out.conditions if c.type not in ("Ready", "Synced"))
        )
        shapes.append(Shape(replica, status, objects))
    return shapes


def _stamp_replica(shape: Shape, dep: str, namespace: str, where: str, index: int) -> JSON:
    body = copy.deepcopy(shape.replica)
    name = names.replica_name(dep, where, index)
    labels = names.labels(dep, where, index) | {
        CACHE_LABEL: CACHE,
        "crossplane.io/composite": dep,
    }
    body["metadata"] = _meta(
        "ModelReplica",
        name,
        namespace,
        labels=labels,
        annotations={"crossplane.io/composition-resource-name": names.replica_key(where, index)},
        ownerReferences=_owner("ModelDeployment", dep, _uid("ModelDeployment", namespace, dep)),
        finalizers=["composite.apiextensions.crossplane.io"],
    )
    body["spec"]["clusterName"] = where
    body["spec"]["crossplane"] = _crossplane_spec(
        "modelreplicas.modelplane.ai",
        [(OBJECT_API, "Object", f"{name}-{_suffix(name, key)}") for key in sorted(shape.objects)],
    )
    body["status"] = copy.deepcopy(shape.status)
    return body


def _owner(kind: str, name: str, uid: str) -> list[JSON]:
    return [
        {"apiVersion": API, "kind": kind, "name": name, "uid": uid, "controller": True,
         "blockOwnerDeletion": True}
    ]  # fmt: skip


def replica_objects(shape: Shape, replica: JSON) -> Iterator[JSON]:
    """The provider-kubernetes Objects compose-model-replica composes for ``replica``, as
    observed: Crossplane's name, labels and owner, and the provider's status."""
    name = replica["metadata"]["name"]
    namespace = replica["metadata"]["namespace"]
    where = replica["spec"]["clusterName"]
    # The template's name and namespace are in the manifests (names, tenant namespace).
    text = json.dumps(shape.objects)
    text = text.replace(shape.replica["metadata"]["name"], name)
    text = text.replace(json.dumps(MEASURED_NAMESPACE), json.dumps(namespace))
    for key, obj in sorted(json.loads(text).items()):
        obj["metadata"] = _meta(
            "Object",
            f"{name}-{_suffix(name, key)}",
            namespace,
            labels={CLUSTER_LABEL: where, "crossplane.io/composite": name},
            annotations={"crossplane.io/composition-resource-name": key},
            ownerReferences=_owner("ModelReplica", name, replica["metadata"]["uid"]),
            finalizers=["finalizer.managedresource.crossplane.io"],
        )
        manifest = obj["spec"]["forProvider"]["manifest"]
        remote = {"uid": _uid("remote", name, key), "resourceVersion": "4711",
                  "creationTimestamp": CREATED}  # fmt: skip
        obj["status"] = {
            "conditions": _conditions(),
            "atProvider": {"manifest": {**manifest, "metadata": manifest["metadata"] | remote}},
        }
        yield obj


def cache_objects(where: str, namespace: str) -> list[JSON]:
    """A staged cache's Object on ``where``: the PVC (the Job is gone once Ready)."""
    name = f"{CACHE}-{_suffix(namespace, where)}"
    return [
        {
            "apiVersion": OBJECT_API,
            "kind": "Object",
            "metadata": _meta(
                "Object",
                name,
                namespace,
                labels={CACHE_CLUSTER_LABEL: where, "crossplane.io/composite": CACHE},
            ),
            "spec": {
                "providerConfigRef": {
                    "kind": "ClusterProviderConfig",
                    "name": cluster_resources.provider_config_name(where),
                },
                "forProvider": {
                    "manifest": {
                        "apiVersion": "v1",
                        "kind": "PersistentVolumeClaim",
                        "metadata": {
                            "name": CACHE,
                            "namespace": namespace,
                            "labels": {CACHE_LABEL: CACHE},
                        },
                        "spec": {
                            "accessModes": ["ReadWriteMany"],
                            "resources": {"requests": {"storage": "160Gi"}},
                        },
                    }
                },
            },
            "status": {"conditions": _conditions()},
        }
    ]


@dataclasses.dataclass
class Fleet:
    """Every object Crossplane could fetch, and the XRs the functions are measured on."""

    clusters: int
    replicas: int
    objects: list[JSON]
    xrs: dict[str, JSON]  # function name -> the XR it reconciles


def build(
    clusters: int, shapes: list[Shape], measured_cluster: int = 0, deployments: int = DEPLOYMENTS
) -> Fleet:
    """The fleet at ``clusters`` clusters with ``deployments`` x 10 replicas of other
    deployments, and the XR each measured function reconciles (its first reconcile).
    Objects are stamped only for the replicas and caches on ``measured_cluster``: only
    compose-inference-cluster selects Objects, and only its own cluster's."""
    published = _published_pools()
    fleet_clusters = [cluster(i, published) for i in range(clusters)]
    names_ = [cluster_name(i) for i in range(clusters)]
    measured = names_[measured_cluster]
    objects: list[JSON] = [
        *inference_classes(),
        *fleet_clusters,
        *(provider_config(c) for c in fleet_clusters),
    ]
    count = 0
    on_measured: list[JSON] = []
    for d in range(deployments):
        shape = shapes[d % len(shapes)]
        namespace = NAMESPACES[d % len(NAMESPACES)]
        dep = f"model-{d:04}"
        backends = []
        for index in range(REPLICAS_PER_DEPLOYMENT):
            where = names_[(d * REPLICAS_PER_DEPLOYMENT + index) % clusters]
            replica = _stamp_replica(shape, dep, namespace, where, index)
            objects.append(replica)
            count += 1
            backends.append(replica["metadata"]["name"])
            if where == measured:
                on_measured.append(replica)
                objects.extend(replica_objects(shape, replica))
        objects.append(_route(namespace, dep, backends))
    # Without a clusterSelector a cache is staged where replicas mounting it run (on demand).
    staged: dict[str, set[str]] = {}
    for obj in objects:
        if obj["kind"] == "ModelReplica":
            staged.setdefault(obj["metadata"]["namespace"], set()).add(obj["spec"]["clusterName"])
    objects += [model_cache(ns, sorted(staged.get(ns, ()))) for ns in NAMESPACES]
    for namespace in NAMESPACES:
        if measured in staged.get(namespace, ()):
            objects.extend(cache_objects(measured, namespace))
    objects.extend(capacity_summaries(fleet_clusters, objects))
    xrs = {
        "compose-model-deployment": deployment(
            MEASURED_DEPLOYMENT, MEASURED_NAMESPACE, MEASURED_SPEC
        ),
        "compose-model-cache": next(
            o
            for o in objects
            if o["kind"] == "ModelCache" and o["metadata"]["namespace"] == MEASURED_NAMESPACE
        ),
        "compose-inference-cluster": fleet_clusters[measured_cluster],
    }
    if on_measured:
        # Reads its cluster and its ModelCache by name; the cache lists every cluster.
        xrs["compose-model-replica"] = on_measured[0]
    for obj in objects:
        # As the API server returns them: who applied what (Crossplane composes most of them).
        status = obj.get("status") if isinstance(obj.get("status"), dict) else None
        obj["metadata"]["managedFields"] = _managed_fields(obj, status)
    return Fleet(clusters, count, objects, xrs)


def capacity_summaries(clusters: list[JSON], objects: list[JSON]) -> list[JSON]:
    """Each cluster's capacity and cache summary ConfigMaps as compose-inference-cluster
    composes them from the replicas pinned to the cluster and the caches' Objects on it, with
    the metadata the API server and Crossplane add. Every cache is staged where it is mounted
    (the steady state) but the measured namespace's, staged nowhere yet: ``restage`` says where
    it is as it is reconciled."""
    replicas = [o for o in objects if o["kind"] == "ModelReplica"]
    staged = [
        _as_staged(replica)
        for replica in replicas
        if replica["metadata"]["namespace"] != MEASURED_NAMESPACE
        and replica["metadata"].get("labels", {}).get(CACHE_LABEL)
    ]
    out = capacity_summary.summaries([*clusters, *replicas, *staged])
    pairs = zip(out[0::2], out[1::2], strict=True)
    for (capacity, caches), cluster_ in zip(pairs, clusters, strict=True):
        name = cluster_["metadata"]["name"]
        for summary, key in ((capacity, "capacity-summary"), (caches, "cache-summary")):
            meta = summary["metadata"]
            summary["metadata"] = _meta(
                "ConfigMap",
                meta["name"],
                meta["namespace"],
                labels=meta["labels"] | {"crossplane.io/composite": name},
                annotations={"crossplane.io/composition-resource-name": key},
                ownerReferences=_owner("InferenceCluster", name, cluster_["metadata"]["uid"]),
            )
    return out


def _as_staged(replica: JSON) -> JSON:
    """What a summary reads of the Object of the cache ``replica`` mounts on its cluster."""
    return {
        "kind": "Object",
        "metadata": {
            "namespace": replica["metadata"]["namespace"],
            "labels": {CACHE_CLUSTER_LABEL: replica["spec"]["clusterName"]},
        },
        "spec": {"forProvider": {"manifest": {"metadata": {"labels": {CACHE_LABEL: CACHE}}}}},
    }


def restage(objects: list[JSON], clusters: set[str]) -> None:
    """The cache summaries of ``clusters`` published again once the measured namespace's
    cache has an Object there (in place: the objects Crossplane fetches from)."""
    label = capacity_summary.cache_label(MEASURED_NAMESPACE, CACHE)
    names = {capacity_summary.cache_configmap_name(c) for c in clusters}
    for obj in objects:
        if obj["kind"] == "ConfigMap" and obj["metadata"]["name"] in names:
            labels = obj["metadata"]["labels"]
            if label in labels:  # mounted there
                labels[label] = capacity_summary.CACHE_STAGED


def _route(namespace: str, dep: str, backends: list[str]) -> JSON:
    """The HTTPRoute a ModelService composes for a deployment: one rule, a backend a replica."""
    return {
        "apiVersion": "gateway.networking.k8s.io/v1",
        "kind": "HTTPRoute",
        "metadata": _meta(
            "HTTPRoute", f"{dep}-svc", namespace, labels={"crossplane.io/composite": f"{dep}-svc"}
        ),
        "spec": {
            "parentRefs": [{"name": "modelplane", "namespace": "modelplane-system"}],
            "rules": [
                {
                    "matches": [{"path": {"type": "PathPrefix", "value": f"/{namespace}/{dep}/"}}],
                    "backendRefs": [{"name": b, "port": 8000, "weight": 1} for b in backends],
                }
            ],
        },
        "status": {
            "parents": [
                {
                    "parentRef": {"name": "modelplane"},
                    "controllerName": "gateway.envoyproxy.io/gatewayclass-controller",
                    "conditions": _conditions(),
                }
            ]
        },
    }


# --- the steady state: what a function's composed resources look like once observed --------

# What the provider reports of a remote object it created, by kind (status only).
_REMOTE_STATUS: dict[str, JSON] = {
    "PersistentVolumeClaim": {"phase": "Bound", "accessModes": ["ReadWriteMany"],
                              "capacity": {"storage": "160Gi"}},
    "Job": {"succeeded": 1, "startTime": CREATED, "completionTime": CREATED,
            "conditions": [{"type": "Complete", "status": "True", "lastTransitionTime": CREATED}]},
    "Deployment": {"replicas": 1, "readyReplicas": 1, "availableReplicas": 1,
                   "updatedReplicas": 1, "observedGeneration": 1},
}  # fmt: skip


def _fields(value: Any) -> JSON:
    """Server-side apply's ``fieldsV1`` for ``value``: every map key as ``f:<key>``."""
    if not isinstance(value, dict):
        return {}
    return {f"f:{key}": _fields(item) for key, item in value.items()}


def _managed_fields(body: JSON, status: JSON | None) -> list[JSON]:
    """Crossplane's apply of the composed resource and its controller's status update, as the
    API server records them (observed resources reach functions with them)."""
    applied = {k: v for k, v in body.items() if k not in ("apiVersion", "kind", "status")}
    common = {"apiVersion": body.get("apiVersion", ""), "time": CREATED, "fieldsType": "FieldsV1"}
    out = [
        {"manager": "apiextensions.crossplane.io/composed", "operation": "Apply", **common,
         "fieldsV1": _fields(applied)},
    ]  # fmt: skip
    if status:
        out.append(
            {"manager": "controller", "operation": "Update", **common,
             "fieldsV1": _fields({"status": status}), "subresource": "status"}
        )  # fmt: skip
    return out


def observed_as_reported(xr: JSON, key: str, body: JSON) -> JSON:
    """A composed resource as Crossplane observes it once its controller acted: the name,
    labels, annotation and owner Crossplane gives it, the API server's metadata and
    ``managedFields``, Synced and Ready, and for a provider-kubernetes Object the remote object
    as the provider reports it."""
    xr_meta = xr["metadata"]
    desired_meta = body.get("metadata") or {}
    name = desired_meta.get("name") or f"{xr_meta['name']}-{_suffix(xr_meta['name'], key)}"
    namespace = desired_meta.get("namespace") or xr_meta.get("namespace")
    seen = copy.deepcopy(body)
    status: JSON = {}
    if body.get("kind") == "Object":
        manifest = body["spec"]["forProvider"]["manifest"]
        remote = {"uid": _uid("remote", name, key), "resourceVersion": "4711",
                  "creationTimestamp": CREATED}  # fmt: skip
        reported = {**manifest, "metadata": (manifest.get("metadata") or {}) | remote}
        if manifest.get("kind") in _REMOTE_STATUS:
            reported["status"] = _REMOTE_STATUS[manifest["kind"]]
        status = {"conditions": _conditions(), "atProvider": {"manifest": reported}}
    elif body.get("kind") != "ConfigMap":
        status = {"conditions": _conditions()}
    seen["metadata"] = _meta(
        str(body.get("kind")),
        name,
        namespace,
        labels=(desired_meta.get("labels") or {}) | {"crossplane.io/composite": xr_meta["name"]},
        annotations=(desired_meta.get("annotations") or {})
        | {"crossplane.io/composition-resource-name": key},
        ownerReferences=_owner(xr["kind"], xr_meta["name"], xr_meta.get("uid", "")),
        managedFields=_managed_fields(body, status or None),
    )
    if status:
        seen["status"] = status
    return seen
