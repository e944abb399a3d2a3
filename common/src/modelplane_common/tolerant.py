"""Tolerant reads of data a function does not own (issue 14).

Observed composed resources, required objects and the XR's own status are written by others
(providers, other functions, a backup restore that strips status, a hand edit), so any field may
be missing, null or of the wrong type. Every accessor here returns None for all three: the value
is *unknown*. Unknown never deletes: a function keeps what exists, says which object and field
it could not read (``Unknowns``), and goes on with everything else. Only a definite signal (a
required object really gone, a scale-down, a spec change, ``Ready=False``) moves or removes
things.

Paths are keys (maps) and integer indexes (lists): ``text(obj, "status", "gateway", "address")``.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from typing import Any

Key = str | int


def at(obj: Any, *path: Key) -> Any:
    """The value at ``path``, or None when any step is missing or of the wrong type."""
    value = obj
    for key in path:
        # Plain dicts first: an abstract Mapping check costs more than the lookup, and the
        # functions walk thousands of observed objects a call. (A decoded map's keys are
        # strings: an index finds nothing in it.)
        if type(value) is dict:
            value = value.get(key)
        elif value is None:
            return None
        elif isinstance(key, str) and isinstance(value, Mapping):
            value = value.get(key)
        elif isinstance(key, int) and isinstance(value, list) and -len(value) <= key < len(value):
            value = value[key]
        else:
            return None
    return value


def mapping(obj: Any, *path: Key) -> dict[str, Any] | None:
    value = at(obj, *path)
    return value if isinstance(value, dict) else None


def listing(obj: Any, *path: Key) -> list[Any] | None:
    value = at(obj, *path)
    return value if isinstance(value, list) else None


def text(obj: Any, *path: Key) -> str | None:
    value = at(obj, *path)
    return value if isinstance(value, str) else None


def integer(obj: Any, *path: Key) -> int | None:
    value = at(obj, *path)
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def maps(obj: Any, *path: Key) -> list[dict[str, Any]]:
    """The map entries of a list (others skipped); empty when the list itself is unknown."""
    return [item for item in listing(obj, *path) or [] if isinstance(item, dict)]


def status(obj: Any) -> dict[str, Any]:
    """``obj.status`` as a map; empty when missing or not a map (callers must treat an empty
    status as "nothing known", never as "nothing exists")."""
    return mapping(obj, "status") or {}


def name_of(obj: Any) -> str:
    """``metadata.name``, or "" when unreadable."""
    return text(obj, "metadata", "name") or ""


def describe(obj: Any) -> str:
    """``Kind name`` of an object, for messages naming what could not be read."""
    kind = text(obj, "kind") or "object"
    name = name_of(obj)
    return f"{kind} {name}" if name else kind


@dataclasses.dataclass
class Unknowns:
    """What a reconcile could not read: ``object: field (why)``, for one condition message."""

    found: list[str] = dataclasses.field(default_factory=list)

    def note(self, what: str, field: str, why: str = "missing or malformed") -> None:
        entry = f"{what}: {field} {why}"
        if entry not in self.found:
            self.found.append(entry)

    def __bool__(self) -> bool:
        return bool(self.found)

    def message(self, limit: int = 4) -> str:
        shown = "; ".join(self.found[:limit])
        more = len(self.found) - limit
        return shown + (f"; and {more} more" if more > 0 else "")
