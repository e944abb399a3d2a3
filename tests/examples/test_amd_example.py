"""examples/amd-mi300x: an AMD MI300X pool served end to end in `modelplane simulate` (real
gRPC functions), and what its README promises."""

from __future__ import annotations

from typing import Any

from modelplane.kube import condition

JSON = dict[str, Any]
AMD_TOLERATION = {"key": "amd.com/gpu", "operator": "Exists", "effect": "NoSchedule"}


def _objects(converged_example) -> list[JSON]:
    return converged_example("amd-mi300x").objects


def _all(objects: list[JSON], kind: str) -> list[JSON]:
    return [o for o in objects if o["kind"] == kind]


def _owned_by(objects: list[JSON], owner: JSON) -> list[JSON]:
    uid = owner["metadata"]["uid"]
    return [
        o
        for o in objects
        if any(r.get("uid") == uid for r in o["metadata"].get("ownerReferences") or [])
    ]


def test_the_stack_installs_amds_dra_driver_and_not_nvidias(converged_example) -> None:
    objects = _objects(converged_example)
    (stack,) = _all(objects, "ServingStack")
    assert stack["spec"]["draDrivers"] == ["gpu.amd.com"]
    releases = {
        r["metadata"]["labels"]["modelplane.ai/resource"]: r["spec"]["forProvider"]
        for r in _owned_by(objects, stack)
        if r["kind"] == "Release"
    }
    amd = releases["amd-gpu-dra-driver"]
    assert (amd["chart"]["name"], amd["chart"]["version"], amd["namespace"]) == (
        "k8s-gpu-dra-driver", "v1.0.1", "kube-amd-gpu"
    )  # fmt: skip
    assert "dra-driver" not in releases  # NVIDIA's


def test_both_replicas_land_on_the_mi300x_pool_claiming_amd_gpus(converged_example) -> None:
    objects = _objects(converged_example)
    (cluster,) = _all(objects, "InferenceCluster")
    (pool,) = cluster["status"]["gpuPools"]
    assert pool["devices"][0]["capacity"]["memory"] == {"value": "192Gi"}
    replicas = _all(objects, "ModelReplica")
    assert sorted(r["spec"]["clusterName"] for r in replicas) == ["lab-mi300x", "lab-mi300x"]
    (deployment,) = _all(objects, "ModelDeployment")
    assert deployment["status"]["replicas"] == {"total": 2, "ready": 2}
    assert condition(deployment, "ReplicasScheduled")["message"] == "Scheduled 2 of 2 replicas"
    for replica in replicas:
        manifests = [
            o["spec"]["forProvider"]["manifest"]
            for o in _owned_by(objects, replica)
            if o["kind"] == "Object"
        ]
        (template,) = [m for m in manifests if m["kind"] == "ResourceClaimTemplate"]
        (request,) = template["spec"]["spec"]["devices"]["requests"]
        assert request["exactly"]["deviceClassName"] == "gpu.amd.com"
        (workload,) = [m for m in manifests if m["kind"] == "Deployment"]
        pod = workload["spec"]["template"]["spec"]
        assert pod["nodeSelector"] == {"modelplane.ai/pool": "mi300x"}
        assert AMD_TOLERATION in pod["tolerations"]
        assert pod["containers"][0]["image"].startswith("rocm/vllm:")
