"""Perturbed RunFunction requests built from converged examples, and the verdict on each answer.

A base request is one a function really received once its example converged. A perturbation
damages what the function *reads* but does not own (missing, null, of the wrong type, or a
string with unreadable content):

- its XR's status, and its XR's metadata (labels, annotations and the rest; never name,
  namespace or uid, which are the XR's identity);
- anything in an observed composed resource but its apiVersion, kind and identity: spec,
  status, labels, annotations and other metadata;
- a required object's spec, status and annotations (its labels decide whether it is required
  at all);
- the pipeline context: a field deleted, nulled or mistyped, garbage keys added, or no context
  at all;
- a whole status stripped, every status at once, or a required object removed.

The XR's own spec is never touched: an invalid spec is the one input that may end in a Fatal
result. A function that runs after other steps of its Composition (compose-usages after
compose-serving-stack) is judged with those steps in front of it (``chained``), so what an
earlier step carries over from the damaged observed state (a held Usage) reaches it as it would
in Crossplane.

The verdict on the answer (issues 14 and 21):
- crash: a Fatal result (an internal error is a traceback the servicer caught), whatever was
  damaged;
- drop: an observed composed resource the base answer kept is missing from desired state, which
  Crossplane would delete. Allowed only after a definite signal (a required object removed, or
  a field of a required object's spec removed: a spec change) or damage to an observed
  resource's spec (the function's own output, see ``Perturbation.may_remove``);
- nondeterministic: the same request twice gave different answers.
"""

from __future__ import annotations

import copy
import dataclasses
import random
from collections.abc import Callable, Iterator
from typing import Any

from crossplane.function.proto.v1 import run_function_pb2 as fnv1
from modelplane_common.plain import to_plain, to_struct

JSON = dict[str, Any]
Path = tuple[Any, ...]
Run = Callable[[fnv1.RunFunctionRequest], fnv1.RunFunctionResponse]

# Values of the wrong type for a node of each type ("unknown" to a tolerant reader).
_WRONG: dict[type, tuple[Any, ...]] = {
    dict: ("garbage", ["garbage"], 7),
    list: ({"garbage": "x"}, "garbage", 7),
    str: (["garbage"], {"garbage": "x"}, 7),
    int: ("garbage", ["garbage"], {"garbage": 1}),
    float: ("garbage", ["garbage"], {"garbage": 1}),
    bool: ("garbage", ["garbage"]),
    type(None): ("garbage", {"garbage": 1}),
}
# Strings of the right type that cannot be read (a timestamp that is not one): drawn, besides
# the wrong types, for context values and label and annotation values.
_MALFORMED_TEXT = ("garbage", "")
# Keys and values another step (or a newer Crossplane) might put in the pipeline context.
_GARBAGE_KEYS = ("garbage", "modelplane.ai/garbage", "apiextensions.crossplane.io/environment")
_GARBAGE_VALUES: tuple[Any, ...] = ("garbage", 7, None, ["garbage"], {"garbage": {"x": [1]}})
_SKIPPED_TOP = {"apiVersion", "kind", "metadata"}
# An object's identity: never perturbed (the API server owns and validates it).
_IDENTITY = {"name", "namespace", "uid", "generateName"}


@dataclasses.dataclass(frozen=True)
class Target:
    """What a perturbation damages: the XR ("xr"), an observed resource, a required object, or
    the pipeline context ("context")."""

    part: str  # "xr" | "observed" | "required" | "context"
    key: str = ""
    index: int = 0

    def label(self) -> str:
        if self.part == "xr":
            return "XR"
        if self.part == "context":
            return "context"
        if self.part == "observed":
            return f"observed[{self.key}]"
        return f"required[{self.key}][{self.index}]"


@dataclasses.dataclass(frozen=True)
class Perturbation:
    target: Target
    # delete | null | wrong | strip-status | remove-object | strip-all-status
    # | add-context-key | strip-context
    op: str
    path: Path = ()
    value: Any = None

    @property
    def may_remove(self) -> bool:
        """Whether the answer may legitimately leave out an observed resource after this.

        A definite signal may (issue 14): a required object removed, or a field of a required
        object's spec removed (a spec change). So may damage to an observed resource's own
        spec: that is the function's own output, which it recomputes from the XR's spec
        rather than trusts (crashes and determinism are still judged). Damage to metadata
        (labels, annotations) or the pipeline context never may.
        """
        if self.op == "remove-object":
            return self.target.part == "required"
        if self.target.part == "context":
            return False
        if self.path[:1] == ("status",):
            return self.removes_published_entry
        if self.path[:1] != ("spec",):
            return False
        return self.target.part == "observed" or (
            self.target.part == "required" and self.op in ("delete", "null")
        )

    @property
    def removes_published_entry(self) -> bool:
        """Deleting a whole entry of a list a required object publishes (a pool, a device): the
        published set changed, which a reader cannot tell from a real change. Conditions are
        the exception: a missing condition is unknown, never False."""
        return (
            self.target.part == "required"
            and self.op == "delete"
            and isinstance(self.path[-1], int)
            and "conditions" not in self.path
        )

    def describe(self) -> str:
        where = ".".join(str(p) for p in self.path)
        shown = f" = {self.value!r}" if self.op in ("wrong", "add-context-key") else ""
        return f"{self.op} {self.target.label()}{'.' + where if where else ''}{shown}"


# What a path is drawn from: a region (e.g. "observed-metadata"), then an object in it, then
# a path in that object. Regions are drawn alike, so a CRD bundle's huge spec does not crowd
# out the few labels of an XR or the one key of the pipeline context.
Regions = dict[str, dict[Target, list[tuple[Path, Any]]]]


@dataclasses.dataclass
class Base:
    """A captured request and the plain objects perturbations are drawn from.

    ``upstream``: the functions that run before this one in its Composition's pipeline (their
    answer is this request's desired state and context)."""

    name: str
    request: fnv1.RunFunctionRequest
    xr: JSON
    observed: dict[str, JSON]
    required: dict[str, list[JSON]]
    context: JSON | None
    regions: Regions
    upstream: tuple[str, ...] = ()

    @classmethod
    def of(
        cls, name: str, request: fnv1.RunFunctionRequest, upstream: tuple[str, ...] = ()
    ) -> Base:
        # Sorted: protobuf map order differs between processes, and a seed must draw the same
        # perturbations in every run.
        xr = to_plain(request.observed.composite.resource)
        resources = request.observed.resources
        observed = {k: to_plain(resources[k].resource) for k in sorted(resources)}
        required = {
            k: [to_plain(item.resource) for item in request.required_resources[k].items]
            for k in sorted(request.required_resources)
        }
        context = to_plain(request.context) if request.HasField("context") else None
        regions: Regions = {}

        def add(region: str, target: Target, found: Iterator[tuple[Path, Any]]) -> None:
            paths = list(found)
            if paths:
                regions.setdefault(region, {}).setdefault(target, []).extend(paths)

        add("xr-status", Target("xr"), _walk(xr.get("status"), ("status",)))
        add("xr-metadata", Target("xr"), _walk_metadata(xr))
        for key, obj in observed.items():
            target = Target("observed", key)
            add("observed-status", target, _walk(obj.get("status"), ("status",)))
            add("observed-spec", target, _walk_object(obj, skip={"status"}))
            add("observed-metadata", target, _walk_metadata(obj))
        for key, objs in required.items():
            for index, obj in enumerate(objs):
                target = Target("required", key, index)
                add("required-status", target, _walk(obj.get("status"), ("status",)))
                add("required-spec", target, _walk_object(obj, skip={"status"}))
                annotations = obj.get("metadata", {}).get("annotations")
                add("required-metadata", target, _walk(annotations, ("metadata", "annotations")))
        add("context", Target("context"), _walk(context, ()))
        return cls(name, request, xr, observed, required, context, regions, upstream)

    def targets(self) -> list[Target]:
        return [
            Target("xr"),
            *(Target("observed", k) for k in self.observed),
            *(
                Target("required", k, i)
                for k, objs in self.required.items()
                for i in range(len(objs))
            ),
        ]


def _walk(value: Any, path: Path) -> Iterator[tuple[Path, Any]]:
    if value is None and not path:
        return
    if path:
        yield path, value
    if isinstance(value, dict):
        for key in sorted(value):
            yield from _walk(value[key], (*path, key))
    elif isinstance(value, list):
        for index, item in enumerate(value):
            yield from _walk(item, (*path, index))


def _walk_object(obj: JSON, skip: set[str]) -> Iterator[tuple[Path, Any]]:
    for key in sorted(obj):
        if key not in _SKIPPED_TOP | skip:
            yield from _walk(obj[key], (key,))


def _walk_metadata(obj: JSON) -> Iterator[tuple[Path, Any]]:
    metadata = obj.get("metadata")
    if isinstance(metadata, dict):
        for key in sorted(metadata):
            if key not in _IDENTITY:
                yield from _walk(metadata[key], ("metadata", key))


def draw(base: Base, rng: random.Random) -> list[Perturbation]:
    """One to three perturbations of ``base`` (mostly one: a single fault is easiest to read)."""
    count = rng.choices((1, 2, 3), weights=(6, 2, 1))[0]
    return [_draw_one(base, rng) for _ in range(count)]


def _draw_one(base: Base, rng: random.Random) -> Perturbation:
    roll = rng.random()
    if roll < 0.04:
        return Perturbation(Target("xr"), "strip-all-status")
    if roll < 0.12 or not base.regions:
        target = rng.choice(base.targets())
        op = "remove-object" if target.part == "required" and rng.random() < 0.3 else "strip-status"
        return Perturbation(target, op)
    if roll < 0.16:
        if rng.random() < 0.25:
            return Perturbation(Target("context"), "strip-context")
        key, value = rng.choice(_GARBAGE_KEYS), rng.choice(_GARBAGE_VALUES)
        return Perturbation(Target("context"), "add-context-key", (key,), value)
    region = base.regions[rng.choice(sorted(base.regions))]
    target = rng.choice(list(region))
    path, value = rng.choice(region[target])
    op = rng.choice(("delete", "null", "wrong", "wrong"))
    if op != "wrong":
        return Perturbation(target, op, path)
    wrong = _WRONG[type(value)]
    if isinstance(value, str) and (target.part == "context" or path[:1] == ("metadata",)):
        wrong = (*wrong, *_MALFORMED_TEXT)
    return Perturbation(target, op, path, rng.choice(wrong))


def apply(base: Base, perturbations: list[Perturbation]) -> fnv1.RunFunctionRequest:
    """The base request with every perturbation applied. Only the objects a perturbation
    touches are copied and rebuilt from plain dicts (copying whole CRD bundles per run was
    most of the gateway function's fuzz time)."""
    touched: dict[Target, JSON] = {}
    removed: dict[str, set[int]] = {}
    context_touched = False
    context = copy.deepcopy(base.context)

    def original(target: Target) -> JSON | None:
        if target.part == "xr":
            return base.xr
        if target.part == "observed":
            return base.observed.get(target.key)
        objs = base.required.get(target.key) or []
        return objs[target.index] if target.index < len(objs) else None

    def object_of(target: Target) -> JSON | None:
        if target not in touched:
            found = original(target)
            if found is None:
                return None
            touched[target] = _copied(found)
        return touched[target]

    for p in perturbations:
        if p.target.part == "context":
            context_touched = True
            if p.op == "strip-context":
                context = None
            elif p.op == "add-context-key":
                context = {**(context or {}), p.path[0]: copy.deepcopy(p.value)}
            elif context is not None:
                _mutate(context, p.path, p.op, p.value)
            continue
        if p.op == "strip-all-status":
            for target in base.targets():
                obj = object_of(target)
                if obj is not None:
                    obj.pop("status", None)
            continue
        if p.op == "remove-object":
            removed.setdefault(p.target.key, set()).add(p.target.index)
            continue
        obj = object_of(p.target)
        if obj is None:
            continue
        if p.op == "strip-status":
            obj.pop("status", None)
            continue
        _mutate(obj, p.path, p.op, p.value)

    req = fnv1.RunFunctionRequest()
    req.CopyFrom(base.request)
    changed = {t: obj for t, obj in touched.items() if obj != original(t)}
    for target, obj in changed.items():
        if target.part == "xr":
            req.observed.composite.resource.CopyFrom(to_struct(obj))
        elif target.part == "observed":
            req.observed.resources[target.key].resource.CopyFrom(to_struct(obj))
    for key, objs in base.required.items():
        mine = {t.index: o for t, o in changed.items() if t.part == "required" and t.key == key}
        if mine or key in removed:
            kept = [mine.get(i, o) for i, o in enumerate(objs) if i not in removed.get(key, set())]
            req.required_resources[key].CopyFrom(
                fnv1.Resources(items=[fnv1.Resource(resource=to_struct(o)) for o in kept])
            )
    if context_touched:
        if context is None:
            req.ClearField("context")
        else:
            req.context.CopyFrom(to_struct(context))
    return req


def _copied(value: Any) -> Any:
    """A copy of a plain JSON value (copy.deepcopy's memo made it most of ``apply``'s time)."""
    if isinstance(value, dict):
        return {k: _copied(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_copied(v) for v in value]
    return value


def _mutate(obj: Any, path: Path, op: str, value: Any) -> None:
    parent = obj
    for step in path[:-1]:
        try:
            parent = parent[step]
        except (KeyError, IndexError, TypeError):
            return  # an earlier perturbation already removed or replaced this branch
    last = path[-1]
    if (isinstance(parent, dict) and last in parent) or (
        isinstance(parent, list) and isinstance(last, int) and last < len(parent)
    ):
        if op == "delete":
            del parent[last]
        else:
            parent[last] = None if op == "null" else copy.deepcopy(value)


def chained(steps: list[Run]) -> Run:
    """One function run behind the steps before it in its pipeline, as Crossplane runs them:
    the first step gets no desired state, each later one the desired state and context the
    step before answered. A Fatal answer ends the pipeline (and is the answer)."""
    if len(steps) == 1:
        return steps[0]

    def run(req: fnv1.RunFunctionRequest) -> fnv1.RunFunctionResponse:
        current = fnv1.RunFunctionRequest()
        current.CopyFrom(req)
        current.ClearField("desired")
        for step in steps[:-1]:
            rsp = step(current)
            if _fatal(rsp) is not None:
                return rsp
            current = fnv1.RunFunctionRequest()
            current.CopyFrom(req)
            current.desired.CopyFrom(rsp.desired)
            if rsp.HasField("context"):
                current.context.CopyFrom(rsp.context)
            else:
                current.ClearField("context")
        return steps[-1](current)

    return run


@dataclasses.dataclass
class Finding:
    kind: str  # crash | fatal | drop | nondeterministic
    base: str
    perturbations: list[str]
    detail: str


@dataclasses.dataclass
class Tally:
    runs: int = 0
    crashes: int = 0
    fatals: int = 0
    drops: int = 0
    nondeterministic: int = 0
    findings: list[Finding] = dataclasses.field(default_factory=list)

    def failed(self) -> bool:
        return bool(self.crashes or self.fatals or self.drops or self.nondeterministic)

    def without(self, known: Callable[[Finding], bool]) -> tuple[Tally, list[Finding]]:
        """This tally without the findings ``known`` matches, and those findings."""
        kept = Tally(runs=self.runs)
        left = []
        for finding in self.findings:
            if known(finding):
                left.append(finding)
                continue
            kept.findings.append(finding)
            if finding.kind == "crash":
                kept.crashes += 1
            elif finding.kind == "fatal":
                kept.fatals += 1
            elif finding.kind == "drop":
                kept.drops += 1
            else:
                kept.nondeterministic += 1
        return kept, left


def _fatal(rsp: fnv1.RunFunctionResponse) -> str | None:
    return next((r.message for r in rsp.results if r.severity == fnv1.SEVERITY_FATAL), None)


def fuzz(
    run: Run,
    bases: list[Base],
    runs: int,
    seed: str,
    check_determinism_every: int = 4,
) -> Tally:
    """``runs`` perturbed requests over ``bases`` (round robin), judged as the module says."""
    rng = random.Random(seed)
    kept = {}
    for base in bases:
        rsp = run(base.request)
        assert _fatal(rsp) is None, f"{base.name}: the unperturbed request fails: {_fatal(rsp)}"
        kept[base.name] = set(rsp.desired.resources) & set(base.observed)
    tally = Tally()
    for i in range(runs):
        base = bases[i % len(bases)]
        perturbations = draw(base, rng)
        req = apply(base, perturbations)
        rsp = run(req)
        tally.runs += 1
        described = [p.describe() for p in perturbations]
        fatal = _fatal(rsp)
        if fatal is not None:
            kind = "crash" if "internal error" in fatal else "fatal"
            tally.crashes += kind == "crash"
            tally.fatals += kind == "fatal"
            tally.findings.append(Finding(kind, base.name, described, fatal))
            continue
        if i % check_determinism_every == 0:
            again = run(req)
            if again.SerializeToString(deterministic=True) != rsp.SerializeToString(
                deterministic=True
            ):
                tally.nondeterministic += 1
                tally.findings.append(Finding("nondeterministic", base.name, described, ""))
        if any(p.may_remove for p in perturbations):
            continue
        dropped = sorted(kept[base.name] - set(rsp.desired.resources))
        if dropped:
            tally.drops += 1
            tally.findings.append(Finding("drop", base.name, described, ", ".join(dropped)))
    return tally


def summary(tally: Tally, limit: int = 12) -> str:
    lines = [
        f"runs={tally.runs} crashes={tally.crashes} fatals={tally.fatals} "
        f"drops={tally.drops} nondeterministic={tally.nondeterministic}"
    ]
    seen: set[tuple[str, str]] = set()
    for finding in tally.findings:
        key = (finding.kind, finding.detail[:80])
        if key in seen:
            continue
        seen.add(key)
        lines.append(
            f"  {finding.kind} [{finding.base}] {'; '.join(finding.perturbations)} -> "
            f"{finding.detail[:300]}"
        )
        if len(seen) >= limit:
            break
    return "\n".join(lines)
