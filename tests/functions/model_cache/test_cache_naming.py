"""The shared PVC naming contract between compose-model-cache and compose-model-replica."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st
from modelplane_common.cache_naming import cache_hydration_job_name, cache_pvc_name

DNS_LABEL = st.from_regex(r"[a-z]([a-z0-9-]{0,40}[a-z0-9])?", fullmatch=True)


def test_names_match_the_spec_examples() -> None:
    assert cache_pvc_name("ml-team", "qwen") == "modelcache-ml-team-qwen-17db2"
    assert cache_pvc_name("ml-team", "llama-70b") == "modelcache-ml-team-llama-70b-bb164"
    assert (
        cache_hydration_job_name("ml-team", "llama-70b")
        == "modelcache-ml-team-llama-70b-hydrate-00904"
    )


@settings(max_examples=50)
@given(name=DNS_LABEL, ns_a=DNS_LABEL, ns_b=DNS_LABEL)
def test_same_cache_name_in_two_namespaces_never_shares_a_pvc(
    name: str, ns_a: str, ns_b: str
) -> None:
    if ns_a == ns_b:
        return
    assert cache_pvc_name(ns_a, name) != cache_pvc_name(ns_b, name)


def test_long_names_stay_valid_dns_labels() -> None:
    long = "a" * 63
    for produced in (cache_pvc_name(long, long), cache_hydration_job_name(long, long)):
        assert len(produced) <= 63
        assert not produced.startswith("-") and "--" not in produced[-7:]
    # Truncation hides the namespace, the hash still tells the two apart.
    assert cache_pvc_name("x" * 60 + "a", "m") != cache_pvc_name("x" * 60 + "b", "m")
