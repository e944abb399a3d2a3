"""Running a Pipeline composition against real gRPC function servers (shared by render and
simulate).

This models Crossplane's function runner (spec ``render.md`` §1): every step sees the same
observed state, the desired state and context flow from step to step, requirements are resolved
in rounds until a function asks for the same thing twice (at most six calls), and the first
Fatal result ends the run. Where ``crossplane render`` is looser than the in-cluster reconciler
we follow the reconciler (decision D7): a required-resource selector honours its namespace.

Contract (simulate codes against it)::

    with FunctionHost(functions=None, timeout=60.0) as host:
        result = run_pipeline(host, composition, xr, observed, required)

``FunctionHost(functions, timeout, servicers)``: ``functions`` is a list of Crossplane
``Function`` objects (None: every repository function, from the ``modelplane.functions``
entry points). A Function annotated ``render.crossplane.io/runtime: Development`` is dialled
at ``render.crossplane.io/runtime-development-target``; any other repository function is served
in-process by a ``BackgroundServer``, started on first use and reused for the host's lifetime.
``servicers`` maps extra function names to servicer objects to host in-process.
"""

from __future__ import annotations

import dataclasses
import hashlib
import threading
import time
from collections.abc import Callable, Mapping
from importlib.metadata import entry_points
from types import TracebackType
from typing import Any

import grpc
from crossplane.function import logging as function_logging
from crossplane.function.proto.v1 import run_function_pb2 as fnv1
from crossplane.function.proto.v1 import run_function_pb2_grpc as grpcv1
from crossplane.function.proto.v1beta1 import run_function_pb2 as fnv1beta1
from crossplane.function.proto.v1beta1 import run_function_pb2_grpc as grpcv1beta1
from google.protobuf import struct_pb2
from google.protobuf.message import Message
from modelplane_common.naming import MAX_NAME_LENGTH
from modelplane_common.plain import to_plain, to_struct
from modelplane_common.serving import CHANNEL_OPTIONS, BackgroundServer

from modelplane.project import function_directory

JSON = dict[str, Any]

ENTRY_POINT_GROUP = "modelplane.functions"
RUNTIME_ANNOTATION = "render.crossplane.io/runtime"
TARGET_ANNOTATION = "render.crossplane.io/runtime-development-target"
DEFAULT_DEVELOPMENT_TARGET = "localhost:9443"
FUNCTION_API_VERSIONS = ("pkg.crossplane.io/v1", "pkg.crossplane.io/v1beta1")

# Crossplane's FetchingFunctionRunner: one call plus at most five requirement rounds.
MAX_REQUIREMENT_ITERATIONS = 5

# Condition types Crossplane owns; a function returning one is silently ignored (the v2.3
# reconciler's apiextensions IsSystemConditionType: core's four plus the watch circuit's).
SYSTEM_CONDITION_TYPES = frozenset({"Ready", "Synced", "Healthy", "UpToDate", "Responsive"})

# The reason the reconciler gives composition events that carry none of their own.
COMPOSE_REASON = "ComposeResources"
# Crossplane's ChildName: this many hex characters of sha256 end a generated name.
CHILD_HASH_LENGTH = 12

CAPABILITIES = [
    fnv1.CAPABILITY_CAPABILITIES,
    fnv1.CAPABILITY_REQUIRED_RESOURCES,
    fnv1.CAPABILITY_CREDENTIALS,
    fnv1.CAPABILITY_CONDITIONS,
    fnv1.CAPABILITY_REQUIRED_SCHEMAS,
]

_READY_NAMES = {
    fnv1.READY_TRUE: "True",
    fnv1.READY_FALSE: "False",
    fnv1.READY_UNSPECIFIED: "Unspecified",
}
_CONDITION_STATUS_NAMES = {
    fnv1.STATUS_CONDITION_TRUE: "True",
    fnv1.STATUS_CONDITION_FALSE: "False",
}


@dataclasses.dataclass
class DesiredResource:
    body: JSON
    ready: str  # "True", "False" or "Unspecified"


@dataclasses.dataclass
class PipelineResult:
    desired_composite: JSON  # the desired XR (status, etc.) as the last step left it
    composite_ready: str  # "True", "False" or "Unspecified"
    resources: dict[str, DesiredResource]  # composition resource name -> desired object
    conditions: list[JSON]  # custom conditions in order: {type,status,reason,message}
    results: list[JSON]  # non-fatal results: {step, severity (enum name), message, reason}
    context: JSON | None  # the last step's context; None when it returned none
    ttl: float | None = None  # smallest non-zero TTL any step returned, in seconds


class PipelineError(Exception):
    """A step failed: a Fatal result, a function error, or requirements that never settled.

    The message matches crossplane render's cause, e.g.
    ``pipeline step "compose-x" returned a fatal result: <msg>``. ``conditions`` and
    ``results`` hold what steps returned before the failure (the reconciler still applies the
    conditions and emits the events).
    """

    def __init__(
        self,
        message: str,
        conditions: list[JSON] | None = None,
        results: list[JSON] | None = None,
    ) -> None:
        super().__init__(message)
        self.conditions = conditions or []
        self.results = results or []


class FunctionCallError(Exception):
    """One RunFunction call failed (transport error, unknown function, timeout)."""


# --------------------------------------------------------------------------------------------
# Hosting and dialling functions


def repository_functions() -> dict[str, Any]:
    """Function directory name -> entry point, for every function installed in this
    environment."""
    return {ep.name: ep for ep in entry_points(group=ENTRY_POINT_GROUP)}


@dataclasses.dataclass
class _Runtime:
    """Where one function runs: a development target to dial, or a servicer to host."""

    target: str | None = None
    make_servicer: Callable[[], grpcv1.FunctionRunnerServiceServicer] | None = None


class FunctionHost:
    """Runs the functions a pipeline names; see the module docstring."""

    def __init__(
        self,
        functions: list[JSON] | None = None,
        timeout: float = 60.0,
        servicers: Mapping[str, grpcv1.FunctionRunnerServiceServicer] | None = None,
        *,
        packaged: bool = False,
    ) -> None:
        self.timeout = timeout
        # A control plane's (simulate's) runner: a failed call names its Function, as
        # Crossplane's PackagedFunctionRunner words it; render's engine does not.
        self._packaged = packaged
        # Optional absolute time.monotonic() deadline shared by every call (render's --timeout).
        self.deadline: float | None = None
        self._from_file = functions is not None
        self._runtimes = self._plan(functions)
        for name, servicer in (servicers or {}).items():
            self._runtimes[function_directory(name)] = _Runtime(make_servicer=lambda s=servicer: s)
        self._lock = threading.Lock()
        self._servers: dict[str, BackgroundServer] = {}
        self._channels: dict[str, grpc.Channel] = {}

    @staticmethod
    def _plan(functions: list[JSON] | None) -> dict[str, _Runtime]:
        installed = repository_functions()
        if functions is None:
            return {
                name: _Runtime(make_servicer=lambda ep=ep: ep.load()())
                for name, ep in installed.items()
            }
        runtimes: dict[str, _Runtime] = {}
        for fn in functions:
            metadata = fn.get("metadata") or {}
            name = metadata.get("name", "")
            # Runtimes are keyed by function directory, so the name a control plane installs
            # a function as (what Compositions reference) and the bare name meet.
            key = function_directory(name)
            if fn.get("kind") != "Function" or fn.get("apiVersion") not in FUNCTION_API_VERSIONS:
                raise PipelineError(f"not a function: {fn.get('kind')}/{name}")
            annotations = metadata.get("annotations") or {}
            runtime = annotations.get(RUNTIME_ANNOTATION) or "Docker"
            if runtime == "Development":
                target = annotations.get(TARGET_ANNOTATION) or DEFAULT_DEVELOPMENT_TARGET
                runtimes[key] = _Runtime(target=target)
            elif runtime == "Docker":
                # No Docker here: a repository function is hosted in-process instead.
                if key not in installed:
                    raise PipelineError(
                        f"cannot start Function {name!r}: modelplane render cannot run the "
                        f"Docker runtime; start the function yourself and annotate it "
                        f"{RUNTIME_ANNOTATION}: Development"
                    )
                runtimes[key] = _Runtime(make_servicer=lambda ep=installed[key]: ep.load()())
            else:
                raise PipelineError(
                    f"cannot start Function {name!r}: unsupported value {runtime!r} for "
                    f"annotation {RUNTIME_ANNOTATION} (use Docker or Development)"
                )
        return runtimes

    def __enter__(self) -> FunctionHost:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()

    def close(self) -> None:
        with self._lock:
            for channel in self._channels.values():
                channel.close()
            for server in self._servers.values():
                server.stop()
            self._channels.clear()
            self._servers.clear()

    def _channel(self, name: str) -> grpc.Channel:
        with self._lock:
            key = function_directory(name)
            if key in self._channels:
                return self._channels[key]
            runtime = self._runtimes.get(key)
            if runtime is None:
                if self._from_file:
                    raise FunctionCallError(
                        f"unknown Function {name!r} - does it exist in your Functions file?"
                    )
                raise FunctionCallError(
                    f"unknown Function {name!r} - no function of that name is installed "
                    f"(entry point group {ENTRY_POINT_GROUP})"
                )
            if runtime.target is not None:
                target = runtime.target
            else:
                assert runtime.make_servicer is not None
                try:
                    servicer = runtime.make_servicer()
                except Exception as err:
                    raise FunctionCallError(
                        f"cannot start Function {name!r}: {type(err).__name__}: {err}"
                    ) from err
                _silence_function_logs()
                server = BackgroundServer(servicer)
                target = server.start()
                self._servers[key] = server
            channel = grpc.insecure_channel(target, options=CHANNEL_OPTIONS)
            self._channels[key] = channel
            return channel

    def _call_timeout(self) -> float:
        if self.deadline is None:
            return self.timeout
        remaining = self.deadline - time.monotonic()
        if remaining <= 0:
            raise FunctionCallError("context deadline exceeded")
        return min(self.timeout, remaining)

    def run_function(self, name: str, req: fnv1.RunFunctionRequest) -> fnv1.RunFunctionResponse:
        """One RunFunction call; falls back to v1beta1 when v1 is UNIMPLEMENTED."""
        channel = self._channel(name)
        timeout = self._call_timeout()
        try:
            # wait_for_ready: a development function still starting up is waited for.
            return grpcv1.FunctionRunnerServiceStub(channel).RunFunction(
                req, timeout=timeout, wait_for_ready=True
            )
        except grpc.RpcError as err:
            if err.code() != grpc.StatusCode.UNIMPLEMENTED:  # type: ignore[attr-defined]
                raise self._call_error(name, err) from err
        beta_req = fnv1beta1.RunFunctionRequest.FromString(req.SerializeToString())
        try:
            beta_rsp = grpcv1beta1.FunctionRunnerServiceStub(channel).RunFunction(
                beta_req, timeout=self._call_timeout(), wait_for_ready=True
            )
        except grpc.RpcError as err:
            raise self._call_error(name, err) from err
        return fnv1.RunFunctionResponse.FromString(beta_rsp.SerializeToString())

    def _call_error(self, name: str, err: grpc.RpcError) -> FunctionCallError:
        if self._packaged:
            return FunctionCallError(f"cannot run Function {go_quote(name)}: {_rpc_error(err)}")
        return FunctionCallError(_rpc_error(err))


def _silence_function_logs() -> None:
    """Hosted functions log through structlog to stdout, which is where render and simulate
    print their output; a function's failure reaches the user as its Fatal result instead."""
    function_logging.configure(function_logging.Level.DISABLED)


def _rpc_error(err: grpc.RpcError) -> str:
    """A gRPC failure in grpc-go's words: ``rpc error: code = Unknown desc = ...``."""
    code: grpc.StatusCode = err.code()  # type: ignore[attr-defined]
    go_name = (
        "Canceled" if code == grpc.StatusCode.CANCELLED else code.name.title().replace("_", "")
    )
    return f"rpc error: code = {go_name} desc = {err.details()}"  # type: ignore[attr-defined]


# --------------------------------------------------------------------------------------------
# Required resources


@dataclasses.dataclass
class ResourcePool:
    """The objects requirements are resolved from (render's -e, simulate's store)."""

    objects: list[JSON]
    honour_namespaces: bool = True

    def __post_init__(self) -> None:
        self.objects = sorted(self.objects, key=_name_key)

    def fetch(self, selector: fnv1.ResourceSelector) -> fnv1.Resources:
        found = [
            obj
            for obj in self.objects
            if obj.get("apiVersion") == selector.api_version and obj.get("kind") == selector.kind
        ]
        namespace = selector.namespace if selector.HasField("namespace") else None
        match = selector.WhichOneof("match")
        if match == "match_name":
            found = [o for o in found if _meta(o).get("name") == selector.match_name]
            if self.honour_namespaces:
                # A Get: in the selector's namespace, or at cluster scope when it has none.
                found = [o for o in found if _meta(o).get("namespace") == namespace]
            found = found[:1]
        else:
            if match == "match_labels":
                wanted = dict(selector.match_labels.labels)
                found = [o for o in found if wanted.items() <= _labels(o).items()]
            if self.honour_namespaces and namespace is not None:
                found = [o for o in found if _meta(o).get("namespace") == namespace]
            found = sorted(found, key=_namespaced_key)
        return fnv1.Resources(items=[fnv1.Resource(resource=to_struct(o)) for o in found])


_REF_PREFIX = "#/components/schemas/"


@dataclasses.dataclass
class SchemaSource:
    """OpenAPI v3 documents (``/openapi/v3/<group-version>`` output) required schemas are
    answered from, as ``crossplane render -s`` does (render.md §2.4)."""

    documents: list[JSON]

    def fetch(self, api_version: str, kind: str) -> fnv1.Schema:
        """The first schema naming exactly this GVK, ``$ref``s inlined; else an empty Schema."""
        group, _, version = api_version.rpartition("/")
        for document in self.documents:
            schemas = (document.get("components") or {}).get("schemas") or {}
            for name in sorted(schemas):
                gvks = (schemas[name] or {}).get("x-kubernetes-group-version-kind")
                if not isinstance(gvks, list) or len(gvks) != 1 or not isinstance(gvks[0], dict):
                    continue
                gvk = gvks[0]
                if (
                    str(gvk.get("group", "")).lower() == group.lower()
                    and str(gvk.get("version", "")).lower() == version.lower()
                    and gvk.get("kind") == kind
                ):
                    inlined = _inline(schemas[name], schemas, frozenset({name}))
                    return fnv1.Schema(openapi_v3=to_struct(inlined))
        return fnv1.Schema()


def _inline(node: Any, schemas: Mapping[str, Any], seen: frozenset[str]) -> Any:
    """``node`` with every local ``$ref`` replaced by its target (a cycle keeps its ``$ref``)."""
    if isinstance(node, list):
        return [_inline(item, schemas, seen) for item in node]
    if not isinstance(node, dict):
        return node
    ref = node.get("$ref")
    if isinstance(ref, str) and ref.startswith(_REF_PREFIX):
        name = ref.removeprefix(_REF_PREFIX)
        if name in schemas and name not in seen:
            siblings = {k: v for k, v in node.items() if k != "$ref"}
            return {**_inline(schemas[name], schemas, seen | {name}), **siblings}
    return {key: _inline(value, schemas, seen) for key, value in node.items()}


def _meta(obj: JSON) -> JSON:
    return obj.get("metadata") or {}


def _labels(obj: JSON) -> dict[str, str]:
    return _meta(obj).get("labels") or {}


def _name_key(obj: JSON) -> str:
    return str(_meta(obj).get("name", ""))


def _namespaced_key(obj: JSON) -> str:
    return f"{_meta(obj).get('namespace', '')}/{_meta(obj).get('name', '')}"


def _bootstrap(
    step: JSON,
) -> tuple[dict[str, fnv1.ResourceSelector], dict[str, fnv1.SchemaSelector]]:
    """A step's up-front requirements: resource and schema selectors."""
    requirements = step.get("requirements") or {}
    selectors: dict[str, fnv1.ResourceSelector] = {}
    for entry in requirements.get("requiredResources") or []:
        selector = fnv1.ResourceSelector(api_version=entry["apiVersion"], kind=entry["kind"])
        if entry.get("namespace"):
            selector.namespace = entry["namespace"]
        if entry.get("name"):
            selector.match_name = entry["name"]
        elif entry.get("matchLabels") is not None:
            selector.match_labels.labels.update(entry["matchLabels"])
        selectors[entry["requirementName"]] = selector
    schemas = {
        entry["requirementName"]: fnv1.SchemaSelector(
            api_version=entry.get("apiVersion", ""), kind=entry.get("kind", "")
        )
        for entry in requirements.get("requiredSchemas") or []
    }
    return selectors, schemas


# --------------------------------------------------------------------------------------------
# The pipeline


def _copy(message: Message) -> Any:
    copied = type(message)()
    copied.CopyFrom(message)
    return copied


def _fatal(rsp: fnv1.RunFunctionResponse) -> fnv1.Result | None:
    return next((r for r in rsp.results if r.severity == fnv1.SEVERITY_FATAL), None)


def run_with_requirements(
    call: Callable[[fnv1.RunFunctionRequest], fnv1.RunFunctionResponse],
    req: fnv1.RunFunctionRequest,
    pool: ResourcePool,
    schemas: SchemaSource | None = None,
) -> fnv1.RunFunctionResponse:
    """Call a function until the requirements it returns are stable (render.md §1.9)."""
    bootstrap_resources = {k: _copy(v) for k, v in req.required_resources.items()}
    bootstrap_schemas = {k: _copy(v) for k, v in req.required_schemas.items()}
    previous: fnv1.Requirements | None = None
    for _ in range(MAX_REQUIREMENT_ITERATIONS + 1):
        rsp = call(req)
        if _fatal(rsp) is not None:
            return rsp
        # Message equality: unset requirements differ from present-but-empty ones.
        current = _copy(rsp.requirements) if rsp.HasField("requirements") else None
        if (current is None and previous is None) or (
            current is not None and previous is not None and current == previous
        ):
            return rsp
        previous = current
        req.ClearField("extra_resources")
        req.ClearField("required_resources")
        req.ClearField("required_schemas")
        for key, resources in bootstrap_resources.items():
            req.required_resources[key].CopyFrom(resources)
        for key, schema in bootstrap_schemas.items():
            req.required_schemas[key].CopyFrom(schema)
        asked = current or fnv1.Requirements()
        for key, selector in asked.extra_resources.items():
            req.extra_resources[key].CopyFrom(pool.fetch(selector))
        for key, selector in asked.resources.items():
            req.required_resources[key].CopyFrom(pool.fetch(selector))
        for key, wanted in asked.schemas.items():
            req.required_schemas[key].CopyFrom(_schema(schemas, wanted))
        # Context carries between rounds; desired state from this round is discarded.
        if rsp.HasField("context"):
            req.context.CopyFrom(rsp.context)
        else:
            req.ClearField("context")
    raise FunctionCallError(
        "requirements didn't stabilize after the maximum number of iterations "
        f"({MAX_REQUIREMENT_ITERATIONS})"
    )


def _schema(schemas: SchemaSource | None, selector: fnv1.SchemaSelector) -> fnv1.Schema:
    # Without a schema source: resolved, nothing found (like render without -s).
    return schemas.fetch(selector.api_version, selector.kind) if schemas else fnv1.Schema()


def _condition(condition: fnv1.Condition) -> JSON:
    out: JSON = {
        "type": condition.type,
        "status": _CONDITION_STATUS_NAMES.get(condition.status, "Unknown"),
        "reason": condition.reason,
    }
    if condition.HasField("message"):
        out["message"] = condition.message
    return out


def _result(step: str, result: fnv1.Result) -> JSON:
    out: JSON = {
        "step": step,
        "severity": fnv1.Severity.Name(result.severity),
        "message": result.message,
    }
    if result.HasField("reason"):
        out["reason"] = result.reason
    return out


def _credentials(
    step: JSON, secrets: Mapping[str, Mapping[str, bytes]]
) -> dict[str, fnv1.Credentials]:
    out: dict[str, fnv1.Credentials] = {}
    for credential in step.get("credentials") or []:
        ref = credential.get("secretRef")
        if credential.get("source") != "Secret" or not ref:
            continue
        key = f"{ref.get('namespace', '')}/{ref.get('name', '')}"
        if key not in secrets:
            name = ref.get("name", "")
            raise FunctionCallError(
                f'cannot get credentials from secret "{name}": secret "{name}" not found'
            )
        out[credential["name"]] = fnv1.Credentials(
            credential_data=fnv1.CredentialData(data=dict(secrets[key]))
        )
    return out


def run_pipeline(  # noqa: PLR0917 - the contract simulate codes against
    host: FunctionHost,
    composition: JSON,
    xr: JSON,
    observed: dict[str, JSON],
    required: list[JSON],
    context: JSON | None = None,
    credentials: dict[str, dict[str, bytes]] | None = None,
    honour_namespaces: bool = True,
    *,
    extra: list[JSON] | None = None,
    schemas: SchemaSource | None = None,
) -> PipelineResult:
    """Run every step of ``composition`` for ``xr`` (render.md §1.8-1.9).

    ``observed`` maps composition resource names to observed composed objects. ``required`` is
    the pool requirements are resolved from. ``credentials`` maps ``"<namespace>/<name>"`` of a
    Secret to its data. ``extra`` (render's deprecated ``--extra-resources``) joins the pool
    for requirements a function returns but not for a step's bootstrap requirements; ``schemas``
    answers required schemas. Raises PipelineError on a Fatal result or a failing step.
    """
    observed_state = fnv1.State(
        composite=fnv1.Resource(resource=to_struct(xr)),
        resources={name: fnv1.Resource(resource=to_struct(obj)) for name, obj in observed.items()},
    )
    bootstrap_pool = ResourcePool(list(required), honour_namespaces=honour_namespaces)
    pool = (
        ResourcePool([*required, *extra], honour_namespaces=honour_namespaces)
        if extra
        else bootstrap_pool
    )
    desired = fnv1.State()
    pipeline_context: struct_pb2.Struct | None = to_struct(context or {})
    conditions: list[JSON] = []
    results: list[JSON] = []
    ttl: float | None = None

    for step in (composition.get("spec") or {}).get("pipeline") or []:
        step_name = step.get("step", "")
        function_name = (step.get("functionRef") or {}).get("name", "")
        try:
            req = fnv1.RunFunctionRequest(
                meta=fnv1.RequestMeta(capabilities=CAPABILITIES),
                observed=observed_state,
                desired=desired,
                credentials=_credentials(step, credentials or {}),
            )
            if pipeline_context is not None:
                req.context.CopyFrom(pipeline_context)
            if step.get("input") is not None:
                req.input.CopyFrom(to_struct(step["input"]))
            selectors, schema_selectors = _bootstrap(step)
            for key, selector in selectors.items():
                req.required_resources[key].CopyFrom(bootstrap_pool.fetch(selector))
            for key, wanted in schema_selectors.items():
                req.required_schemas[key].CopyFrom(_schema(schemas, wanted))
            rsp = run_with_requirements(
                lambda r, n=function_name: host.run_function(n, r), req, pool, schemas
            )
        except FunctionCallError as err:
            raise PipelineError(
                f'cannot run Composition pipeline step "{step_name}": {err}', conditions, results
            ) from err

        if rsp.meta.HasField("ttl"):
            seconds = rsp.meta.ttl.ToTimedelta().total_seconds()
            if seconds > 0:
                ttl = seconds if ttl is None else min(ttl, seconds)
        desired = rsp.desired  # replaces, never merges (an omitted desired wipes the state)
        pipeline_context = rsp.context if rsp.HasField("context") else None
        conditions.extend(
            _condition(c) for c in rsp.conditions if c.type not in SYSTEM_CONDITION_TYPES
        )
        for result in rsp.results:
            if result.severity == fnv1.SEVERITY_FATAL:
                raise PipelineError(
                    f'pipeline step "{step_name}" returned a fatal result: {result.message}',
                    conditions,
                    results,
                )
            results.append(_result(step_name, result))

    return PipelineResult(
        desired_composite=to_plain(desired.composite.resource),
        composite_ready=_READY_NAMES.get(desired.composite.ready, "Unspecified"),
        resources={
            name: DesiredResource(
                body=to_plain(resource.resource),
                ready=_READY_NAMES.get(resource.ready, "Unspecified"),
            )
            for name, resource in desired.resources.items()
        },
        conditions=conditions,
        results=results,
        context=to_plain(pipeline_context) if pipeline_context is not None else None,
        ttl=ttl,
    )


# --------------------------------------------------------------------------------------------
# What the reconciler makes of a run (shared by render and simulate)


def go_quote(text: str) -> str:
    """``text`` as Go's ``%q`` prints it: double-quoted, with ``"``, ``\\`` and control
    characters escaped."""
    escapes = {'"': '\\"', "\\": "\\\\", "\n": "\\n", "\t": "\\t", "\r": "\\r"}
    out = []
    for char in text:
        if char in escapes:
            out.append(escapes[char])
        elif ord(char) < 0x20 or ord(char) == 0x7F:
            out.append(f"\\x{ord(char):02x}")
        else:
            out.append(char)
    return '"' + "".join(out) + '"'


def result_event(result: JSON) -> tuple[str, str, str]:
    """The event (type, reason, message) the reconciler records for one non-fatal function
    result: the result's reason (``ComposeResources`` when it has none), the message behind
    ``Pipeline step "<step>": ``, and a result of unknown severity as a warning."""
    reason = str(result.get("reason") or COMPOSE_REASON)
    step = go_quote(str(result.get("step", "")))
    message = str(result.get("message", ""))
    severity = result.get("severity")
    if severity == "SEVERITY_NORMAL":
        return "Normal", reason, f"Pipeline step {step}: {message}"
    if severity == "SEVERITY_WARNING":
        return "Warning", reason, f"Pipeline step {step}: {message}"
    return (
        "Warning",
        reason,
        f"Pipeline step {step} returned a result of unknown severity (assuming warning): {message}",
    )


def child_name(parent: str, parent_uid: str, child: str) -> str:
    """Crossplane's name for a composed resource that has only ``generateName`` (its
    ``names.ChildName``): the prefix with one trailing ``-``, then the first 12 hex characters
    of sha256(owner UID + composition resource name); a prefix too long for 63 characters is
    cut, keeping a ``-`` before the hash."""
    suffix = hashlib.sha256((parent_uid + child).encode()).hexdigest()[:CHILD_HASH_LENGTH]
    if parent and not parent.endswith("-"):
        parent += "-"
    if len(parent) + len(suffix) <= MAX_NAME_LENGTH:
        return parent + suffix
    keep = MAX_NAME_LENGTH - CHILD_HASH_LENGTH
    if not parent[:keep].endswith("-"):
        return parent[: keep - 1] + "-" + suffix
    return parent[:keep] + suffix
