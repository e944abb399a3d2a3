"""child_name (platform spec C1): deterministic, bounded, and always a valid Kubernetes name."""

from __future__ import annotations

import re

from hypothesis import given, settings
from hypothesis import strategies as st
from modelplane_common.naming import child_name

SUBDOMAIN = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$")
LABEL = r"[a-z0-9]([-a-z0-9]{0,20}[a-z0-9])?"
DNS_LABELS = st.from_regex(rf"\A{LABEL}\Z")
SUBDOMAINS = st.from_regex(rf"\A{LABEL}(\.{LABEL}){{0,3}}\Z")


def test_cut_landing_after_a_dot_drops_the_dot():
    # A 3-letter InferenceCluster makes the ServingStack's Usage key for the GAIE
    # InferencePool CRD cut exactly after "inferencepools." (seen in examples/quickstart).
    name = child_name(
        "lab-serving-stack-a9c46", "usage-pc-gaie-crd-inferencepools.inference.networking.k8s.io"
    )
    assert name.startswith("lab-serving-stack-a9c46-usage-pc-gaie-crd-inferencepools-")
    assert SUBDOMAIN.match(name), name


def test_short_names_keep_every_part():
    name = child_name("gke-us", "serving-stack")
    assert re.fullmatch(r"gke-us-serving-stack-[0-9a-f]{5}", name)
    assert name == child_name("gke-us", "serving-stack")


@settings(max_examples=50)
@given(st.lists(SUBDOMAINS, min_size=1, max_size=4))
def test_subdomain_parts_give_a_subdomain_of_at_most_63(parts):
    name = child_name(*parts)
    assert len(name) <= 63
    assert SUBDOMAIN.match(name), name


@settings(max_examples=50)
@given(st.lists(DNS_LABELS, min_size=1, max_size=4))
def test_label_parts_give_a_label(parts):
    name = child_name(*parts)
    assert re.fullmatch(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?", name) and len(name) <= 63, name
