"""The CEL conformance corpus (tests/conformance/cel_*.yaml) re-checked against a real API server.

The corpus states what a Kubernetes 1.34 API server does with each rule; here a real one says:

* compile cases: each rule on a property of its own (typed by the case's schema, or
  ``x-kubernetes-int-or-string`` for a dyn ``self``) of a CRD sent as a dry-run create; the
  rule compiles, or is refused with a message containing the case's ``error``;
* cost cases: the case's schema as a CRD (dry-run create): accepted, or refused for a rule's,
  a messageExpression's or the whole schema's cost;
* runtime cases: ``<result literal> == dyn(<expr>)`` (and the result's type) as a rule of a
  real CRD, with an object holding ``self``; an ``error: true`` case must fail with an
  evaluation error (``evaluating rule``).

Schemas get ``maxItems``/``maxLength``/``maxProperties`` where they declare none, so that no
cost limit decides a case about compilation or evaluation.

    uv run python -m modelplane_realplane.corpus --run /tmp/fuzz-plane
"""

from __future__ import annotations

import copy
import dataclasses
import json
import re
import sys
import time
from collections.abc import Callable, Iterable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import yaml

from modelplane_realplane import fuzz
from modelplane_realplane.kubeapi import ApiError, Client
from modelplane_realplane.paths import REPOSITORY

JSON = dict[str, Any]
CORPUS = REPOSITORY / "tests" / "conformance"
BATCH = 40
_DYN: JSON = {"x-kubernetes-int-or-string": True, "maxLength": 64}


def cases(group: str) -> list[JSON]:
    return yaml.safe_load((CORPUS / f"cel_{group}.yaml").read_text())


@dataclasses.dataclass(frozen=True)
class Finding:
    group: str
    index: int
    case: JSON
    expected: str
    server: str
    agrees: bool

    def describe(self) -> str:
        label = self.case.get("name") or self.case.get("rule") or self.case.get("expr")
        return (f"{self.group}[{self.index}] {label!r}: the corpus says {self.expected}; "
                f"the API server: {self.server}")  # fmt: skip


# --------------------------------------------------------------------------------------------
# Schemas


def bounded(schema: Any) -> Any:
    """``schema`` with a small bound on every list, map and string that declares none."""
    if not isinstance(schema, dict):
        return schema
    out = {key: copy.deepcopy(value) for key, value in schema.items()}
    if out.get("type") == "array" and "maxItems" not in out:
        out["maxItems"] = 16
    if (out.get("type") == "string" or out.get("x-kubernetes-int-or-string")) and (
        "maxLength" not in out and "format" not in out and "enum" not in out
    ):
        out["maxLength"] = 64
    if isinstance(out.get("additionalProperties"), dict) and "maxProperties" not in out:
        out["maxProperties"] = 16
    if isinstance(out.get("properties"), dict):
        out["properties"] = {k: bounded(v) for k, v in out["properties"].items()}
    for key in ("items", "additionalProperties"):
        if isinstance(out.get(key), dict):
            out[key] = bounded(out[key])
    return out


def schema_of(value: Any, top: bool = True) -> JSON:
    """A schema for a JSON value as the corpus means an untyped ``self``: strings and integers
    dynamic (int-or-string), nested objects maps when their values agree, everything small."""
    if isinstance(value, bool):
        return {"type": "boolean"}
    if isinstance(value, float):
        return {"type": "number"}
    if isinstance(value, dict):
        values = [schema_of(v, top=False) for v in value.values()]
        if not top and values and all(v == values[0] for v in values):
            return {"type": "object", "maxProperties": 16, "additionalProperties": values[0]}
        return {"type": "object",
                "properties": {k: schema_of(v, top=False) for k, v in value.items()}}  # fmt: skip
    if isinstance(value, list):
        return {"type": "array", "maxItems": 16,
                "items": schema_of(value[0], top=False) if value else dict(_DYN)}  # fmt: skip
    if value is None:
        return {**_DYN, "nullable": True}
    return dict(_DYN)


_RUN = fuzz.run_token()


def _crd(name: str, schema: JSON) -> JSON:
    group = f"{name}.corpus{_RUN}.{fuzz.GROUP_DOMAIN}"
    return {
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": {"name": f"{fuzz.PLURAL}.{group}", "labels": {fuzz.FUZZ_LABEL: "true"}},
        "spec": {
            "group": group,
            "scope": "Cluster",
            "names": {"plural": fuzz.PLURAL, "kind": fuzz.KIND},
            "versions": [
                {
                    "name": "v1",
                    "served": True,
                    "storage": True,
                    "schema": {"openAPIV3Schema": schema},
                }
            ],
        },
    }


def _dry_create_crds(client: Client, crds: list[JSON]) -> list[list[tuple[str, str]]]:
    """The causes of each CRD's refusal (empty: accepted), as dry-run creates."""

    def create(crd: JSON) -> list[tuple[str, str]]:
        try:
            client.request("POST", fuzz.CRD_PATH + "?dryRun=All", crd)
        except ApiError as error:
            return [(fuzz.normal_field(f), m) for f, m in fuzz._status_causes(error)]
        return []

    with ThreadPoolExecutor(fuzz.WORKERS) as pool:
        return list(pool.map(create, crds))


_PROPERTY = re.compile(r"properties\[spec\]\.properties\[(r[0-9]+)\]")


def _per_property(
    client: Client, label: str, schemas: dict[str, JSON]
) -> dict[str, list[tuple[str, str]]]:
    """The causes naming each property of a spec holding ``schemas``, checked together in one
    dry-run CRD; a batch refused as a whole (the total cost) is checked property by property."""
    spec = {"type": "object", "properties": schemas}
    (causes,) = _dry_create_crds(client, [_crd(label, {"type": "object",
                                                       "properties": {"spec": spec}})])  # fmt: skip
    found: dict[str, list[tuple[str, str]]] = {name: [] for name in schemas}
    stray = False
    for field, message in causes:
        match = _PROPERTY.search(field)
        if match and match.group(1) in found:
            found[match.group(1)].append((field, message))
        else:
            stray = True
    if stray and len(schemas) > 1:
        for name, schema in schemas.items():
            found.update(_per_property(client, f"{label}-{name}", {name: schema}))
    elif stray:
        found[next(iter(schemas))] = causes
    return found


# --------------------------------------------------------------------------------------------
# Compile


def _compile_schema(case: JSON) -> JSON:
    schema = bounded(case.get("schema") or dict(_DYN))
    return {**schema, "x-kubernetes-validations": [_with_message({"rule": case["rule"]})]}


def _with_message(rule: JSON) -> JSON:
    """A rule spanning lines needs a message."""
    return {**rule, "message": "the corpus case"} if "\n" in rule["rule"] else rule


def _compile_verdict(causes: list[tuple[str, str]]) -> str:
    if not causes:
        return "ok"
    return "error: " + " | ".join(m.replace("\n", " ")[:400] for _, m in causes)


def compile_findings(client: Client) -> list[Finding]:
    corpus = cases("compile")
    verdicts: dict[int, str] = {}
    plain = [(i, c) for i, c in enumerate(corpus) if not c.get("root")]
    for start in range(0, len(plain), BATCH):
        batch = plain[start : start + BATCH]
        found = _per_property(client, f"compile{start}",
                              {f"r{i}": _compile_schema(c) for i, c in batch})  # fmt: skip
        for i, _ in batch:
            verdicts[i] = _compile_verdict(found[f"r{i}"])
    roots = [(i, c) for i, c in enumerate(corpus) if c.get("root")]
    crds = []
    for i, case in roots:
        schema = bounded(case["schema"])
        schema["x-kubernetes-validations"] = [_with_message({"rule": case["rule"]})]
        crds.append(_crd(f"root{i}", schema))
    for (i, _), causes in zip(roots, _dry_create_crds(client, crds), strict=True):
        verdicts[i] = _compile_verdict(causes)
    findings = []
    for i, case in enumerate(corpus):
        server = verdicts[i]
        if case.get("ok"):
            expected, agrees = "ok", server == "ok"
        else:
            expected = f"error containing {case.get('error')!r}"
            agrees = server.startswith("error") and str(case.get("error")) in server
        findings.append(Finding("compile", i, case, expected, server, agrees))
    return findings


# --------------------------------------------------------------------------------------------
# Cost


_COST_MARKERS = (
    ("rule", "estimated rule cost exceeds"),
    ("messageExpression", "estimated messageExpression cost exceeds"),
    ("total", "total for entire OpenAPIv3 schema exceeds"),
)


def cost_verdict(causes: list[tuple[str, str]]) -> str:
    for verdict, marker in _COST_MARKERS:
        if any(marker in message for _, message in causes):
            return verdict
    if causes:
        return "problems: " + " | ".join(m[:300] for _, m in causes)
    return "accepted"


def cost_findings(client: Client) -> list[Finding]:
    corpus = cases("cost")
    crds = [_crd(f"cost{i}", case["schema"]) for i, case in enumerate(corpus)]
    findings = []
    for i, (case, causes) in enumerate(zip(corpus, _dry_create_crds(client, crds), strict=True)):
        server = cost_verdict(causes)
        findings.append(Finding("cost", i, case, case["expect"], server, server == case["expect"]))
    return findings


# --------------------------------------------------------------------------------------------
# Runtime


def cel_literal(value: Any) -> str:
    """A CEL literal for a JSON value (strings double-quoted with JSON's escapes)."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int):
        return str(value)
    if isinstance(value, float):
        text = repr(value)
        return text if any(c in text for c in ".en") else text + ".0"
    if isinstance(value, str):
        return json.dumps(value, ensure_ascii=False)
    if isinstance(value, list):
        return "[" + ", ".join(cel_literal(v) for v in value) + "]"
    if isinstance(value, dict):
        return (
            "{" + ", ".join(f"{cel_literal(k)}: {cel_literal(v)}" for k, v in value.items()) + "}"
        )
    raise TypeError(f"no CEL literal for {value!r}")


_IDENT = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")


def cel_match(expr: str, want: Any) -> str:
    """A condition that ``expr`` equals the JSON value ``want``: lists and maps element by
    element (so objects, which no map literal equals, compare too), in order; scalars with
    the literal on the left."""
    if isinstance(want, list):
        parts = [f"size({expr}) == {len(want)}"]
        parts += [cel_match(f"{expr}[{i}]", item) for i, item in enumerate(want)]
        return "(" + " && ".join(parts) + ")"
    if isinstance(want, dict):
        parts = []
        for key, value in want.items():
            if isinstance(key, str) and _IDENT.match(key):
                parts.append(cel_match(f"{expr}.{key}", value))
            else:
                parts.append(cel_match(f"{expr}[{cel_literal(key)}]", value))
        return "(" + " && ".join(parts or ["true"]) + ")"
    return f"{cel_literal(want)} == {expr}"


_TYPE_NAMES: list[tuple[type, str]] = [(bool, "bool"), (int, "int"), (float, "double"),
                                       (str, "string"), (list, "list"), (dict, "map")]  # fmt: skip


def runtime_rule(case: JSON) -> str:
    """``<result> == (<expr>)`` and the result's type (the literal on the left, so a set or
    map list is compared in order, element by element); for an error case, a use of the
    value that costs nothing whatever its type (``[<expr>].size() == 1``)."""
    expr = f"(\n{case['expr']}\n)"
    if case.get("error"):
        return f"[{expr}].size() == 1"
    result = case["result"]
    rule = cel_match(expr, result)
    if result is None:
        return f"{rule} && type({expr}) == null_type"
    name = next(n for t, n in _TYPE_NAMES if isinstance(result, t))
    return f"{rule} && type({expr}) == {name}"


def _reads_absent(case: JSON, value: JSON) -> bool:
    named = re.findall(r"self\.\??([A-Za-z_]\w*)|self\[\??'(\w+)'\]", case["expr"])
    return any((a or b) not in value for a, b in named)


def _runtime_property(case: JSON) -> tuple[JSON, Any]:
    """The property schema (with the rule) and the value ``self`` takes."""
    if "self" in case:
        value = case["self"]
        schema = bounded(case["schema"]) if case.get("schema") else schema_of(value)
        if not case.get("schema") and isinstance(value, dict) and _reads_absent(case, value):
            # self as a map of dyn: reading a key it lacks is an evaluation error, not a
            # compile error as for an object's undeclared field.
            schema = {"type": "object", "maxProperties": 16,
                      "additionalProperties": {**_DYN, "nullable": True}}  # fmt: skip
    else:
        value, schema = 0, {"type": "integer"}
    rule = {"rule": runtime_rule(case), "message": "the corpus case"}
    return {**schema, "x-kubernetes-validations": [rule]}, value


def runtime_findings(client: Client) -> list[Finding]:
    corpus = cases("runtime")
    properties = {f"r{i}": _runtime_property(case) for i, case in enumerate(corpus)}
    compiled: dict[str, list[tuple[str, str]]] = {}
    names = list(properties)
    for start in range(0, len(names), BATCH):
        batch = names[start : start + BATCH]
        compiled.update(_per_property(client, f"runtime{start}",
                                      {n: properties[n][0] for n in batch}))  # fmt: skip
    accepted = [n for n in names if not compiled[n]]
    token = fuzz.run_token()  # created for real: a name no earlier run's deletion still holds
    chunks = [accepted[s : s + BATCH] for s in range(0, len(accepted), BATCH)]
    crds = []
    for number, chunk in enumerate(chunks):
        spec = {"type": "object", "properties": {n: properties[n][0] for n in chunk}}
        crds.append(_crd(f"runtime{number}-{token}",
                         {"type": "object", "properties": {"spec": spec}}))  # fmt: skip
    outcomes: dict[str, str] = {}
    try:
        created = fuzz._crd_verdicts(client, crds)
        for crd, verdict in zip(crds, created, strict=True):
            if not verdict.accepted:
                raise RuntimeError(f"the API server refused {crd['metadata']['name']}: "
                                   f"{verdict.show()}")  # fmt: skip
        fuzz.wait_established(client, (crd["metadata"]["name"] for crd in crds))
        jobs = [(crds[number]["spec"]["group"], name) for number, chunk in enumerate(chunks)
                for name in chunk]  # fmt: skip

        def evaluate(job: tuple[str, str]) -> str:
            group, name = job
            body = {"apiVersion": f"{group}/v1", "kind": fuzz.KIND,
                    "metadata": {"name": name}, "spec": {name: properties[name][1]}}  # fmt: skip
            try:
                client.request("POST", f"/apis/{group}/v1/{fuzz.PLURAL}?dryRun=All", body)
            except ApiError as error:
                causes = fuzz._status_causes(error)
                return "refused: " + " | ".join(m.replace("\n", " ")[:300] for _, m in causes)
            return "holds"

        with ThreadPoolExecutor(fuzz.WORKERS) as pool:
            for (_, name), outcome in zip(jobs, pool.map(evaluate, jobs), strict=True):
                outcomes[name] = outcome
    finally:
        fuzz.delete_fuzz_crds(client)
    findings = []
    for i, case in enumerate(corpus):
        name = f"r{i}"
        if compiled[name]:
            server = "compile error: " + " | ".join(m.replace("\n", " ")[:300]
                                                     for _, m in compiled[name])  # fmt: skip
        else:
            server = outcomes[name]
        if case.get("error"):
            expected, agrees = "an evaluation error", "evaluating rule" in server
        else:
            expected = f"result {json.dumps(case.get('result'))}"
            agrees = server == "holds"
        findings.append(Finding("runtime", i, case, expected, server, agrees))
    return findings


# --------------------------------------------------------------------------------------------


CHECKS: dict[str, Callable[[Client], list[Finding]]] = {
    "compile": compile_findings,
    "cost": cost_findings,
    "runtime": runtime_findings,
}


def recheck(client: Client, groups: Iterable[str] = tuple(CHECKS)) -> list[Finding]:
    findings: list[Finding] = []
    for group in groups:
        findings += CHECKS[group](client)
    return findings


def main(argv: list[str] | None = None) -> int:
    import argparse  # noqa: PLC0415 - only for the development entry point

    from modelplane_realplane import plane as planes  # noqa: PLC0415

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--run", type=Path, required=True, help="the plane's run directory")
    parser.add_argument("groups", nargs="*", default=list(CHECKS))
    args = parser.parse_args(argv)
    plane = planes.Plane.load(args.run)
    if plane is None:
        parser.error(f"no plane in {args.run}")
    begin = time.monotonic()
    findings = recheck(plane.client(), args.groups)
    for finding in findings:
        if not finding.agrees:
            print(finding.describe())
    for group in args.groups:
        mine = [f for f in findings if f.group == group]
        print(f"{group}: {sum(f.agrees for f in mine)}/{len(mine)} corpus expectations hold")
    print(f"{time.monotonic() - begin:.0f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
