"""The simulated XR reconciler (render.md §3) with a fake pipeline: what a user would observe."""

from __future__ import annotations

import hashlib

import pytest
import yaml
from modelplane import xrd
from modelplane.controlplane import ControlPlane, InvalidManifestError, format_list
from modelplane.kube import condition, kind_is_namespaced
from modelplane.pipeline import PipelineError

API = "test.modelplane.ai/v1alpha1"


def widget(name: str = "w", namespace: str = "team-a", **spec) -> dict:
    return {
        "apiVersion": API,
        "kind": "Widget",
        "metadata": {"name": name, "namespace": namespace},
        "spec": spec,
    }


def config_map(key: str, **data: str) -> dict:
    return {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {}, "data": {"key": key, **data}}


def compose_items(runner, ready: str = "True"):
    """compose-widget: one ConfigMap per spec.items entry, ready as given."""

    def compose(xr, observed, required):
        items = xr["spec"].get("items", [])
        return runner.result(
            {f"cm-{item}": (config_map(item), ready) for item in items},
            status={"count": len(items)},
        )

    runner.functions["compose-widget"] = compose


def configmaps(plane: ControlPlane) -> dict[str, dict]:
    return {
        o["metadata"]["annotations"]["crossplane.io/composition-resource-name"]: o
        for o in plane.list("v1", "ConfigMap")
    }


def test_composes_names_and_converges(plane, runner):
    compose_items(runner)
    plane.apply(widget(items=["a", "b"]))
    outcome = plane.run(max_rounds=10)
    assert outcome.converged
    xr = plane.get(API, "Widget", "w", "team-a")
    uid = xr["metadata"]["uid"]
    composed = configmaps(plane)
    assert set(composed) == {"cm-a", "cm-b"}
    for name, obj in composed.items():
        digest = hashlib.sha256((uid + name).encode()).hexdigest()[:12]
        assert obj["metadata"]["name"] == f"w-{digest}"
        assert obj["metadata"]["namespace"] == "team-a"
        assert obj["metadata"]["labels"]["crossplane.io/composite"] == "w"
        (owner,) = obj["metadata"]["ownerReferences"]
        assert (owner["uid"], owner["controller"]) == (uid, True)
    assert [r["name"] for r in xr["spec"]["crossplane"]["resourceRefs"]] == sorted(
        o["metadata"]["name"] for o in composed.values()
    )
    assert xr["status"]["count"] == 2
    assert condition(xr, "Ready")["status"] == "True"
    assert condition(xr, "Synced")["reason"] == "ReconcileSuccess"
    assert xr["spec"]["replicas"] == 1  # XRD default applied on admission


def test_names_are_stable_across_rounds_and_observed_identity_wins(plane, runner):
    compose_items(runner)
    plane.apply(widget(items=["a"]))
    plane.run(max_rounds=10)
    first = configmaps(plane)["cm-a"]
    # A function that later proposes another name does not rename the observed object.
    runner.functions["compose-widget"] = lambda xr, observed, required: runner.result(
        {"cm-a": ({**config_map("a"), "metadata": {"name": "renamed"}}, "True")}
    )
    assert plane.run(max_rounds=10).converged
    again = configmaps(plane)["cm-a"]
    assert again["metadata"]["name"] == first["metadata"]["name"]
    assert again["metadata"]["uid"] == first["metadata"]["uid"]
    assert len(plane.list("v1", "ConfigMap")) == 1


def test_dropped_resource_is_garbage_collected(plane, runner):
    compose_items(runner)
    plane.apply(widget(items=["a", "b"]))
    plane.run(max_rounds=10)
    kept = configmaps(plane)["cm-a"]["metadata"]["uid"]
    plane.apply(widget(items=["a"]))
    assert plane.run(max_rounds=10).converged
    composed = configmaps(plane)
    assert set(composed) == {"cm-a"}
    assert composed["cm-a"]["metadata"]["uid"] == kept  # untouched, not recreated
    xr = plane.get(API, "Widget", "w", "team-a")
    assert len(xr["spec"]["crossplane"]["resourceRefs"]) == 1


def test_namespaced_xr_cannot_compose_cluster_scoped_kind(plane, runner):
    runner.functions["compose-widget"] = lambda xr, observed, required: runner.result(
        {"ns": ({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "x"}}, "True")}
    )
    plane.apply(widget())
    plane.run(max_rounds=5)
    xr = plane.get(API, "Widget", "w", "team-a")
    synced = condition(xr, "Synced")
    assert synced["status"] == "False"
    assert "cannot apply cluster scoped composed resource" in synced["message"]
    assert '"ns"' in synced["message"]
    assert plane.list("v1", "Namespace") == []


def test_namespace_is_forced_to_the_xr_namespace(plane, runner):
    def compose(xr, observed, required):
        body = config_map("a")
        body["metadata"] = {"namespace": "elsewhere"}
        return runner.result({"cm": (body, "True")})

    runner.functions["compose-widget"] = compose
    plane.apply(widget())
    plane.run(max_rounds=5)
    assert [o["metadata"]["namespace"] for o in plane.list("v1", "ConfigMap")] == ["team-a"]


def test_cluster_xr_must_give_namespaced_resources_a_namespace(plane, runner):
    runner.functions["compose-gadget"] = lambda xr, observed, required: runner.result(
        {"cm": (config_map("a"), "True")}
    )
    plane.apply({"apiVersion": API, "kind": "Gadget", "metadata": {"name": "g"}, "spec": {}})
    plane.run(max_rounds=5)
    synced = condition(plane.get(API, "Gadget", "g"), "Synced")
    assert synced["status"] == "False"
    assert "metadata.namespace" in synced["message"]


def test_fields_the_xr_stops_setting_are_removed_but_others_stay(plane, runner):
    extra = {"on": True}

    def compose(xr, observed, required):
        body = config_map("a", **({"extra": "yes"} if extra["on"] else {}))
        return runner.result({"cm": (body, "True")})

    runner.functions["compose-widget"] = compose
    plane.apply(widget())
    plane.run(max_rounds=5)
    (cm,) = plane.list("v1", "ConfigMap")
    # Another field manager (a user) adds a label; the XR never set it.
    key = ("v1", "ConfigMap", "team-a", cm["metadata"]["name"])
    plane.patch(key, {"metadata": {"labels": {"team": "blue"}}})
    extra["on"] = False
    assert plane.run(max_rounds=5).converged
    (cm,) = plane.list("v1", "ConfigMap")
    assert cm["data"] == {"key": "a"}
    assert cm["metadata"]["labels"]["team"] == "blue"


def test_unready_resources_are_listed_in_ready_condition(plane, runner):
    compose_items(runner, ready="False")
    plane.apply(widget(items=["a", "b", "c", "d", "e"]))
    plane.run(max_rounds=5)
    ready = condition(plane.get(API, "Widget", "w", "team-a"), "Ready")
    assert ready["status"] == "False"
    assert ready["reason"] == "Creating"
    assert ready["message"] == "Unready resources: cm-a, cm-b, cm-c, and 2 more"


def test_list_wording_matches_crossplane():
    assert format_list(["b", "a"]) == "a, b"
    assert format_list(["c", "a", "b"]) == "a, b, and c"
    assert format_list(["a"]) == "a"


def test_custom_conditions_and_fatal_errors(plane, runner):
    state = {"fail": False}

    def compose(xr, observed, required):
        if state["fail"]:
            raise PipelineError('pipeline step "compose-widget" returned a fatal result: boom')
        return runner.result(
            {"cm": (config_map("a"), "True")},
            conditions=[
                {"type": "Healthy", "status": "True", "reason": "Ignored"},
                {"type": "Accepted", "status": "True", "reason": "Fine"},
            ],
        )

    runner.functions["compose-widget"] = compose
    plane.apply(widget())
    plane.run(max_rounds=5)
    xr = plane.get(API, "Widget", "w", "team-a")
    assert condition(xr, "Accepted")["status"] == "True"
    assert condition(xr, "Healthy") is None  # system types from functions are dropped
    state["fail"] = True
    plane.run(max_rounds=5)
    xr = plane.get(API, "Widget", "w", "team-a")
    synced = condition(xr, "Synced")
    assert synced["status"] == "False"
    assert synced["message"].startswith("cannot compose resources: pipeline step")
    assert condition(xr, "Accepted")["status"] == "Unknown"
    assert condition(xr, "Accepted")["reason"] == "FatalError"
    assert len(plane.list("v1", "ConfigMap")) == 1  # a failed compose deletes nothing


def test_composed_xrs_are_reconciled_in_turn_and_deleted_with_their_parent(plane, runner):
    runner.functions["compose-parent"] = lambda xr, observed, required: runner.result(
        {
            "child": (
                {"apiVersion": API, "kind": "Widget", "metadata": {}, "spec": {"items": ["x"]}},
                "True"
                if observed.get("child")
                and condition(observed["child"], "Ready")
                and condition(observed["child"], "Ready")["status"] == "True"
                else "False",
            )
        }
    )
    compose_items(runner)
    plane.apply(
        {"apiVersion": API, "kind": "Parent", "metadata": {"name": "p", "namespace": "team-a"}}
        | {"spec": {}}
    )
    assert plane.run(max_rounds=10).converged
    (child,) = plane.list(API, "Widget")
    assert child["metadata"]["labels"]["crossplane.io/composite"] == "p"
    assert child["spec"]["replicas"] == 1  # composed XRs are defaulted too
    (cm,) = plane.list("v1", "ConfigMap")
    assert cm["metadata"]["name"].startswith("p-")  # generateName from the root's label
    parent = plane.get(API, "Parent", "p", "team-a")
    assert condition(parent, "Ready")["status"] == "True"
    assert {o["kind"] for o in plane.composed_by(parent)} == {"Widget", "ConfigMap"}
    deleted = plane.delete(("test.modelplane.ai/v1alpha1", "Parent", "team-a", "p"))
    assert len(deleted) == 3
    assert plane.objects() == []


def test_required_resources_come_from_the_store(plane, runner):
    seen = {}

    def compose(xr, observed, required):
        seen["kinds"] = sorted({o["kind"] for o in required})
        return runner.result()

    runner.functions["compose-widget"] = compose
    plane.apply({"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "s"}})
    plane.apply(widget())
    plane.run(max_rounds=5)
    assert seen["kinds"] == ["Secret", "Widget"]
    assert plane.get("v1", "Secret", "s", "default") is not None  # namespace defaulted


def test_paused_xr_is_not_reconciled(plane, runner):
    compose_items(runner)
    paused = widget(items=["a"])
    paused["metadata"]["annotations"] = {"crossplane.io/paused": "true"}
    plane.apply(paused)
    plane.run(max_rounds=5)
    assert runner.calls == []
    synced = condition(plane.get(API, "Widget", "w", "team-a"), "Synced")
    assert (synced["status"], synced["reason"]) == ("False", "ReconcilePaused")


def test_never_converging_composition_is_reported(plane, runner):
    def compose(xr, observed, required):
        previous = int((observed.get("cm") or {}).get("data", {}).get("n", "0"))
        return runner.result({"cm": (config_map("a", n=str(previous + 1)), "True")})

    runner.functions["compose-widget"] = compose
    plane.apply(widget())
    outcome = plane.run(max_rounds=4)
    assert not outcome.converged
    assert "4 rounds" in outcome.reason
    assert any(key[1] == "ConfigMap" for key in outcome.still_changing)


def test_invalid_manifest_names_the_field(plane):
    with pytest.raises(InvalidManifestError) as err:
        plane.apply(widget(replicas=9), source="examples/w.yaml")
    message = str(err.value)
    assert "examples/w.yaml" in message
    assert "Widget/w" in message
    assert "spec.replicas" in message


def test_unknown_modelplane_kind_is_rejected(plane):
    with pytest.raises(InvalidManifestError, match="no CompositeResourceDefinition"):
        plane.apply({"apiVersion": API, "kind": "Gizmo", "metadata": {"name": "g"}})


def test_composed_object_the_api_server_rejects_is_unsynced(plane, runner):
    def compose(xr, observed, required):
        bad = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {}, "data": {"n": 1}}
        return runner.result({"good": (config_map("a"), "True"), "bad": (bad, "True")})

    runner.functions["compose-widget"] = compose
    plane.apply(widget())
    plane.run(max_rounds=5)
    xr = plane.get(API, "Widget", "w", "team-a")
    synced = condition(xr, "Synced")
    assert (synced["status"], synced["message"]) == ("False", "Unsynced resources: bad")
    assert list(configmaps(plane)) == ["good"]
    (event,) = plane.events[("test.modelplane.ai/v1alpha1", "Widget", "team-a", "w")]
    assert "data.n" in event["message"]


def test_scope_table():
    assert not kind_is_namespaced("v1", "Namespace")
    assert not kind_is_namespaced("kubernetes.m.crossplane.io/v1alpha1", "ClusterProviderConfig")
    assert not kind_is_namespaced("protection.crossplane.io/v1beta1", "ClusterUsage")
    assert not kind_is_namespaced("container.gcp.upbound.io/v1beta2", "Cluster")  # legacy group
    assert kind_is_namespaced("container.gcp.m.upbound.io/v1beta1", "Cluster")
    assert kind_is_namespaced("eks.aws.m.upbound.io/v1beta1", "ClusterAuth")
    assert kind_is_namespaced("kubernetes.m.crossplane.io/v1alpha1", "Object")
    assert kind_is_namespaced("protection.crossplane.io/v1beta1", "Usage")
    assert kind_is_namespaced("v1", "Service")


def test_secret_string_data_is_stored_as_data(plane):
    plane.apply(
        {
            "apiVersion": "v1",
            "kind": "Secret",
            "metadata": {"name": "kc", "namespace": "modelplane-system"},
            "stringData": {"kubeconfig": "apiVersion: v1"},
        }
    )
    secret = plane.find("Secret", "kc", "modelplane-system")
    assert secret["data"] == {"kubeconfig": "YXBpVmVyc2lvbjogdjE="}
    assert "stringData" not in secret


def test_same_input_gives_identical_output(runner, test_catalog):
    compose_items(runner)
    outputs = []
    for _ in range(2):
        plane = ControlPlane(runner, catalog=test_catalog)
        plane.apply(widget(items=["a", "b"]))
        plane.apply(widget(name="v", items=["c"]))
        assert plane.run(max_rounds=10).converged
        outputs.append(plane.objects())
    assert outputs[0] == outputs[1]


def test_xr_without_a_composition_is_not_synced(runner, tmp_path):
    from_path = tmp_path / "apis"
    (from_path / "widgets").mkdir(parents=True)
    definition = {
        "apiVersion": "apiextensions.crossplane.io/v2",
        "kind": "CompositeResourceDefinition",
        "metadata": {"name": "widgets.test.modelplane.ai"},
        "spec": {
            "group": "test.modelplane.ai",
            "names": {"kind": "Widget", "plural": "widgets"},
            "versions": [
                {
                    "name": "v1alpha1",
                    "served": True,
                    "referenceable": True,
                    "schema": {
                        "openAPIV3Schema": {
                            "type": "object",
                            "properties": {"spec": {"type": "object"}},
                        }
                    },
                }
            ],
        },
    }
    (from_path / "widgets" / "definition.yaml").write_text(yaml.safe_dump(definition))
    plane = ControlPlane(runner, catalog=xrd.read_catalog(from_path))
    plane.apply(widget())
    plane.run(max_rounds=3)
    synced = condition(plane.get(API, "Widget", "w", "team-a"), "Synced")
    assert synced["status"] == "False"
    assert synced["message"].startswith("cannot select composition")


def test_parent_dropping_a_child_xr_field_keeps_the_child_refs(plane, runner):
    """A parent that once re-emitted its child's spec.crossplane (a hold copy) and stops must
    not strip the refs the child's own reconciler writes: the child could no longer GC."""
    state = {"hold": False, "items": ["x"]}

    def compose_parent(xr, observed, required):
        child = {"apiVersion": API, "kind": "Widget", "metadata": {}, "spec": {}}
        if state["hold"] and "child" in observed:
            child["spec"] = observed["child"]["spec"]
        child["spec"]["items"] = state["items"]
        return runner.result({"child": (child, "True")})

    runner.functions["compose-parent"] = compose_parent
    compose_items(runner)
    parent = {"apiVersion": API, "kind": "Parent", "metadata": {"name": "p", "namespace": "t"}}
    plane.apply(parent | {"spec": {}})
    assert plane.run(max_rounds=10).converged
    state["hold"] = True
    assert plane.run(max_rounds=10).converged
    state["hold"], state["items"] = False, []
    assert plane.run(max_rounds=10).converged
    (child,) = plane.list(API, "Widget")
    assert child["spec"]["crossplane"]["resourceRefs"] == []
    assert plane.list("v1", "ConfigMap") == []  # the child garbage-collected its ConfigMap


def test_explicit_composition_ref_must_exist(plane, runner):
    compose_items(runner)
    xr = widget(items=["a"])
    xr["spec"]["crossplane"] = {"compositionRef": {"name": "no-such-composition"}}
    plane.apply(xr)
    plane.run(max_rounds=3)
    synced = condition(plane.get(API, "Widget", "w", "team-a"), "Synced")
    assert synced["status"] == "False"
    assert 'Composition "no-such-composition"' in synced["message"]
    assert runner.calls == []


def _namespaced(api_version: str, kind: str, name: str, namespace: str, **spec) -> dict:
    body = {"apiVersion": api_version, "kind": kind}
    body["metadata"] = {"name": name, "namespace": namespace}
    return body | ({"spec": spec} if spec else {})


def test_a_deleted_namespace_goes_with_what_it_holds_and_takes_nothing_new(plane):
    """The namespace controller: everything in it is deleted (delete returns all of it), a
    provider's ProviderConfig there goes too (only Objects and Releases get stuck, as the real
    plane showed), and while it is Terminating the API server refuses anything new in it."""
    plane.apply({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "team-x"}})
    plane.apply(_namespaced("v1", "ConfigMap", "settings", "team-x"))
    plane.apply(
        _namespaced(
            "kubernetes.m.crossplane.io/v1alpha1", "ProviderConfig", "remote", "team-x",
            credentials={"source": "None"},
        )
    )  # fmt: skip
    gone = plane.delete(plane.key("Namespace", "team-x"))
    assert sorted(k[1] for k in gone) == ["ConfigMap", "Namespace", "ProviderConfig"]
    assert not [o for o in plane.objects() if o["metadata"].get("namespace") == "team-x"]
    # A namespace still emptying its Objects refuses new content.
    plane.apply({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "team-y"}})
    stuck = _namespaced(
        "kubernetes.m.crossplane.io/v1alpha1", "Object", "engine", "team-y",
        forProvider={"manifest": {"apiVersion": "v1", "kind": "ConfigMap",
                                  "metadata": {"name": "c", "namespace": "team-y"}}},
        providerConfigRef={"kind": "ClusterProviderConfig", "name": "lab"},
    )  # fmt: skip
    plane.apply(stuck)
    assert plane.delete(plane.key("Namespace", "team-y")) == []
    assert plane.find("Namespace", "team-y")["status"]["phase"] == "Terminating"
    assert plane.find("Object", "engine", "team-y")["metadata"]["deletionTimestamp"]
    with pytest.raises(InvalidManifestError, match="unable to create new content in namespace"):
        plane.apply(_namespaced("v1", "ConfigMap", "late", "team-y"))
