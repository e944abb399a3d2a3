"""Engines that would never run, reported by `modelplane validate` before anything is applied.

The API server admits these (nothing in the XRD can see which engine a command line starts),
but compose-model-deployment and compose-model-replica refuse them with the same words
(modelplane_common.engines): a PrefillDecode decode engine on the port its routing sidecar
takes, SGLang behind the vLLM-only sidecar, an extended resource requested but not limited, a
request above its limit. A warning, like a dangling reference: the set stays valid.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from modelplane_common import engines

from modelplane.references import Source
from modelplane.validation import Problem

GROUP = "modelplane.ai"
KINDS = frozenset({"ModelDeployment", "ModelReplica"})


def _checked(body: Any) -> bool:
    return (
        isinstance(body, dict)
        and str(body.get("apiVersion", "")).split("/", maxsplit=1)[0] == GROUP
        and body.get("kind") in KINDS
        and isinstance(body.get("spec"), dict)
    )


def engine_warnings(sources: Iterable[Source]) -> list[Problem]:
    """A warning for each engine problem of a ModelDeployment or ModelReplica, in order."""
    warnings: list[Problem] = []
    for source in sources:
        body = source.body
        if not _checked(body):
            continue
        name = str((body.get("metadata") or {}).get("name", ""))
        try:
            problems, notes = engines.engine_problems(body["spec"])
        except (AttributeError, TypeError, KeyError, IndexError, StopIteration):
            continue  # a malformed spec: validation already reports it field by field
        for text in [*problems, *notes]:
            path, _, message = text.partition(" ")
            if path.startswith("spec.") and path.endswith(":"):
                path = path.rstrip(":")
            else:
                path, message = "", text
            prefix = "" if text in notes else "the function would refuse it: "
            warnings.append(Problem(source.file, body["kind"], name, path, prefix + message))
    return warnings
