"""Semantic versions as DRA compares ``version`` device attributes (semver 2.0.0, strict)."""

from __future__ import annotations

import re
from collections.abc import Iterable
from typing import Any

# The same pattern as the InferenceClass XRD's CEL rule on version attributes.
SEMVER = re.compile(
    r"^(0|[1-9][0-9]*)[.](0|[1-9][0-9]*)[.](0|[1-9][0-9]*)"
    r"(-[0-9A-Za-z-]+([.][0-9A-Za-z-]+)*)?([+][0-9A-Za-z-]+([.][0-9A-Za-z-]+)*)?$"
)


def is_semver(text: object) -> bool:
    return isinstance(text, str) and SEMVER.match(text) is not None


def bad_version_attributes(devices: Iterable[Any]) -> list[str]:
    """``devices[i].attributes[key].version: "8.9" is not a semantic version`` for each
    ``version`` attribute (plain JSON devices) a DRA selector could never compare."""
    problems = []
    for i, device in enumerate(devices):
        attributes = (device.get("attributes") or {}) if isinstance(device, dict) else {}
        for key, value in sorted(attributes.items()):
            version = value.get("version") if isinstance(value, dict) else None
            if version is not None and not is_semver(version):
                problems.append(
                    f"devices[{i}].attributes[{key}].version: {version!r} is not a semantic"
                    " version (MAJOR.MINOR.PATCH, e.g. 8.9.0)"
                )
    return problems
