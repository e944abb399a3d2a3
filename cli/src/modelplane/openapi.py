"""Validating a value against a Kubernetes structural OpenAPI v3 schema, as the API server does.

`check_value` walks the value and the schema together and returns (path, message) pairs: first
the OpenAPI ones (types, required, enum, bounds, formats, list types, unknown fields), then one
per failing `x-kubernetes-validations` rule. Paths use the API server's notation:
``spec.devices[0].attributes[model]``.
"""

from __future__ import annotations

import base64
import dataclasses
import ipaddress
import json
import operator
import re
import uuid
from typing import Any

from modelplane_common import cel

from modelplane import celrules

JSON = dict[str, Any]
Issue = tuple[str, str]  # (field path, message)

INT64 = (-(2**63), 2**63 - 1)
INT32 = (-(2**31), 2**31 - 1)
CEL_REASONS = {
    "FieldValueInvalid": "",
    "FieldValueForbidden": "Forbidden: ",
    "FieldValueRequired": "Required value: ",
    "FieldValueDuplicate": "Duplicate value: ",
}


def join(path: str, name: str) -> str:
    return f"{path}.{name}" if path else name


def _matches_type(kind: str, value: Any) -> bool:
    """Whether a decoded JSON value is of OpenAPI type ``kind`` (an integral float is an
    integer, any integer a number)."""
    if isinstance(value, bool):
        return kind == "boolean"
    if isinstance(value, int):
        return kind in ("integer", "number")
    if isinstance(value, float):
        return kind == "number" or (kind == "integer" and value.is_integer())
    if isinstance(value, str):
        return kind == "string"
    if isinstance(value, list):
        return kind == "array"
    return kind == ("null" if value is None else "object")


def _json_type(value: Any) -> str:
    """The JSON type kube-openapi names a decoded value by."""
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, int):
        return "integer"
    if isinstance(value, float):
        return "integer" if value.is_integer() else "number"
    if isinstance(value, str):
        return "string"
    return "array" if isinstance(value, list) else "object"


def _short(value: Any) -> str:
    text = json.dumps(value, sort_keys=True, default=str)
    return text if len(text) <= 80 else text[:77] + "..."


def _check_format(fmt: str, value: Any) -> str | None:
    """An error for a value that does not match a format the API server checks."""
    if fmt in ("int32", "int64") and isinstance(value, int) and not isinstance(value, bool):
        low, high = INT32 if fmt == "int32" else INT64
        return None if low <= value <= high else f"must fit in {fmt}"
    if not isinstance(value, str):
        return None
    if fmt in ("date-time", "date", "duration"):
        valid = {"date-time": _is_date_time, "date": celrules.parse_date,
                 "duration": celrules.parse_duration}[fmt](value)  # fmt: skip
        # kube-openapi reports these as type errors, which stop the rules.
        return None if valid is not None and valid is not False else f"must be of type {fmt}"
    try:
        if fmt == "byte":
            base64.b64decode(value, validate=True)
        elif fmt == "uuid":
            uuid.UUID(value)
        elif fmt == "ipv4":
            ipaddress.IPv4Address(value)
        elif fmt == "ipv6":
            ipaddress.IPv6Address(value)
        elif fmt == "cidr":
            ipaddress.ip_network(value, strict=False)
        else:
            return None
    except ValueError:
        return f"must be of format {fmt}"
    return None


_DATE_TIME_CLOCK = re.compile(
    r"^([0-9]{2}):([0-9]{2}):([0-9]{2})(.[0-9]+)?(z|([+-][0-9]{2}:[0-9]{2}))$"
)


def _is_date_time(value: str) -> bool:
    """kube-openapi's strfmt.IsDateTime (lenient: a lowercase t and z pass)."""
    if len(value) < 4:
        return False
    parts = value.lower().split("t")
    if len(parts) < 2 or celrules.parse_date(parts[0]) is None:
        return False
    match = _DATE_TIME_CLOCK.match(parts[1])
    return match is not None and match[1] <= "23" and match[2] <= "59" and match[3] <= "59"


@dataclasses.dataclass
class _Walk:
    """State of one validation: the schema issues, then the rule issues."""

    issues: list[Issue] = dataclasses.field(default_factory=list)
    rule_issues: list[Issue] = dataclasses.field(default_factory=list)

    def add(self, path: str, message: str) -> None:
        self.issues.append((path, message))


# What the API server says instead of running any x-kubernetes-validations rule when the
# object already has a blocking schema error: a missing required field, a value outside its
# enum, too long, too many, or of the wrong type (the errors the rules' cost bounds and types
# rely on). Other errors (a bound like maximum, a pattern, a duplicate) let the rules run.
RULES_NOT_CHECKED = (
    "Invalid value: null: some validation rules were not checked because the object was "
    "invalid; correct the existing errors to complete validation"
)
_BLOCKING = ("Required value", "Unsupported value", "Too long", "Too many")
_WRONG_TYPE = (" must be of type ", ": must be an integer or a string")


def check_value(schema: JSON, value: Any) -> list[Issue]:
    """Every problem with ``value`` under ``schema``."""
    schema_issues, rule_issues = check_parts(schema, value)
    return schema_issues + after_schema(schema, schema_issues, rule_issues)


class _Absent:
    """No old value: a create, or a node the stored object lacks or cannot correlate."""

    def __repr__(self) -> str:
        return "ABSENT"


ABSENT: Any = _Absent()


def check_parts(schema: JSON, value: Any, old: Any = ABSENT) -> tuple[list[Issue], list[Issue]]:
    """The schema's issues and, apart, its rules' issues. ``old``: the stored value of an
    update, which transition rules (``oldSelf``) compare against."""
    walk = _Walk()
    _check(walk, schema, value, "", old=old)
    return walk.issues, walk.rule_issues


def after_schema(schema: JSON, schema_issues: list[Issue], rule_issues: list[Issue]) -> list[Issue]:
    """The rules' issues; or, for an object with a blocking schema error, the API server's note
    that its rules were not run. (An unknown field stops the request earlier, at strict
    decoding: no rule runs and there is no note.)"""
    messages = [message for _, message in schema_issues]
    if any(m.startswith("unknown field") for m in messages):
        return []
    if not any(m.startswith(_BLOCKING) or any(t in m for t in _WRONG_TYPE) for m in messages):
        return rule_issues
    return [("", RULES_NOT_CHECKED)] if _has_rules(schema) else []


def _has_rules(schema: Any) -> bool:
    if isinstance(schema, dict):
        return bool(schema.get("x-kubernetes-validations")) or any(
            _has_rules(sub) for key, sub in schema.items() if key != "x-kubernetes-validations"
        )
    return isinstance(schema, list) and any(_has_rules(sub) for sub in schema)


def _check(
    walk: _Walk,
    schema: JSON,
    value: Any,
    path: str,
    *,
    old: Any = ABSENT,
    unchanged: bool = False,
    cel_path: str | None = None,
) -> None:
    """Validate one node; a value of the wrong type gets no further checks (nor rules).

    ``path`` is where schema errors are reported, ``cel_path`` where rules report: the same
    except below a map, whose keys schema errors join with a dot (``spec.labels.app``) and
    rules index (``spec.labels[app]``), as the API server writes them.

    ``old`` is the stored value this node correlates with on an update (ABSENT if none);
    ``unchanged`` whether the nearest correlated ancestor kept its value, which decides
    ratcheting for a node without its own stored value."""
    if value is None:
        if not schema.get("nullable"):
            walk.add(path, f"Invalid value: null: must be of type {schema.get('type', 'any')}")
        return
    if schema.get("x-kubernetes-int-or-string"):
        if not (isinstance(value, str) or _matches_type("integer", value)):
            walk.add(path, f"Invalid value: {_short(value)}: must be an integer or a string")
            return
    elif (kind := schema.get("type")) and not _matches_type(kind, value):
        # kube-openapi's InvalidType, as the API server reports it.
        actual = json.dumps(_json_type(value))
        walk.add(path, f"Invalid value: {actual}: {path} in body must be of type {kind}: {actual}")
        return
    _check_values(walk, schema, value, path)
    _check_junctors(walk, schema, value, path)
    if old is not ABSENT:
        unchanged = old == value
    where = _Where(path, path if cel_path is None else cel_path)
    if isinstance(value, dict):
        _check_object(walk, schema, value, where, old=old, unchanged=unchanged)
    elif isinstance(value, list):
        _check_array(walk, schema, value, where, old=old, unchanged=unchanged)
    _check_rules(walk, schema, value, where.cel, old=old, unchanged=unchanged)


@dataclasses.dataclass(frozen=True)
class _Where:
    schema: str  # where schema errors are reported
    cel: str  # where rules report


def _branch_issues(schema: Any, value: Any, path: str) -> list[Issue]:
    branch = _Walk()
    if isinstance(schema, dict):
        _check_values(branch, schema, value, path)
    return branch.issues


def _check_junctors(walk: _Walk, schema: JSON, value: Any, path: str) -> None:
    """allOf, anyOf, oneOf and not: value validations only, as structural schemas allow."""
    for sub in schema.get("allOf") or []:
        walk.issues.extend(_branch_issues(sub, value, path))
    if branches := schema.get("anyOf"):
        results = [_branch_issues(sub, value, path) for sub in branches]
        if all(results):
            first = "; ".join(f"{p}: {m}" for issues in results for p, m in issues[:1])
            walk.add(path, f"Invalid value: must match at least one schema in anyOf: {first}")
    if branches := schema.get("oneOf"):
        passing = sum(not _branch_issues(sub, value, path) for sub in branches)
        if passing != 1:
            walk.add(
                path, f"Invalid value: must match exactly one schema in oneOf, matches {passing}"
            )
    if isinstance(schema.get("not"), dict) and not _branch_issues(schema["not"], value, path):
        walk.add(path, "Invalid value: must not match the schema in not")


# (bound, its exclusive flag, how a value lies beyond it, the wording of the wanted relation)
_BOUNDS = (
    ("minimum", "exclusiveMinimum", operator.lt, "greater than"),
    ("maximum", "exclusiveMaximum", operator.gt, "less than"),
)


def _check_values(walk: _Walk, schema: JSON, value: Any, path: str) -> None:
    """Value validations (no structure): enum, bounds, lengths, pattern, format."""
    if "enum" in schema and value not in schema["enum"]:
        supported = ", ".join(_short(v) for v in schema["enum"])
        walk.add(path, f"Unsupported value: {_short(value)}: supported values: {supported}")
    if isinstance(value, int | float) and not isinstance(value, bool):
        for bound, exclusive, beyond, relation in _BOUNDS:
            if bound in schema:
                limit, strict = schema[bound], schema.get(exclusive)
                if beyond(value, limit) or (strict and value == limit):
                    wanted = relation if strict else f"{relation} or equal to"
                    walk.add(path, f"Invalid value: {value}: should be {wanted} {limit}")
        if schema.get("multipleOf") and value % schema["multipleOf"]:
            walk.add(path, f"Invalid value: {value}: must be a multiple of {schema['multipleOf']}")
    if isinstance(value, str):
        if "maxLength" in schema and len(value) > schema["maxLength"]:
            walk.add(path, f"Too long: may not be more than {schema['maxLength']} bytes")
        if "minLength" in schema and len(value) < schema["minLength"]:
            walk.add(
                path,
                f"Invalid value: {_short(value)}: should be at least "
                f"{schema['minLength']} chars long",
            )
        if "pattern" in schema and not _search(schema["pattern"], value):
            walk.add(path, f"Invalid value: {_short(value)}: should match '{schema['pattern']}'")
    if (fmt := schema.get("format")) and (problem := _check_format(fmt, value)):
        if problem.startswith("must be of type "):  # a format kube-openapi checks as a type
            shown = json.dumps(value)
            walk.add(path, f"Invalid value: {shown}: {path} in body {problem}: {shown}")
        else:
            walk.add(path, f"Invalid value: {_short(value)}: {problem}")
    if isinstance(value, list | dict):
        noun, most, least = (
            ("items", "maxItems", "minItems")
            if isinstance(value, list)
            else ("properties", "maxProperties", "minProperties")
        )
        if most in schema and len(value) > schema[most]:
            walk.add(path, f"Too many: {len(value)}: must have at most {schema[most]} {noun}")
        if least in schema and len(value) < schema[least]:
            walk.add(
                path, f"Invalid value: {len(value)}: must have at least {schema[least]} {noun}"
            )
    if isinstance(value, dict):
        for name in schema.get("required") or []:
            if name not in value:
                walk.add(join(path, name), "Required value")


def _search(pattern: str, value: str) -> bool:
    try:
        return re.search(pattern, value) is not None
    except re.error:
        return True  # check_definition reports the bad pattern itself


def _check_object(
    walk: _Walk, schema: JSON, value: JSON, where: _Where, *, old: Any, unchanged: bool
) -> None:
    properties: JSON = schema.get("properties") or {}
    # Properties and map values correlate with the stored object's by name.
    olds = old if isinstance(old, dict) else {}
    extra = schema.get("additionalProperties")
    keep_unknown = schema.get("x-kubernetes-preserve-unknown-fields") or extra is True
    embedded = schema.get("x-kubernetes-embedded-resource")
    path = where.schema
    for name, item in value.items():
        child = join(path, name)
        before = olds.get(name, ABSENT)
        if name in properties:
            _check(walk, properties[name], item, child, old=before, unchanged=unchanged,
                   cel_path=join(where.cel, name))  # fmt: skip
        elif isinstance(extra, dict):
            _check(walk, extra, item, child, old=before, unchanged=unchanged,
                   cel_path=f"{where.cel}[{name}]")  # fmt: skip
        elif embedded and name in ("apiVersion", "kind", "metadata"):
            continue
        elif not keep_unknown:
            walk.add(child, f'unknown field "{name}" (not declared in the schema)')


def _check_array(
    walk: _Walk, schema: JSON, value: list[Any], where: _Where, *, old: Any, unchanged: bool
) -> None:
    path = where.schema
    items = schema.get("items")
    if isinstance(items, dict):
        olds = _correlated_items(schema, value, old)
        for index, item in enumerate(value):
            _check(walk, items, item, f"{path}[{index}]", old=olds[index], unchanged=unchanged,
                   cel_path=f"{where.cel}[{index}]")  # fmt: skip
    list_type = schema.get("x-kubernetes-list-type")
    if list_type == "set" or schema.get("uniqueItems"):
        seen: list[Any] = []
        for index, item in enumerate(value):
            if item in seen:
                walk.add(f"{path}[{index}]", f"Duplicate value: {_short(item)}")
            else:
                seen.append(item)
    elif list_type == "map":
        keys = schema.get("x-kubernetes-list-map-keys") or []
        defaults = {k: ((items or {}).get("properties") or {}).get(k, {}) for k in keys}
        seen_keys: set[str] = set()
        for index, item in enumerate(value):
            if not isinstance(item, dict):
                continue
            key = {k: item.get(k, defaults[k].get("default")) for k in keys}
            encoded = json.dumps(key, sort_keys=True)
            if encoded in seen_keys:
                walk.add(f"{path}[{index}]", f"Duplicate value: {encoded}")
            seen_keys.add(encoded)


def _correlated_items(schema: JSON, value: list[Any], old: Any) -> list[Any]:
    """The stored item each item correlates with: only the items of a map list do, by their
    keys (atomic and set lists' items have no identity across an update)."""
    olds = [ABSENT] * len(value)
    if schema.get("x-kubernetes-list-type") != "map" or not isinstance(old, list):
        return olds
    keys = schema.get("x-kubernetes-list-map-keys") or []

    def key(item: Any) -> str | None:
        if not isinstance(item, dict):
            return None
        return json.dumps([item.get(k) for k in keys], sort_keys=True)

    stored: dict[str, Any] = {}
    for item in old:
        if (found := key(item)) is not None:
            stored.setdefault(found, item)
    for index, item in enumerate(value):
        if (found := key(item)) is not None:
            olds[index] = stored.get(found, ABSENT)
    return olds


def _check_rules(
    walk: _Walk, schema: JSON, value: Any, path: str, *, old: Any = ABSENT, unchanged: bool = False
) -> None:
    """Every rule of this node, as the API server runs them: a transition rule (``oldSelf``)
    only when the node has a stored value to compare with, or with ``optionalOldSelf``
    always (``oldSelf`` then an optional); on an update a rule without ``oldSelf`` whose value
    did not change is ratcheted (its failure is only a warning)."""
    rules = schema.get("x-kubernetes-validations") or []
    if not rules:
        return
    variables: dict[str, Any] = {}
    for rule in rules:
        if not isinstance(rule, dict):
            continue  # check_definition reports malformed rules
        source = rule.get("rule")
        try:
            compiled = celrules.compile_rule(source)
        except celrules.RuleError as err:
            walk.rule_issues.append((path, f"Invalid value: rule {source!r}: {err}"))
            continue
        if compiled.uses_old_self:
            if rule.get("optionalOldSelf") is True:
                compiled = celrules.with_optional_old_self(source, old is not ABSENT)
            elif old is ABSENT:
                continue  # transition rules need a stored value to compare with
        if not variables:
            variables["self"] = celrules.to_cel(value, schema)
            if old is not ABSENT:
                variables["oldSelf"] = celrules.to_cel(old, schema)
        issue = evaluate_rule(rule, celrules.for_schema(compiled, schema), variables, schema)
        if issue is None or (unchanged and not compiled.uses_old_self):
            continue
        target = path
        # A rule that fails names its fieldPath; one whose evaluation errors, its own node.
        if (field_path := rule.get("fieldPath")) and not issue.endswith(
            f" evaluating rule: {_rule_text(rule)}"
        ):
            relative = rule_field_path(schema, str(field_path))
            target = join(path, relative) if relative else path
        walk.rule_issues.append((target, issue))


def evaluate_rule(rule: JSON, compiled: celrules.Compiled, bound: Any, schema: JSON) -> str | None:
    """The API server's message for a failing rule, or None when it holds. ``bound`` is the
    value of ``self``, or every variable (``{"self": ..., "oldSelf": ...}``)."""
    variables = bound if isinstance(bound, dict) and "self" in bound else {"self": bound}
    try:
        result = compiled.evaluate(variables)
    except cel.CelEvalError as err:
        return f"Invalid value: {celrules.describe_error(err)} evaluating rule: {_rule_text(rule)}"
    if result is True:
        return None
    reason = rule.get("reason") or "FieldValueInvalid"
    if reason == "FieldValueDuplicate":
        # field.Duplicate carries the value (the schema's type) and no detail.
        return f"Duplicate value: {json.dumps(schema.get('type', ''))}"
    message = _message(rule)
    if expression := rule.get("messageExpression"):
        try:
            custom_rule = celrules.for_schema(celrules.compile_rule(expression), schema)
            custom = custom_rule.evaluate(variables)
        except (celrules.RuleError, cel.CelEvalError):
            custom = None  # the API server falls back to message when messageExpression fails
        if isinstance(custom, str):
            trimmed = custom.strip()
            if trimmed and "\n" not in trimmed and len(trimmed) <= MAX_MESSAGE_EXPRESSION_BYTES:
                message = trimmed
    return CEL_REASONS.get(reason, "") + message


# celconfig.MaxEvaluatedMessageExpressionSizeBytes: longer results fall back to message.
MAX_MESSAGE_EXPRESSION_BYTES = 5 * 1024


def _rule_text(rule: JSON) -> str:
    """How the API server names a rule in its messages: by its message if it has one."""
    message = str(rule.get("message") or "").strip()
    return message or str(rule.get("rule", "")).strip()


def _message(rule: JSON) -> str:
    message = str(rule.get("message") or "").strip()
    return message or f"failed rule: {_rule_text(rule)}"


def rule_field_path(schema: JSON, field_path: str) -> str | None:
    """A rule's ``fieldPath`` as the API server writes it below the rule's node
    (``.labels['a.b']`` is ``labels[a.b]``), or None when it names no field of ``schema``:
    only properties and map keys, each ``.name`` or ``['name']``, never into a list."""
    tokens = re.findall(r"'(?:[^'\\]|\\.)*'|[.\[\]]|[^.\[\]']+|'", field_path)
    if "".join(tokens) != field_path:
        return None
    out = ""
    node: Any = schema
    position = 0
    while position < len(tokens):
        token = tokens[position]
        if token == "[":
            quoted = tokens[position + 1] if position + 1 < len(tokens) else ""
            closing = tokens[position + 2] if position + 2 < len(tokens) else ""
            if len(quoted) < 2 or quoted[0] != "'" or quoted[-1] != "'" or closing != "]":
                return None
            name = re.sub(r"\\(.)", r"\1", quoted[1:-1])
            position += 3
        elif token == ".":
            if position + 1 >= len(tokens) or tokens[position + 1] in ".[]":
                return None
            name = tokens[position + 1]
            position += 2
        else:
            return None
        if not isinstance(node, dict):
            return None
        if node.get("properties") is not None:
            if name not in node["properties"]:
                return None
            out = join(out, name)
            node = node["properties"][name]
        elif isinstance(node.get("additionalProperties"), dict):
            out = f"{out}[{name}]"
            node = node["additionalProperties"]
        else:
            return None
    return out or None
