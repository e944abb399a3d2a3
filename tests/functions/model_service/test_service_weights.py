"""Group weights to backendRef weights: every example of routing.md §5.5, plus invariants."""

from __future__ import annotations

import pytest
from compose_model_service.weights import GATEWAY_API_MAX_WEIGHT, backend_weights
from hypothesis import given, settings
from hypothesis import strategies as st


@pytest.mark.parametrize(
    ("groups", "expected"),
    [
        # The spec's three examples.
        ([(1, 3)], [[1, 1, 1]]),
        ([(95, 2), (5, 1)], [[48, 47], [5]]),
        ([(1, 4), (1, 1)], [[1, 1, 1, 1], [4]]),
        # The §5.5 manifest: 90 over a two-replica deployment, 10 over one hosted endpoint.
        ([(90, 2), (10, 1)], [[9, 9], [2]]),
        # An entry with nothing routable takes no share and gets no refs.
        ([(95, 0), (5, 2)], [[], [3, 2]]),
        ([(3, 0)], [[]]),
        # Remainders go to the first endpoints in sorted order.
        ([(10, 3)], [[4, 3, 3]]),
        ([(10, 3), (1, 1)], [[4, 3, 3], [1]]),
        # Weights above the Gateway API maximum are rescaled, never to 0.
        ([(1_000_000, 1), (1, 3)], [[1_000_000], [1, 1, 1]]),
    ],
)
def test_spec_weight_examples(groups, expected):
    assert backend_weights(groups) == expected


@settings(max_examples=50)
@given(st.lists(st.tuples(st.integers(1, 1_000_000), st.integers(0, 20)), min_size=1, max_size=16))
def test_every_routable_endpoint_gets_traffic_within_gateway_api_limits(groups):
    split = backend_weights(groups)
    assert [len(entry) for entry in split] == [count for _, count in groups]
    for entry in split:
        assert all(1 <= w <= GATEWAY_API_MAX_WEIGHT for w in entry)
        # Endpoints of one entry share its weight as evenly as possible.
        if entry and max(entry) < GATEWAY_API_MAX_WEIGHT // 10:
            assert max(entry) - min(entry) <= 1


@settings(max_examples=50)
@given(st.integers(1, 1000), st.integers(1, 1000), st.integers(1, 8), st.integers(1, 8))
def test_entry_shares_follow_their_weights(w_a, w_b, n_a, n_b):
    a, b = backend_weights([(w_a, n_a), (w_b, n_b)])
    share_a = sum(a) / (sum(a) + sum(b))
    # The only distortion is the scale-up that keeps every endpoint at >= 1.
    assert share_a == pytest.approx(w_a / (w_a + w_b), abs=0.02) or min(w_a, w_b) < max(n_a, n_b)
