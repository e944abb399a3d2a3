"""Kinds that are not Modelplane XRs: core Kubernetes kinds, generated CRD models, Compositions."""

from __future__ import annotations

import copy
from typing import Any

import yaml
from modelplane import openapi, repo, validation, xrd


def deployment(**container: Any) -> dict[str, Any]:
    return {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": "vllm", "namespace": "serving"},
        "spec": {
            "replicas": 1,
            "selector": {"matchLabels": {"app": "vllm"}},
            "template": {
                "metadata": {"labels": {"app": "vllm"}},
                "spec": {"containers": [{"name": "vllm", "image": "vllm:1", **container}]},
            },
        },
    }


def found(obj: dict[str, Any]) -> list[str]:
    return [str(p) for p in validation.validate_object(obj, "d.yaml")]


def test_a_valid_deployment():
    assert found(deployment()) == []


def test_a_deployment_with_a_misspelt_field_names_it():
    assert found(deployment(imagePullPolicyy="Always")) == [
        "d.yaml: Deployment/vllm: spec.template.spec.containers[0].imagePullPolicyy: unknown "
        'field "imagePullPolicyy" (not declared in the schema)'
    ]


def test_a_core_object_missing_a_required_field():
    service = {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": {"name": "vllm"},
        "spec": {"ports": [{"protocol": "TCP"}]},
    }
    assert found(service) == ["d.yaml: Service/vllm: spec.ports[0].port: Required value"]


def test_a_deployment_with_a_wrongly_typed_field():
    obj = deployment()
    obj["spec"]["replicas"] = "two"
    (problem,) = validation.validate_object(obj, "d.yaml")
    assert problem.path == "spec.replicas"
    assert "'two' is not of type 'integer'" in problem.message


def test_a_core_object_without_a_name():
    obj = deployment()
    del obj["metadata"]["name"]
    assert found(obj) == [
        "d.yaml: Deployment/?: metadata.name: Required value: name or generateName is required"
    ]


def kubernetes_object(**spec: Any) -> dict[str, Any]:
    return {
        "apiVersion": "kubernetes.m.crossplane.io/v1alpha1",
        "kind": "Object",
        "metadata": {"name": "remote-ns", "namespace": "fleet"},
        "spec": {
            "forProvider": {"manifest": {"apiVersion": "v1", "kind": "Namespace"}},
            "providerConfigRef": {"kind": "ProviderConfig", "name": "cluster-a"},
            **spec,
        },
    }


def test_a_valid_provider_kubernetes_object():
    assert found(kubernetes_object()) == []


def test_a_provider_kubernetes_object_with_bad_fields():
    obj = kubernetes_object(readiness={"policy": "Sometimes"})
    del obj["spec"]["forProvider"]["manifest"]
    problems = {p.path: p.message for p in validation.validate_object(obj, "o.yaml")}
    assert problems["spec.forProvider.manifest"] == "Required value"
    assert problems["spec.readiness.policy"].startswith('Unsupported value: "Sometimes"')
    # An unknown field stops the request at strict decoding, as a real API server answers
    # --validate=strict: only it is reported.
    obj = kubernetes_object(readiness={"policy": "Sometimes"}, extra=True)
    del obj["spec"]["forProvider"]["manifest"]
    problems = {p.path: p.message for p in validation.validate_object(obj, "o.yaml")}
    assert problems == {"spec.extra": 'unknown field "extra" (not declared in the schema)'}


def test_a_kind_without_schema_is_reported_clearly():
    obj = {"apiVersion": "example.com/v1", "kind": "Gadget", "metadata": {"name": "g"}}
    assert found(obj) == ["d.yaml: Gadget/g: no schema for apiVersion example.com/v1 kind Gadget"]


def test_a_crd_group_is_not_mistaken_for_a_core_group():
    """gateway.networking.k8s.io is a CRD group even though networking.k8s.io is core."""
    obj = {
        "apiVersion": "gateway.networking.k8s.io/v1",
        "kind": "Ingress",
        "metadata": {"name": "g"},
        "spec": {},
    }
    assert "no schema for apiVersion gateway.networking.k8s.io/v1 kind Ingress" in found(obj)[0]


def test_not_an_object_at_all():
    assert found(["a", "list"]) == [  # type: ignore[arg-type]
        "d.yaml: ?/?: not a Kubernetes object (expected a mapping)"
    ]
    assert found({"kind": "Thing"}) == ["d.yaml: Thing/?: apiVersion: Required value"]


def composition(mode: str = "Pipeline", function: str = "compose-inference-class") -> dict:
    return {
        "apiVersion": "apiextensions.crossplane.io/v1",
        "kind": "Composition",
        "metadata": {"name": "c"},
        "spec": {
            "compositeTypeRef": {"apiVersion": "modelplane.ai/v1alpha1", "kind": "InferenceClass"},
            "mode": mode,
            "pipeline": [{"step": "one", "functionRef": {"name": function}}],
        },
    }


def test_a_composition_using_a_known_function():
    assert found(composition()) == []


def test_a_composition_must_be_pipeline_mode_in_the_words_of_crossplanes_crd():
    assert found(composition(mode="Resources")) == [
        'd.yaml: Composition/c: spec.mode: Unsupported value: "Resources": supported values: '
        '"Pipeline"',
        # The CRD's rule ("an array of pipeline steps is required in Pipeline mode") waits for
        # the schema error to be fixed, as on the API server.
        f"d.yaml: Composition/c: {openapi.RULES_NOT_CHECKED}",
    ]


def test_a_composition_must_use_functions_this_repository_has():
    assert found(composition(function="function-patch-and-transform")) == [
        "d.yaml: Composition/c: spec.pipeline[0].functionRef.name: unknown function "
        "'function-patch-and-transform': no functions/function-patch-and-transform directory "
        "in the repository",
    ]


def test_xrds_and_compositions_meet_crossplanes_own_crds():
    """Fields Crossplane's CRDs do not declare are refused, as the API server would."""
    obj = composition()
    obj["spec"]["pipeline"][0]["functionref"] = {"name": "x"}
    assert found(obj) == [
        'd.yaml: Composition/c: spec.pipeline[0].functionref: unknown field "functionref" '
        "(not declared in the schema)"
    ]
    assert found({**composition(), "spec": None}) == ["d.yaml: Composition/c: spec: Required value"]
    definition = yaml.safe_load((repo.root() / "apis/modelcaches/definition.yaml").read_text())
    definition["spec"]["versions"][0].pop("referenceable")
    assert found(definition) == [
        "d.yaml: CompositeResourceDefinition/modelcaches.modelplane.ai: "
        "spec.versions[0].referenceable: Required value",
        "d.yaml: CompositeResourceDefinition/modelcaches.modelplane.ai: "
        + openapi.RULES_NOT_CHECKED,
    ]


def test_a_composition_for_an_unknown_type():
    obj = composition()
    obj["spec"]["compositeTypeRef"]["kind"] = "Nothing"
    assert found(obj) == [
        "d.yaml: Composition/c: spec.compositeTypeRef: no XRD defines apiVersion "
        "modelplane.ai/v1alpha1 kind Nothing"
    ]


def test_rbac_names_may_contain_colons_but_other_names_may_not():
    role = {
        "apiVersion": "rbac.authorization.k8s.io/v1",
        "kind": "ClusterRole",
        "metadata": {"name": "system:modelplane-reader"},
        "rules": [{"apiGroups": [""], "resources": ["pods"], "verbs": ["get"]}],
    }
    assert found(role) == []
    config_map = {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {"name": "system:modelplane", "namespace": "default"},
    }
    assert any("metadata.name" in problem for problem in found(config_map))


def test_modelplane_kinds_are_checked_against_their_shipped_xrd_away_from_the_repository():
    """An installed CLI has no apis/ beside it: the XRD schema `modelplane generate` ships with
    the models stands in, with its CEL rules and Crossplane's own spec fields."""
    here, away = xrd.catalog(), xrd.Catalog({}, {})
    examples = [
        doc
        for path in sorted((repo.root() / "examples").rglob("*.yaml"))
        for doc in yaml.safe_load_all(path.read_text())
        if isinstance(doc, dict) and here.definition_for(str(doc["apiVersion"]), str(doc["kind"]))
    ]
    assert {doc["kind"] for doc in examples} >= {"ModelCache", "ModelDeployment", "ModelService"}
    for doc in examples:
        assert validation.validate_object(doc, "x.yaml", away) == []
    cache = next(doc for doc in examples if doc["kind"] == "ModelCache")
    broken = copy.deepcopy(cache)
    broken["spec"]["crossplane"] = {"compositionRef": {"name": "modelcache"}}
    broken["spec"]["huggingFace"].pop("repo")
    found = validation.validate_object(broken, "x.yaml", away)
    assert found == validation.validate_object(broken, "x.yaml", here)
    # A missing required field is blocking: the rules are not run, and the API server says so.
    assert {p.path for p in found} == {"", "spec.huggingFace.repo"}
    # An unknown field stops the request at strict decoding: only it is reported.
    broken["spec"]["sizeGiBs"] = 1
    found = validation.validate_object(broken, "x.yaml", away)
    assert found == validation.validate_object(broken, "x.yaml", here)
    assert {p.path for p in found} == {"spec.sizeGiBs"}
