"""The gRPC servicer every Modelplane composition function is built on.

A function implements one method, ``compose(request) -> Outcome``: plain Python over plain
dicts and Pydantic models, with no protobuf in sight. This module turns the protobuf request
into a ``Request`` and the ``Outcome`` back into a RunFunctionResponse.

Losing desired state deletes real infrastructure, so the servicer starts from the desired state
earlier pipeline steps built (``response.to``) and, when ``compose`` raises, answers with a
Fatal result: Crossplane then aborts the reconcile and deletes nothing.
"""

from __future__ import annotations

import dataclasses
import time
import traceback
from collections.abc import Callable, Mapping
from datetime import UTC, datetime, timedelta
from typing import Any, ClassVar, Literal

import grpc
import pydantic
from crossplane.function import logging, response
from crossplane.function.proto.v1 import run_function_pb2 as fnv1
from crossplane.function.proto.v1 import run_function_pb2_grpc as grpcv1
from google.protobuf import struct_pb2

from modelplane_common import observed, tolerant
from modelplane_common.plain import JSON, fill_struct, resource_plain, to_plain
from modelplane_common.serving import FUNCTION_MESSAGE_LIMIT, MIB

DEFAULT_TTL = timedelta(minutes=1)
# Crossplane re-runs a pipeline after its TTL, and (realtime compositions) otherwise only when a
# composed resource changes: a resource read through requirements (a ModelService's endpoints,
# a deployment's clusters) is not watched. While anything is still settling, look again soon.
SETTLING_TTL = timedelta(seconds=5)
# Pipeline context key carrying "now" (RFC 3339) for functions that judge elapsed time.
# `modelplane simulate` sets it from its simulated clock and `modelplane render` takes it from
# --context-values, so their output is deterministic; a real control plane leaves it unset and
# functions read the wall clock.
CLOCK_CONTEXT_KEY = "modelplane.ai/now"


# A request past this share of the limit is warned about.
NEAR_LIMIT = 0.75


def injected_now(context: Mapping[str, Any]) -> datetime | None:
    """The clock ``context`` carries (``CLOCK_CONTEXT_KEY``), or None when unset or
    unreadable (then a function reads the wall clock)."""
    value = context.get(CLOCK_CONTEXT_KEY)
    if not isinstance(value, str) or not value:
        return None
    try:
        moment = datetime.fromisoformat(value.replace("Z", "+00:00"))
    except ValueError:
        return None
    return moment if moment.tzinfo else moment.replace(tzinfo=UTC)


Severity = Literal["Normal", "Warning", "Fatal"]
_SEVERITY = {
    "Normal": fnv1.SEVERITY_NORMAL,
    "Warning": fnv1.SEVERITY_WARNING,
    "Fatal": fnv1.SEVERITY_FATAL,
}
_CONDITION_STATUS = {
    True: fnv1.STATUS_CONDITION_TRUE,
    False: fnv1.STATUS_CONDITION_FALSE,
    None: fnv1.STATUS_CONDITION_UNKNOWN,
}
_READY = {True: fnv1.READY_TRUE, False: fnv1.READY_FALSE, None: fnv1.READY_UNSPECIFIED}


class InputError(Exception):
    """Input the function cannot act on; reported as a Fatal result naming the field."""


@dataclasses.dataclass(frozen=True)
class Condition:
    """A custom XR status condition. ``status`` None means Unknown."""

    type: str
    status: bool | None
    reason: str
    message: str = ""
    # False is the normal case for some types (EndpointsHeld): such a condition does not keep
    # the XR "settling" (see SETTLING_TTL).
    normal: bool = False


@dataclasses.dataclass(frozen=True)
class Result:
    """A result: an event on the XR, or (Fatal) the end of the reconcile."""

    severity: Severity
    message: str
    reason: str = ""


@dataclasses.dataclass(frozen=True)
class Selector:
    """A required-resource selector: by name, by labels, or (neither) every object of a kind."""

    api_version: str
    kind: str
    match_name: str | None = None
    match_labels: Mapping[str, str] | None = None
    namespace: str | None = None


@dataclasses.dataclass
class Composed:
    """One desired composed resource: its full manifest and its readiness (None = unknown)."""

    body: JSON
    ready: bool | None = None


@dataclasses.dataclass
class Outcome:
    """Everything a ``compose`` step decides. Resources are added to those of earlier steps."""

    resources: dict[str, Composed] = dataclasses.field(default_factory=dict)
    composite_status: JSON | None = None
    composite_ready: bool | None = None
    conditions: list[Condition] = dataclasses.field(default_factory=list)
    results: list[Result] = dataclasses.field(default_factory=list)
    requirements: dict[str, Selector] = dataclasses.field(default_factory=dict)
    context: JSON | None = None
    ttl: timedelta = DEFAULT_TTL

    def compose(self, key: str, body: JSON | pydantic.BaseModel, ready: bool | None = None) -> None:
        self.resources[key] = Composed(body=as_manifest(body), ready=ready)

    def condition(self, type_: str, status: bool | None, reason: str, message: str = "",
                  *, normal: bool = False) -> None:  # fmt: skip
        self.conditions.append(Condition(type_, status, reason, message, normal))

    def event(self, severity: Severity, message: str, reason: str = "") -> None:
        self.results.append(Result(severity, message, reason))


class Request:
    """A plain view of a RunFunctionRequest."""

    def __init__(
        self,
        req: fnv1.RunFunctionRequest,
        read_observed: Callable[[struct_pb2.Struct], JSON] = resource_plain,
        read_required: Mapping[str, Callable[[struct_pb2.Struct], JSON]] | None = None,
    ) -> None:
        """``read_observed``: how the function reads an observed composed resource;
        ``read_required``: per requirement, how it reads the objects resolved for it; by
        default the whole of each (plain.resource_plain)."""
        self.proto = req
        # Objects without metadata.managedFields (plain.resource_plain).
        self.composite: JSON = resource_plain(req.observed.composite.resource)
        self.observed: dict[str, JSON] = {
            name: read_observed(r.resource) for name, r in req.observed.resources.items()
        }
        self.desired: dict[str, JSON] = {
            name: resource_plain(r.resource) for name, r in req.desired.resources.items()
        }
        self.context: JSON = to_plain(req.context) if req.HasField("context") else {}
        self.input: JSON | None = to_plain(req.input) if req.HasField("input") else None
        self._required: dict[str, list[JSON]] = {}
        self._read_required = read_required or {}

    @property
    def spec(self) -> JSON:
        return tolerant.mapping(self.composite, "spec") or {}

    @property
    def status(self) -> JSON:
        """The XR's own status; empty when missing or malformed (e.g. stripped by a restore)."""
        return tolerant.status(self.composite)

    @property
    def name(self) -> str:
        return tolerant.name_of(self.composite)

    @property
    def namespace(self) -> str | None:
        return tolerant.text(self.composite, "metadata", "namespace")

    def required(self, name: str) -> list[JSON] | None:
        """Objects resolved for a requirement; None while it is not resolved yet.

        Crossplane sends a key it could not satisfy with an empty list, so an absent key means
        "not asked for yet", never "nothing exists".
        """
        if name not in self.proto.required_resources:
            return None
        # Converted once per request: several readers look at the same key. Each caller gets
        # its own list (of the same dicts, which callers only read).
        if name not in self._required:
            items = self.proto.required_resources[name].items
            read = self._read_required.get(name, resource_plain)
            self._required[name] = [read(item.resource) for item in items]
        return list(self._required[name])


def as_manifest(body: JSON | pydantic.BaseModel) -> JSON:
    """A manifest dict from a dict or a generated model (by alias, unset fields left out)."""
    if isinstance(body, pydantic.BaseModel):
        # Generated models default apiVersion and kind, which exclude_unset would leave out.
        identity = {"apiVersion": body.apiVersion, "kind": body.kind}  # type: ignore[attr-defined]
        return identity | body.model_dump(mode="json", by_alias=True, exclude_unset=True)
    return body


def _write(rsp: fnv1.RunFunctionResponse, outcome: Outcome) -> None:
    shared: dict[int, Any] = {}  # maps the composed resources share, encoded once
    for key, composed in outcome.resources.items():
        resource = rsp.desired.resources[key]
        resource.resource.Clear()
        fill_struct(resource.resource, composed.body, shared)
        resource.ready = _READY[composed.ready]
    if outcome.composite_status is not None:
        composite = to_plain(rsp.desired.composite.resource)
        composite["status"] = outcome.composite_status
        rsp.desired.composite.resource.Clear()
        fill_struct(rsp.desired.composite.resource, composite)
    if outcome.composite_ready is not None:
        rsp.desired.composite.ready = _READY[outcome.composite_ready]
    for condition in outcome.conditions:
        rsp.conditions.append(
            fnv1.Condition(
                type=condition.type,
                status=_CONDITION_STATUS[condition.status],
                reason=condition.reason,
                message=condition.message or None,
                target=fnv1.TARGET_COMPOSITE,
            )
        )
    for result in outcome.results:
        rsp.results.append(
            fnv1.Result(
                severity=_SEVERITY[result.severity],
                message=result.message,
                reason=result.reason or None,
                target=fnv1.TARGET_COMPOSITE,
            )
        )
    for key, selector in outcome.requirements.items():
        _require(rsp, key, selector)
    if outcome.context is not None:
        rsp.context.Clear()
        fill_struct(rsp.context, outcome.context)


def _readiness_known(request: Request, outcome: Outcome) -> None:
    """Say when kept composed resources have no readable readiness (see observed.readiness)."""
    if any(c.type == observed.READINESS_KNOWN for c in outcome.conditions):
        return
    # Only resources the XR waits for: some (provider configs, usages) never report Ready.
    waiting = [key for key, item in outcome.resources.items() if item.ready is not True]
    verdict = observed.readiness_known(request.composite, request.observed, waiting)
    if verdict is not None:
        known, message = verdict
        reason = "Observed" if known else "StatusUnknown"
        outcome.condition(observed.READINESS_KNOWN, known, reason, message)


def _settled(request: Request, outcome: Outcome) -> bool:
    """Nothing the XR reports or composes is still on its way: no condition other than True,
    no composed resource not yet created, unready, or observed with Ready not True."""
    if outcome.composite_ready is False or any(
        c.status is not True and not c.normal for c in outcome.conditions
    ):
        return False
    for key, item in outcome.resources.items():
        seen = request.observed.get(key)
        if item.ready is False or seen is None:
            return False
        # Unknown (no readable Ready) counts as settled: provider configs never report one.
        if item.ready is None and observed.readiness(seen) is False:
            return False
    return True


def _require(rsp: fnv1.RunFunctionResponse, key: str, selector: Selector) -> None:
    target = rsp.requirements.resources[key]
    target.api_version = selector.api_version
    target.kind = selector.kind
    if selector.namespace:
        target.namespace = selector.namespace
    if selector.match_name is not None:
        target.match_name = selector.match_name
    else:
        target.match_labels.SetInParent()
        target.match_labels.labels.update(dict(selector.match_labels or {}))


class CompositionFunction(grpcv1.FunctionRunnerServiceServicer):
    """Base servicer: subclasses set ``name`` and implement ``compose``."""

    name: str = "composition-function"

    def __init__(self) -> None:
        self.log = logging.get_logger()

    # How observed composed resources are read (Request): each whole, unless a function
    # reads less of them.
    read_observed: Callable[[struct_pb2.Struct], JSON] = staticmethod(resource_plain)
    # How the objects resolved for a requirement are read, by requirement: whole, unless a
    # function reads less of them.
    read_required: ClassVar[Mapping[str, Callable[[struct_pb2.Struct], JSON]]] = {}

    # The most this function receives (its --max-recv-message-size) and, for its warning
    # near that, what its requests grow with.
    message_limit: int = FUNCTION_MESSAGE_LIMIT
    request_growth: str = ""

    def compose(self, request: Request) -> Outcome:  # pragma: no cover - abstract
        raise NotImplementedError

    def run_sized(self, req: fnv1.RunFunctionRequest, size: int) -> fnv1.RunFunctionResponse:
        """``run``, given the request's size on the wire (serving.add_function)."""
        rsp = self.run(req)
        # (A limit of -1 is none.) First: Crossplane reads no result after a Fatal one.
        if self.message_limit > 0 and size > NEAR_LIMIT * self.message_limit:
            rsp.results.insert(
                0,
                fnv1.Result(
                    severity=fnv1.SEVERITY_WARNING,
                    message=self._near_limit(req, size),
                    reason="RequestNearLimit",
                    target=fnv1.TARGET_COMPOSITE,
                ),
            )
        return rsp

    def _near_limit(self, req: fnv1.RunFunctionRequest, size: int) -> str:
        kind = req.observed.composite.resource.fields.get("kind")
        kind_name = (kind.string_value if kind is not None else "") or "resource"
        mib, limit = size / MIB, self.message_limit / MIB
        return (
            f"this reconcile's request to {self.name} was {mib:.1f} MiB of the {limit:g} MiB "
            f"it receives; past that Crossplane's calls are refused (ResourceExhausted) and "
            f"this {kind_name} stops reconciling, keeping what "
            f"it composed. {self.request_growth}Or give the function a larger "
            "--max-recv-message-size (its DeploymentRuntimeConfig's args)."
        )

    def run(self, req: fnv1.RunFunctionRequest) -> fnv1.RunFunctionResponse:
        """Run one request synchronously (the servicer's logic without gRPC).

        Logs one info line per request and, at debug, what was decided. Only names, kinds,
        counts and the function's own messages are logged, never a resource body or a
        credential: observed Secrets and kubeconfigs must not reach log pipelines."""
        started = time.monotonic()
        log = self.log.bind(function=self.name, xr=_xr_ref(req), tag=req.meta.tag)
        rsp = response.to(req, ttl=DEFAULT_TTL)
        fields: dict[str, object] = {}
        try:
            request = Request(req, self.read_observed, self.read_required)
            outcome = self.compose(request)
        except InputError as err:
            response.fatal(rsp, str(err))
            fields = {"outcome": "fatal", "message": str(err)}
        except Exception as err:
            # Its text may quote input (a Secret's value too): log the type and frames only.
            log.error("compose failed", error=type(err).__name__, trace=_frames(err))
            response.fatal(rsp, f"{self.name}: internal error: {type(err).__name__}: {err}")
            fields = {"outcome": "error", "error": type(err).__name__}
        else:
            _readiness_known(request, outcome)
            ttl = outcome.ttl if _settled(request, outcome) else min(outcome.ttl, SETTLING_TTL)
            rsp.meta.ttl.FromTimedelta(ttl)
            _write(rsp, outcome)
            _log_decisions(log, outcome)
            fields = {"outcome": "ok", "composed": len(outcome.resources)}
            if outcome.requirements:
                fields["requirements"] = len(outcome.requirements)
        log.info(
            "RunFunction",
            **fields,
            duration_ms=round((time.monotonic() - started) * 1000, 1),
        )
        return rsp

    async def RunFunction(  # noqa: N802 - gRPC method name
        self, req: fnv1.RunFunctionRequest, _: grpc.aio.ServicerContext
    ) -> fnv1.RunFunctionResponse:
        return self.run(req)


def _xr_ref(req: fnv1.RunFunctionRequest) -> str:
    """``Kind/namespace/name`` (``Kind/name`` when cluster-scoped) of the observed XR."""
    fields = req.observed.composite.resource.fields
    kind = fields.get("kind")
    metadata = fields.get("metadata")
    meta = metadata.struct_value.fields if metadata is not None else {}
    parts = [meta[key].string_value for key in ("namespace", "name") if key in meta]
    return "/".join([kind.string_value if kind is not None else "?", *parts])


def _frames(err: BaseException) -> str:
    """Where an exception was raised, without its message."""
    return "".join(traceback.format_tb(err.__traceback__)).rstrip()


def _log_decisions(log: Any, outcome: Outcome) -> None:
    for key, composed in outcome.resources.items():
        metadata = composed.body.get("metadata") or {}
        log.debug(
            "compose",
            resource=key,
            kind=composed.body.get("kind"),
            name=metadata.get("name") or metadata.get("generateName"),
            ready=composed.ready,
        )
    for key, selector in outcome.requirements.items():
        log.debug(
            "require",
            requirement=key,
            kind=selector.kind,
            match_name=selector.match_name,
            match_labels=dict(selector.match_labels or {}) or None,
        )
    for condition in outcome.conditions:
        log.debug(
            "condition",
            type=condition.type,
            status=condition.status,
            reason=condition.reason,
            message=condition.message,
        )
    for result in outcome.results:
        log.debug("result", severity=result.severity, reason=result.reason, message=result.message)


def validation_summary(err: pydantic.ValidationError, root: str = "") -> str:
    """One line naming each failing field path, e.g. ``spec.devices[0].name: ...``."""
    problems = []
    for error in err.errors()[:5]:
        path = root
        for part in error["loc"]:
            path += f"[{part}]" if isinstance(part, int) else (f".{part}" if path else str(part))
        problems.append(f"{path}: {error['msg']}")
    more = len(err.errors()) - len(problems)
    return "; ".join(problems) + (f"; and {more} more" if more > 0 else "")
