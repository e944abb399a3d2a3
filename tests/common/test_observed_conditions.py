"""Reading conditions from observed objects never raises on a malformed status."""

from __future__ import annotations

import pytest
from modelplane_common.observed import condition, is_ready


def test_ready_is_read_from_the_ready_condition() -> None:
    obj = {"status": {"conditions": [{"type": "Synced"}, {"type": "Ready", "status": "True"}]}}
    assert is_ready(obj)
    assert condition(obj, "Synced") == {"type": "Synced"}
    assert not is_ready({"status": {"conditions": [{"type": "Ready", "status": "False"}]}})


@pytest.mark.parametrize(
    "obj",
    [
        None,
        [],
        {"status": "pending"},
        {"status": {"conditions": "Ready"}},
        {"status": {"conditions": ["Ready", 3, None]}},
    ],
)
def test_malformed_status_reads_as_not_ready(obj: object) -> None:
    assert condition(obj, "Ready") is None  # type: ignore[arg-type]
    assert not is_ready(obj)  # type: ignore[arg-type]
