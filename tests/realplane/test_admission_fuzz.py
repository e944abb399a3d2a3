"""CRD validation rules fuzzed against the real API server, and the CEL corpus re-checked on it
(issue 19 item 4).

The fuzzer (``modelplane_realplane.fuzz``) makes seeded CRDs with ``x-kubernetes-validations``
rules and objects of each; the real kube-apiserver and ``modelplane validate`` both judge
every one. The corpus re-check (``modelplane_realplane.corpus``) turns each case of
``tests/conformance/cel_*.yaml`` into a CRD (and an object) and asks the real server whether
the corpus's expectation holds.
"""

from __future__ import annotations

import time

from modelplane_realplane import corpus, fuzz, report
from modelplane_realplane.install import Running

FUZZ_GOAL = 0.97
FUZZ_BUDGET_SECONDS = 240


def test_modelplane_validate_agrees_with_the_api_server_on_fuzzed_rules(
    real_plane: Running,
) -> None:
    started = time.monotonic()
    judged = fuzz.run(real_plane.plane.client())
    elapsed = time.monotonic() - started
    agreeing = [j for j in judged if j.agree]
    report.record(("admission", "fuzz"), {"agree": len(agreeing), "cases": len(judged)})
    print(fuzz.summary(judged))
    print(f"{len(judged)} verdict pairs in {elapsed:.0f} s")
    disagreements = [j.describe() for j in judged if not j.agree]
    print("\n".join(disagreements))
    groups = fuzz.agreement(judged)
    assert all(groups[g][1] > 0 for g in fuzz.GROUPS), groups
    assert len(judged) > 1000
    assert len(agreeing) / len(judged) >= FUZZ_GOAL, "\n".join(disagreements)
    assert elapsed < FUZZ_BUDGET_SECONDS


def test_the_cel_corpus_holds_on_the_api_server(real_plane: Running) -> None:
    """Every expectation of tests/conformance/cel_*.yaml, as the real server answers it."""
    findings = corpus.recheck(real_plane.plane.client())
    wrong = [f.describe() for f in findings if not f.agrees]
    print(f"{len(findings) - len(wrong)}/{len(findings)} corpus expectations hold")
    print("\n".join(wrong))
    assert len(findings) >= 150
    assert not wrong, "\n".join(wrong)
