"""Group weights to integer backendRef weights (routing.md §5.5)."""

from __future__ import annotations

import math
from collections.abc import Sequence

GATEWAY_API_MAX_WEIGHT = 1_000_000


def backend_weights(groups: Sequence[tuple[int, int]]) -> list[list[int]]:
    """Per-endpoint weights for entries given as ``(weight, routable endpoint count)``.

    Returns one list per entry, in entry order, with one integer per endpoint in the entry's
    sorted order. Entries without routable endpoints get an empty list and take no share.
    Every endpoint of a non-empty entry gets at least 1, so none silently receives no traffic.
    """
    live = [(weight, count) for weight, count in groups if count > 0]
    if not live:
        return [[] for _ in groups]
    scale = max(1, *(math.ceil(count / weight) for weight, count in live))
    split: list[list[int]] = []
    for weight, count in groups:
        if count == 0:
            split.append([])
            continue
        quotient, remainder = divmod(weight * scale, count)
        split.append([quotient + 1] * remainder + [quotient] * (count - remainder))
    divisor = math.gcd(*(w for entry in split for w in entry))
    split = [[w // divisor for w in entry] for entry in split]
    largest = max(w for entry in split for w in entry)
    if largest > GATEWAY_API_MAX_WEIGHT:
        split = [
            [max(1, round(w / largest * GATEWAY_API_MAX_WEIGHT)) for w in entry] for entry in split
        ]
    return split
