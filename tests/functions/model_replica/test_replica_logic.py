"""Pure planning rules of compose-model-replica that the golden cases do not pin down."""

from __future__ import annotations

import copy

import pytest
from compose_model_replica import names
from compose_model_replica.dra import driver_selectors
from compose_model_replica.plan import plan_replica
from compose_model_replica.routing import block_size
from modelplane_schemas.generated.modelplane_ai.v1alpha1.modelreplica import (
    DeviceRequest,
    ModelReplica,
)
from replica_support import example, manifest_problems


def _plan(xr: dict, name: str | None = None, namespace: str = "ml-team"):
    replica = ModelReplica.model_validate({"spec": xr["spec"]})
    return plan_replica(replica, name or xr["metadata"]["name"], namespace)


def _serving_template(workload: dict) -> dict:
    if workload["kind"] == "LeaderWorkerSet":
        return workload["spec"]["leaderWorkerTemplate"]["leaderTemplate"]
    return workload["spec"]["template"]


# --------------------------------------------------------------------------------------------
# Reading the user's flags


@pytest.mark.parametrize(
    ("args", "expected"),
    [
        ([], 16),
        (["--block-size=32"], 32),
        (["--block-size", "64"], 64),
        (["--page-size", "8"], 8),
        (["--block-size=auto", "--page-size=128"], 128),
        (["--block-size"], 16),
        (["--block-size-extra=9"], 16),
        (["--block-size=0"], 16),
    ],
)
def test_block_size_comes_from_the_first_parsable_flag(args, expected):
    assert block_size(args) == expected


def test_prefill_decode_reads_the_block_size_and_never_rewrites_args():
    xr = example("prefill-decode")
    decode = xr["spec"]["engines"][1]["members"][0]["template"]["spec"]["containers"][0]
    decode["args"] = ["--model=m", "--port=8001", "--page-size=64"]
    plan = _plan(xr)
    template = _serving_template(plan.manifests["model-serving-decode"])
    engine, sidecar = template["spec"]["containers"]
    assert engine["ports"] == [{"name": "engine", "containerPort": 8001}]
    assert sidecar["args"][0] == "--port=8000"
    assert sidecar["args"][-1] == "--vllm-port=8001"
    assert '"blockSizeTokens": 64' in plan.manifests["epp-config"]["data"]["pd-epp-config.yaml"]
    assert engine["args"] == ["--model=m", "--port=8001", "--page-size=64"]  # never rewritten


def test_user_nixl_settings_are_not_duplicated():
    xr = example("prefill-decode")
    container = xr["spec"]["engines"][0]["members"][0]["template"]["spec"]["containers"][0]
    container["env"] = [{"name": "VLLM_NIXL_SIDE_CHANNEL_PORT", "value": "6000"}]
    env = _serving_template(_plan(xr).manifests["model-serving-prefill"])["spec"]["containers"][0][
        "env"
    ]
    assert [e["name"] for e in env] == [
        "VLLM_NIXL_SIDE_CHANNEL_PORT",
        "VLLM_NIXL_SIDE_CHANNEL_HOST",
    ]
    assert env[0]["value"] == "6000"


def test_prefill_decode_gang_decorates_only_the_leader():
    xr = example("prefill-decode")
    gang = copy.deepcopy(example("gang-with-cache")["spec"]["engines"][0])
    gang.update(name="decode", phase="Decode", copies=1)
    xr["spec"]["engines"][1] = gang
    xr["spec"]["modelCacheRef"] = {"name": "llama-8b"}
    lws = _plan(xr).manifests["model-serving-decode"]
    leader = lws["spec"]["leaderWorkerTemplate"]["leaderTemplate"]
    worker = lws["spec"]["leaderWorkerTemplate"]["workerTemplate"]
    assert leader["metadata"]["labels"]["llm-d.ai/role"] == "decode"
    assert [c["name"] for c in leader["spec"]["containers"]] == ["engine", "pd-sidecar"]
    assert "metadata" not in worker
    assert [c["name"] for c in worker["spec"]["containers"]] == ["engine"]
    # Followers hold KV cache too: NIXL must reach them at their own pod IP.
    worker_env = {e["name"]: e for e in worker["spec"]["containers"][0]["env"]}
    assert worker_env["VLLM_NIXL_SIDE_CHANNEL_HOST"]["valueFrom"] == {
        "fieldRef": {"fieldPath": "status.podIP"}
    }
    assert manifest_problems(lws) == []


# --------------------------------------------------------------------------------------------
# DRA selectors


MEMORY_80GI = 'device.capacity["gpu.nvidia.com"].memory.compareTo(quantity("80Gi")) >= 0'


def test_modelplane_selectors_never_reach_the_cluster():
    request = DeviceRequest.model_validate(
        {
            "name": "gpu",
            "deviceClassName": "gpu.nvidia.com",
            "selectors": [
                {"cel": 'device.attributes["modelplane.ai"].gpusPerNode >= 8'},
                {"cel": 'device.attributes["gpu.nvidia.com"].architecture == "Hopper"'},
                {"cel": "device.attributes['modelplane.ai/fabric'] == 'ib'"},
                {"cel": MEMORY_80GI},
            ],
        }
    )
    assert driver_selectors(request) == [
        'device.attributes["gpu.nvidia.com"].architecture == "Hopper"',
        MEMORY_80GI,
    ]


def test_a_request_left_without_selectors_is_still_claimed():
    xr = example("standalone")
    request = xr["spec"]["engines"][0]["members"][0]["deviceRequests"][0]
    request["selectors"] = [{"cel": 'device.attributes["modelplane.ai"].nodes >= 1'}]
    claim = _plan(xr).manifests["resource-claim-main-standalone"]
    assert claim["spec"]["spec"]["devices"]["requests"] == [
        {"name": "gpu", "exactly": {"deviceClassName": "gpu.nvidia.com", "count": 1}}
    ]


# --------------------------------------------------------------------------------------------
# Cache and labels


def test_a_cache_nobody_points_at_is_warned_about_per_engine():
    xr = example("gang-with-cache")
    leader = xr["spec"]["engines"][0]["members"][0]["template"]["spec"]["containers"][0]
    leader["command"] = ["/bin/sh", "-c", "ray start --head && exec vllm serve meta-llama/70b"]
    (warning,) = _plan(xr).warnings
    assert warning.reason == "CacheNotReferenced"
    assert "'llama'" in warning.message
    assert "/mnt/models" in warning.message


def test_no_cache_means_no_cache_volume_and_no_warning():
    plan = _plan(example("two-engines"))
    assert plan.warnings == []
    for key in ("model-serving-chat", "model-serving-embed"):
        spec = _serving_template(plan.manifests[key])["spec"]
        assert [v["name"] for v in spec["volumes"]] == ["dshm"]


def test_user_labels_cannot_claim_modelplane_or_llm_d_keys():
    xr = example("gang-with-cache")
    worker = xr["spec"]["engines"][0]["members"][1]
    worker["template"]["metadata"] = {
        "labels": {
            "modelplane.ai/serving": "llama-70b-6098a",
            "llm-d.ai/inference-serving": "true",
            "team": "infra",
        }
    }
    lws = _plan(xr).manifests["model-serving-llama"]
    assert lws["spec"]["leaderWorkerTemplate"]["workerTemplate"]["metadata"] == {
        "labels": {"team": "infra"}
    }


# --------------------------------------------------------------------------------------------
# Names and isolation


def test_a_change_to_one_engine_changes_only_its_objects():
    before = _plan(example("two-engines")).manifests
    xr = example("two-engines")
    container = xr["spec"]["engines"][1]["members"][0]["template"]["spec"]["containers"][0]
    container["args"] = ["--model=Qwen/Qwen3-Embedding-4B", "--task=embed"]
    xr["spec"]["engines"][1]["members"][0]["deviceRequests"][0]["count"] = 2
    after = _plan(xr).manifests
    changed = sorted(k for k in before if before[k] != after[k])
    assert changed == ["model-serving-embed", "resource-claim-embed-standalone"]


@pytest.mark.parametrize(
    ("case", "engine"),
    [("prefill-decode", 0), ("prefill-decode", 1), ("gang-with-cache", 0)],
)
def test_a_template_edit_under_shared_routing_changes_only_that_engines_workload(case, engine):
    """PrefillDecode's pool, picker and route front both engines; a gang has two templates."""
    before = _plan(example(case)).manifests
    xr = example(case)
    edited = xr["spec"]["engines"][engine]
    for member in edited["members"]:
        container = member["template"]["spec"]["containers"][0]
        container["image"] += "-rc1"
        container.setdefault("env", []).append({"name": "LOG_LEVEL", "value": "debug"})
        member["template"].setdefault("metadata", {})["annotations"] = {"team": "ml"}
    after = _plan(xr).manifests
    assert sorted(after) == sorted(before)
    assert sorted(k for k in before if before[k] != after[k]) == [f"model-serving-{edited['name']}"]


def test_suffixed_names_fall_back_to_hashes_past_63_characters():
    replica = "a" * 57 + "-1b2c3"  # a 63-character replica name
    assert len(names.pool_name(replica)) <= 63
    assert names.pool_name(replica) != names.picker_name(replica)
    assert names.pool_name("llama-8b-pd-a46a6") == "llama-8b-pd-a46a6-pool"
    xr = example("prefill-decode")
    plan = _plan(xr, name=replica)
    pool = plan.manifests["inference-pool"]
    picker = names.picker_name(replica)
    assert pool["metadata"]["name"] == names.pool_name(replica)
    assert pool["spec"]["endpointPickerRef"]["name"] == picker
    route_backend = plan.manifests["model-route"]["spec"]["rules"][0]["backendRefs"][0]
    assert route_backend["name"] == names.pool_name(replica)
    epp_args = plan.manifests["epp"]["spec"]["template"]["spec"]["containers"][0]["args"]
    assert f"--pool-name={names.pool_name(replica)}" in epp_args
    assert plan.manifests["epp-rolebinding"]["subjects"][0]["name"] == picker
    for key, manifest in plan.manifests.items():
        assert len(manifest["metadata"]["name"]) <= 63, key
        assert manifest_problems(manifest) == [], key


def test_workload_names_never_collide_with_the_serving_service():
    for replica in ("r", "llama-70b-6098a", "x" * 63):
        workload = names.workload_name(replica, "main")
        assert workload not in (replica, names.pool_name(replica), names.picker_name(replica))
