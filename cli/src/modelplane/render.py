"""``modelplane render``: a drop-in for ``crossplane render`` that needs no Docker.

It reads an XR (and optionally a Composition, defaulting to the one in apis/ for the XR's
type), applies the XRD's schema defaults, runs the composition's function pipeline against
real gRPC servers (repository functions hosted in-process, or Development targets from a
Functions file) and prints the document stream ``crossplane render`` v2.5 prints. Since v2.3
that command runs one real reconcile of Crossplane's composite reconciler against an in-memory
store (spec ``render.md`` "v2.3+"); ``reconcile`` models that reconcile. Where render is looser
than the in-cluster reconciler we follow the reconciler (decision D7); see design/render.md.
"""

from __future__ import annotations

import base64
import copy
import dataclasses
import json
import re
import time
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

import click
import yaml

from modelplane import goyaml, xrd
from modelplane.pipeline import (
    COMPOSE_REASON,
    FunctionHost,
    PipelineError,
    PipelineResult,
    SchemaSource,
    child_name,
    go_quote,
    result_event,
    run_pipeline,
)

JSON = dict[str, Any]

RESOURCE_NAME_ANNOTATION = "crossplane.io/composition-resource-name"
COMPOSITE_LABEL = "crossplane.io/composite"
CLAIM_NAME_LABEL = "crossplane.io/claim-name"
CLAIM_NAMESPACE_LABEL = "crossplane.io/claim-namespace"
RENDER_API_VERSION = "render.crossplane.io/v1beta1"
# Render pins every condition's time so its output is stable across runs.
LAST_TRANSITION_TIME = "2024-01-01T00:00:00Z"


class RenderError(Exception):
    """Why the composite resource cannot be rendered (printed after the standard prefix)."""


# --------------------------------------------------------------------------------------------
# Reading manifests


class _Loader(yaml.SafeLoader):
    """YAML as Kubernetes reads it: timestamps stay strings (Go decodes them into JSON text)."""


_Loader.yaml_implicit_resolvers = {
    first: [(tag, regexp) for tag, regexp in resolvers if tag != "tag:yaml.org,2002:timestamp"]
    for first, resolvers in yaml.SafeLoader.yaml_implicit_resolvers.items()
}


def _yaml_problem(err: yaml.YAMLError) -> str:
    mark = getattr(err, "problem_mark", None)
    problem = getattr(err, "problem", None) or str(err)
    where = f" (line {mark.line + 1}, column {mark.column + 1})" if mark is not None else ""
    return f"{problem}{where}"


def parse_documents(text: str, source: str) -> list[JSON]:
    """The non-empty documents of a YAML stream; each must be a mapping."""
    try:
        documents = list(yaml.load_all(text, Loader=_Loader))
    except yaml.YAMLError as err:
        raise RenderError(f"cannot parse {source}: {_yaml_problem(err)}") from err
    objects = []
    for n, document in enumerate(documents):
        if document is None:
            continue
        if not isinstance(document, dict):
            raise RenderError(
                f"cannot parse {source}: document {n + 1} is not a Kubernetes object "
                f"(a YAML mapping), it is a {type(document).__name__}"
            )
        objects.append(document)
    return objects


def _read(path: Path) -> str:
    try:
        return path.read_text()
    except OSError as err:
        raise RenderError(f"cannot read {path}: {err.strerror or err}") from err


def load_objects(location: str) -> list[JSON]:
    """Every object in a YAML file, or in the *.yaml / *.yml files directly inside a folder."""
    path = Path(location)
    if path.is_dir():
        files = sorted(p for p in path.iterdir() if p.suffix in (".yaml", ".yml") and p.is_file())
        if not files:
            raise RenderError(f"no .yaml or .yml files in directory {location}")
        return [obj for file in files for obj in parse_documents(_read(file), str(file))]
    if not path.exists():
        raise RenderError(f"file {location} does not exist")
    return parse_documents(_read(path), location)


def load_one(location: str, what: str) -> JSON:
    objects = load_objects(location)
    if len(objects) != 1:
        raise RenderError(
            f"{location} must hold exactly one {what} manifest, it holds {len(objects)}"
        )
    return objects[0]


def _meta(obj: JSON) -> JSON:
    metadata = obj.get("metadata")
    return metadata if isinstance(metadata, dict) else {}


def _describe(obj: JSON) -> str:
    return f"{obj.get('kind')}/{_meta(obj).get('name', '')}"


# --------------------------------------------------------------------------------------------
# Inputs: XR, Composition, context, credentials, observed resources


def _check_xr(xr: JSON, location: str) -> None:
    for field in ("apiVersion", "kind"):
        if not isinstance(xr.get(field), str) or not xr[field]:
            raise RenderError(f"composite resource in {location} has no {field}")
    if not _meta(xr).get("name"):
        raise RenderError(f"composite resource in {location} has no metadata.name")


def select_composition(xr: JSON, location: str | None) -> JSON:
    """The Composition to run: the one given, else the one in apis/ for the XR's type."""
    api_version, kind = xr["apiVersion"], xr["kind"]
    if location is not None:
        composition = load_one(location, "Composition")
        if composition.get("kind") != "Composition":
            raise RenderError(f"not a composition: {_describe(composition)}")
        return composition
    catalog = xrd.catalog()
    found = catalog.composition_for(api_version, kind)
    if found is not None:
        return found[1]
    if catalog.definition_for(api_version, kind) is None:
        known = sorted({d.kind for d in catalog.definitions.values()})
        raise RenderError(
            f"unknown kind {kind} ({api_version}): no CompositeResourceDefinition in apis/ "
            f"defines it (known kinds: {', '.join(known)}); give a Composition as the second "
            "argument"
        )
    raise RenderError(
        f"no Composition in apis/ has compositeTypeRef {api_version} {kind}; give a "
        "Composition as the second argument"
    )


def check_composition(xr: JSON, composition: JSON) -> None:
    """The checks crossplane render makes before running anything (render.md §2.2)."""
    spec = composition.get("spec") or {}
    ref = spec.get("compositeTypeRef") or {}
    if ref.get("kind") != xr["kind"]:
        raise RenderError(
            f"composition's compositeTypeRef.kind ({ref.get('kind')}) does not match XR's "
            f"kind ({xr['kind']})"
        )
    if ref.get("apiVersion") != xr["apiVersion"]:
        raise RenderError(
            f"composition's compositeTypeRef.apiVersion ({ref.get('apiVersion')}) does not "
            f"match XR's apiVersion ({xr['apiVersion']})"
        )
    selector = ((xr.get("spec") or {}).get("crossplane") or {}).get("compositionSelector") or {}
    labels = _meta(composition).get("labels") or {}
    for key, value in (selector.get("matchLabels") or {}).items():
        if labels.get(key) != value:
            raise RenderError(
                f"composition {_meta(composition).get('name', '')!r} does not match the XR's "
                f"spec.crossplane.compositionSelector: label {key}={value} is missing"
            )
    if spec.get("mode") != "Pipeline":
        raise RenderError(
            "render only supports Composition Function pipelines: Composition "
            f"{_meta(composition).get('name', '')!r} must use spec.mode: Pipeline"
        )


def load_xrd(location: str) -> xrd.Definition:
    """``--xrd``: one CompositeResourceDefinition."""
    body = load_one(location, "CompositeResourceDefinition")
    if body.get("kind") != "CompositeResourceDefinition":
        raise RenderError(f"cannot load XRD from {location!r}: {_describe(body)} is not an XRD")
    spec = body.get("spec") or {}
    if not (spec.get("group") and (spec.get("names") or {}).get("kind")):
        raise RenderError(f"cannot load XRD from {location!r}: no spec.group or spec.names.kind")
    return xrd.Definition(Path(location), body)


def default_xr(xr: JSON, given: xrd.Definition | None = None) -> JSON:
    """The XR with its XRD's schema defaults applied, as the API server would store it: the
    ``--xrd`` given, else the one in apis/ for the XR's kind."""
    definition = given or xrd.catalog().definition_for(xr["apiVersion"], xr["kind"])
    if definition is None:
        return xr  # a kind from outside this repository: no XRD, no defaults (like render)
    schema = definition.schema(xr["apiVersion"])
    if schema is None:
        version = xr["apiVersion"].rsplit("/", 1)[-1]
        raise RenderError(f"the specified API version '{version}' does not exist in the XRD")
    return xrd.apply_defaults(schema, xr)


def validate_xr(xr: JSON) -> None:
    """Refuse an XR its XRD's schema or CEL rules reject (the API server would never admit it).

    crossplane render skips this; we check so a user learns about the bad field here, not from
    the cluster. See design/render.md.
    """
    if xrd.catalog().definition_for(xr["apiVersion"], xr["kind"]) is None:
        return  # a kind from outside this repository: nothing to validate against
    from modelplane import validation  # noqa: PLC0415 - CEL and schemas load only when needed

    problems = [
        f"{p.path}: {p.message}" if p.path else p.message for p in validation.validate_xr(xr)
    ]
    if problems:
        listed = "; ".join(problems[:5])
        more = f"; and {len(problems) - 5} more" if len(problems) > 5 else ""
        raise RenderError(f"{xr['kind']} {_meta(xr).get('name', '')!r} is invalid: {listed}{more}")


def parse_context(values: tuple[str, ...], files: tuple[str, ...]) -> JSON:
    """The initial pipeline context: --context-files first, then --context-values."""
    context: JSON = {}
    for flag, pairs in (("--context-files", files), ("--context-values", values)):
        for pair in pairs:
            key, sep, value = pair.partition("=")
            if not sep or not key:
                raise RenderError(f"{flag} {pair!r} is not KEY=VALUE")
            text = _read(Path(value)) if flag == "--context-files" else value
            try:
                context[key] = yaml.load(text, Loader=_Loader)
            except yaml.YAMLError as err:
                raise RenderError(f"{flag} {key}: {_yaml_problem(err)}") from err
    return context


def annotate_functions(functions: list[JSON], pairs: tuple[str, ...]) -> list[JSON]:
    """``--function-annotations``: set each KEY=VALUE on every Function, overriding."""
    annotations: dict[str, str] = {}
    for pair in pairs:
        key, sep, value = pair.partition("=")
        if not sep or not key:
            raise RenderError(f"--function-annotations {pair!r} is not KEY=VALUE")
        annotations[key] = value
    if not annotations:
        return functions
    out = copy.deepcopy(functions)
    for fn in out:
        metadata = fn.setdefault("metadata", {})
        metadata["annotations"] = {**(metadata.get("annotations") or {}), **annotations}
    return out


def load_schemas(location: str | None) -> SchemaSource | None:
    """``--required-schemas``: every ``*.json`` OpenAPI v3 document below a directory."""
    if location is None:
        return None
    root = Path(location)
    if not root.is_dir():
        raise RenderError(f"cannot load required schemas from {location!r}: not a directory")
    files = sorted(p for p in root.rglob("*.json") if p.is_file())
    if not files:
        raise RenderError(
            f"cannot load required schemas from {location!r}: no JSON files found in {location!r}"
        )
    documents = []
    for file in files:
        try:
            document = json.loads(_read(file))
        except json.JSONDecodeError as err:
            raise RenderError(f"cannot parse OpenAPI JSON from {str(file)!r}: {err}") from err
        if not isinstance(document, dict):
            raise RenderError(f"cannot parse OpenAPI JSON from {str(file)!r}: not an object")
        documents.append(document)
    return SchemaSource(documents)


def load_credentials(location: str | None) -> dict[str, dict[str, bytes]]:
    """Secret data by ``"<namespace>/<name>"``; like render, ``stringData`` is ignored."""
    if location is None:
        return {}
    secrets: dict[str, dict[str, bytes]] = {}
    for obj in load_objects(location):
        if obj.get("kind") != "Secret":
            raise RenderError(f"--function-credentials: {_describe(obj)} is not a Secret")
        key = f"{_meta(obj).get('namespace', '')}/{_meta(obj).get('name', '')}"
        try:
            secrets[key] = {
                k: base64.b64decode(v, validate=True) for k, v in (obj.get("data") or {}).items()
            }
        except (ValueError, TypeError) as err:
            raise RenderError(f"Secret {key}: data is not valid base64: {err}") from err
    return secrets


def load_observed(location: str | None) -> list[JSON]:
    """The observed composed resources, in file order (render makes one resource reference
    per object, in this order, before the reconcile observes them)."""
    if location is None:
        return []
    return load_objects(location)


# --------------------------------------------------------------------------------------------
# Conditions, as crossplane-runtime's ConditionedStatus handles them

# v2.3+ render's XR has no resourceVersion of its own; it gets this one.
RESOURCE_VERSION = "999"
PAUSED_ANNOTATION = "crossplane.io/paused"
RECONCILE_REQUEST_ANNOTATION = "crossplane.io/reconcile-requested-at"
PAUSED_MESSAGE = "Reconciliation (including deletion) is paused via the pause annotation"
_RFC3339 = re.compile(r"\d{4}-\d{2}-\d{2}[Tt]\d{2}:\d{2}:\d{2}(\.\d+)?([Zz]|[+-]\d{2}:\d{2})")
_RBAC_GROUP = "rbac.authorization.k8s.io"
_RBAC_KINDS = frozenset({"Role", "ClusterRole", "RoleBinding", "ClusterRoleBinding"})
_DNS1123_SUBDOMAIN = re.compile(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*")


def condition(type_: str, status: str, reason: str, message: str = "", generation: int = 0) -> JSON:
    """One condition as Go marshals it (``message`` and ``observedGeneration`` only when set),
    at render's fixed time."""
    out: JSON = {
        "type": type_,
        "status": status,
        "lastTransitionTime": LAST_TRANSITION_TIME,
        "reason": reason,
    }
    if message:
        out["message"] = message
    if generation:
        out["observedGeneration"] = generation
    return out


def _decode_condition(raw: Any) -> JSON | None:
    """``raw`` decoded into crossplane-runtime's Condition and marshalled back (unknown fields
    dropped, ``reason`` always present); None where Go's decoder would fail."""
    if not isinstance(raw, dict):
        return None
    texts = {}
    for field in ("type", "status", "reason", "message"):
        value = raw.get(field)
        if value is not None and not isinstance(value, str):
            return None
        texts[field] = value or ""
    time_ = raw.get("lastTransitionTime")
    if time_ is not None and not (isinstance(time_, str) and _RFC3339.fullmatch(time_)):
        return None
    generation = raw.get("observedGeneration")
    if isinstance(generation, float) and generation.is_integer():
        generation = int(generation)
    if generation is not None and (isinstance(generation, bool) or not isinstance(generation, int)):
        return None
    out = {
        "type": texts["type"],
        "status": texts["status"],
        "lastTransitionTime": time_,
        "reason": texts["reason"],
    }
    if texts["message"]:
        out["message"] = texts["message"]
    if generation:
        out["observedGeneration"] = generation
    return out


def get_conditions(obj: JSON) -> list[JSON] | None:
    """``status.conditions`` decoded, ``[]`` when there are none; None when they do not
    decode (Go leaves such an object alone)."""
    status = obj.get("status")
    if not isinstance(status, dict):
        return [] if status is None else None
    raw = status.get("conditions")
    if raw is None:
        return []
    if not isinstance(raw, list):
        return None
    decoded = [_decode_condition(c) for c in raw]
    return None if any(c is None for c in decoded) else [c for c in decoded if c is not None]


def _equal(a: JSON, b: JSON) -> bool:
    """Condition.Equal: the time never counts; observedGeneration only when both have one."""
    fields = ["type", "status", "reason", "message"]
    if a.get("observedGeneration") and b.get("observedGeneration"):
        fields.append("observedGeneration")
    return all(a.get(f, "") == b.get(f, "") for f in fields)


def set_conditions(obj: JSON, *conditions: JSON) -> None:
    """ConditionedStatus.SetConditions on ``obj``: a condition replaces each one of its type
    unless it equals it (keeping the older time), and is appended when its type is new."""
    merged = get_conditions(obj) or []
    for new in conditions:
        exists = False
        for i, existing in enumerate(merged):
            if existing["type"] != new["type"]:
                continue
            exists = True
            if not _equal(existing, new):
                merged[i] = dict(new)
        if not exists:
            merged.append(dict(new))
    status = obj.get("status")
    if not isinstance(status, dict):
        status = obj["status"] = {}
    status["conditions"] = merged


def pin_condition_times(obj: JSON) -> None:
    """render's ReplaceConditionTimestamps: every condition of an object with a status gets
    the fixed time. A status without conditions gets ``conditions: null`` (Go writes its nil
    list back); conditions that do not decode are left as they are."""
    status = obj.get("status")
    if not isinstance(status, dict):
        return
    if status.get("conditions") is None:
        status["conditions"] = None
        return
    decoded = get_conditions(obj)
    if decoded is not None:
        status["conditions"] = [{**c, "lastTransitionTime": LAST_TRANSITION_TIME} for c in decoded]


def _names(names: list[str]) -> str:
    """crossplane-runtime's StableNAndSomeMore: ``a``, ``a, b``, ``a, b, and c``, ``... N more``."""
    names = sorted(names)
    if len(names) > 3:
        return f"{', '.join(names[:3])}, and {len(names) - 3} more"
    if len(names) == 3:
        return f"{', '.join(names[:2])}, and {names[2]}"
    return ", ".join(names)


def _ready_condition(result: PipelineResult) -> JSON:
    """Ready as the reconciler sets it: the composite's own readiness when a function gave one,
    else Available unless some composed resource is not ready."""
    if result.composite_ready == "True":
        return condition("Ready", "True", "Available")
    if result.composite_ready == "False":
        return condition("Ready", "False", "Creating")
    unready = [name for name, r in result.resources.items() if r.ready != "True"]
    if unready:
        return condition("Ready", "False", "Creating", f"Unready resources: {_names(unready)}")
    return condition("Ready", "True", "Available")


# --------------------------------------------------------------------------------------------
# One reconcile, as crossplane render v2.3+ runs it (``crossplane internal render``)


@dataclasses.dataclass
class Reconciled:
    """What one reconcile leaves behind: the XR as last written, the composed resources it
    applied (sorted by resource name), its events in order, and the pipeline's last context
    (None when the pipeline did not run or its last step returned none)."""

    composite: JSON
    composed: list[JSON]
    events: list[JSON]  # {"type": "Normal" | "Warning", "reason", "message"}
    context: JSON | None


def fake_uid(xr: JSON) -> str:
    """The UID render gives the XR: a SHA-1 (version 5) UUID in the nil namespace of
    ``<group>/<version>, Kind=<kind> NUL <namespace> NUL <name>``."""
    group, _, version = str(xr["apiVersion"]).rpartition("/")
    metadata = _meta(xr)
    data = (
        f"{group}/{version}, Kind={xr['kind']}\x00"
        f"{metadata.get('namespace') or ''}\x00{metadata.get('name') or ''}"
    )
    return str(uuid.uuid5(uuid.UUID(int=0), data))


def _event(type_: str, reason: str, message: str) -> JSON:
    return {"type": type_, "reason": reason, "message": message}


def _mapping(obj: JSON, key: str) -> JSON:
    """``obj[key]``, made an empty mapping when it is absent or not one."""
    value = obj.get(key)
    if not isinstance(value, dict):
        value = obj[key] = {}
    return value


def _reference(obj: JSON, with_namespace: bool, with_uid: bool) -> JSON:
    """A corev1.ObjectReference to ``obj`` as Go marshals it (empty fields left out); the
    namespace only for a cluster-scoped XR, whose schema allows one."""
    metadata = _meta(obj)
    fields = {
        "apiVersion": obj.get("apiVersion"),
        "kind": obj.get("kind"),
        "name": metadata.get("name"),
        "namespace": metadata.get("namespace") if with_namespace else None,
        "uid": metadata.get("uid") if with_uid else None,
    }
    return {k: v for k, v in fields.items() if isinstance(v, str) and v}


def _ref_key(ref: JSON) -> bytes:
    return "".join(ref.get(f, "") for f in ("apiVersion", "kind", "name", "namespace")).encode()


def _controller_uid(obj: JSON) -> str | None:
    for ref in _meta(obj).get("ownerReferences") or []:
        if isinstance(ref, dict) and ref.get("controller") is True:
            return str(ref.get("uid") or "")
    return None


def _set_or_remove(mapping: JSON, key: str, value: Any) -> None:
    if value:
        mapping[key] = value
    else:
        mapping.pop(key, None)


def stored_xr(xr: JSON, observed: list[JSON]) -> JSON:
    """The XR as render stores it before reconciling: the fake UID, resourceVersion ``999``
    and, when there are observed resources, one ``spec.crossplane.resourceRefs`` entry per
    observed object in file order (replacing the input's)."""
    stored = copy.deepcopy(xr)
    metadata = _mapping(stored, "metadata")
    metadata["uid"] = fake_uid(xr)
    metadata["resourceVersion"] = RESOURCE_VERSION
    if observed:
        cluster_scoped = not metadata.get("namespace")
        refs = [_reference(obj, cluster_scoped, with_uid=False) for obj in observed]
        crossplane = _mapping(_mapping(stored, "spec"), "crossplane")
        crossplane["resourceRefs"] = [ref for ref in refs if ref]
    return stored


def observe(xr: JSON, objects: list[JSON]) -> dict[str, JSON]:
    """The composed resources the reconciler finds through the XR's resourceRefs, keyed by
    resource name: a reference without a name, to nothing, or to an object another owner
    controls is skipped; a namespaced XR looks only in its own namespace."""
    store = {
        (o.get("apiVersion"), o.get("kind"), _meta(o).get("namespace") or "", _meta(o).get("name"))
        : o
        for o in objects
    }  # fmt: skip
    metadata = _meta(xr)
    crossplane = (xr.get("spec") or {}).get("crossplane") or {}
    found: dict[str, JSON] = {}
    for ref in crossplane.get("resourceRefs") or []:
        if not isinstance(ref, dict) or not ref.get("name"):
            continue
        namespace = metadata.get("namespace") or ref.get("namespace") or ""
        obj = store.get((ref.get("apiVersion"), ref.get("kind"), namespace, ref["name"]))
        if obj is None:
            continue
        controller = _controller_uid(obj)
        if controller is not None and controller != metadata.get("uid"):
            continue
        name = (_meta(obj).get("annotations") or {}).get(RESOURCE_NAME_ANNOTATION)
        if not name:
            raise RenderError(
                f"observed resource {_describe(obj)} has no {RESOURCE_NAME_ANNOTATION} annotation"
            )
        found[name] = obj
    return found


def _valid_name(name: str, api_version: str, kind: str) -> bool:
    """Crossplane's names.ValidateName: an RFC 1123 subdomain; RBAC names may also hold ``:``."""
    if api_version.rpartition("/")[0] == _RBAC_GROUP and kind in _RBAC_KINDS:
        name = name.replace(":", "")
    return len(name) <= 253 and _DNS1123_SUBDOMAIN.fullmatch(name) is not None


def compose_resource(name: str, body: JSON, xr: JSON, observed: dict[str, JSON]) -> JSON:
    """One desired composed resource as the reconciler applies it: the observed identity, the
    metadata Crossplane stamps (render.md §2.5), and a name made from ``generateName``."""
    out = copy.deepcopy(body)
    if not out.get("apiVersion") or not out.get("kind"):
        raise RenderError(
            f"cannot marshal composed resource {name!r}: it has no "
            f"{'apiVersion' if not out.get('apiVersion') else 'kind'}"
        )
    metadata = out["metadata"] = dict(_meta(out))
    if name in observed:
        # The observed object's identity wins over whatever the function set.
        observed_meta = _meta(observed[name])
        for field in ("namespace", "name", "generateName"):
            _set_or_remove(metadata, field, observed_meta.get(field))
    xr_meta = _meta(xr)
    xr_labels = xr_meta.get("labels") or {}
    prefix = xr_labels.get(COMPOSITE_LABEL) or xr_meta.get("name", "")
    if not metadata.get("name") and not metadata.get("generateName"):
        metadata["generateName"] = f"{prefix}-"
    if xr_meta.get("namespace"):
        metadata["namespace"] = xr_meta["namespace"]
    metadata["annotations"] = {
        **(metadata.get("annotations") or {}),
        RESOURCE_NAME_ANNOTATION: name,
    }
    labels = {**(metadata.get("labels") or {}), COMPOSITE_LABEL: prefix}
    if xr_labels.get(CLAIM_NAME_LABEL) and xr_labels.get(CLAIM_NAMESPACE_LABEL):
        labels[CLAIM_NAME_LABEL] = xr_labels[CLAIM_NAME_LABEL]
        labels[CLAIM_NAMESPACE_LABEL] = xr_labels[CLAIM_NAMESPACE_LABEL]
    metadata["labels"] = labels
    uid = xr_meta.get("uid", "")
    owner = {
        "apiVersion": xr["apiVersion"],
        "kind": xr["kind"],
        "name": xr_meta.get("name", ""),
        "uid": uid,
        "controller": True,
        "blockOwnerDeletion": True,
    }
    references = [r for r in metadata.get("ownerReferences") or [] if isinstance(r, dict)]
    for ref in references:
        if ref.get("controller") and ref.get("uid", "") != uid:
            raise RenderError(
                f"cannot render composed resource {name!r} metadata: "
                f"{metadata.get('name') or metadata.get('generateName', '')} is already "
                f"controlled by {ref.get('kind')} {ref.get('name')} (UID {ref.get('uid')})"
            )
    same = [i for i, ref in enumerate(references) if ref.get("uid", "") == uid]
    if same:
        references[same[0]] = owner
    else:
        references.append(owner)
    metadata["ownerReferences"] = references
    if not metadata.get("name") and metadata.get("generateName"):
        metadata["name"] = child_name(str(metadata["generateName"]), uid, name)
    if not _valid_name(str(metadata.get("name") or ""), str(out["apiVersion"]), str(out["kind"])):
        raise RenderError(
            f"cannot apply composed resource {go_quote(name)} because it has an invalid name "
            f"{go_quote(str(metadata.get('name') or ''))}. Must be a valid RFC 1123 subdomain "
            "name."
        )
    return out


def _with_status(stored: JSON, xr: JSON) -> JSON:
    """``stored`` with ``xr``'s status: what the in-memory client keeps after a status write."""
    out = copy.deepcopy(stored)
    if "status" in xr:
        out["status"] = copy.deepcopy(xr["status"])
    return out


def reconcile(
    xr: JSON,
    composition: JSON,
    observed_objects: list[JSON],
    run: Callable[[JSON, dict[str, JSON]], PipelineResult],
) -> Reconciled:
    """One reconcile of ``xr`` by Crossplane's composite reconciler against render's
    in-memory store (render.md "v2.3+"). ``run(xr, observed)`` runs the function pipeline for
    the XR the reconciler holds and the composed resources it observed."""
    stored = stored_xr(xr, observed_objects)
    view = copy.deepcopy(stored)  # the reconciler's copy
    metadata = view["metadata"]
    generation = metadata.get("generation")
    generation = (
        generation if isinstance(generation, int) and not isinstance(generation, bool) else 0
    )
    events: list[JSON] = []
    set_conditions(
        view, condition("Responsive", "True", "WatchCircuitClosed", generation=generation)
    )
    annotations = metadata.get("annotations") or {}
    if annotations.get(PAUSED_ANNOTATION) == "true":
        events.append(
            _event(
                "Normal",
                "ReconciliationPaused",
                "Reconciliation is paused via the pause annotation",
            )
        )
        set_conditions(
            view, condition("Synced", "False", "ReconcilePaused", PAUSED_MESSAGE, generation)
        )
        return Reconciled(_with_status(stored, view), [], events, None)
    token = annotations.get(RECONCILE_REQUEST_ANNOTATION)
    status = _mapping(view, "status")
    if isinstance(token, str) and token and status.get("lastHandledReconcileAt") != token:
        events.append(_event("Normal", "ReconcileRequestHandled", "Handling reconcile request"))
        status["lastHandledReconcileAt"] = token
    if metadata.get("deletionTimestamp"):
        set_conditions(view, condition("Ready", "False", "Deleting", generation=generation))
        set_conditions(view, condition("Synced", "True", "ReconcileSuccess", generation=generation))
        return Reconciled(_with_status(stored, view), [], events, None)

    crossplane = _mapping(_mapping(view, "spec"), "crossplane")
    chosen_name = str(_meta(composition).get("name") or "")
    chosen = {"name": chosen_name} if chosen_name else {}
    before = crossplane.get("compositionRef")
    if not isinstance(before, dict) or _reference_fields(before) != chosen:
        events.append(
            _event(
                "Normal", "SelectComposition", f"Successfully selected composition: {chosen_name}"
            )
        )
    crossplane["compositionRef"] = chosen
    labels = _mapping(metadata, "labels")
    if not labels.get(COMPOSITE_LABEL):
        labels[COMPOSITE_LABEL] = metadata.get("name", "")

    observed = observe(view, observed_objects)
    result = run(view, observed)

    composed: dict[str, JSON] = {}
    overridden: list[JSON] = []
    namespace = metadata.get("namespace")
    # Crossplane walks a Go map here (any order); render walks resource names in order.
    for name in sorted(result.resources, key=str.encode):
        body = result.resources[name].body
        # The namespace the resource asks for: the observed object's, else its own.
        wanted = _meta(observed.get(name, body)).get("namespace")
        if namespace and wanted and wanted != namespace:
            overridden.append(
                _event(
                    "Warning",
                    "NamespaceOverridden",
                    f"cannot create composed resource {go_quote(name)} in namespace "
                    f"{go_quote(str(wanted))}, using XR namespace {go_quote(namespace)} instead",
                )
            )
        composed[name] = compose_resource(name, body, view, observed)

    refs = sorted(
        (r for r in (_reference(o, not namespace, with_uid=True) for o in composed.values()) if r),
        key=_ref_key,
    )
    out_meta = {"name": metadata.get("name", "")}
    if namespace:
        out_meta["namespace"] = namespace
    desired_status = (result.desired_composite or {}).get("status")
    composite: JSON = {
        "apiVersion": xr["apiVersion"],
        "kind": xr["kind"],
        "metadata": out_meta,
        "spec": {"crossplane": {"resourceRefs": refs}},
        "status": copy.deepcopy(desired_status) if isinstance(desired_status, dict) else {},
    }
    # The pipeline's status write keeps the conditions the XR already had...
    set_conditions(composite, *(get_conditions(view) or []))
    # ...then come the functions' own conditions, and Synced and Ready.
    set_conditions(
        composite,
        *(
            condition(c["type"], c["status"], c.get("reason", ""), c.get("message", ""))
            for c in result.conditions
        ),
    )
    set_conditions(
        composite, condition("Synced", "True", "ReconcileSuccess"), _ready_condition(result)
    )

    events += [_event(*result_event(r)) for r in result.results]
    events += overridden
    events += [
        _event("Normal", COMPOSE_REASON, f"Composed resource {go_quote(name)} is not yet ready")
        for name in composed
        if result.resources[name].ready != "True"
    ]
    return Reconciled(composite, list(composed.values()), events, result.context)


def _reference_fields(ref: JSON) -> JSON:
    """A reference read into corev1.ObjectReference: its known, non-empty string fields."""
    known = ("kind", "namespace", "name", "uid", "apiVersion", "resourceVersion", "fieldPath")
    return {k: ref[k] for k in known if isinstance(ref.get(k), str) and ref[k]}


def merge_into(dst: JSON, src: JSON) -> None:
    """``mergo.Merge(dst, src, WithOverride)`` on decoded JSON, as ``-x`` merges the output
    XR into the input: a mapping merges into a non-empty mapping, anything else replaces."""
    for key, value in src.items():
        current = dst.get(key)
        if isinstance(value, dict) and isinstance(current, dict) and current:
            merge_into(current, value)
        else:
            dst[key] = copy.deepcopy(value)


def output_documents(
    xr: JSON,
    reconciled: Reconciled,
    *,
    include_full_xr: bool,
    include_results: bool,
    include_context: bool,
) -> list[JSON]:
    """The stream ``crossplane render`` v2.5 prints for one reconcile."""
    composite = copy.deepcopy(reconciled.composite)
    if include_full_xr:
        full = copy.deepcopy(xr)
        merge_into(full, composite)
        composite = full
    pin_condition_times(composite)
    composed = [copy.deepcopy(o) for o in reconciled.composed]
    for obj in composed:
        pin_condition_times(obj)
    composed.sort(key=lambda o: _meta(o)["annotations"][RESOURCE_NAME_ANNOTATION].encode())
    documents = [composite, *composed]
    if include_results:
        documents += [
            {
                "apiVersion": RENDER_API_VERSION,
                "kind": "Result",
                "severity": e["type"],
                "reason": e["reason"],
                "message": e["message"],
            }
            for e in reconciled.events
        ]
    if include_context and reconciled.context is not None:
        documents.append(
            {"apiVersion": RENDER_API_VERSION, "kind": "Context", "fields": reconciled.context}
        )
    return documents


# --------------------------------------------------------------------------------------------
# The command


def parse_timeout(text: str) -> float:
    """Seconds from ``90``, ``1.5``, or a Go duration such as ``1m``, ``30s``, ``500ms``."""
    try:
        seconds = float(text)
    except ValueError:
        seconds = _duration(text)
    if seconds <= 0:
        raise RenderError(f"invalid --timeout {text!r}: must be positive")
    return seconds


def _duration(text: str) -> float:
    units = {"h": 3600.0, "m": 60.0, "s": 1.0, "ms": 0.001, "us": 1e-6, "µs": 1e-6}
    parts = re.findall(r"(\d+(?:\.\d+)?)(ms|us|µs|h|m|s)", text)
    if not parts or "".join(n + u for n, u in parts) != text:
        raise RenderError(f"invalid --timeout {text!r}: give seconds or a duration like 1m")
    return sum(float(n) * units[u] for n, u in parts)


def render(
    xr_location: str,
    composition_location: str | None = None,
    *,
    observed_location: str | None = None,
    required_location: str | None = None,
    include_full_xr: bool = False,
    include_results: bool = False,
    include_context: bool = False,
    context_values: tuple[str, ...] = (),
    context_files: tuple[str, ...] = (),
    credentials_location: str | None = None,
    functions_location: str | None = None,
    timeout: str = "1m",
    extra_location: str | None = None,
    schemas_location: str | None = None,
    function_annotations: tuple[str, ...] = (),
    xrd_location: str | None = None,
) -> str:
    """The YAML stream ``modelplane render`` prints; raises RenderError or PipelineError."""
    seconds = parse_timeout(timeout)
    deadline = time.monotonic() + seconds
    xr = load_one(xr_location, "composite resource")
    _check_xr(xr, xr_location)
    composition = select_composition(xr, composition_location)
    check_composition(xr, composition)
    functions = load_objects(functions_location) if functions_location is not None else None
    if functions is not None:
        functions = annotate_functions(functions, function_annotations)
    elif function_annotations:
        raise RenderError("--function-annotations needs a Functions file (the FUNCTIONS argument)")
    xr = default_xr(xr, load_xrd(xrd_location) if xrd_location is not None else None)
    validate_xr(xr)
    credentials = load_credentials(credentials_location)
    observed = load_observed(observed_location)
    required = load_objects(required_location) if required_location is not None else []
    # v2.3+ puts --extra-resources in the same store as -e: both answer every lookup.
    if extra_location is not None:
        required += load_objects(extra_location)
    context = parse_context(context_values, context_files)
    schemas = load_schemas(schemas_location)
    with FunctionHost(functions=functions, timeout=seconds) as host:
        host.deadline = deadline

        def run(held: JSON, found: dict[str, JSON]) -> PipelineResult:
            return run_pipeline(
                host,
                composition,
                held,
                found,
                required,
                context,
                credentials,
                schemas=schemas,
            )

        reconciled = reconcile(xr, composition, observed, run)
    documents = output_documents(
        xr,
        reconciled,
        include_full_xr=include_full_xr,
        include_results=include_results,
        include_context=include_context,
    )
    return goyaml.dump_all(json.loads(json.dumps(documents)))


@click.command("render")
@click.argument("composite_resource", metavar="XR")
@click.argument("composition", metavar="[COMPOSITION", required=False)
@click.argument("functions_argument", metavar="[FUNCTIONS]]", required=False)
@click.option(
    "-o", "--observed-resources", metavar="PATH", help="Observed composed resources (file or dir)."
)
@click.option(
    "-e",
    "--required-resources",
    metavar="PATH",
    help="Resources function requirements are resolved from (file or dir).",
)
@click.option(
    "--extra-resources",
    metavar="PATH",
    help="Deprecated: the same as --required-resources (both may be given).",
)
@click.option(
    "-s",
    "--required-schemas",
    metavar="DIR",
    help="Directory searched recursively for OpenAPI v3 *.json documents.",
)
@click.option(
    "-a",
    "--function-annotations",
    metavar="KEY=VALUE",
    multiple=True,
    help="Annotation set on every Function (overriding); repeatable.",
)
@click.option(
    "--xrd",
    "xrd_file",
    metavar="PATH",
    help="The XR's CompositeResourceDefinition; its defaults are applied (default: apis/).",
)
@click.option(
    "-x",
    "--include-full-xr",
    is_flag=True,
    help="Print the output XR merged into the input XR (its spec and metadata too).",
)
@click.option(
    "-r",
    "--include-function-results",
    is_flag=True,
    help="Print the reconciler's events, function results among them, as Result documents.",
)
@click.option("-c", "--include-context", is_flag=True, help="Print the final pipeline context.")
@click.option(
    "--context-values",
    metavar="KEY=VALUE",
    multiple=True,
    help="Initial context value (JSON or YAML); repeatable; beats --context-files.",
)
@click.option(
    "--context-files",
    metavar="KEY=PATH",
    multiple=True,
    help="Initial context value read from a JSON or YAML file; repeatable.",
)
@click.option("--function-credentials", metavar="PATH", help="Secrets for function credentials.")
@click.option(
    "--functions",
    metavar="PATH",
    help="Same as the FUNCTIONS argument (kept for earlier scripts).",
)
@click.option(
    "--timeout",
    default="1m",
    show_default=True,
    metavar="SECONDS",
    help="Deadline for the whole render (seconds, or a duration such as 30s).",
)
def command(  # noqa: PLR0917 - click passes every option
    composite_resource: str,
    composition: str | None,
    functions_argument: str | None,
    observed_resources: str | None,
    required_resources: str | None,
    extra_resources: str | None,
    required_schemas: str | None,
    function_annotations: tuple[str, ...],
    xrd_file: str | None,
    include_full_xr: bool,
    include_function_results: bool,
    include_context: bool,
    context_values: tuple[str, ...],
    context_files: tuple[str, ...],
    function_credentials: str | None,
    functions: str | None,
    timeout: str,
) -> None:
    """Render XR through its Composition's function pipeline, like `crossplane render`.

    COMPOSITION defaults to the Composition in apis/ whose compositeTypeRef matches the XR.
    FUNCTIONS (a file or directory of Function objects, e.g. functions.yaml) dials their
    Development targets; without it the repository's functions are hosted in-process.
    """
    try:
        if functions_argument is not None and functions is not None:
            raise RenderError("give the Functions file once: as FUNCTIONS or with --functions")
        text = render(
            composite_resource,
            composition,
            observed_location=observed_resources,
            required_location=required_resources,
            include_full_xr=include_full_xr,
            include_results=include_function_results,
            include_context=include_context,
            context_values=context_values,
            context_files=context_files,
            credentials_location=function_credentials,
            functions_location=functions_argument or functions,
            timeout=timeout,
            extra_location=extra_resources,
            schemas_location=required_schemas,
            function_annotations=function_annotations,
            xrd_location=xrd_file,
        )
    except (RenderError, PipelineError) as err:
        _fail(str(err))
    except Exception as err:  # never a traceback for the user
        _fail(f"internal error: {type(err).__name__}: {err}")
    click.echo(text, nl=False)


def _fail(cause: str) -> None:
    click.echo(f"modelplane: error: cannot render composite resource: {cause}", err=True)
    raise SystemExit(1)
