"""The plain view every function reads its request through: objects arrive without
``metadata.managedFields`` (which no function reads, none may return, and which is often the
largest part of an observed object) and with everything else as sent."""

from __future__ import annotations

import copy

import pytest
from compose_model_cache.fn import ModelCacheFunction
from crossplane.function.proto.v1 import run_function_pb2 as fnv1
from modelplane_common.function import Request
from modelplane_common.plain import replica_plain, to_plain, to_struct
from modelplane_common.serving import run_function

MANAGED = [
    {"manager": "apiextensions.crossplane.io/composed", "operation": "Apply",
     "fieldsType": "FieldsV1", "fieldsV1": {"f:spec": {"f:forProvider": {}}}},
]  # fmt: skip


def _object(name: str) -> dict:
    return {
        "apiVersion": "kubernetes.m.crossplane.io/v1alpha1",
        "kind": "Object",
        "metadata": {"name": name, "uid": "u-1", "managedFields": MANAGED, "labels": {"a": "b"}},
        "spec": {"forProvider": {"manifest": {"apiVersion": "v1", "kind": "ConfigMap"}}},
        "status": {"conditions": [{"type": "Ready", "status": "True"}]},
    }


def test_objects_are_read_without_managed_fields_and_otherwise_whole():
    req = fnv1.RunFunctionRequest()
    req.observed.composite.resource.CopyFrom(to_struct(_object("xr")))
    req.observed.resources["one"].resource.CopyFrom(to_struct(_object("one")))
    req.required_resources["found"].items.add().resource.CopyFrom(to_struct(_object("two")))
    view = Request(req)
    expected = _object("one")
    del expected["metadata"]["managedFields"]
    assert view.observed["one"] == expected
    assert "managedFields" not in view.composite["metadata"]
    assert view.composite["metadata"]["labels"] == {"a": "b"}
    (required,) = view.required("found") or []
    assert required["metadata"] == {"name": "two", "uid": "u-1", "labels": {"a": "b"}}
    # Read twice, the same content (converted once).
    assert view.required("found") == [required]


def test_a_held_resource_is_returned_without_managed_fields():
    """A ModelCache with a spec the schema would refuse holds what it observes: re-emitted
    without managedFields, which Crossplane would refuse."""
    xr = {
        "apiVersion": "modelplane.ai/v1alpha1",
        "kind": "ModelCache",
        "metadata": {"name": "c", "namespace": "ml-team", "managedFields": MANAGED},
        "spec": {"source": "HuggingFace", "huggingFace": {"repo": 7}},
    }
    observed = _object("pvc-x")
    req = fnv1.RunFunctionRequest()
    req.observed.composite.resource.CopyFrom(to_struct(xr))
    req.observed.resources["pvc-x"].resource.CopyFrom(to_struct(copy.deepcopy(observed)))
    rsp = run_function(ModelCacheFunction(), req)
    held = to_plain(rsp.desired.resources["pvc-x"].resource)
    assert "managedFields" not in held["metadata"]
    assert held["spec"] == observed["spec"]


def test_the_cache_reads_only_the_status_of_the_remote_object_its_objects_report():
    """compose-model-cache reads of an observed Object's remote copy
    (``status.atProvider.manifest``) only its status: everything else reads as sent (without
    managedFields), and an Object without a readable remote copy reads whole."""
    reported = _object("pvc-a")
    remote = {"apiVersion": "v1", "kind": "PersistentVolumeClaim",
              "metadata": {"name": "w", "uid": "r-1"}, "spec": {"storageClassName": "rwx"},
              "status": {"phase": "Bound"}}  # fmt: skip
    reported["status"]["atProvider"] = {"manifest": remote, "note": "kept"}
    without_status = _object("pvc-b")
    without_status["status"]["atProvider"] = {"manifest": {"kind": "PersistentVolumeClaim"}}
    malformed = _object("pvc-c")
    malformed["status"]["atProvider"] = {"manifest": "not a map"}
    req = fnv1.RunFunctionRequest()
    for body in (reported, without_status, malformed, _object("pvc-d")):
        struct = req.observed.resources[body["metadata"]["name"]].resource
        struct.CopyFrom(to_struct(body))
    view = Request(req, ModelCacheFunction.read_observed)
    whole = Request(req)
    for key in ("pvc-c", "pvc-d"):
        assert view.observed[key] == whole.observed[key]
    expected = copy.deepcopy(whole.observed["pvc-a"])
    expected["status"]["atProvider"]["manifest"] = {"status": {"phase": "Bound"}}
    assert view.observed["pvc-a"] == expected
    assert view.observed["pvc-b"]["status"]["atProvider"]["manifest"] == {}
    assert view.observed["pvc-b"]["spec"] == whole.observed["pvc-b"]["spec"]


def _replica() -> dict:
    member = {
        "role": "Leader",
        "nodePoolName": "h100",
        "worker": {"size": 2},
        "deviceRequests": [{"name": "gpu", "deviceClassName": "gpu.nvidia.com", "count": 8}],
        "template": {"spec": {"containers": [{"name": "engine", "image": "vllm:1"}]}},
    }
    return {
        "apiVersion": "modelplane.ai/v1alpha1",
        "kind": "ModelReplica",
        "metadata": {"name": "r", "namespace": "ml-team", "managedFields": MANAGED,
                     "labels": {"modelplane.ai/modelcache": "weights"}},
        "spec": {
            "clusterName": "lab",
            "modelCacheRef": {"name": "weights"},
            "crossplane": {"compositionRef": {"name": "modelreplicas.modelplane.ai"}},
            "engines": [{"name": "main", "copies": 2, "members": [member, "not a map"]}],
        },
        "status": {"remoteNamespace": "ml-team",
                   "conditions": [{"type": "Ready", "status": "True"}]},
    }  # fmt: skip


def test_a_cluster_reads_its_replicas_without_pod_templates_or_crossplanes_references():
    """compose-inference-cluster reads the replicas placed on it for its summary, drain and
    tenants: everything but the pod templates and spec.crossplane, which none of those read."""
    req = fnv1.RunFunctionRequest()
    req.required_resources["model-replicas"].items.add().resource.CopyFrom(to_struct(_replica()))
    req.required_resources["other"].items.add().resource.CopyFrom(to_struct(_replica()))
    view = Request(req, read_required={"model-replicas": replica_plain})
    expected = _replica()
    del expected["metadata"]["managedFields"]
    whole = copy.deepcopy(expected)
    del expected["spec"]["crossplane"]
    del expected["spec"]["engines"][0]["members"][0]["template"]
    assert view.required("model-replicas") == [expected]
    assert view.required("other") == [whole]  # another requirement is read whole


@pytest.mark.parametrize(
    "spec",
    [None, "text", {"engines": "text"}, {"engines": [7, {"members": {"a": 1}}]}],
    ids=["no-spec", "spec-not-a-map", "engines-not-a-list", "malformed-engines"],
)
def test_a_malformed_replica_is_read_as_sent(spec):
    """A shape the schema would refuse reaches the readers unchanged, for them to judge."""
    replica = {"kind": "ModelReplica", "metadata": {"name": "r"}}
    if spec is not None:
        replica["spec"] = spec
    assert replica_plain(to_struct(replica)) == replica


@pytest.mark.parametrize(("mib", "warned"), [(2.9, False), (3.2, True)])
def test_render_and_simulate_warn_near_the_4_mib_limit_as_the_deployed_function_does(mib, warned):
    """The in-process host (render, simulate) tells a function each request's size as its
    console script does, so the warning past 3 MiB of the 4 MiB appears there too."""
    rsp = run_function(ModelCacheFunction(), _padded(mib))
    near = [r.message for r in rsp.results if "MiB it receives" in r.message]
    assert len(near) == int(warned)
    if warned:
        assert f"was {mib:.1f} MiB of the 4 MiB" in near[0]
        assert rsp.results[0].severity == fnv1.SEVERITY_WARNING
        assert rsp.results[0].reason == "RequestNearLimit"  # the event's reason


class _Failing(ModelCacheFunction):
    def compose(self, request):
        raise RuntimeError("boom")


def _padded(mib: float) -> fnv1.RunFunctionRequest:
    req = fnv1.RunFunctionRequest()
    req.observed.composite.resource.CopyFrom(to_struct(_object("xr")))
    pad = {"apiVersion": "v1", "kind": "ConfigMap", "data": {"x": "x" * int(mib * 1024 * 1024)}}
    req.required_resources["pad"].items.add().resource.CopyFrom(to_struct(pad))
    return req


def test_the_warning_comes_before_a_fatal_result_which_ends_what_crossplane_reads():
    rsp = run_function(_Failing(), _padded(3.2))
    assert [r.severity for r in rsp.results] == [fnv1.SEVERITY_WARNING, fnv1.SEVERITY_FATAL]
    assert rsp.results[0].reason == "RequestNearLimit"


def test_a_function_without_a_limit_never_warns():
    """--max-recv-message-size -1 is gRPC's "no limit"."""
    unlimited = ModelCacheFunction()
    unlimited.message_limit = -1
    rsp = run_function(unlimited, _padded(3.2))
    assert not [r for r in rsp.results if r.reason == "RequestNearLimit"]
