"""`modelplane validate` on plain CustomResourceDefinitions and their custom resources, through
the command as a user runs it (API server behaviour: apiextensions-apiserver CRD validation)."""

from __future__ import annotations

import json
from pathlib import Path

import yaml
from click.testing import CliRunner
from modelplane.main import cli

# One version: the API server holds its schema as spec.validation and names it so.
SPEC = "spec.validation.openAPIV3Schema.properties[spec]"


def crd(spec_schema: dict, **version: object) -> dict:
    return {
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": {"name": "widgets.example.com"},
        "spec": {
            "group": "example.com",
            "scope": "Namespaced",
            "names": {"kind": "Widget", "plural": "widgets"},
            "versions": [
                {
                    "name": "v1",
                    "served": True,
                    "storage": True,
                    "schema": {
                        "openAPIV3Schema": {
                            "type": "object",
                            "properties": {"spec": spec_schema},
                        }
                    },
                    **version,
                }
            ],
        },
    }


def widget(spec: dict) -> dict:
    return {
        "apiVersion": "example.com/v1",
        "kind": "Widget",
        "metadata": {"name": "w", "namespace": "default"},
        "spec": spec,
    }


def run(tmp_path: Path, *documents: dict, output: str = "json") -> tuple[int, dict]:
    path = tmp_path / "set.yaml"
    path.write_text(yaml.safe_dump_all(documents, sort_keys=False))
    result = CliRunner().invoke(cli, ["validate", "-o", output, str(path)])
    return result.exit_code, json.loads(result.output)


def messages(report: dict) -> dict[str, str]:
    return {p["path"]: p["message"] for p in report["problems"]}


REPLICAS = {
    "type": "object",
    "properties": {
        "replicas": {"type": "integer"},
        "maxReplicas": {"type": "integer", "default": 10},
    },
    "x-kubernetes-validations": [
        {"rule": "self.replicas <= self.maxReplicas", "message": "too many replicas"}
    ],
}


def test_a_custom_resource_of_a_crd_in_the_set_is_validated_against_it(tmp_path):
    code, report = run(tmp_path, crd(REPLICAS), widget({"replicas": 20, "colour": "red"}))
    assert code == 1
    # An unknown field fails strict decoding before any rule runs.
    assert messages(report) == {
        "spec.colour": 'unknown field "colour" (not declared in the schema)'
    }
    code, report = run(tmp_path, crd(REPLICAS), widget({"replicas": 20}))
    assert code == 1
    assert messages(report) == {"spec": "too many replicas"}  # maxReplicas defaulted to 10
    code, report = run(tmp_path, crd(REPLICAS), widget({"replicas": 3}))
    assert (code, report["valid"]) == (0, 2)


def test_an_invalid_escape_in_a_rule_is_a_compile_error(tmp_path):
    schema = {
        "type": "object",
        "properties": {"key": {"type": "string", "maxLength": 63}},
        "x-kubernetes-validations": [{"rule": r"self.key.matches('^[a-z]+(\.[a-z]+)*$')"}],
    }
    code, report = run(tmp_path, crd(schema))
    assert code == 1
    message = messages(report)[f"{SPEC}.x-kubernetes-validations[0].rule"]
    assert "compilation failed: ERROR: <input>:1:18: Syntax error: token recognition error" in (
        message
    )
    fixed = dict(schema, **{"x-kubernetes-validations": [
        {"rule": r"self.key.matches('^[a-z]+(\\.[a-z]+)*$')"}
    ]})  # fmt: skip
    assert run(tmp_path, crd(fixed))[0] == 0


def test_rule_cost_is_limited_per_rule_and_bounded_by_max_items(tmp_path):
    names = {
        "type": "array",
        "items": {"type": "string"},
        "x-kubernetes-validations": [{"rule": "self.all(a, self.all(b, a == b || a != b))"}],
    }
    schema = {"type": "object", "properties": {"names": names}}
    code, report = run(tmp_path, crd(schema))
    assert code == 1
    rule_path = f"{SPEC}.properties[names].x-kubernetes-validations[0].rule"
    at_rule = [p["message"] for p in report["problems"] if p["path"] == rule_path]
    # Over the schema's total too, so the server also says the rule contributed to it.
    assert at_rule == [
        "Forbidden: estimated rule cost exceeds budget by factor of more than 100x (try "
        "simplifying the rule, or adding maxItems, maxProperties, and maxLength where arrays, "
        "maps, and strings are declared)",
        "Forbidden: contributed to estimated rule cost total exceeding cost limit for entire "
        "OpenAPIv3 schema",
    ]
    bounded = {**names, "maxItems": 20, "items": {"type": "string", "maxLength": 63}}
    assert run(tmp_path, crd({"type": "object", "properties": {"names": bounded}}))[0] == 0


def test_transition_rules_need_a_correlatable_place(tmp_path):
    items = {
        "type": "object",
        "properties": {"name": {"type": "string", "maxLength": 63}},
        "x-kubernetes-validations": [{"rule": "self.name == oldSelf.name"}],
    }
    atomic = {
        "type": "object",
        "properties": {"items": {"type": "array", "maxItems": 16, "items": items}},
    }
    code, report = run(tmp_path, crd(atomic))
    assert code == 1
    path = f"{SPEC}.properties[items].items.x-kubernetes-validations[0].rule"
    assert messages(report)[path].endswith(
        "oldSelf cannot be used on the uncorrelatable portion of the schema within "
        f"{SPEC}.properties[items].items"
    )
    listed = {
        "type": "array",
        "x-kubernetes-list-type": "map",
        "x-kubernetes-list-map-keys": ["name"],
        "maxItems": 16,
        "items": {**items, "required": ["name"]},
    }
    assert run(tmp_path, crd({"type": "object", "properties": {"items": listed}}))[0] == 0


def test_optional_old_self_is_only_for_transition_rules_and_runs_on_create(tmp_path):
    not_transition = {
        "type": "integer",
        "x-kubernetes-validations": [{"rule": "self > 0", "optionalOldSelf": True}],
    }
    code, report = run(tmp_path, crd({"type": "object", "properties": {"n": not_transition}}))
    assert messages(report)[
        f"{SPEC}.properties[n].x-kubernetes-validations[0].optionalOldSelf"
    ] == ("Invalid value: true: may not be set if oldSelf is not used in rule")
    on_create = {
        "type": "object",
        "properties": {"n": {"type": "integer"}},
        "x-kubernetes-validations": [
            {
                "rule": "oldSelf.hasValue() || self.n > 5",
                "optionalOldSelf": True,
                "message": "n must start above 5",
            }
        ],
    }
    code, report = run(tmp_path, crd(on_create), widget({"n": 1}))
    assert (code, messages(report)) == (1, {"spec": "n must start above 5"})


def test_kubernetes_libraries_are_available_to_rules(tmp_path):
    schema = {
        "type": "object",
        "properties": {
            "endpoint": {"type": "string", "maxLength": 256},
            "cidr": {"type": "string", "maxLength": 64},
            "memory": {"type": "string", "maxLength": 32},
            "version": {"type": "string", "maxLength": 32},
            "nick": {"type": "string", "maxLength": 16},
        },
        "x-kubernetes-validations": [
            {"rule": "isURL(self.endpoint) && url(self.endpoint).getScheme() == 'https'",
             "message": "endpoint must be an https URL"},
            {"rule": "cidr(self.cidr).containsIP('10.0.0.1')",
             "message": "cidr must hold 10.0.0.1"},
            {"rule": "quantity(self.memory).isGreaterThan(quantity('1Gi'))",
             "message": "memory must exceed 1Gi"},
            {"rule": "isSemver(self.version, true)", "message": "version must be semver"},
            {"rule": "self.?nick.orValue('x') != ''"},
            {"rule": "[1, 2].all(i, v, v > i)"},
        ],
    }  # fmt: skip
    good = {"endpoint": "https://a.example", "cidr": "10.0.0.0/8", "memory": "2Gi",
            "version": "v1.2"}  # fmt: skip
    assert run(tmp_path, crd(schema), widget(good))[0] == 0
    bad = {"endpoint": "http://a", "cidr": "192.168.0.0/16", "memory": "1Gi", "version": "x"}
    code, report = run(tmp_path, crd(schema), widget(bad))
    assert code == 1
    assert [p["message"] for p in report["problems"]] == [
        "endpoint must be an https URL",
        "cidr must hold 10.0.0.1",
        "memory must exceed 1Gi",
        "version must be semver",
    ]


def test_format_library_reports_apimachinery_messages(tmp_path):
    schema = {
        "type": "object",
        "properties": {"host": {"type": "string", "maxLength": 253}},
        "x-kubernetes-validations": [
            {"rule": "!format.dns1123Label().validate(self.host).hasValue()",
             "messageExpression": "format.dns1123Label().validate(self.host).value()[0]"},
            # Not `... == optional.none()`: a real API server refuses that for its cost.
            {"rule": "!format.named('dns1123Subdomain').value().validate(self.host).hasValue()",
             "message": "host must be a DNS subdomain"},
        ],
    }  # fmt: skip
    assert run(tmp_path, crd(schema), widget({"host": "api"}))[0] == 0
    # 64 characters: a valid subdomain, one too many for a label.
    code, report = run(tmp_path, crd(schema), widget({"host": "a" * 64}))
    assert code == 1
    assert messages(report) == {"spec": "must be no more than 63 characters"}
    code, report = run(tmp_path, crd(schema), widget({"host": "API"}))
    assert code == 1
    assert [p["message"] for p in report["problems"]] == [
        "a lowercase RFC 1123 label must consist of lower case alphanumeric characters or '-', "
        "and must start and end with an alphanumeric character (e.g. 'my-name',  or '123-abc', "
        "regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?')",
        "host must be a DNS subdomain",
    ]
    # A rule must evaluate to bool; the library's optional does not.
    schema["x-kubernetes-validations"] = [{"rule": "format.uuid().validate(self.host)"}]
    code, report = run(tmp_path, crd(schema))
    assert code == 1
    assert "cel expression must evaluate to a bool" in json.dumps(report)


def test_set_and_map_lists_compare_and_concatenate_as_the_api_server_does(tmp_path):
    tags = {
        "type": "array",
        "x-kubernetes-list-type": "set",
        "maxItems": 8,
        "items": {"type": "string", "maxLength": 16},
    }
    ports = {
        "type": "array",
        "x-kubernetes-list-type": "map",
        "maxItems": 8,
        "x-kubernetes-list-map-keys": ["name"],
        "items": {
            "type": "object",
            "required": ["name"],
            "properties": {
                "name": {"type": "string", "maxLength": 16},
                "port": {"type": "integer"},
            },
        },
    }
    # Two map lists concatenate only when they have one type: items of one list (a real API
    # server refuses `self.defaults + self.overrides` for two properties; objects are typed by
    # where they stand).
    layers = {"type": "array", "maxItems": 2, "items": ports}
    schema = {
        "type": "object",
        "properties": {"tags": tags, "layers": layers},
        "x-kubernetes-validations": [
            {"rule": "self.tags == ['gpu', 'fast']", "message": "tags must be gpu and fast"},
            {"rule": "self.layers.size() < 2 || "
                     "(self.layers[0] + self.layers[1]).all(p, p.port < 9000)",
             "message": "merged ports must stay below 9000"},
        ],
    }  # fmt: skip
    spec = {
        "tags": ["fast", "gpu"],  # a set: order does not matter
        "layers": [
            [{"name": "http", "port": 9080}, {"name": "grpc", "port": 8081}],
            [{"name": "http", "port": 8080}],  # replaces http's 9080
        ],
    }
    assert run(tmp_path, crd(schema), widget(spec))[0] == 0
    spec["tags"] = ["fast", "cpu"]
    spec["layers"][1] = [{"name": "metrics", "port": 9090}]
    code, report = run(tmp_path, crd(schema), widget(spec))
    assert code == 1
    assert [p["message"] for p in report["problems"]] == [
        "tags must be gpu and fast",
        "merged ports must stay below 9000",
    ]


def test_a_crd_needs_exactly_one_storage_version(tmp_path):
    body = crd(REPLICAS, storage=False)
    code, report = run(tmp_path, body)
    assert code == 1
    assert messages(report)["spec.versions"] == (
        "Invalid value: must have exactly one version marked as storage version"
    )


def test_text_output_and_version(tmp_path):
    path = tmp_path / "set.yaml"
    path.write_text(yaml.safe_dump_all([crd(REPLICAS), widget({"replicas": 1})]))
    result = CliRunner().invoke(cli, ["validate", str(path)])
    assert (result.exit_code, result.output.strip()) == (0, "2 objects valid")
    version = CliRunner().invoke(cli, ["--version"])
    assert version.output.startswith("modelplane, version ")


CROSSPLANE_INSTALL = """\
apiVersion: pkg.crossplane.io/v1
kind: Provider
metadata: {name: provider-helm}
spec:
  package: xpkg.upbound.io/upbound/provider-helm:v1.2.0
  runtimeConfigRef: {name: helm}
---
apiVersion: pkg.crossplane.io/v1beta1
kind: DeploymentRuntimeConfig
metadata: {name: helm}
spec:
  deploymentTemplate: {spec: {template: {spec: {containers: [{name: package-runtime}]}}}}
---
apiVersion: pkg.crossplane.io/v1
kind: Function
metadata: {name: function-auto-ready}
spec: {package: xpkg.crossplane.io/crossplane-contrib/function-auto-ready:v0.5.0}
---
apiVersion: pkg.crossplane.io/v1
kind: Configuration
metadata: {name: platform}
spec: {package: xpkg.example.com/platform:v1.0.0}
---
apiVersion: pkg.crossplane.io/v1beta1
kind: ImageConfig
metadata: {name: mirror}
spec:
  matchImages: [{type: Prefix, prefix: xpkg.upbound.io}]
  rewriteImage: {prefix: registry.example.com/xpkg}
---
apiVersion: apiextensions.crossplane.io/v1alpha1
kind: ManagedResourceActivationPolicy
metadata: {name: default}
spec: {activate: ["*.helm.m.crossplane.io"]}
"""


def test_crossplane_install_manifests_validate(tmp_path):
    path = tmp_path / "install.yaml"
    path.write_text(CROSSPLANE_INSTALL)
    result = CliRunner().invoke(cli, ["validate", str(path)])
    assert (result.exit_code, result.output.strip()) == (0, "6 objects valid")
    path.write_text(CROSSPLANE_INSTALL.replace("package: xpkg.upbound", "pakage: xpkg.upbound"))
    result = CliRunner().invoke(cli, ["validate", "-o", "json", str(path)])
    assert result.exit_code == 1
    # Strict decoding refuses the unknown field before anything is validated (a real API
    # server does not go on to say that spec.package is missing).
    assert messages(json.loads(result.output)) == {
        "spec.pakage": 'unknown field "pakage" (not declared in the schema)',
    }


def test_nulls_defaults_and_list_types_as_the_api_server_applies_them(tmp_path):
    schema = {
        "type": "object",
        "x-kubernetes-validations": [
            {"rule": "!has(self.nick)", "message": "a null field is pruned"},
            {"rule": "has(self.note)", "message": "a nullable null stays"},
            {"rule": "self.size == 3", "message": "a null field with a default gets it"},
        ],
        "properties": {
            "nick": {"type": "string", "maxLength": 10},
            "note": {"type": "string", "maxLength": 10, "nullable": True},
            "size": {"type": "integer", "default": 3},
            "tags": {
                "type": "array",
                "maxItems": 4,
                "items": {"type": "string", "maxLength": 5},
                "x-kubernetes-list-type": "set",
            },
        },
    }
    spec = {"nick": None, "note": None, "size": None, "tags": ["a", "b"]}
    assert run(tmp_path, crd(schema), widget(spec))[0] == 0
    code, report = run(tmp_path, crd(schema), widget({**spec, "tags": ["a", "a"]}))
    # A duplicate does not stop the rules (they hold here), unlike a missing required field.
    assert (code, messages(report)) == (1, {"spec.tags[1]": 'Duplicate value: "a"'})


def test_manifests_in_memory_are_checked_as_a_set():
    """What simulate can call: a CRD among the documents applies to the others."""
    from modelplane.validate import Document, check_documents  # noqa: PLC0415

    found = check_documents(
        [Document("crd", 1, crd(REPLICAS)), Document("cr", 1, widget({"replicas": 11}))]
    )
    assert [[p.message for p in problems] for problems in found] == [[], ["too many replicas"]]


def test_a_definition_the_api_server_refuses_does_not_take_effect(tmp_path):
    """A refused CRD is never established: its custom resources have no schema to meet, and
    the definition's own problem is what the user is told to fix (no internal errors)."""
    broken = crd({"type": "object", "properties": {"replicas": "many"}})
    code, report = run(tmp_path, broken, widget({"replicas": 3}))
    assert code == 1
    found = {(p["kind"], p["message"].split(":")[0]) for p in report["problems"]}
    assert found == {
        ("CustomResourceDefinition", "Invalid value"),
        ("Widget", "no schema for apiVersion example.com/v1 kind Widget"),
    }
    assert not any("internal error" in p["message"] for p in report["problems"])
