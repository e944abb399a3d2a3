"""Spec model-deployment §4.8: replica names, desired-resource keys and labels."""

from __future__ import annotations

import re

import pytest
from compose_model_deployment import names
from hypothesis import given
from hypothesis import strategies as st

DNS_LABEL = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$")


@pytest.mark.parametrize(
    ("deployment", "cluster", "index", "expected"),
    [
        ("my-model", "cluster-a", 0, "my-model-5ab63"),
        ("my-model", "cluster-a", 1, "my-model-609c5"),
        (
            "deepseek-v3-expert-parallel-sixteen-way-prod-us-central1-x-y",
            "gke-usc1",
            0,
            "deepseek-v3-expert-parallel-sixteen-way-prod-us-central1-b4686",
        ),
        ("qwen3-8b", "gke-us-central", 0, "qwen3-8b-a02c0"),  # model-replica.md §5.1
    ],
)
def test_spec_names(deployment, cluster, index, expected):
    assert names.replica_name(deployment, cluster, index) == expected


def test_keys_and_labels():
    assert names.replica_key("gke-a", 2) == "replica-gke-a-2"
    assert names.endpoint_key("gke-a", 2) == "endpoint-gke-a-2"
    assert names.labels("m", "gke-a", 2) == {
        "modelplane.ai/deployment": "m",
        "modelplane.ai/cluster": "gke-a",
        "modelplane.ai/replica-index": "2",
    }


@given(
    st.from_regex(r"[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?", fullmatch=True),
    st.from_regex(r"[a-z0-9]([-a-z0-9]{0,30}[a-z0-9])?", fullmatch=True),
    st.integers(0, 20),
)
def test_names_are_dns_labels_and_separate_identities(deployment, cluster, index):
    name = names.replica_name(deployment, cluster, index)
    assert len(name) <= 63 and DNS_LABEL.match(name)
    assert name != names.replica_name(deployment, cluster, index + 1)
