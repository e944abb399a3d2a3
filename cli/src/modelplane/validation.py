"""What ``kubectl apply --dry-run=server`` would say about a manifest, offline.

* Modelplane kinds (XRDs in apis/): the XRD's structural schema after defaulting, then every
  ``x-kubernetes-validations`` CEL rule (``celrules``).
* Other kinds: the CRD (or XRD) shipped beside the generated models
  (``modelplane_schemas.generated``), else the core Kubernetes schemas of
  ``kubernetes-validate`` (strict, Kubernetes ``KUBERNETES_VERSION``).
* XRDs and Compositions themselves: ``check_definition`` and ``check_composition``.

Every function returns a list of ``Problem``; an empty list means the API server would accept it.
See design/validation.md for what is modelled and what is not.
"""

from __future__ import annotations

import copy
import dataclasses
import json
import re
from functools import cache
from pathlib import Path
from typing import Any

import jsonschema
from kubernetes_validate import utils as kubernetes_validate
from modelplane_common.managed import without_status
from modelplane_schemas import generated

from modelplane import celrules, draselectors, openapi, repo, xrd
from modelplane.kube import DNS_SUBDOMAIN, valid_name
from modelplane.openapi import join
from modelplane.project import function_directory

JSON = dict[str, Any]
KUBERNETES_VERSION = "1.35"  # GKE default in the spec; DRA resource.k8s.io/v1 is GA

_DNS_LABEL = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$")
_LABEL_VALUE = re.compile(r"^(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?$")
_LABEL_NAME = re.compile(r"^([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]$")

_NAME_REF: JSON = {
    "type": "object",
    "required": ["name"],
    "properties": {"name": {"type": "string"}},
}
_SELECTOR: JSON = {
    "type": "object",
    "required": ["matchLabels"],
    "properties": {"matchLabels": {"type": "object", "additionalProperties": {"type": "string"}}},
}
_OBJECT_REF: JSON = {
    "type": "object",
    "properties": {k: {"type": "string"} for k in ("apiVersion", "kind", "name", "namespace")},
}
# What Crossplane adds to every XR's spec: under spec.crossplane for apiextensions v2 XRDs,
# at the top of spec for legacy ones. Unlisted fields are let through (preserve-unknown) so a
# newer Crossplane field is never reported as unknown.
_CROSSPLANE_FIELDS: JSON = {
    "compositionRef": _NAME_REF,
    "compositionSelector": _SELECTOR,
    "compositionRevisionRef": _NAME_REF,
    "compositionRevisionSelector": _SELECTOR,
    "compositionUpdatePolicy": {"type": "string", "enum": ["Automatic", "Manual"]},
    "resourceRefs": {"type": "array", "items": {**_OBJECT_REF, "required": ["kind"]}},
}
_LEGACY_FIELDS: JSON = {
    **_CROSSPLANE_FIELDS,
    "claimRef": {**_OBJECT_REF, "required": ["apiVersion", "kind", "name", "namespace"]},
    "writeConnectionSecretToRef": {
        "type": "object",
        "required": ["name", "namespace"],
        "properties": {"name": {"type": "string"}, "namespace": {"type": "string"}},
    },
    "publishConnectionDetailsTo": {"type": "object", "x-kubernetes-preserve-unknown-fields": True},
    "environmentConfigRefs": {
        "type": "array",
        "items": {"type": "object", "x-kubernetes-preserve-unknown-fields": True},
    },
}


def _with_crossplane_fields(schema: JSON, legacy: bool) -> JSON:
    """The XR schema as Crossplane serves it, with its own spec fields added."""
    spec = (schema.get("properties") or {}).get("spec")
    if not isinstance(spec, dict) or spec.get("type") != "object":
        return schema
    added = (
        _LEGACY_FIELDS
        if legacy
        else {
            "crossplane": {
                "type": "object",
                "x-kubernetes-preserve-unknown-fields": True,
                "properties": _CROSSPLANE_FIELDS,
            }
        }
    )
    spec = {**spec, "properties": {**added, **(spec.get("properties") or {})}}
    return {**schema, "properties": {**schema["properties"], "spec": spec}}


@dataclasses.dataclass(frozen=True)
class Problem:
    file: str
    kind: str
    name: str
    path: str  # field path inside the object, "" for the object as a whole
    message: str

    def __str__(self) -> str:
        where = f"{self.path}: " if self.path else ""
        return f"{self.file}: {self.kind}/{self.name}: {where}{self.message}"


def _identity(obj: Any) -> tuple[str, str]:
    if not isinstance(obj, dict):
        return "?", "?"
    metadata = obj.get("metadata") if isinstance(obj.get("metadata"), dict) else {}
    name = metadata.get("name") or metadata.get("generateName") or "?"
    return str(obj.get("kind") or "?"), str(name)


def _problems(source: str, obj: Any, issues: list[tuple[str, str]]) -> list[Problem]:
    kind, name = _identity(obj)
    return [Problem(source, kind, name, path, message) for path, message in issues]


# ---------------------------------------------------------------------------------------------
# Objects


def validate_object(
    obj: Any, source: str = "<object>", catalog: xrd.Catalog | None = None
) -> list[Problem]:
    """Every problem the API server would report for ``obj`` (and for an XRD or Composition,
    the problems its own checks would find)."""
    if not isinstance(obj, dict):
        return [Problem(source, "?", "?", "", "not a Kubernetes object (expected a mapping)")]
    api_version, kind = obj.get("apiVersion"), obj.get("kind")
    missing = [k for k, v in (("apiVersion", api_version), ("kind", kind)) if not v]
    if missing:
        return _problems(source, obj, [(k, "Required value") for k in missing])
    if not isinstance(api_version, str) or not isinstance(kind, str):
        return _problems(source, obj, [("", "apiVersion and kind must be strings")])
    catalog = catalog or xrd.catalog()
    obj = without_status(obj)  # status is a subresource: create/apply ignores it
    definition = catalog.definition_for(api_version, kind)
    if definition is not None:
        return _validate_composite(obj, source, definition)
    crossplane = api_version.startswith("apiextensions.crossplane.io/")
    if (kind == "CompositeResourceDefinition" and crossplane) or (
        kind == "CustomResourceDefinition" and api_version == "apiextensions.k8s.io/v1"
    ):
        return check_definition(obj, source)
    if kind == "Composition" and crossplane:
        return check_composition(obj, source, catalog)
    return _against_schema(obj, source)


def _against_schema(obj: JSON, source: str) -> list[Problem]:
    """``obj`` against the CRD shipped for its kind, else its core Kubernetes schema."""
    shipped = shipped_crd(str(obj.get("apiVersion")), str(obj.get("kind")))
    if shipped is not None:
        return _validate_composite(obj, source, shipped)
    return _problems(source, obj, _check_metadata(obj)) + _validate_core(obj, source)


def _schema_first(obj: JSON, source: str) -> tuple[list[Problem], bool]:
    """An XRD's, CRD's or Composition's schema problems, and whether the checks that read its
    spec may run: not when the schema fails outside metadata, nor without a spec (which
    Crossplane's CRDs allow)."""
    problems = _against_schema(obj, source)
    if not isinstance(obj.get("spec"), dict):
        return [*problems, *_problems(source, obj, [("spec", "Required value")])], False
    return problems, not any(not p.path.startswith("metadata") for p in problems)


def validate_xr(
    obj: JSON, catalog: xrd.Catalog | None = None, source: str = "<xr>"
) -> list[Problem]:
    """Problems with a composite resource of a Modelplane kind (render calls this first).

    An object whose kind no XRD defines gets one Problem saying so.
    """
    catalog = catalog or xrd.catalog()
    api_version, kind = str(obj.get("apiVersion", "")), str(obj.get("kind", ""))
    if catalog.definition_for(api_version, kind) is None:
        return _problems(
            source, obj, [("", f"no XRD in apis/ defines apiVersion {api_version} kind {kind}")]
        )
    return validate_object(obj, source, catalog)


def defaulted(obj: JSON, catalog: xrd.Catalog | None = None) -> JSON:
    """``obj`` as the API server would store it: nulls pruned and schema defaults applied."""
    catalog = catalog or xrd.catalog()
    definition = catalog.definition_for(str(obj.get("apiVersion")), str(obj.get("kind")))
    schema = definition.schema(str(obj.get("apiVersion"))) if definition else None
    if schema is None:
        return copy.deepcopy(obj)
    return xrd.apply_defaults(schema, _prune_nulls(schema, obj))


def _prune_nulls(schema: JSON, value: Any) -> Any:
    """Drop null fields the schema does not mark nullable, as the API server does before
    defaulting (so a null field with a default gets the default)."""
    if isinstance(value, dict):
        properties = schema.get("properties") or {}
        extra = schema.get("additionalProperties")
        out = {}
        for name, item in value.items():
            sub = properties.get(name, extra if isinstance(extra, dict) else {})
            if item is None and not sub.get("nullable"):
                continue
            out[name] = _prune_nulls(sub, item)
        return out
    if isinstance(value, list) and isinstance(schema.get("items"), dict):
        return [_prune_nulls(schema["items"], item) for item in value]
    return value


def validate_update(
    old: Any, new: Any, source: str = "<object>", catalog: xrd.Catalog | None = None
) -> list[Problem]:
    """What the API server would say about an update of the stored ``old`` to ``new``: the
    checks of a create of ``new``, plus the transition rules (``oldSelf``) against ``old``,
    and rules ratcheted where the value they check did not change. Schema errors are not
    ratcheted (``old`` is assumed valid)."""
    if not isinstance(old, dict) or not isinstance(new, dict):
        return validate_object(new, source, catalog)
    catalog = catalog or xrd.catalog()
    api_version, kind = new.get("apiVersion"), new.get("kind")
    definition = (
        catalog.definition_for(api_version, kind)
        if isinstance(api_version, str) and isinstance(kind, str)
        else None
    )
    if definition is None or old.get("apiVersion") != api_version or old.get("kind") != kind:
        return validate_object(new, source, catalog)
    return _validate_composite(without_status(new), source, definition, without_status(old))


def _validate_composite(
    obj: JSON, source: str, definition: xrd.Definition, old: JSON | None = None
) -> list[Problem]:
    api_version = str(obj["apiVersion"])
    version = definition.version(api_version)
    if version is None:
        served = ", ".join(
            f"{definition.group}/{v['name']}" for v in definition.body["spec"]["versions"]
        )
        return _problems(
            source, obj, [("apiVersion", f"{api_version} is not served (served: {served})")]
        )
    if not version.get("served", True):
        return _problems(source, obj, [("apiVersion", f"{api_version} is not served")])
    schema = version["schema"]["openAPIV3Schema"]
    issues = _check_metadata(obj)
    value = xrd.apply_defaults(schema, _prune_nulls(schema, obj))
    stored = (
        openapi.ABSENT if old is None else xrd.apply_defaults(schema, _prune_nulls(schema, old))
    )
    if definition.is_crd:
        root = celrules.with_object_meta(schema)
    else:
        legacy = definition.body.get("apiVersion", "").endswith("/v1") or (
            definition.body["spec"].get("scope") == "LegacyCluster"
        )
        root = celrules.with_object_meta(_with_crossplane_fields(schema, legacy))
    schema_issues, rule_issues = openapi.check_parts(root, value, stored)
    schema_issues = [
        (path, message)
        for path, message in schema_issues
        # identity and metadata are checked above, as ObjectMeta
        if not path.startswith("metadata") and path not in ("apiVersion", "kind")
    ]
    unknown = [(p, m) for p, m in schema_issues if m.startswith("unknown field")]
    if unknown:
        # Strict decoding refuses unknown fields before anything is validated: only they are
        # reported, as the API server answers kubectl's --validate=strict.
        return _problems(source, obj, unknown)
    issues += schema_issues
    issues += openapi.after_schema(root, issues, rule_issues)
    issues += draselectors.issues(definition, value, issues)
    return _problems(source, obj, issues)


def _check_metadata(obj: JSON) -> list[tuple[str, str]]:
    """The ObjectMeta checks every kind gets: a valid name, string labels and annotations."""
    metadata = obj.get("metadata")
    if metadata is None:
        return [("metadata.name", "Required value: name or generateName is required")]
    if not isinstance(metadata, dict):
        return [("metadata", "Invalid value: must be an object")]
    issues: list[tuple[str, str]] = []
    name = metadata.get("name")
    if name is None and not metadata.get("generateName"):
        issues.append(("metadata.name", "Required value: name or generateName is required"))
    elif name is not None and not valid_name(
        name, str(obj.get("apiVersion")), str(obj.get("kind"))
    ):
        issues.append(
            (
                "metadata.name",
                f"Invalid value: {json.dumps(name)}: a lowercase RFC 1123 subdomain must consist "
                "of lower case alphanumeric characters, '-' or '.', and must start and end "
                "with an alphanumeric character",
            )
        )
    namespace = metadata.get("namespace")
    if namespace is not None and (
        not isinstance(namespace, str) or len(namespace) > 63 or not _DNS_LABEL.match(namespace)
    ):
        issues.append(("metadata.namespace", f"Invalid value: {json.dumps(namespace)}"))
    for field in ("labels", "annotations"):
        values = metadata.get(field)
        if values is None:
            continue
        if not isinstance(values, dict):
            issues.append((f"metadata.{field}", "Invalid value: must be a map of strings"))
            continue
        for key, item in values.items():
            if not isinstance(item, str):
                issues.append(
                    (f"metadata.{field}[{key}]", f"Invalid value: {item!r}: must be a string")
                )
            elif field == "labels" and (len(item) > 63 or not _LABEL_VALUE.match(item)):
                issues.append((f"metadata.labels[{key}]", f"Invalid value: {item!r}"))
            if not _valid_qualified_name(str(key)):
                issues.append((f"metadata.{field}", f"Invalid value: {key!r}: invalid key"))
    return issues


def _valid_qualified_name(key: str) -> bool:
    prefix, _, name = key.rpartition("/")
    if prefix and (len(prefix) > 253 or not DNS_SUBDOMAIN.match(prefix)):
        return False
    return len(name) <= 63 and bool(_LABEL_NAME.match(name))


# ---------------------------------------------------------------------------------------------
# Other kinds: shipped CRDs and core Kubernetes schemas


@cache
def shipped_crd(api_version: str, kind: str) -> xrd.Definition | None:
    """The CRD or XRD Modelplane ships for a kind it defines, composes or reads (apis/ and
    ``schemas/crds.txt``, kept by `modelplane generate` as ``<kind>.crd.json`` beside the
    kind's model), as a one-version definition; None if none."""
    group, _, version = api_version.rpartition("/")
    package = group.replace(".", "_").replace("-", "_")
    path = Path(generated.__file__).parent / package / version / f"{kind.lower()}.crd.json"
    try:
        if not group or not path.is_file():
            return None
    except OSError:  # a "kind" no file can be named after (too long, say): none shipped
        return None
    record = json.loads(path.read_text())
    xrd_version = record.get("definedBy")
    body = {
        "apiVersion": xrd_version or "apiextensions.k8s.io/v1",
        "kind": "CompositeResourceDefinition" if xrd_version else "CustomResourceDefinition",
        "spec": {
            "group": group,
            "scope": record["scope"],
            "names": {"kind": record["kind"]},
            "versions": [
                {
                    "name": version,
                    "served": True,
                    "schema": {"openAPIV3Schema": record["openAPIV3Schema"]},
                }
            ],
        },
    }
    return xrd.Definition(path, body)


@cache
def core_validator(api_version: str, kind: str) -> jsonschema.protocols.Validator | None:
    """A validator for a core kind in kubernetes-validate's strict schemas, or None."""
    version = kubernetes_validate.major_minor(KUBERNETES_VERSION)
    api = re.sub(r"^([^./]*)(?:\.[^/]*)?/", r"\1-", api_version)
    directory = f"kubernetes-json-schema/v{version}.0-local-strict"
    try:
        schema = kubernetes_validate.schema_contents(
            f"{directory}/{kind.lower()}-{api}.json", KUBERNETES_VERSION
        )
    except (OSError, kubernetes_validate.VersionNotSupportedError):  # no such file, or no name
        return None
    if not _core_group_matches(schema, api_version, kind):
        return None
    definitions = kubernetes_validate.schema_contents(
        f"{directory}/_definitions.json", KUBERNETES_VERSION
    )
    from referencing import Registry, Resource  # noqa: PLC0415 - kubernetes-validate's dep

    registry = Resource.from_contents(definitions) @ (Resource.from_contents(schema) @ Registry())
    return jsonschema.Draft202012Validator(schema, registry=registry)


def _core_group_matches(schema: JSON, api_version: str, kind: str) -> bool:
    """kubernetes-validate names files by the group's first label; make sure the full group
    matches (so gateway.networking.k8s.io is not mistaken for networking.k8s.io)."""
    gvks = schema.get("x-kubernetes-group-version-kind")
    if not gvks:
        return True
    group, _, version = api_version.rpartition("/")
    return any(
        g.get("group", "") == group and g.get("version") == version and g.get("kind") == kind
        for g in gvks
    )


def _validate_core(obj: JSON, source: str) -> list[Problem]:
    api_version, kind = str(obj.get("apiVersion")), str(obj.get("kind"))
    validator = core_validator(api_version, kind)
    if validator is None:
        return _problems(source, obj, [("", f"no schema for apiVersion {api_version} kind {kind}")])
    issues: list[tuple[str, str]] = []
    for error in sorted(validator.iter_errors(obj), key=lambda e: list(e.absolute_path)):
        path = ""
        for part in error.absolute_path:
            path = f"{path}[{part}]" if isinstance(part, int) else join(path, str(part))
        if path.startswith(("metadata.labels.", "metadata.annotations.")):
            continue  # _check_metadata reports these, with map-key paths
        issues.extend(_jsonschema_issues(path, error))
    return _problems(source, obj, issues)


def _jsonschema_issues(path: str, error: jsonschema.ValidationError) -> list[tuple[str, str]]:
    if error.validator == "additionalProperties" and isinstance(error.instance, dict):
        declared = error.schema.get("properties") or {}
        return [
            (join(path, name), f'unknown field "{name}" (not declared in the schema)')
            for name in error.instance
            if name not in declared
        ]
    if error.validator == "required" and isinstance(error.validator_value, list):
        missing = [n for n in error.validator_value if n not in (error.instance or {})]
        return [(join(path, name), "Required value") for name in missing]
    return [(path, f"Invalid value: {error.message}")]


# ---------------------------------------------------------------------------------------------
# XRDs


_COUNTS = ("maxLength", "minLength", "maxItems", "minItems", "maxProperties", "minProperties")
_KEYWORD_TYPES: dict[str, tuple[type, ...]] = {
    **{key: (int,) for key in _COUNTS},
    **{key: (int, float) for key in ("minimum", "maximum", "multipleOf")},
    **{key: (str,) for key in ("type", "pattern", "format", "description", "title")},
    **{key: (bool,) for key in ("nullable", "exclusiveMinimum", "exclusiveMaximum",
                                "uniqueItems", "x-kubernetes-preserve-unknown-fields",
                                "x-kubernetes-int-or-string", "x-kubernetes-embedded-resource")},
    **{key: (list,) for key in ("allOf", "anyOf", "oneOf", "required", "enum",
                                "x-kubernetes-validations", "x-kubernetes-list-map-keys")},
    "properties": (dict,),
    "x-kubernetes-list-type": (str,),
    "x-kubernetes-map-type": (str,),
}  # fmt: skip


def _schema_problem(schema: Any, path: str = "") -> str | None:
    """Why a schema tree is not even a tree of well-typed schema objects, or None."""
    if not isinstance(schema, dict):
        return f"{path or 'schema'}: must be an object"
    for key, types in _KEYWORD_TYPES.items():
        value = schema.get(key)
        if key in schema and (
            not isinstance(value, types)
            or (isinstance(value, bool) and bool not in types)
            or (key in _COUNTS and value < 0)
        ):
            return f"{join(path, key)}: must be {' or '.join(t.__name__ for t in types)}"
    for key in ("required", "x-kubernetes-list-map-keys"):
        if not all(isinstance(item, str) for item in schema.get(key) or []):
            return f"{join(path, key)}: must be a list of strings"
    children = [(f"properties[{k}]", v) for k, v in (schema.get("properties") or {}).items()]
    children += [(k, schema[k]) for k in ("items", "additionalProperties", "not") if k in schema]
    children += [
        (f"{k}[{i}]", sub)
        for k in ("allOf", "anyOf", "oneOf")
        if k in schema
        for i, sub in enumerate(schema[k])
    ]
    for where, child in children:
        if isinstance(child, bool) and where == "additionalProperties":
            continue
        if problem := _schema_problem(child, join(path, where)):
            return problem
    return None


def check_definition(definition: JSON, source: str = "<xrd>") -> list[Problem]:
    """The API server's (and Crossplane's) checks of an XRD or a CustomResourceDefinition:
    names, versions, structural schemas, defaults, list-map keys, and every CEL rule compiling
    within the cost budget."""
    crd = definition.get("kind") == "CustomResourceDefinition"
    problems, readable = _schema_first(definition, source)
    if not readable:
        return problems
    # The schema guarantees group, names.kind, names.plural and each version's name.
    issues: list[tuple[str, str]] = []
    spec = definition["spec"]
    expected = f"{spec['names']['plural']}.{spec['group']}"
    metadata = definition.get("metadata")
    name = metadata.get("name") if isinstance(metadata, dict) else None
    if name != expected:
        issues.append(("metadata.name", f"Invalid value: {name!r}: must be {expected!r}"))
    versions = spec["versions"]
    if crd:
        if sum(bool(v.get("storage")) for v in versions) != 1:
            issues.append(
                (
                    "spec.versions",
                    "Invalid value: must have exactly one version marked as storage version",
                )
            )
    elif sum(bool(v.get("referenceable")) for v in versions) != 1:
        issues.append(("spec.versions", "exactly one version must be referenceable"))
    seen: set[str] = set()
    # A CRD whose versions share one schema holds it as spec.validation inside the API server,
    # which names it so in its errors.
    shared = crd and all(v.get("schema") == versions[0].get("schema") for v in versions)
    for index, version in enumerate(versions):
        base = f"spec.versions[{index}]"
        if version.get("name") in seen:
            issues.append((f"{base}.name", f"Duplicate value: {version.get('name')!r}"))
        seen.add(version.get("name"))
        schema = (version.get("schema") or {}).get("openAPIV3Schema")
        if not isinstance(schema, dict):
            issues.append((f"{base}.schema.openAPIV3Schema", "Required value"))
            continue
        if shared and index > 0:
            continue  # checked once, as spec.validation
        at = "spec.validation.openAPIV3Schema" if shared else f"{base}.schema.openAPIV3Schema"
        if malformed := _schema_problem(schema):
            where, _, why = malformed.rpartition(": ")
            issues.append((join(at, where), f"Invalid value: {why}"))
            continue
        issues.extend(check_schema(celrules.with_object_meta(schema), at))
    return problems + _problems(source, definition, issues)


def check_schema(schema: JSON, base: str = "openAPIV3Schema") -> list[tuple[str, str]]:
    """Structural-schema, default, list-type and CEL (compile + cost) checks of one schema.

    As the API server does, the rules of a node are compiled only when neither the node nor
    anything below it has a schema error (their types may not be derivable)."""
    issues: list[tuple[str, str]] = []
    if schema.get("type") != "object":
        issues.append((f"{base}.type", "Required value: must be object at the root"))
    nodes = _schema_nodes(schema)
    broken: list[str] = []  # schema paths (relative to base) with a schema error
    for entry in nodes:
        node, in_junctor, where = entry.node, entry.in_junctor, base + entry.path
        found = [(f"{where}.{p}" if p else where, m) for p, m in _check_node(node, in_junctor)]
        if not in_junctor:
            for index, rule in enumerate(node.get("x-kubernetes-validations") or []):
                at = f"{where}.x-kubernetes-validations[{index}]"
                found += [(f"{at}.{p}", m) for p, m in _rule_schema_issues(rule, node)]
        if found:
            broken.append(entry.path)
        issues += found
        if not in_junctor and "default" in node:
            for sub_path, message in openapi.check_value(node, node["default"]):
                issues.append((join(f"{where}.default", sub_path).rstrip("."), message))
    costs: list[tuple[str, int]] = []  # (path of the expression, its cost times cardinality)
    for entry in nodes:
        node, where = entry.node, base + entry.path
        rules = node.get("x-kubernetes-validations") or []
        if entry.in_junctor or not rules or any(_below(b, entry.path) for b in broken):
            continue
        loose = base + entry.uncorrelatable if entry.uncorrelatable else None
        for index, rule in enumerate(rules):
            rule_issues, rule_costs = _check_rule(rule, node, entry.cardinality, loose)
            at = f"{where}.x-kubernetes-validations[{index}]"
            costs += [(f"{at}.{field}", cost) for field, cost in rule_costs]
            issues.extend((f"{at}.{p}", m) for p, m in rule_issues)
    total_cost = min(sum(cost for _, cost in costs), celrules.U64)
    if total_cost > celrules.STATIC_CRD_COST_LIMIT:
        # The server also names the (up to four) dearest expressions of at least 1 % of the
        # limit.
        dearest = sorted(
            (c for c in costs if c[1] >= celrules.STATIC_CRD_COST_LIMIT // 100),
            key=lambda c: -c[1],
        )[:4]
        for path, _ in dearest:
            issues.append((path, "Forbidden: contributed to estimated rule cost total exceeding "
                           "cost limit for entire OpenAPIv3 schema"))  # fmt: skip
        issues.append(
            (
                base,
                "Forbidden: "
                + _cost_message(
                    "x-kubernetes-validations estimated rule cost total for entire OpenAPIv3 "
                    "schema",
                    total_cost,
                    celrules.STATIC_CRD_COST_LIMIT,
                ),
            )
        )
    return issues


def _below(path: str, ancestor: str) -> bool:
    """Whether the schema path ``path`` is ``ancestor`` or lies below it."""
    return path == ancestor or path.startswith((ancestor + ".", ancestor + "["))


@dataclasses.dataclass(frozen=True)
class _SchemaNode:
    path: str
    node: JSON
    cardinality: int  # max times the node can occur in one object
    in_junctor: bool  # inside allOf/anyOf/oneOf/not
    uncorrelatable: str | None  # the items path of an atomic or set list above, if any


def _schema_nodes(schema: JSON) -> list[_SchemaNode]:
    """Every node with its cardinality as the API server reckons it: the product of the
    maxItems/maxProperties above it when all are declared, else how many values of the node
    fit in one request."""
    out: list[_SchemaNode] = []

    def visit(node: JSON, path: str, bound: int | None, junctor: bool, loose: str | None) -> None:
        cardinality = bound if bound is not None else celrules.max_cardinality(node)
        out.append(_SchemaNode(path, node, cardinality, junctor, loose))
        inner = (
            bound * celrules.max_elements(node)
            if bound is not None and celrules.is_bounded(node)
            else None
        )
        for name, sub in (node.get("properties") or {}).items():
            if isinstance(sub, dict):
                visit(sub, f"{path}.properties[{name}]", bound, junctor, loose)
        if isinstance(node.get("items"), dict):
            items = f"{path}.items"
            # Only list-map items correlate an old object's item with the new one's.
            if node.get("x-kubernetes-list-type") != "map":
                loose = loose or items
            visit(node["items"], items, inner, junctor, loose)
        if isinstance(node.get("additionalProperties"), dict):
            visit(
                node["additionalProperties"], f"{path}.additionalProperties", inner, junctor, loose
            )
        for key in ("allOf", "anyOf", "oneOf"):
            for index, sub in enumerate(node.get(key) or []):
                if node.get("x-kubernetes-int-or-string") and sub in _INT_OR_STRING_BRANCHES:
                    continue  # the one place a junctor may name types
                if isinstance(sub, dict):
                    visit(sub, f"{path}.{key}[{index}]", bound, True, loose)
        if isinstance(node.get("not"), dict):
            visit(node["not"], f"{path}.not", bound, True, loose)

    visit(schema, "", 1, False, None)
    return out


_TYPES = {"object", "array", "string", "integer", "number", "boolean"}
_INT_OR_STRING_BRANCHES = ({"type": "integer"}, {"type": "string"})
_JUNCTOR_FORBIDDEN = ("type", "default", "additionalProperties", "nullable", "description")
_LIST_TYPES = {"atomic", "set", "map"}


def _check_node(node: JSON, in_junctor: bool) -> list[tuple[str, str]]:
    """Structural rules for one schema node; paths are relative to the node."""
    issues: list[tuple[str, str]] = []
    kind = node.get("type")
    int_or_string = node.get("x-kubernetes-int-or-string")
    preserve = node.get("x-kubernetes-preserve-unknown-fields")
    if in_junctor:
        for field in _JUNCTOR_FORBIDDEN:
            if field in node:
                issues.append(
                    (field, "Forbidden: must not be used inside allOf, anyOf, oneOf or not")
                )
        return issues
    if kind is None and not int_or_string and not preserve:
        issues.append(("type", "Required value: must not be empty for specified object fields"))
    elif kind is not None and kind not in _TYPES:
        issues.append(("type", f"Unsupported value: {kind!r}: supported values: {sorted(_TYPES)}"))
    if int_or_string and kind is not None:
        issues.append(("type", "Forbidden: must be empty with x-kubernetes-int-or-string"))
    if "properties" in node and "additionalProperties" in node:
        issues.append(
            (
                "additionalProperties",
                "Forbidden: additionalProperties and properties are mutual exclusive",
            )
        )
    if node.get("additionalProperties") is False:
        issues.append(("additionalProperties", "Forbidden: must not be false"))
    if kind == "array" and not isinstance(node.get("items"), dict):
        issues.append(("items", "Required value: must be specified for type array"))
    for field in ("$ref", "definitions", "patternProperties", "dependencies", "additionalItems"):
        if field in node:
            issues.append((field, f"Forbidden: {field} is not supported"))
    if "pattern" in node:
        try:
            re.compile(node["pattern"])
        except re.error as err:
            issues.append(("pattern", f"Invalid value: {node['pattern']!r}: {err}"))
    if node.get("enum") and kind:
        for value in node["enum"]:
            if not openapi._matches_type(kind, value):
                issues.append(("enum", f"Invalid value: {value!r}: must be of type {kind}"))
    issues.extend(_check_list_type(node))
    return issues


def _check_list_type(node: JSON) -> list[tuple[str, str]]:
    list_type = node.get("x-kubernetes-list-type")
    keys = node.get("x-kubernetes-list-map-keys")
    issues: list[tuple[str, str]] = []
    if list_type is None:
        if keys:
            issues.append(
                ("x-kubernetes-list-map-keys", "Forbidden: requires x-kubernetes-list-type map")
            )
        return issues
    if list_type not in _LIST_TYPES:
        issues.append(
            ("x-kubernetes-list-type", f"Unsupported value: {list_type!r}: atomic, set or map")
        )
        return issues
    if node.get("type") != "array":
        issues.append(("x-kubernetes-list-type", "Forbidden: only allowed on arrays"))
        return issues
    items = node.get("items") if isinstance(node.get("items"), dict) else {}
    if (
        list_type == "set"
        and items.get("type") == "object"
        and items.get("x-kubernetes-map-type") != "atomic"
    ):
        issues.append(("items", "Invalid value: set lists must have scalar or atomic items"))
    if list_type in ("set", "map") and items.get("nullable"):
        issues.append(
            ("items.nullable", f"Forbidden: cannot be nullable for list type {list_type}")
        )
    if list_type != "map":
        if keys:
            issues.append(("x-kubernetes-list-map-keys", "Forbidden: only for list type map"))
        return issues
    if not keys:
        issues.append(("x-kubernetes-list-map-keys", "Required value: at least one key"))
        return issues
    if items.get("type") != "object":
        issues.append(("items.type", "Invalid value: must be object for list type map"))
        return issues
    properties = items.get("properties") or {}
    required = set(items.get("required") or [])
    for key in keys:
        prop = properties.get(key)
        where = f"items.properties[{key}]"
        if prop is None:
            issues.append(
                ("x-kubernetes-list-map-keys", f"Invalid value: {key!r}: not a property of items")
            )
            continue
        if prop.get("type") in ("object", "array"):
            issues.append((f"{where}.type", "Invalid value: list-map keys must be scalars"))
        if key not in required and "default" not in prop:
            issues.append(
                (
                    f"{where}.default",
                    "Required value: this property is in x-kubernetes-list-map-keys, so it "
                    "must have a default or be a required property",
                )
            )
        if prop.get("nullable"):
            issues.append((f"{where}.nullable", "Forbidden: list-map keys cannot be nullable"))
    return issues


def _check_rule(
    rule: Any, node: JSON, cardinality: int, uncorrelatable: str | None = None
) -> tuple[list[tuple[str, str]], list[tuple[str, int]]]:
    """Compile one rule (and its messageExpression), estimate its cost in the schema, and
    check where a transition rule may stand (the API server's messages). Returns the issues
    and the cost of each expression ("rule", "messageExpression") times its cardinality."""
    if not isinstance(rule, dict) or not isinstance(rule.get("rule"), str):
        return [], []
    issues: list[tuple[str, str]] = []
    costs: list[tuple[str, int]] = []
    for field in ("rule", "messageExpression"):
        source = rule.get(field)
        if field == "messageExpression" and not source:
            continue
        try:
            result = "bool" if field == "rule" else "string"
            per_call = celrules.estimate_cost(
                source, node, result, optional_old_self=rule.get("optionalOldSelf") is True
            )
        except celrules.RuleError as err:
            issues.append((field, f"Invalid value: {source!r}: {err}"))
            if field == "rule":
                costs.append((field, 0))
                if rule.get("optionalOldSelf") is not None:  # no oldSelf seen: none is used
                    shown = json.dumps(rule["optionalOldSelf"])
                    issues.append(("optionalOldSelf", f"Invalid value: {shown}: may not be set "
                                   "if oldSelf is not used in rule"))  # fmt: skip
                break  # the server compiles a messageExpression only for a rule that compiles
            continue
        # The server multiplies a rule's cost by how often its node can occur, but not its
        # messageExpression's (which runs only when the rule fails).
        expression_cost = min(per_call * (cardinality if field == "rule" else 1), celrules.U64)
        costs.append((field, expression_cost))
        if field == "rule":
            issues.extend(_transition_issues(rule, source, uncorrelatable))
        if expression_cost > celrules.STATIC_COST_LIMIT:
            label = "estimated rule cost" if field == "rule" else "estimated messageExpression cost"
            issues.append(
                (
                    field,
                    "Forbidden: "
                    + _cost_message(label, expression_cost, celrules.STATIC_COST_LIMIT),
                )
            )
    return issues, costs


def _rule_schema_issues(rule: Any, node: JSON) -> list[tuple[str, str]]:
    """What the API server checks of a rule before compiling anything (its schema errors):
    a rule is given, message, messageExpression and fieldPath are usable, reason known."""
    if not isinstance(rule, dict) or not isinstance(rule.get("rule"), str):
        return [("rule", "Required value")]
    issues: list[tuple[str, str]] = []
    text = rule["rule"].strip()
    message = str(rule.get("message") or "")
    if not text:
        issues.append(("rule", "Required value: rule is not specified"))
    elif message and not message.strip():
        issues.append(("message", f"Invalid value: {message!r}: must be non-empty if specified"))
    elif re.search(r"[\n\r]", message.strip()):
        issues.append(("message", f"Invalid value: {message!r}: must not contain line breaks"))
    elif re.search(r"[\n\r]", text) and not message.strip():
        issues.append(
            ("message", "Required value: message must be specified if rule contains line breaks")
        )
    expression = str(rule.get("messageExpression") or "")
    if expression and not expression.strip():
        issues.append(
            (
                "messageExpression",
                "Required value: messageExpression must be non-empty if specified",
            )
        )
    reason = rule.get("reason")
    if reason is not None and reason not in openapi.CEL_REASONS:
        issues.append(
            (
                "reason",
                f"Unsupported value: {reason!r}: supported values: "
                + ", ".join(sorted(openapi.CEL_REASONS)),
            )
        )
    field_path = str(rule.get("fieldPath") or "")
    if field_path and not field_path.strip():
        issues.append(
            ("fieldPath", f"Invalid value: {field_path!r}: must be non-empty if specified")
        )
    elif re.search(r"[\n\r]", field_path):
        issues.append(("fieldPath", f"Invalid value: {field_path!r}: must not contain line breaks"))
    elif field_path and not _valid_field_path(node, field_path):
        issues.append(("fieldPath", f"Invalid value: {field_path!r}: must be a valid path"))
    return issues


def _transition_issues(
    rule: JSON, source: str, uncorrelatable: str | None
) -> list[tuple[str, str]]:
    """A rule using oldSelf must stand where old and new values correlate; optionalOldSelf
    only on such a rule."""
    if celrules.compile_rule(source).uses_old_self:
        if uncorrelatable:
            return [
                (
                    "rule",
                    f"Invalid value: {source!r}: oldSelf cannot be used on the uncorrelatable "
                    f"portion of the schema within {uncorrelatable}",
                )
            ]
    elif rule.get("optionalOldSelf") is not None:
        shown = json.dumps(rule["optionalOldSelf"])
        return [
            (
                "optionalOldSelf",
                f"Invalid value: {shown}: may not be set if oldSelf is not used in rule",
            )
        ]
    return []


def _valid_field_path(node: JSON, field_path: str) -> bool:
    """Whether a rule's fieldPath (``.spec.foo``, ``.labels['key']``) names a field of the
    schema: properties and map keys only, never into a list (cel.ValidFieldPath)."""
    return openapi.rule_field_path(node, field_path) is not None


def _cost_message(label: str, cost: int, limit: int) -> str:
    factor = cost / limit
    if factor > 100:
        shown = "more than 100x"
    elif factor < 1.5:
        shown = f"{factor:f}x"
    else:
        shown = f"{factor:.1f}x"
    return (
        f"{label} exceeds budget by factor of {shown} (try simplifying the rule, or adding "
        "maxItems, maxProperties, and maxLength where arrays, maps, and strings are declared)"
    )


# ---------------------------------------------------------------------------------------------
# Compositions


def check_composition(
    composition: JSON, source: str = "<composition>", catalog: xrd.Catalog | None = None
) -> list[Problem]:
    """A Composition must be Pipeline mode, name its type, and use functions this repo has."""
    problems, readable = _schema_first(composition, source)
    if not readable:
        return problems
    issues: list[tuple[str, str]] = []
    spec = composition["spec"]
    ref = spec["compositeTypeRef"]
    if catalog is not None and catalog.definition_for(ref["apiVersion"], ref["kind"]) is None:
        issues.append(
            (
                "spec.compositeTypeRef",
                f"no XRD defines apiVersion {ref['apiVersion']} kind {ref['kind']}",
            )
        )
    pipeline = spec.get("pipeline")
    if not isinstance(pipeline, list) or not pipeline:
        issues.append(("spec.pipeline", "Required value: at least one step"))
        pipeline = []
    try:
        functions: Path | None = repo.root() / "functions"
    except FileNotFoundError:
        functions = None  # outside the repository there is no function list to check against
    # The schema guarantees every step is an object with a step name and a functionRef.name.
    steps: set[str] = set()
    for index, step in enumerate(pipeline):
        where = f"spec.pipeline[{index}]"
        if step["step"] in steps:
            issues.append((f"{where}.step", f"Duplicate value: {step['step']!r}"))
        steps.add(step["step"])
        name = step["functionRef"]["name"]
        if not name:
            issues.append((f"{where}.functionRef.name", "Required value"))
        elif (
            functions is not None
            and not (functions / (directory := function_directory(name))).is_dir()
        ):
            issues.append(
                (
                    f"{where}.functionRef.name",
                    f"unknown function {name!r}: no functions/{directory} "
                    "directory in the repository",
                )
            )
    return problems + _problems(source, composition, issues)


def relative(path: Path) -> str:
    """How a file is named in problems: relative to the working directory when possible."""
    try:
        return str(path.resolve().relative_to(Path.cwd().resolve()))
    except ValueError:
        return str(path)
