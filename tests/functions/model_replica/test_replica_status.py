"""Status from observed remote objects, and nothing lost when inputs go bad (through gRPC)."""

from __future__ import annotations

import copy

from modelplane_common.observed import held
from replica_support import (
    cluster,
    example,
    observed_object,
    ready_cluster,
    request,
    summarize,
)

CLUSTER = "gke-us-central"


def _compose(stub, xr, clusters=None, observed=None):
    clusters = [cluster(CLUSTER)] if clusters is None else clusters
    return summarize(stub.RunFunction(request(xr, clusters, observed), timeout=30))


def _conditions(summary):
    return {
        c["type"]: (c["status"], c["reason"], c.get("message", "")) for c in summary["conditions"]
    }


def _observe_all(summary, *, ready_keys=(), remote_status=None, synced_errors=None):
    """Observed Objects for every desired one: created, ready where asked."""
    observed = {}
    for index, (key, resource) in enumerate(summary["resources"].items()):
        observed[key] = observed_object(
            resource["object"],
            name=f"obj-{index}",
            ready=key in ready_keys,
            remote_status=(remote_status or {}).get(key),
            synced_error=(synced_errors or {}).get(key),
        )
    return observed


def test_all_workloads_available_makes_the_replica_serving(stub):
    xr = example("prefill-decode")
    first = _compose(stub, xr)
    observed = _observe_all(
        first, ready_keys={"model-serving-prefill", "model-serving-decode", "epp"}
    )
    summary = _compose(stub, xr, observed=observed)
    assert _conditions(summary) == {
        "ModelAccepted": ("True", "Accepted", ""),
        "ModelReady": ("True", "Serving", ""),
    }
    assert {k: r["ready"] for k, r in summary["resources"].items()} == dict.fromkeys(
        first["resources"], "True"
    )
    assert not [r for r in summary["results"] if r.get("reason") == "Composing"]
    # Stable across reconciles: observing the objects changes none of them.
    assert {k: r["object"] for k, r in summary["resources"].items()} == {
        k: r["object"] for k, r in first["resources"].items()
    }


def test_a_starting_workload_lifts_the_remote_deployment_conditions(stub):
    xr = example("two-engines")
    first = _compose(stub, xr)
    starting = {
        "replicas": 2,
        "readyReplicas": 1,
        "conditions": [
            {"type": "Progressing", "status": "True", "reason": "NewReplicaSetAvailable"},
            {
                "type": "Available",
                "status": "False",
                "reason": "MinimumReplicasUnavailable",
                "message": "Deployment does not have minimum availability.",
            },
        ],
    }
    observed = _observe_all(
        first,
        ready_keys={"model-serving-embed"},
        remote_status={"model-serving-chat": starting},
    )
    summary = _compose(stub, xr, observed=observed)
    status, reason, message = _conditions(summary)["ModelReady"]
    assert (status, reason) == ("False", "ModelStarting")
    assert message == (
        "model-serving-chat: Deployment qwen3-duo-14c0d-chat-32f5a, 1/2 ready, "
        "Available=False (MinimumReplicasUnavailable: Deployment does not have minimum "
        "availability.)"
    )
    assert _conditions(summary)["ModelAccepted"][:2] == ("True", "Accepted")
    ready = {k: r["ready"] for k, r in summary["resources"].items()}
    # Only engine workloads gate readiness; everything else is ready once it exists.
    assert ready["model-serving-chat"] == "False"
    assert ready["model-serving-embed"] == "True"
    assert ready["model-service"] == ready["model-route"] == "True"


def test_objects_not_yet_observed_leave_readiness_unset_and_say_deploying(stub):
    xr = example("standalone")
    first = _compose(stub, xr)
    observed = _observe_all(first)
    del observed["model-serving-main"]
    summary = _compose(stub, xr, observed=observed)
    assert summary["resources"]["model-serving-main"]["ready"] is None
    assert summary["resources"]["model-service"]["ready"] == "True"
    assert _conditions(summary)["ModelAccepted"] == (
        "False",
        "Deploying",
        "model-serving-main: not created yet",
    )
    assert ("NORMAL", "Composing vllm/vllm-openai:v0.11.0 on gke-us-central") in [
        (r["severity"], r["message"]) for r in summary["results"]
    ]


def test_a_provider_apply_error_is_reported_with_its_message(stub):
    xr = example("standalone")
    first = _compose(stub, xr)
    error = (
        "cannot create object: the server could not find the requested resource (post httproutes)"
    )
    observed = _observe_all(
        first, ready_keys={"model-serving-main"}, synced_errors={"model-route": error}
    )
    summary = _compose(stub, xr, observed=observed)
    assert ("WARNING", "ApplyFailed", f"model-route: cannot apply on gke-us-central: {error}") in [
        (r["severity"], r.get("reason"), r["message"]) for r in summary["results"]
    ]


def test_malformed_observed_objects_keep_every_object_and_say_why(stub):
    xr = example("gang-with-cache")
    first = _compose(stub, xr)
    observed = _observe_all(first)
    observed["model-serving-llama"]["status"]["atProvider"] = {"manifest": "not an object"}
    observed["model-service"]["status"] = "garbage"
    summary = _compose(stub, xr, observed=observed)
    assert {k: r["object"] for k, r in summary["resources"].items()} == {
        k: r["object"] for k, r in first["resources"].items()
    }
    assert _conditions(summary)["ModelAccepted"] == (
        "False",
        "Deploying",
        "model-serving-llama: observed Object has a malformed status.atProvider.manifest",
    )


# --------------------------------------------------------------------------------------------
# Nothing lost: every path that cannot compose normally keeps what exists


def _composed_and_observed(stub, case="gang-with-cache"):
    xr = example(case)
    first = _compose(stub, xr)
    return xr, first, _observe_all(first, ready_keys={"model-serving-llama"})


def _assert_held(summary, observed):
    assert {k: r["object"] for k, r in summary["resources"].items()} == {
        k: held(obj) for k, obj in observed.items()
    }


def test_lost_provider_config_keeps_every_object_unchanged(stub):
    xr, _, observed = _composed_and_observed(stub)
    lost = copy.deepcopy(cluster(CLUSTER))
    del lost["status"]["providerConfigRef"]
    summary = _compose(stub, xr, clusters=[lost], observed=observed)
    _assert_held(summary, observed)
    accepted = _conditions(summary)["ModelAccepted"]
    assert accepted[:2] == ("False", "WaitingForCluster")
    assert "providerConfigRef" in accepted[2]
    assert ("WARNING", "Holding") in [(r["severity"], r.get("reason")) for r in summary["results"]]
    # The workload that was serving stays marked ready: a provider-config flap is no outage.
    assert summary["resources"]["model-serving-llama"]["ready"] == "True"


def test_unresolved_or_deleted_cluster_keeps_every_object(stub):
    xr, _, observed = _composed_and_observed(stub)
    for clusters in (None, []):
        summary = summarize(stub.RunFunction(request(xr, clusters, observed), timeout=30))
        _assert_held(summary, observed)
        assert _conditions(summary)["ModelAccepted"][:2] == ("False", "WaitingForCluster")


def test_invalid_replica_keeps_every_object_and_names_the_field(stub):
    xr, _, observed = _composed_and_observed(stub)
    broken = copy.deepcopy(xr)
    broken["spec"]["engines"][0]["copies"] = 0
    summary = _compose(stub, broken, observed=observed)
    _assert_held(summary, observed)
    status, reason, message = _conditions(summary)["ModelAccepted"]
    assert (status, reason) == ("False", "InvalidSpec")
    assert "spec.engines[0].copies" in message


def test_provider_config_rename_moves_every_object_to_the_new_config(stub):
    xr = example("standalone")
    summary = _compose(stub, xr, clusters=[ready_cluster(provider_config="renamed-pc-12345")])
    refs = {r["object"]["spec"]["providerConfigRef"]["name"] for r in summary["resources"].values()}
    assert refs == {"renamed-pc-12345"}


def test_a_replica_that_bypassed_admission_is_reported_by_field_not_crashed(stub):
    xr, _, observed = _composed_and_observed(stub)
    split = copy.deepcopy(xr)
    split["spec"]["engines"][0]["members"][1]["nodePoolName"] = "h200"
    summary = _compose(stub, split, observed=observed)
    _assert_held(summary, observed)
    assert _conditions(summary)["ModelAccepted"] == (
        "False",
        "InvalidSpec",
        "invalid ModelReplica: spec.engines[0].members: all members of an engine must be "
        "pinned to the same node pool",
    )
    pd = example("prefill-decode")
    pd["spec"]["engines"][1]["phase"] = "Prefill"
    summary = _compose(stub, pd)
    assert summary["resources"] == {}
    assert summary["composite_ready"] == "False"
    assert (
        "PrefillDecode serving requires exactly two engines"
        in _conditions(summary)["ModelAccepted"][2]
    )
    assert not [r for r in summary["results"] if r["severity"] == "FATAL"]


def test_a_cache_the_engine_ignores_is_a_warning_and_composing_goes_on(stub):
    """D2: nothing is injected; the user is told, through the real interface, and nothing is
    held back."""
    xr = example("gang-with-cache")
    pointed = _compose(stub, xr)
    leader = xr["spec"]["engines"][0]["members"][0]["template"]["spec"]["containers"][0]
    leader["command"] = ["/bin/sh", "-c", "ray start --head && exec vllm serve meta-llama/70b"]
    summary = _compose(stub, xr)
    warnings = [r for r in summary["results"] if r["severity"] == "WARNING"]
    assert [r.get("reason") for r in warnings] == ["CacheNotReferenced"]
    assert "'llama'" in warnings[0]["message"] and "/mnt/models" in warnings[0]["message"]
    assert not [r for r in pointed["results"] if r.get("reason") == "CacheNotReferenced"]
    assert sorted(summary["resources"]) == sorted(pointed["resources"])
    lws = summary["resources"]["model-serving-llama"]["object"]["spec"]["forProvider"]["manifest"]
    (container,) = lws["spec"]["leaderWorkerTemplate"]["leaderTemplate"]["spec"]["containers"]
    assert container["command"] == leader["command"]  # never rewritten
    assert {"name": "model-cache", "mountPath": "/mnt/models"} in container["volumeMounts"]
