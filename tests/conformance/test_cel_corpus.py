"""Modelplane's CEL against the Kubernetes API server's published expectations.

The corpus (cel_compile.yaml, cel_cost.yaml, cel_runtime.yaml beside this file) states what a
Kubernetes 1.34 API server does with each rule; every case runs through the same code
`modelplane validate` uses. Cases marked ``known_gap`` are where Modelplane is known to
disagree: they must still disagree (so a fix is noticed and the mark removed), and they count
against the agreement figure, which must stay at 97 % or more per group (docs/validation.md).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import yaml
from modelplane import celrules, validation
from modelplane_common import cel

HERE = Path(__file__).parent
GROUPS = ("compile", "cost", "runtime")
THRESHOLD = 0.97


def corpus(group: str) -> list[dict[str, Any]]:
    return yaml.safe_load((HERE / f"cel_{group}.yaml").read_text())


def same(got: Any, want: Any) -> bool:
    """Equal values of the same JSON type (1, 1.0 and true are three different answers)."""
    if isinstance(want, bool) or isinstance(got, bool):
        return got is want
    if isinstance(want, dict):
        return (
            isinstance(got, dict)
            and got.keys() == want.keys()
            and all(same(got[k], want[k]) for k in want)
        )
    if isinstance(want, list):
        return (
            isinstance(got, list)
            and len(got) == len(want)
            and all(same(g, w) for g, w in zip(got, want, strict=True))
        )
    return type(got) is type(want) and got == want


def compile_agrees(case: dict[str, Any]) -> bool:
    schema = case.get("schema") or {}
    if case.get("root"):
        schema = celrules.with_object_meta(schema)
    try:
        celrules.estimate_cost(case["rule"], schema, "bool")
    except celrules.RuleError as err:
        return "error" in case and case["error"] in str(err)
    return bool(case.get("ok"))


def cost_verdict(schema: dict[str, Any]) -> str:
    messages = [m for _, m in validation.check_schema(celrules.with_object_meta(schema))]
    for verdict, marker in (
        ("rule", "estimated rule cost exceeds"),
        ("messageExpression", "estimated messageExpression cost exceeds"),
        ("total", "total for entire OpenAPIv3 schema exceeds"),
    ):
        if any(marker in m for m in messages):
            return verdict
    return f"problems: {messages}" if messages else "accepted"


def cost_agrees(case: dict[str, Any]) -> bool:
    return cost_verdict(case["schema"]) == case["expect"]


def runtime_agrees(case: dict[str, Any]) -> bool:
    schema = case.get("schema")
    try:
        compiled = celrules.compile_rule(case["expr"])
        if schema is not None:
            compiled = celrules.for_schema(compiled, schema)
        got = compiled.evaluate({"self": celrules.to_cel(case.get("self"), schema)})
    except celrules.RuleError:
        return False
    except cel.CelEvalError:
        return bool(case.get("error"))
    return "result" in case and same(got, case["result"])


AGREES = {"compile": compile_agrees, "cost": cost_agrees, "runtime": runtime_agrees}


def _cases() -> list[Any]:
    params = []
    for group in GROUPS:
        for index, case in enumerate(corpus(group)):
            label = case.get("name") or case.get("rule") or case.get("expr")
            params.append(pytest.param(group, case, id=f"{group}-{index}-{label}"[:90]))
    return params


@pytest.mark.parametrize(("group", "case"), _cases())
def test_case(group: str, case: dict[str, Any]):
    agrees = AGREES[group](case)
    if case.get("known_gap"):
        assert not agrees, "now agrees with Kubernetes: remove known_gap and update the figures"
    else:
        assert agrees, f"disagrees with Kubernetes: {case}"


@pytest.mark.parametrize("group", GROUPS)
def test_agreement_per_group_is_at_least_97_percent(group: str):
    cases = corpus(group)
    agreed = sum(AGREES[group](case) for case in cases)
    assert agreed / len(cases) >= THRESHOLD, f"{group}: {agreed}/{len(cases)}"


def test_the_corpus_holds_at_least_150_cases():
    assert sum(len(corpus(group)) for group in GROUPS) >= 150


SHIPPED = sorted(
    (
        Path(validation.__file__).parents[3] / "schemas/python/src/modelplane_schemas/generated"
    ).rglob("*.crd.json")
)


@pytest.mark.parametrize("path", SHIPPED, ids=lambda p: p.stem)
def test_every_shipped_crd_passes_the_api_server_checks(path: Path):
    """Real API servers accept these CRDs: any compile or cost error here is ours."""
    schema = json.loads(path.read_text())["openAPIV3Schema"]
    assert validation.check_schema(celrules.with_object_meta(schema)) == []
