"""``modelplane render``: a drop-in for ``crossplane render`` that needs no Docker.

It reads an XR (and optionally a Composition, defaulting to the one in apis/ for the XR's
type), applies the XRD's schema defaults, runs the composition's function pipeline against
real gRPC servers (repository functions hosted in-process, or Development targets from a
Functions file) and prints the document stream ``crossplane render`` v2.2 prints (spec
``render.md`` §2). Where render is looser than the in-cluster reconciler we follow the
reconciler (decision D7); see design/render.md.
"""

from __future__ import annotations

import base64
import copy
import json
import re
import time
from pathlib import Path
from typing import Any

import click
import yaml

from modelplane import goyaml, xrd
from modelplane.pipeline import (
    FunctionHost,
    PipelineError,
    PipelineResult,
    SchemaSource,
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


def load_observed(location: str | None) -> dict[str, JSON]:
    """Observed composed resources keyed by their composition resource name."""
    if location is None:
        return {}
    observed: dict[str, JSON] = {}
    for obj in load_objects(location):
        name = (_meta(obj).get("annotations") or {}).get(RESOURCE_NAME_ANNOTATION)
        if not name:
            # crossplane render keys such an object as ""; the reconciler refuses it (D7).
            raise RenderError(
                f"observed resource {_describe(obj)} has no {RESOURCE_NAME_ANNOTATION} annotation"
            )
        observed[name] = obj
    return observed


# --------------------------------------------------------------------------------------------
# Output


def _names(names: list[str]) -> str:
    """crossplane-runtime's StableNAndSomeMore: ``a``, ``a, b``, ``a, b, and c``, ``... N more``."""
    names = sorted(names)
    if len(names) > 3:
        return f"{', '.join(names[:3])}, and {len(names) - 3} more"
    if len(names) == 3:
        return f"{', '.join(names[:2])}, and {names[2]}"
    return ", ".join(names)


def _ready_condition(result: PipelineResult) -> JSON:
    available = {"type": "Ready", "status": "True", "reason": "Available"}
    creating = {"type": "Ready", "status": "False", "reason": "Creating"}
    if result.composite_ready == "True":
        return available
    if result.composite_ready == "False":
        return creating
    unready = [name for name, r in result.resources.items() if r.ready != "True"]
    if unready:
        return {**creating, "message": f"Unready resources: {_names(unready)}"}
    return available


def _set_conditions(xr: JSON, conditions: list[JSON]) -> None:
    """crossplane-runtime's SetConditions: update a type in place unless equal, else append."""
    status = xr.setdefault("status", {})
    existing = status.get("conditions")
    merged: list[JSON] = list(existing) if isinstance(existing, list) else []
    for condition in conditions:
        stamped = {**condition, "lastTransitionTime": LAST_TRANSITION_TIME}
        for i, old in enumerate(merged):
            if isinstance(old, dict) and old.get("type") == condition["type"]:
                same = all(
                    old.get(f, "") == condition.get(f, "")
                    for f in ("type", "status", "reason", "message")
                )
                if not same:
                    merged[i] = stamped
                break
        else:
            merged.append(stamped)
    status["conditions"] = merged


def _set_or_remove(mapping: JSON, key: str, value: Any) -> None:
    if value:
        mapping[key] = value
    else:
        mapping.pop(key, None)


def render_composite(xr: JSON, result: PipelineResult, include_full_xr: bool) -> JSON:
    out = copy.deepcopy(result.desired_composite) or {}
    out["apiVersion"], out["kind"] = xr["apiVersion"], xr["kind"]
    metadata = out.get("metadata") if isinstance(out.get("metadata"), dict) else {}
    _set_or_remove(metadata, "name", _meta(xr).get("name"))
    _set_or_remove(metadata, "namespace", _meta(xr).get("namespace"))
    _set_or_remove(out, "metadata", metadata)
    _set_conditions(out, [_ready_condition(result), *result.conditions])
    if include_full_xr:
        if "spec" not in xr:
            raise RenderError("cannot include the full XR: the composite resource has no spec")
        out["spec"] = copy.deepcopy(xr["spec"])
        out["metadata"] = copy.deepcopy(xr.get("metadata") or {})
    return out


def render_composed(name: str, body: JSON, xr: JSON, observed: dict[str, JSON]) -> JSON:
    """One desired composed resource with the metadata Crossplane stamps (render.md §2.5)."""
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
    metadata["annotations"] = {
        **(metadata.get("annotations") or {}),
        RESOURCE_NAME_ANNOTATION: name,
    }
    if not metadata.get("name") and not metadata.get("generateName"):
        metadata["generateName"] = f"{prefix}-"
    if xr_meta.get("namespace"):
        metadata["namespace"] = xr_meta["namespace"]
    labels = {**(metadata.get("labels") or {}), COMPOSITE_LABEL: prefix}
    if CLAIM_NAME_LABEL in xr_labels and CLAIM_NAMESPACE_LABEL in xr_labels:
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
    return out


def output_documents(
    xr: JSON,
    result: PipelineResult,
    observed: dict[str, JSON],
    *,
    include_full_xr: bool,
    include_results: bool,
    include_context: bool,
) -> list[JSON]:
    documents = [render_composite(xr, result, include_full_xr)]
    composed = [
        render_composed(name, resource.body, xr, observed)
        for name, resource in result.resources.items()
    ]
    documents += sorted(
        composed, key=lambda o: o["metadata"]["annotations"][RESOURCE_NAME_ANNOTATION].encode()
    )
    if include_results:
        documents += [
            {
                "apiVersion": RENDER_API_VERSION,
                "kind": "Result",
                "step": r["step"],
                "severity": r["severity"],
                "message": r["message"],
            }
            for r in result.results
        ]
    if include_context:
        documents.append(
            {"apiVersion": RENDER_API_VERSION, "kind": "Context", "fields": result.context}
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
    extra = load_objects(extra_location) if extra_location is not None else []
    context = parse_context(context_values, context_files)
    schemas = load_schemas(schemas_location)
    with FunctionHost(functions=functions, timeout=seconds) as host:
        host.deadline = deadline
        result = run_pipeline(
            host,
            composition,
            xr,
            observed,
            required,
            context,
            credentials,
            extra=extra,
            schemas=schemas,
        )
    documents = output_documents(
        xr,
        result,
        observed,
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
    help="Deprecated: like --required-resources, but not for bootstrap requirements.",
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
    "-x", "--include-full-xr", is_flag=True, help="Print the input XR's spec and metadata too."
)
@click.option("-r", "--include-function-results", is_flag=True, help="Print non-fatal results.")
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
