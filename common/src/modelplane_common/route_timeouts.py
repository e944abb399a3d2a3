"""The ``timeouts`` every HTTPRoute Modelplane composes states (routing.md R2).

Without them Envoy Gateway gives a route Envoy's 15-second route timeout, which covers the
whole response, streamed or not: a longer completion ends in a 504. Unset ``request`` is one
hour; unset ``backendRequest`` follows ``request``. The choice and the gateways' semantics are
in design/routing-and-cache.md ("Route timeouts").

Pure: the same rules the XRDs' CEL enforces, re-checked here so a spec that bypassed admission
is reported by field instead of producing a route the HTTPRoute CRD refuses.
"""

from __future__ import annotations

import datetime
import re

DEFAULT_REQUEST = "1h"
MINIMUM = datetime.timedelta(seconds=1)
MAXIMUM = datetime.timedelta(hours=24)
# GEP-2257, exactly as the HTTPRoute CRD's pattern admits it, so a value is copied verbatim.
PATTERN = r"^([0-9]{1,5}(h|m|s|ms)){1,4}$"
_PART = re.compile(r"([0-9]{1,5})(h|ms|m|s)")
_MILLISECONDS = {"h": 3_600_000, "m": 60_000, "s": 1000, "ms": 1}


def parse(text: object) -> datetime.timedelta | None:
    """A Gateway API duration (``300s``, ``1h30m``, ``500ms``), or None if it is not one."""
    if not isinstance(text, str) or not re.fullmatch(PATTERN, text):
        return None
    total = sum(int(n) * _MILLISECONDS[unit] for n, unit in _PART.findall(text))
    return datetime.timedelta(milliseconds=total)


def problems(request: str | None, backend_request: str | None, field: str) -> list[str]:
    """What is wrong with ``<field>.request`` and ``<field>.backendRequest``, as the XRD says it."""
    found: list[str] = []
    parsed: dict[str, datetime.timedelta] = {}
    for name, value in (("request", request), ("backendRequest", backend_request)):
        if value is None:
            continue
        duration = parse(value)
        if duration is None:
            found.append(
                f"{field}.{name} must be a duration such as 300s, 30m or 1h (at most four "
                "parts of up to five digits, each h, m, s or ms)"
            )
        elif not MINIMUM <= duration <= MAXIMUM:
            found.append(f"{field}.{name} must be between 1s and 24h")
        else:
            parsed[name] = duration
    effective = parsed.get("request", parse(DEFAULT_REQUEST) if request is None else None)
    backend = parsed.get("backendRequest")
    if backend is not None and effective is not None and backend > effective:
        found.append(
            f"{field}.backendRequest must not be longer than {field}.request "
            f"({DEFAULT_REQUEST} when unset)"
        )
    return found


def rule_timeouts(request: str | None, backend_request: str | None) -> dict[str, str]:
    """An HTTPRoute rule's ``timeouts``: the values given, else the defaults."""
    chosen = request or DEFAULT_REQUEST
    return {"request": chosen, "backendRequest": backend_request or chosen}
