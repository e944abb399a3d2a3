"""Spec model-deployment §3.6: matching a member's requests against one pool."""

from __future__ import annotations

import md_fixtures as fx
import pytest
from compose_model_deployment import devices


def _match(pool_devices, *requests):
    pool = devices.parse_pool(fx.pool("p", 1, *pool_devices))
    member = devices.requests_of({"devices": list(requests)}) if requests else None
    assert devices.compile_requests(member) == []
    return devices.match_member(member, pool)


def _resolved(result):
    return [(r.name, r.device_class, r.count) for r in result]


def test_p1_whole_node_request_resolves_with_the_device_class():
    result = _match([fx.H200], fx.request("gpu", fx.MEMORY_80, count=8))
    assert _resolved(result) == [("gpu", "gpu.nvidia.com", 8)]
    assert result[0].selectors == (fx.MEMORY_80,)


def test_p2_count_not_covered():
    assert _match([fx.with_count(fx.H200, 4)], fx.request("gpu", fx.ANY_GPU, count=8)) is None


def test_p3_published_zero_count_means_none():
    assert _match([fx.with_count(fx.H200, 0)], fx.request("gpu", fx.ANY_GPU)) is None


def test_p3_missing_count_means_none():
    device = dict(fx.H200)
    del device["count"]
    assert _match([device], fx.request("gpu", fx.ANY_GPU)) is None


def test_p4_counts_are_shared_across_requests():
    result = _match(
        [fx.H200],
        fx.request("gpu-a", fx.ANY_GPU, count=5),
        fx.request("gpu-b", fx.ANY_GPU, count=5),
    )
    assert result is None


def test_p5_two_requests_that_fit_together():
    result = _match(
        [fx.H200],
        fx.request("gpu-a", fx.ANY_GPU, count=4),
        fx.request("gpu-b", fx.ANY_GPU, count=4),
    )
    assert _resolved(result) == [("gpu-a", "gpu.nvidia.com", 4), ("gpu-b", "gpu.nvidia.com", 4)]


def test_p6_one_device_cannot_serve_two_requests():
    result = _match(
        [fx.with_count(fx.H200, 1)],
        fx.request("gpu-a", fx.ANY_GPU),
        fx.request("gpu-b", fx.ANY_GPU),
    )
    assert result is None


def test_p7_synthetic_fabric_steers_but_is_not_claimed():
    result = _match(
        [fx.H200, fx.IB], fx.request("gpu", fx.MEMORY_80), fx.request("fabric", fx.INFINIBAND)
    )
    assert _resolved(result) == [("gpu", "gpu.nvidia.com", 1)]


def test_p8_missing_fabric_is_no_match():
    assert (
        _match([fx.H200], fx.request("gpu", fx.MEMORY_80), fx.request("fabric", fx.INFINIBAND))
        is None
    )


def test_p9_synthetic_only_matches_and_resolves_nothing():
    assert _match([fx.H200, fx.IB], fx.request("fabric", fx.INFINIBAND)) == ()


@pytest.mark.parametrize("pool_devices", [[], [fx.H200], [fx.BAD, fx.IB]])
def test_p10_no_node_selector_matches_any_pool(pool_devices):
    assert _match(pool_devices) == ()


def test_requests_take_the_first_qualifying_device_in_published_order():
    l4_x2 = fx.with_count(fx.L4, 2)
    result = _match([l4_x2, fx.H200], fx.request("gpu", fx.ANY_GPU, count=2))
    assert _resolved(result) == [("gpu", "gpu.nvidia.com", 2)]
    # With count 4, the L4 entry is too small and the H200 entry takes it.
    h200_only = _match([l4_x2, fx.H200], fx.request("gpu", fx.MEMORY_80, count=4))
    assert _resolved(h200_only) == [("gpu", "gpu.nvidia.com", 4)]


@pytest.mark.parametrize(
    "raw",
    [None, {"nodes": 1}, {"name": "p", "devices": "gpu"}, {"name": "p", "devices": ["gpu"]}],
)
def test_malformed_pool_entries_are_reported(raw):
    with pytest.raises(devices.MalformedPoolError):
        devices.parse_pool(raw)


@pytest.mark.parametrize(("nodes", "expected"), [(None, 0), (-3, 0), ("2", 0), (4, 4), (2.0, 2)])
def test_published_node_counts_are_floored(nodes, expected):
    assert devices.parse_pool({"name": "p", "nodes": nodes, "devices": []}).nodes == expected


def test_compile_failures_name_the_request_and_position():
    member = devices.requests_of({"devices": [fx.request("gpu", fx.ANY_GPU, "device.driver ==")]})
    ((request, position, error),) = devices.compile_requests(member)
    assert (request, position) == (0, 1)
    assert "Syntax error" in error
