"""Perturbed RunFunction requests built from converged examples, and the verdict on each answer.

A base request is one a function really received once its example converged. A perturbation
damages what the function *reads* but does not own: a field under the XR's status, anything in
an observed composed resource or a required object (missing, null, or of the wrong type), a
whole status stripped, or a required object removed. The function's own spec is never touched:
an invalid spec is the one input that may end in a Fatal result.

The verdict on the answer (issue 14):
- crash: a Fatal result (an internal error is a traceback the servicer caught);
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
_SKIPPED_TOP = {"apiVersion", "kind", "metadata"}


@dataclasses.dataclass(frozen=True)
class Target:
    """One object in a request: the XR ("xr"), an observed resource, or a required object."""

    part: str  # "xr" | "observed" | "required"
    key: str = ""
    index: int = 0

    def label(self) -> str:
        if self.part == "xr":
            return "XR"
        if self.part == "observed":
            return f"observed[{self.key}]"
        return f"required[{self.key}][{self.index}]"


@dataclasses.dataclass(frozen=True)
class Perturbation:
    target: Target
    op: str  # delete | null | wrong | strip-status | remove-object | strip-all-status
    path: Path = ()
    value: Any = None

    @property
    def may_remove(self) -> bool:
        """Whether the answer may legitimately leave out an observed resource after this.

        A definite signal may (issue 14): a required object removed, or a field of a required
        object's spec removed (a spec change). So may damage to an observed resource's own
        spec: that is the function's own output, which it recomputes from the XR's spec
        rather than trusts (crashes and determinism are still judged).
        """
        if self.op == "remove-object":
            return self.target.part == "required"
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
        shown = f" = {self.value!r}" if self.op == "wrong" else ""
        return f"{self.op} {self.target.label()}{'.' + where if where else ''}{shown}"


@dataclasses.dataclass
class Base:
    """A captured request and the plain objects perturbations are drawn from."""

    name: str
    request: fnv1.RunFunctionRequest
    xr: JSON
    observed: dict[str, JSON]
    required: dict[str, list[JSON]]
    paths: list[tuple[Target, Path, Any]]

    @classmethod
    def of(cls, name: str, request: fnv1.RunFunctionRequest) -> Base:
        xr = to_plain(request.observed.composite.resource)
        observed = {k: to_plain(r.resource) for k, r in request.observed.resources.items()}
        required = {
            k: [to_plain(item.resource) for item in rs.items]
            for k, rs in request.required_resources.items()
        }
        paths: list[tuple[Target, Path, Any]] = []
        for path, value in _walk(xr.get("status"), ("status",)):
            paths.append((Target("xr"), path, value))
        for key, obj in observed.items():
            for path, value in _walk_object(obj):
                paths.append((Target("observed", key), path, value))
        for key, objs in required.items():
            for index, obj in enumerate(objs):
                for path, value in _walk_object(obj):
                    paths.append((Target("required", key, index), path, value))
        return cls(name, request, xr, observed, required, paths)

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


def _walk_object(obj: JSON) -> Iterator[tuple[Path, Any]]:
    for key in sorted(obj):
        if key not in _SKIPPED_TOP:
            yield from _walk(obj[key], (key,))


def draw(base: Base, rng: random.Random) -> list[Perturbation]:
    """One to three perturbations of ``base`` (mostly one: a single fault is easiest to read)."""
    count = rng.choices((1, 2, 3), weights=(6, 2, 1))[0]
    return [_draw_one(base, rng) for _ in range(count)]


def _draw_one(base: Base, rng: random.Random) -> Perturbation:
    roll = rng.random()
    if roll < 0.04:
        return Perturbation(Target("xr"), "strip-all-status")
    if roll < 0.12 or not base.paths:
        target = rng.choice(base.targets())
        op = "remove-object" if target.part == "required" and rng.random() < 0.3 else "strip-status"
        return Perturbation(target, op)
    target, path, value = rng.choice(base.paths)
    op = rng.choice(("delete", "null", "wrong", "wrong"))
    if op == "wrong":
        return Perturbation(target, op, path, rng.choice(_WRONG[type(value)]))
    return Perturbation(target, op, path)


def apply(base: Base, perturbations: list[Perturbation]) -> fnv1.RunFunctionRequest:
    """The base request with every perturbation applied. Only the objects a perturbation
    touches are copied and rebuilt from plain dicts (copying whole CRD bundles per run was
    most of the gateway function's fuzz time)."""
    touched: dict[Target, JSON] = {}
    removed: dict[str, set[int]] = {}

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
            touched[target] = copy.deepcopy(found)
        return touched[target]

    for p in perturbations:
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
            req.observed.composite.resource.Clear()
            req.observed.composite.resource.update(obj)
        elif target.part == "observed":
            req.observed.resources[target.key].resource.CopyFrom(to_struct(obj))
    for key, objs in base.required.items():
        mine = {t.index: o for t, o in changed.items() if t.part == "required" and t.key == key}
        if mine or key in removed:
            kept = [mine.get(i, o) for i, o in enumerate(objs) if i not in removed.get(key, set())]
            req.required_resources[key].CopyFrom(
                fnv1.Resources(items=[fnv1.Resource(resource=to_struct(o)) for o in kept])
            )
    return req


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


def _fatal(rsp: fnv1.RunFunctionResponse) -> str | None:
    return next((r.message for r in rsp.results if r.severity == fnv1.SEVERITY_FATAL), None)


def fuzz(
    run: Callable[[fnv1.RunFunctionRequest], fnv1.RunFunctionResponse],
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
