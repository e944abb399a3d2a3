"""compose-inference-class: an InferenceClass is pure data with no composed children.

The function checks the class against its generated model, writes an empty status, sets
``Accepted`` and marks the composite ready explicitly (platform spec §3.2).
"""

from __future__ import annotations

import pydantic
from modelplane_common.function import CompositionFunction, Outcome, Request, validation_summary
from modelplane_schemas.generated.modelplane_ai.v1alpha1.inferenceclass import InferenceClass


def accept(composite: dict) -> Outcome:
    """The outcome for one observed InferenceClass."""
    outcome = Outcome(composite_status={})
    try:
        InferenceClass.model_validate(composite)
    except pydantic.ValidationError as err:
        message = f"invalid InferenceClass: {validation_summary(err)}"
        outcome.condition("Accepted", False, "InvalidSpec", message)
        outcome.event("Warning", message, reason="InvalidSpec")
        outcome.composite_ready = False
        return outcome
    outcome.condition("Accepted", True, "Available")
    outcome.composite_ready = True
    return outcome


class InferenceClassFunction(CompositionFunction):
    name = "compose-inference-class"

    def compose(self, request: Request) -> Outcome:
        return accept(request.composite)
