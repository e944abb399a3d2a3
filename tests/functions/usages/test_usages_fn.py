"""compose-usages through real gRPC (routing spec §8.1)."""

from __future__ import annotations

from compose_usages.fn import UsagesFunction
from crossplane.function.proto.v1 import run_function_pb2 as fnv1
from modelplane.validation import validate_object
from modelplane_common.serving import run_function
from modelplane_common.testing import desired_ready, desired_resources, make_request, results

XR = {"apiVersion": "infrastructure.modelplane.ai/v1alpha1", "kind": "ServingStack",
      "metadata": {"name": "s", "namespace": "modelplane-system"},
      "spec": {"secrets": [{"type": "Kubeconfig", "name": "k", "key": "kubeconfig"}]}}  # fmt: skip


def release(pc_kind: str = "ProviderConfig") -> dict:
    return {
        "apiVersion": "helm.m.crossplane.io/v1beta1", "kind": "Release",
        "metadata": {"name": "r", "labels": {"modelplane.ai/resource": "lws"}},
        "spec": {"forProvider": {"chart": {"name": "lws"}},
                 "providerConfigRef": {"kind": pc_kind, "name": "pc"}},
    }  # fmt: skip


def obj() -> dict:
    return {
        "apiVersion": "kubernetes.m.crossplane.io/v1alpha1", "kind": "Object",
        "metadata": {"name": "o"},
        "spec": {"forProvider": {"manifest": {"apiVersion": "v1", "kind": "Namespace",
                                              "metadata": {"name": "x"}}},
                 "providerConfigRef": {"kind": "ProviderConfig", "name": "pc"}},
    }  # fmt: skip


def run(xr: dict, desired: dict, ready: dict | None = None):
    req = make_request(xr, desired=desired)
    for key, value in (ready or {}).items():
        req.desired.resources[key].ready = value
    return run_function(UsagesFunction(), req)


def test_each_consumer_gets_its_own_usage_and_label():
    rsp = run(XR, {"lws": release(), "ns": obj()}, {"lws": fnv1.READY_TRUE})
    desired = desired_resources(rsp)
    assert set(desired) == {"lws", "ns", "usage-pc-lws", "usage-pc-ns"}
    assert desired["lws"]["metadata"]["labels"] == {
        "modelplane.ai/resource": "lws", "modelplane.ai/usage-consumer": "lws"
    }  # fmt: skip
    usage = desired["usage-pc-ns"]
    assert validate_object(usage) == []
    assert usage["metadata"]["namespace"] == "modelplane-system"
    assert usage["spec"] == {
        "of": {"apiVersion": "kubernetes.m.crossplane.io/v1alpha1", "kind": "ProviderConfig",
               "resourceRef": {"name": "pc"}},
        "by": {"apiVersion": "kubernetes.m.crossplane.io/v1alpha1", "kind": "Object",
               "resourceSelector": {"matchControllerRef": True,
                                    "matchLabels": {"modelplane.ai/usage-consumer": "ns"}}},
        "replayDeletion": True,
    }  # fmt: skip
    ready = desired_ready(rsp)
    assert ready["lws"] is True and ready["ns"] is None  # earlier steps' readiness kept
    assert ready["usage-pc-lws"] is True


def test_cluster_provider_config_refs_and_other_kinds_are_left_alone():
    other = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "c"}}
    desired = {"lws": release("ClusterProviderConfig"), "cm": other}
    assert desired_resources(run(XR, desired)) == desired


def test_an_existing_usage_key_is_never_overwritten():
    mine = {"apiVersion": "protection.crossplane.io/v1beta1", "kind": "Usage",
            "metadata": {"name": "mine"}, "spec": {"of": {"kind": "X"}}}  # fmt: skip
    rsp = run(XR, {"lws": release(), "usage-pc-lws": mine})
    assert desired_resources(rsp)["usage-pc-lws"] == mine
    assert results(rsp) == [
        ("SEVERITY_WARNING", "desired resource usage-pc-lws already exists; not replacing it")
    ]


def test_a_cluster_scoped_xr_gets_nothing():
    cluster_xr = {**XR, "metadata": {"name": "s"}}
    assert desired_resources(run(cluster_xr, {"lws": release()})) == {"lws": release()}


def test_a_consumer_without_a_provider_config_name_is_reported_not_fatal():
    # Issue 21: an earlier step's hold copy carries what was observed; a Fatal result would
    # stop the ServingStack reconciling. No Usage exists yet, so nothing can be lost.
    nameless = release()
    del nameless["spec"]["providerConfigRef"]["name"]
    rsp = run(XR, {"lws": nameless, "ns": obj()})
    assert results(rsp) == [
        (
            "SEVERITY_WARNING",
            "desired resource lws: spec.providerConfigRef.name missing or malformed; its "
            "ProviderConfig is not protected",
        )
    ]
    assert set(desired_resources(rsp)) == {"lws", "ns", "usage-pc-ns"}


def test_a_usage_an_earlier_step_carried_over_keeps_its_consumer_labelled():
    # compose-serving-stack holds what it observed, this step's Usages included: the consumer
    # must keep the label the Usage selects, or the ProviderConfig loses its protection.
    first = desired_resources(run(XR, {"lws": release()}))
    rsp = run(XR, {"lws": release(), "usage-pc-lws": first["usage-pc-lws"]})
    desired = desired_resources(rsp)
    assert desired["lws"]["metadata"]["labels"]["modelplane.ai/usage-consumer"] == "lws"
    assert desired["usage-pc-lws"] == first["usage-pc-lws"]
    assert results(rsp) == []
