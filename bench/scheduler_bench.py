"""compose-model-deployment at fleet scale: one RunFunction over real gRPC.

The fleet: N clusters x 4 pools (L4, A100, H100 with an InfiniBand fabric, H200), 10% of
them tainted (NoSchedule and NoExecute, with their spec as the API server returns it), a
deployment of two engines (a Standalone "prefill" and a 2-node "decode" gang with a
claimless leader) at 4 replicas, and 1,000 replicas of other deployments spread over the
fleet. The baseline is the time this process needs just to decode the same request into
dicts (what any Python function pays before doing anything); the target is a whole call
within 1.5x of it.

Run: ``uv run python bench/scheduler_bench.py`` (``--clusters 50,500,5000`` to choose sizes).
"""

from __future__ import annotations

import argparse
import statistics
import time
from typing import Any

from compose_model_deployment.fn import ModelDeploymentFunction
from crossplane.function.proto.v1 import run_function_pb2 as fnv1
from modelplane_common.function import Request
from modelplane_common.serving import serve_in_background
from modelplane_common.testing import make_request

NAMESPACE = "ml-team"
GPU_CLASS = "gpu.nvidia.com"
TEMPLATE = {
    "metadata": {"labels": {"team": "ml"}},
    "spec": {
        "containers": [
            {
                "name": "engine",
                "image": "registry.example.com/vllm-kv:0.11",
                "args": ["--model=/mnt/models", "--max-model-len=32768"],
                "env": [{"name": "HF_HOME", "value": "/mnt/models/.hf"}],
            }
        ]
    },
}


def gpu(architecture: str, memory: str, count: int, cc: str) -> dict[str, Any]:
    return {
        "name": "gpu",
        "claim": "DRA",
        "driver": GPU_CLASS,
        "deviceClassName": GPU_CLASS,
        "count": count,
        "attributes": {
            "architecture": {"string": architecture},
            "cudaComputeCapability": {"version": cc},
            "productName": {"string": f"NVIDIA {architecture}"},
            "resource.kubernetes.io/pcieRoot": {"string": "pci0000:00"},
        },
        "capacity": {"memory": {"value": memory}},
    }


IB = {
    "name": "ib",
    "claim": "Synthetic",
    "driver": "nic.nvidia.com",
    "count": 8,
    "attributes": {"linkType": {"string": "infiniband"}},
    "capacity": {"bandwidth": {"value": "400G"}},
}
POOLS = [
    ("l4", [gpu("Ada Lovelace", "23034Mi", 1, "8.9.0")]),
    ("a100", [gpu("Ampere", "80Gi", 8, "8.0.0")]),
    ("h100-ib", [gpu("Hopper", "80Gi", 8, "9.0.0"), IB]),
    ("h200", [gpu("Hopper", "141Gi", 8, "9.0.0")]),
]


TAINTED_EVERY = 10  # taints on 10% of the clusters (issue 15)


def taints(i: int) -> list[dict[str, str]]:
    """Every tenth cluster is tainted, alternately NoSchedule (cordoned) and NoExecute
    (draining), so the scheduler reads and matches taints on a realistic share of the fleet."""
    if i % TAINTED_EVERY:
        return []
    effect = "NoSchedule" if (i // TAINTED_EVERY) % 2 else "NoExecute"
    return [
        {"key": "modelplane.ai/maintenance", "value": f"window-{i % 3}", "effect": effect},
        {"key": "example.com/dedicated", "value": "research", "effect": "NoSchedule"},
    ]


def cluster(i: int) -> dict[str, Any]:
    return {
        "apiVersion": "modelplane.ai/v1alpha1",
        "kind": "InferenceCluster",
        "metadata": {"name": f"cluster-{i:05}", "labels": {"region": f"r{i % 7}"}},
        "spec": {
            "cluster": {"source": "Existing", "existing": {"secretRef": {"name": f"kc-{i}"}}},
            "nodePools": [{"name": name, "className": name} for name, _ in POOLS],
            "taints": taints(i),
            "failoverGracePeriod": "10m",
        },
        "status": {
            "conditions": [{"type": "Ready", "status": "True", "reason": "Available"}],
            "gateway": {"address": f"10.{i // 250}.{i % 250}.1"},
            "providerConfigRef": {"name": f"cluster-{i:05}-kubeconfig"},
            "gpuPools": [
                {"name": name, "nodes": 4 + i % 3, "maxNodes": 8, "devices": devices}
                for name, devices in POOLS
            ],
        },
    }


def selector(cel: str, name: str = "gpu", count: int = 1) -> dict[str, Any]:
    return {"devices": [{"name": name, "count": count, "selectors": [{"cel": cel}]}]}


DEPLOYMENT_SPEC = {
    "replicas": 4,
    "tolerations": [{"key": "example.com/dedicated", "operator": "Exists"}],
    "modelCacheRef": {"name": "weights"},
    "engines": [
        {
            "name": "prefill",
            "copies": 1,
            "members": [
                {
                    "role": "Standalone",
                    "nodeSelector": selector(
                        'device.capacity["gpu.nvidia.com"].memory.compareTo(quantity("40Gi")) >= 0'
                    ),
                    "template": TEMPLATE,
                }
            ],
        },
        {
            "name": "decode",
            "copies": 1,
            "members": [
                {"role": "Leader", "template": TEMPLATE},
                {
                    "role": "Worker",
                    "worker": {"nodes": 2},
                    "nodeSelector": {
                        "devices": [
                            {
                                "name": "gpu",
                                "count": 8,
                                "selectors": [
                                    {
                                        "cel": 'device.attributes["gpu.nvidia.com"]'
                                        '.architecture == "Hopper"'
                                    }
                                ],
                            },
                            {
                                "name": "fabric",
                                "selectors": [
                                    {
                                        "cel": 'device.attributes["nic.nvidia.com"]'
                                        '.linkType == "infiniband"'
                                    }
                                ],
                            },
                        ]
                    },
                    "template": TEMPLATE,
                },
            ],
        },
    ],
}


def other_replica(i: int, clusters: int) -> dict[str, Any]:
    where = f"cluster-{(i * 7) % clusters:05}"
    pool = POOLS[i % 4][0]
    return {
        "apiVersion": "modelplane.ai/v1alpha1",
        "kind": "ModelReplica",
        "metadata": {
            "name": f"other-{i // 4}-{i:05}",
            "namespace": f"team-{i % 13}",
            "labels": {
                "modelplane.ai/deployment": f"other-{i // 4}",
                "modelplane.ai/cluster": where,
                "modelplane.ai/replica-index": "0",
            },
        },
        "spec": {
            "clusterName": where,
            "engines": [
                {
                    "name": "main",
                    "copies": 1,
                    "members": [
                        {
                            "role": "Standalone",
                            "nodePoolName": pool,
                            "deviceRequests": [
                                {
                                    "name": "gpu",
                                    "deviceClassName": GPU_CLASS,
                                    "count": 1,
                                    "selectors": [{"cel": 'device.driver == "gpu.nvidia.com"'}],
                                }
                            ],
                            "template": TEMPLATE,
                        }
                    ],
                }
            ],
        },
        "status": {"conditions": [{"type": "Ready", "status": "True"}]},
    }


def build_request(clusters: int, others: int = 1000) -> fnv1.RunFunctionRequest:
    xr = {
        "apiVersion": "modelplane.ai/v1alpha1",
        "kind": "ModelDeployment",
        "metadata": {"name": "llama-70b-pd", "namespace": NAMESPACE},
        "spec": DEPLOYMENT_SPEC,
    }
    return make_request(
        xr,
        required={
            "clusters": [cluster(i) for i in range(clusters)],
            "all-replicas": [other_replica(i, clusters) for i in range(others)],
        },
    )


def decode(request: fnv1.RunFunctionRequest) -> None:
    """The baseline: turn the request into plain dicts, as every function must."""
    view = Request(request)
    view.required("clusters")
    view.required("all-replicas")


def measure(clusters: int, runs: int) -> dict[str, float]:
    """Decode and call are measured alternately and the fastest of each is kept: on a shared
    machine the minimum is the estimate least disturbed by other load."""
    request = build_request(clusters)
    decodes, calls = [], []
    with serve_in_background(ModelDeploymentFunction()) as stub:
        start = time.perf_counter()
        first = stub.RunFunction(request, timeout=300)
        cold_ms = (time.perf_counter() - start) * 1000
        for _ in range(runs):
            start = time.perf_counter()
            decode(request)
            decodes.append((time.perf_counter() - start) * 1000)
            start = time.perf_counter()
            stub.RunFunction(request, timeout=300)
            calls.append((time.perf_counter() - start) * 1000)
    placed = sum(1 for key in first.desired.resources if key.startswith("replica-"))
    assert placed == 4, f"expected 4 replicas placed, got {placed}"
    return {
        "clusters": clusters,
        "bytes": request.ByteSize(),
        "decode": min(decodes),
        "decode_median": statistics.median(decodes),
        "cold": cold_ms,
        "call": min(calls),
        "call_median": statistics.median(calls),
        "ratio": min(calls) / min(decodes),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--clusters", default="50,500,5000")
    parser.add_argument("--runs", type=int, default=7)
    args = parser.parse_args()
    print(
        f"{'clusters':>8} {'request':>8} {'decode ms':>10} {'call ms':>8} {'call/decode':>11}"
        f" {'first call ms':>13} {'median decode/call ms':>22}"
    )
    for count in (int(c) for c in args.clusters.split(",")):
        row = measure(count, args.runs)
        print(
            f"{row['clusters']:>8} {row['bytes'] / 1e6:>7.1f}M {row['decode']:>10.1f} "
            f"{row['call']:>8.1f} {row['ratio']:>10.2f}x {row['cold']:>13.1f} "
            f"{row['decode_median']:>12.1f} / {row['call_median']:<8.1f}"
        )


if __name__ == "__main__":
    main()
