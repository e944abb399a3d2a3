"""Issue 21 through gRPC: a replica's remote objects live in its own namespace (D10), its pods
start only where its ModelCache is staged (D12), and a replica made before D10 in the shared
namespace is kept exactly as it runs."""

from __future__ import annotations

import copy

import pytest
from modelplane_common.plain import to_plain
from replica_support import (
    cluster,
    example,
    manifest_of,
    observed_object,
    request,
    staged_cache,
    summarize,
)

CLUSTER = "gke-us-central"


def _run(stub, xr, observed=None, caches="staged"):
    rsp = stub.RunFunction(request(xr, [cluster(CLUSTER)], observed, caches=caches), timeout=30)
    return rsp, summarize(rsp)


def _conditions(summary):
    return {c["type"]: (c["status"], c["reason"]) for c in summary["conditions"]}


def _in_namespace(xr, namespace):
    moved = copy.deepcopy(xr)
    moved["metadata"]["namespace"] = namespace
    return moved


@pytest.mark.parametrize("case", ["standalone", "two-engines", "prefill-decode", "gang-with-cache"])
def test_every_remote_object_lives_in_the_replicas_own_namespace(stub, case):
    for namespace in ("team-a", "team-b"):
        rsp, summary = _run(stub, _in_namespace(example(case), namespace))
        manifests = [manifest_of(r["object"]) for r in summary["resources"].values()]
        assert manifests
        assert {m["metadata"]["namespace"] for m in manifests} == {namespace}
        status = to_plain(rsp.desired.composite.resource)["status"]
        assert status["remoteNamespace"] == namespace


def test_two_teams_with_the_same_names_share_no_remote_object(stub):
    seen = {}
    for namespace in ("team-a", "team-b", "team-c"):
        _, summary = _run(stub, _in_namespace(example("prefill-decode"), namespace))
        for resource in summary["resources"].values():
            m = manifest_of(resource["object"])
            identity = (
                m["apiVersion"],
                m["kind"],
                m["metadata"]["namespace"],
                m["metadata"]["name"],
            )
            assert identity not in seen, f"{identity} composed for {seen.get(identity)} too"
            seen[identity] = namespace
        # The picker reads its pool and the RoleBinding names its account in that namespace.
        picker = next(
            manifest_of(r["object"]) for k, r in summary["resources"].items() if k == "epp"
        )
        args = picker["spec"]["template"]["spec"]["containers"][0]["args"]
        assert f"--pool-namespace={namespace}" in args


@pytest.mark.parametrize(
    "namespace", ["kube-system", "kube-anything", "modelplane-system", "lws-system"]
)
def test_a_reserved_namespace_is_refused_with_a_condition_naming_it(stub, namespace):
    xr = _in_namespace(example("standalone"), namespace)
    _, summary = _run(stub, xr)
    assert summary["resources"] == {}
    accepted = next(c for c in summary["conditions"] if c["type"] == "ModelAccepted")
    assert accepted["reason"] == "ReservedNamespace"
    assert repr(namespace) in accepted["message"]
    assert summary["composite_ready"] == "False"


def test_a_reserved_namespace_keeps_what_already_runs(stub):
    xr = example("standalone")
    _, first = _run(stub, xr)
    observed = {
        k: observed_object(r["object"], name=f"o{i}", ready=True)
        for i, (k, r) in enumerate(first["resources"].items())
    }
    _, held = _run(stub, _in_namespace(xr, "kube-system"), observed)
    assert set(held["resources"]) == set(observed)


@pytest.mark.parametrize(
    ("caches", "reason"),
    [
        (None, "WaitingForCache"),  # not resolved yet
        ([], "CacheNotFound"),
        ("Hydrating", "WaitingForCache"),
        ("Pending", "WaitingForCache"),
        ("elsewhere", "WaitingForCache"),  # staged, but not on this cluster
    ],
)
def test_pods_wait_for_the_cache_to_be_staged_on_their_cluster(stub, caches, reason):
    xr = example("gang-with-cache")
    if caches in ("Hydrating", "Pending"):
        caches = [staged_cache(xr, phase=caches)]
    elif caches == "elsewhere":
        cache = staged_cache(xr)
        cache["status"]["clusters"][0]["name"] = "eks-us-east"
        caches = [cache]
    _, summary = _run(stub, xr, caches=caches)
    assert summary["resources"] == {}
    assert _conditions(summary)["ModelReady"] == ("False", reason)
    assert summary["composite_ready"] == "False"


def test_a_staged_cache_lets_the_pods_start_and_a_later_unstaged_cache_drops_nothing(stub):
    xr = example("gang-with-cache")
    _, staged = _run(stub, xr)
    assert any(k.startswith("model-serving-") for k in staged["resources"])
    observed = {
        k: observed_object(r["object"], name=f"o{i}", ready=True)
        for i, (k, r) in enumerate(staged["resources"].items())
    }
    for caches in ([], [staged_cache(xr, phase="Hydrating")], None):
        _, later = _run(stub, xr, observed, caches=caches)
        assert set(later["resources"]) == set(staged["resources"])


def test_a_replica_made_in_the_shared_namespace_is_kept_exactly_as_it_runs(stub):
    xr = example("standalone")
    _, current = _run(stub, xr)
    observed = {}
    for i, (key, resource) in enumerate(current["resources"].items()):
        legacy = copy.deepcopy(resource["object"])
        legacy["spec"]["forProvider"]["manifest"]["metadata"]["namespace"] = "default"
        observed[key] = observed_object(legacy, name=f"o{i}", ready=True)
    rsp, summary = _run(stub, xr, observed)
    for key, resource in summary["resources"].items():
        assert manifest_of(resource["object"])["metadata"]["namespace"] == "default", key
        assert resource["object"]["spec"] == observed[key]["spec"]
    assert _conditions(summary)["ModelReady"] == ("True", "Serving")
    # The ModelDeployment reads this and replaces the replica make-before-break.
    assert to_plain(rsp.desired.composite.resource)["status"]["remoteNamespace"] == "default"
