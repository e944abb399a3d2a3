"""XRD self-checks (structural schema, CEL compile and cost) and CEL evaluation features."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml
from modelplane import celrules, repo, validation, xrd


def definition(spec_schema: dict[str, Any], kind: str = "Widget") -> dict[str, Any]:
    plural = kind.lower() + "s"
    return {
        "apiVersion": "apiextensions.crossplane.io/v2",
        "kind": "CompositeResourceDefinition",
        "metadata": {"name": f"{plural}.test.modelplane.ai"},
        "spec": {
            "group": "test.modelplane.ai",
            "names": {"kind": kind, "plural": plural},
            "versions": [
                {
                    "name": "v1",
                    "served": True,
                    "referenceable": True,
                    "schema": {
                        "openAPIV3Schema": {
                            "type": "object",
                            "properties": {"spec": spec_schema},
                        }
                    },
                }
            ],
        },
    }


def problems(xrd_body: dict[str, Any]) -> list[tuple[str, str]]:
    return [(p.path, p.message) for p in validation.check_definition(xrd_body, "x.yaml")]


SPEC = "spec.versions[0].schema.openAPIV3Schema.properties[spec]"


def with_rule(rule: str, properties: dict[str, Any]) -> dict[str, Any]:
    return definition(
        {
            "type": "object",
            "properties": properties,
            "x-kubernetes-validations": [{"rule": rule, "message": "nope"}],
        }
    )


@pytest.mark.parametrize("path", sorted(repo.root().glob("apis/*/definition.yaml")), ids=str)
def test_every_xrd_in_the_repository_passes_its_own_checks(path: Path):
    assert validation.check_definition(yaml.safe_load(path.read_text()), str(path)) == []


def test_a_rule_that_does_not_parse_is_reported_with_its_path():
    found = problems(with_rule("self.size >", {"size": {"type": "integer"}}))
    assert len(found) == 1
    path, message = found[0]
    assert path == f"{SPEC}.x-kubernetes-validations[0].rule"
    assert message.startswith("Invalid value: 'self.size >': compilation failed")


def test_a_rule_using_an_undeclared_field_does_not_compile():
    found = problems(with_rule("self.replicas > 0", {"size": {"type": "integer"}}))
    assert found == [
        (
            f"{SPEC}.x-kubernetes-validations[0].rule",
            "Invalid value: 'self.replicas > 0': compilation failed: undefined field 'replicas'",
        )
    ]


def test_a_rule_calling_an_unknown_function_does_not_compile():
    found = problems(with_rule("self.name.shout() == 'A'", {"name": {"type": "string"}}))
    assert found[0][1].endswith(
        "compilation failed: ERROR: <input>:1:16: undeclared reference to 'shout' (in container '')"
    )


@pytest.mark.parametrize(
    ("rule", "error"),
    [
        ("self.size == 'big'", "found no matching overload for '_==_' applied to '(int, string)'"),
        # The real 1.34.4 API server's words: not a compilation error, its own message.
        ("self.size + 1", "Invalid value: 'self.size + 1': cel expression must evaluate to a bool"),
        ("has(self.size + 1)", "ERROR: <input>:1:15: invalid argument to has() macro"),
        (
            "self.size.all(x, x > 0)",
            "expression of type 'int' cannot be range of a comprehension "
            "(must be list, map, or dynamic)",
        ),
        ("[1, 'a'].size() > 0", "ERROR: <input>:1:5: expected type 'int' but found 'string'"),
        # `\.` is not a CEL escape: the API server rejected XRDs written like this.
        (
            r"self.name.matches('a\.b')",
            r"ERROR: <input>:1:19: Syntax error: token recognition error at: ''a\.'; "
            "ERROR: <input>:1:24: Syntax error: token recognition error at: '')'; "
            "ERROR: <input>:1:26: Syntax error: missing ')' at '<EOF>'",
        ),
    ],
)
def test_rules_the_type_checker_rejects(rule: str, error: str):
    found = problems(with_rule(rule, {"size": {"type": "integer"}}))
    assert [m.split(": compilation failed: ")[-1] for _, m in found] == [error]


def test_a_message_expression_must_be_a_string():
    body = definition(
        {
            "type": "object",
            "properties": {"size": {"type": "integer"}},
            "x-kubernetes-validations": [{"rule": "self.size > 0", "messageExpression": "1"}],
        }
    )
    assert problems(body) == [
        (
            f"{SPEC}.x-kubernetes-validations[0].messageExpression",
            "Invalid value: '1': messageExpression must evaluate to a string",
        )
    ]


QUADRATIC = "self.items.all(x, self.items.exists_one(y, x == y))"


def test_a_rule_over_an_unbounded_list_exceeds_the_cost_budget():
    found = problems(
        with_rule(QUADRATIC, {"items": {"type": "array", "items": {"type": "string"}}})
    )
    assert (
        f"{SPEC}.x-kubernetes-validations[0].rule",
        "Forbidden: estimated rule cost exceeds budget by factor of more than 100x (try "
        "simplifying the rule, or adding maxItems, maxProperties, and maxLength where arrays, "
        "maps, and strings are declared)",
    ) in found


def test_the_same_rule_fits_once_the_list_and_strings_are_bounded():
    bounded = {
        "items": {
            "type": "array",
            "maxItems": 32,
            "items": {"type": "string", "maxLength": 63},
        }
    }
    assert problems(with_rule(QUADRATIC, bounded)) == []
    assert 0 < celrules.estimate_cost(QUADRATIC, {"type": "object", "properties": bounded}) < 1e5


def test_a_rule_inside_an_unbounded_list_is_charged_once_per_item():
    """A cheap rule on list items costs (items that fit in a request) x (per-item cost)."""
    item = {
        "type": "object",
        "properties": {"tags": {"type": "array", "items": {"type": "string"}}},
        "x-kubernetes-validations": [{"rule": "self.tags.all(t, t.startsWith('a'))"}],
    }
    found = problems(definition({"type": "object", "properties": {
        "members": {"type": "array", "items": item}}}))  # fmt: skip
    assert any("estimated rule cost exceeds budget" in m for _, m in found)
    item["properties"]["tags"].update(maxItems=4)
    item["properties"]["tags"]["items"]["maxLength"] = 16
    bounded_parent = {"type": "array", "maxItems": 8, "items": item}
    assert problems(definition({"type": "object", "properties": {"members": bounded_parent}})) == []


def test_structural_schema_rules():
    schema = {
        "type": "object",
        "properties": {
            "untyped": {"description": "no type"},
            "both": {
                "type": "object",
                "properties": {"a": {"type": "string"}},
                "additionalProperties": {"type": "string"},
            },
            "list": {"type": "array"},
            "badDefault": {"type": "integer", "minimum": 1, "default": 0},
            "loose": {"type": "object", "x-kubernetes-preserve-unknown-fields": True},
            "port": {"x-kubernetes-int-or-string": True},
        },
    }
    found = dict(problems(definition(schema)))
    base = f"{SPEC}.properties"
    assert found[f"{base}[untyped].type"].startswith("Required value")
    assert "mutual exclusive" in found[f"{base}[both].additionalProperties"]
    assert found[f"{base}[list].items"].startswith("Required value")
    assert found[f"{base}[badDefault].default"] == (
        "Invalid value: 0: should be greater than or equal to 1"
    )
    assert not any(k.startswith((f"{base}[loose]", f"{base}[port]")) for k in found)


def test_list_map_keys_must_be_required_or_defaulted():
    schema = {
        "type": "object",
        "properties": {
            "ports": {
                "type": "array",
                "x-kubernetes-list-type": "map",
                "x-kubernetes-list-map-keys": ["name"],
                "items": {"type": "object", "properties": {"name": {"type": "string"}}},
            }
        },
    }
    assert problems(definition(schema)) == [
        (
            f"{SPEC}.properties[ports].items.properties[name].default",
            "Required value: this property is in x-kubernetes-list-map-keys, so it must have a "
            "default or be a required property",
        )
    ]


def test_a_default_with_an_unknown_field_is_reported():
    schema = {
        "type": "object",
        "properties": {
            "limits": {
                "type": "object",
                "properties": {"cpu": {"type": "string"}},
                "default": {"cpu": "1", "gpu": "2"},
            }
        },
    }
    assert problems(definition(schema)) == [
        (
            f"{SPEC}.properties[limits].default.gpu",
            'unknown field "gpu" (not declared in the schema)',
        )
    ]


def test_bad_reason_and_message_are_reported():
    xrd_body = definition(
        {
            "type": "object",
            "properties": {"a": {"type": "string"}},
            "x-kubernetes-validations": [
                {"rule": "has(self.a)", "reason": "Because", "message": "two\nlines"}
            ],
        }
    )
    paths = sorted(p for p, _ in problems(xrd_body))
    assert paths == [
        f"{SPEC}.x-kubernetes-validations[0].message",
        f"{SPEC}.x-kubernetes-validations[0].reason",
    ]


# --- CEL evaluation: rules of a custom XRD evaluated against objects -------------------------


def evaluate(rules: list[dict[str, Any]], spec: dict[str, Any], properties: dict[str, Any]):
    body = definition(
        {"type": "object", "properties": properties, "x-kubernetes-validations": rules}
    )
    assert validation.check_definition(body) == []
    catalog = xrd.Catalog({("test.modelplane.ai", "Widget"): xrd.Definition(Path("x"), body)}, {})
    obj = {
        "apiVersion": "test.modelplane.ai/v1",
        "kind": "Widget",
        "metadata": {"name": "w"},
        "spec": spec,
    }
    return [(p.path, p.message) for p in validation.validate_object(obj, "w.yaml", catalog)]


NAME = {"type": "string", "maxLength": 63}
NAMES = {"type": "array", "maxItems": 8, "items": NAME}


@pytest.mark.parametrize(
    ("rule", "spec", "holds"),
    [
        ("self.name.lowerAscii() == 'gpu'", {"name": "GPU"}, True),
        ("self.name.upperAscii() == 'GPU'", {"name": "gpu"}, True),
        ("self.name.split('-').size() == 2", {"name": "a-b"}, True),
        ("self.names.join(',') == 'a,b'", {"names": ["a", "b"]}, True),
        ("self.names.isSorted()", {"names": ["b", "a"]}, False),
        ("self.name.matches('^[a-z]+$')", {"name": "abc"}, True),
        ("self.name.startsWith('a') && self.name.endsWith('c')", {"name": "abc"}, True),
        ("self.name.contains('zz')", {"name": "abc"}, False),
        ("self.names.exists_one(n, n == 'a')", {"names": ["a", "a"]}, False),
        ("self.names.map(n, n + '!').all(n, n.endsWith('!'))", {"names": ["a"]}, True),
        ("'a' in self.names ? size(self.names) > 1 : true", {"names": ["a"]}, False),
        ("quantity(self.name).isGreaterThan(quantity('1Gi'))", {"name": "2Gi"}, True),
        ("quantity(self.name).compareTo(quantity('1G')) < 0", {"name": "1000Mi"}, False),
        ("self.count.sum() == 6 && self.count.max() == 3", {"count": [1, 2, 3]}, True),
        ("self.name.indexOf('b') == 1", {"name": "abc"}, True),
        # The lists library's indexOf beside the strings extension's, one rule.
        (
            "self.names.indexOf(self.name) == self.name.indexOf('b')",
            {"name": "ab", "names": ["x", "ab"]},
            True,
        ),
        ("self.count.lastIndexOf(2) == 0", {"count": [2, 1, 2]}, False),
        (
            "self.names.transformMapEntry(i, n, {n: i})[self.name] == 1",
            {"name": "b", "names": ["a", "b"]},
            True,
        ),
        ("self.count.transformMap(i, c, c * 2).all(i, v, v > 2)", {"count": [1, 2]}, False),
        # Orderings compare int with double; equality does not compile (cel-go).
        ("self.count.max() > 2.5 && self.count[0] < 1.5", {"count": [1, 2, 3]}, True),
        ("type(self.name) == string && type(self.count) == list", {"name": "a", "count": []}, True),
    ],
)
def test_kubernetes_cel_functions(rule: str, spec: dict[str, Any], holds: bool):
    properties = {
        "name": NAME,
        "names": NAMES,
        "count": {"type": "array", "maxItems": 8, "items": {"type": "integer"}},
    }
    found = evaluate([{"rule": rule, "message": "rule failed"}], spec, properties)
    assert found == ([] if holds else [("spec", "rule failed")])


def test_message_expression_reason_and_field_path():
    rules = [
        {
            "rule": "size(self.names) <= 2",
            # format(): a real API server refuses `' ... ' + string(int)` for its cost.
            "messageExpression": "'at most 2 names, got %d'.format([size(self.names)])",
            "reason": "FieldValueForbidden",
            "fieldPath": ".names",
        }
    ]
    found = evaluate(rules, {"names": ["a", "b", "c"]}, {"names": NAMES})
    assert found == [("spec.names", "Forbidden: at most 2 names, got 3")]


def test_a_rule_without_message_reports_the_rule():
    found = evaluate([{"rule": "self.name != 'x'"}], {"name": "x"}, {"name": NAME})
    assert found == [("spec", "failed rule: self.name != 'x'")]


def test_transition_rules_are_skipped_offline():
    """oldSelf only exists on update; like a create, validate does not run them."""
    found = evaluate(
        [{"rule": "self.name == oldSelf.name", "message": "immutable"}],
        {"name": "x"},
        {"name": NAME},
    )
    assert found == []


def test_a_rule_that_errors_at_runtime_names_the_rule():
    found = evaluate([{"rule": "self.name == 'a'"}], {}, {"name": NAME})
    assert found == [("spec", "Invalid value: no such key: name evaluating rule: self.name == 'a'")]


def test_escaped_property_names_are_visible_to_rules():
    found = evaluate(
        [{"rule": "self.max__dash__size > 1", "message": "too small"}],
        {"max-size": 1},
        {"max-size": {"type": "integer"}},
    )
    assert found == [("spec", "too small")]


def test_distinct_rules_compile_once():
    celrules._compile.cache_clear()
    obj = {
        "apiVersion": "modelplane.ai/v1alpha1",
        "kind": "InferenceClass",
        "metadata": {"name": "x"},
        "spec": {
            "devices": [{"name": f"d{i}", "driver": "x", "deviceClassName": "c"} for i in range(10)]
        },
    }
    assert validation.validate_object(obj) == []
    assert celrules._compile.cache_info().currsize == 1


def test_junctors_apply_value_validations_with_their_own_meaning():
    properties = {
        "a": {"type": "string"},
        "b": {"type": "string"},
        "port": {
            "x-kubernetes-int-or-string": True,
            "anyOf": [{"type": "integer"}, {"type": "string"}],
        },
        "size": {"type": "integer", "oneOf": [{"maximum": 10}, {"minimum": 5}]},
    }
    body = definition(
        {
            "type": "object",
            "properties": properties,
            "anyOf": [{"required": ["a"]}, {"required": ["b"]}],
        }
    )
    assert validation.check_definition(body) == []
    catalog = xrd.Catalog({("test.modelplane.ai", "Widget"): xrd.Definition(Path("x"), body)}, {})

    def found(spec):
        obj = {"apiVersion": "test.modelplane.ai/v1", "kind": "Widget", "metadata": {"name": "w"}}
        return [
            (p.path, p.message)
            for p in validation.validate_object({**obj, "spec": spec}, "w", catalog)
        ]

    assert found({"b": "x", "port": "http", "size": 3}) == []
    assert found({"port": 80}) == [
        (
            "spec",
            "Invalid value: must match at least one schema in anyOf: spec.a: Required value; "
            "spec.b: Required value",
        )
    ]
    assert found({"a": "x", "size": 7}) == [
        ("spec.size", "Invalid value: must match exactly one schema in oneOf, matches 2")
    ]


LABEL_KEY = (
    r"^([a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*/)?"
    r"[A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?$"
)


def annotations(pattern: str) -> dict[str, Any]:
    return {
        "type": "object",
        "properties": {
            "annotations": {
                "type": "object",
                "maxProperties": 32,
                "additionalProperties": {"type": "string", "maxLength": 8192},
                "x-kubernetes-validations": [
                    {"rule": f"self.all(k, k.matches('{pattern}'))", "message": "bad key"}
                ],
            }
        },
    }


def test_label_key_rules_as_the_api_server_judged_them():
    """The XRDs of issue 12: `\\.` in a CEL string is a compile error; written `\\\\.` and
    bounded (32 keys, values of 8192) the API server accepted them, cost included."""
    broken = problems(definition(annotations(LABEL_KEY.replace(r"\\.", r"\."))))
    assert len(broken) == 1
    assert "Syntax error: token recognition error" in broken[0][1]
    assert problems(definition(annotations(LABEL_KEY))) == []
