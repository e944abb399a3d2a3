"""Admission of every repository object, judged by the real API server (issue 19 item 4)."""

from __future__ import annotations

from modelplane_realplane import admission, report
from modelplane_realplane.install import Running

REPOSITORY_GOAL = 0.99


def test_modelplane_validate_agrees_with_the_api_server_on_repository_objects(
    real_plane: Running,
) -> None:
    judged = admission.judge(real_plane.plane.client())
    agreeing = [j for j in judged if j.agree]
    report.record(("admission", "repository"), {"agree": len(agreeing), "cases": len(judged)})
    disagreements = [j.describe() for j in judged if not j.agree]
    print(f"repository objects: {len(agreeing)}/{len(judged)} agree")
    print("\n".join(disagreements))
    assert len(judged) > 100
    assert len(agreeing) / len(judged) >= REPOSITORY_GOAL, "\n".join(disagreements)
