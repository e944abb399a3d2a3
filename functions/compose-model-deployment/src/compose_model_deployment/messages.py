"""The words of the schedule: the ``ReplicasScheduled`` shortfall, drains and over-committed
pools, grouped as the Kubernetes scheduler counts nodes, bounded and stable. Pure."""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable

from compose_model_deployment import explain
from compose_model_deployment.fitting import SCALE_UP_HINT
from compose_model_deployment.placements import Schedule

MAX_MESSAGE_LENGTH = 1024
MAX_REASON_GROUPS = 6
OVERCOMMITTED = "over-committed"


def _kind(reason: str) -> tuple[str, str]:
    """``insufficient free devices (needs 2 GPUs on one node; ...)`` -> (kind, details)."""
    kind, sep, details = reason.partition(" (")
    if sep and details.endswith(")"):
        return kind, details[:-1]
    return reason, ""


def _summarise(reasons: Iterable[str]) -> str:
    """``6 insufficient free devices, 2 not Ready``: clusters counted by kind of reason, as the
    Kubernetes scheduler does; most common first, bounded. Reasons that differ only in details
    (which pool, how many devices) are one group, and the details are shown only when every
    cluster of the group shares them."""
    counts: Counter[str] = Counter()
    details: dict[str, Counter[str]] = {}
    for reason in reasons:
        kind, detail = _kind(reason)
        counts[kind] += 1
        details.setdefault(kind, Counter())[detail] += 1
    groups = sorted(counts.items(), key=lambda item: (-item[1], item[0]))
    shown = []
    for kind, count in groups[:MAX_REASON_GROUPS]:
        (only,) = details[kind] if len(details[kind]) == 1 else ("",)
        if not only:
            # Differing details are dropped, but scaling up is the actionable one: count it.
            scalable = sum(n for d, n in details[kind].items() if d.endswith(SCALE_UP_HINT))
            only = f"{scalable} {SCALE_UP_HINT}" if scalable and len(details[kind]) > 1 else ""
            only = only or explain.merged(kind, details[kind])
        shown.append(f"{count} {kind} ({only})" if only else f"{count} {kind}")
    rest = sum(count for _, count in groups[MAX_REASON_GROUPS:])
    if rest:
        shown.append(f"{rest} for other reasons")
    return ", ".join(shown)


def scheduled_message(schedule_: Schedule, wanted: int) -> str:
    """The ``ReplicasScheduled`` message of a shortfall (D6, issue item 1)."""
    placed = len(schedule_.staying)
    total = schedule_.checked
    if placed == 0:
        head = f"0 of {wanted} replicas scheduled (checked {total} clusters)"
        tail = f"; 0/{total} clusters available"
    else:
        head = f"{placed} of {wanted} replicas scheduled"
        tail = f"; 0/{total} clusters available for the rest"
    message = head + (f"{tail}: {schedule_.shortfall}" if schedule_.shortfall else "")
    return bounded(message + drain_message(schedule_, prefix="; "))


def drain_message(schedule_: Schedule, prefix: str = "") -> str:
    """What a drain is doing: which replicas leave which cluster and why, and whether each has
    a replacement or keeps serving because no other cluster fits (the shortfall says why)."""
    moving = [p for p in schedule_.draining if not p.stuck]
    stuck = [p for p in schedule_.draining if p.stuck]
    replacement = {p.replaces: p.name for p in schedule_.placements if p.replaces}
    parts = []
    if moving:
        listed = ", ".join(
            f"{p.name} on {p.cluster} ({p.draining}) until {replacement[p.name]} serves"
            for p in moving[:MAX_REASON_GROUPS]
        )
        parts.append(f"draining: {listed}")
    if stuck:
        listed = ", ".join(f"{p.name} on {p.cluster} ({p.draining})" for p in stuck)
        parts.append(f"kept serving, no other cluster fits: {listed}")
    retiring = schedule_.retiring
    if retiring:
        listed = ", ".join(f"{p.name} ({p.retiring})" for p in retiring[:MAX_REASON_GROUPS])
        more = len(retiring) - MAX_REASON_GROUPS
        parts.append(
            f"retiring, out of routes until no route sends them traffic: {listed}"
            + (f" and {more} more" if more > 0 else "")
        )
    return prefix + "; ".join(parts) if parts else ""


def bounded(message: str) -> str:
    """A condition message cut to MAX_MESSAGE_LENGTH."""
    if len(message) > MAX_MESSAGE_LENGTH:
        message = message[: MAX_MESSAGE_LENGTH - 3] + "..."
    return message


def overcommit_message(schedule_: Schedule) -> str:
    """``over-committed: a pool "p" needs 16 devices, has 8``, or "" when every pool fits."""
    found = schedule_.overcommitted
    if not found:
        return ""
    shown = [str(o) for o in found[:MAX_REASON_GROUPS]]
    if len(found) > MAX_REASON_GROUPS:
        shown.append(f"{len(found) - MAX_REASON_GROUPS} more pools")
    message = f"{OVERCOMMITTED}: " + ", ".join(shown)
    if len(message) > MAX_MESSAGE_LENGTH:
        message = message[: MAX_MESSAGE_LENGTH - 3] + "..."
    return message
