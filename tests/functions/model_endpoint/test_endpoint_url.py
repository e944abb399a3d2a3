"""spec.url parsing shared by compose-model-endpoint and compose-model-service."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from modelplane_common.endpoint_url import InvalidURLError, parse_endpoint_url


@pytest.mark.parametrize(
    ("url", "expected"),
    [
        ("http://198.51.100.7/ml-team/qwen-demo-9c1e0/v1", ("http", "198.51.100.7", 80, "IPv4")),
        ("https://api.provider.example/openai/v1", ("https", "api.provider.example", 443, "FQDN")),
        ("https://API.Provider.Example:8443/v1", ("https", "api.provider.example", 8443, "FQDN")),
        ("http://gw.example./v1", ("http", "gw.example", 80, "FQDN")),
        ("http://[2001:db8::10]:8080/v1", ("http", "2001:db8::10", 8080, "IPv6")),
        ("HTTP://10.0.0.1:65535", ("http", "10.0.0.1", 65535, "IPv4")),
    ],
)
def test_valid_urls(url, expected):
    parsed = parse_endpoint_url(url)
    assert (parsed.scheme, parsed.host, parsed.port, parsed.address_type) == expected


@pytest.mark.parametrize(
    ("url", "problem"),
    [
        ("ftp://files.example/v1", "http or https"),
        ("api.example/v1", "http or https"),
        ("https:///v1", "no host"),
        ("http://api.example:0", "outside 1-65535"),
        ("http://api.example:65536", "1-65535"),
        ("http://api.example:http", "1-65535"),
        ("https://[2001:db8::1]/v1", "DNS hostname"),
        ("http://under_score.example/v1", "not a valid DNS name"),
        ("http://[::1", "cannot be parsed"),
    ],
)
def test_invalid_urls_name_the_problem_and_the_url(url, problem):
    with pytest.raises(InvalidURLError) as err:
        parse_endpoint_url(url)
    assert problem in str(err.value)
    assert "spec.url" in str(err.value)


@settings(max_examples=50)
@given(user=st.from_regex(r"[a-z]{1,8}", fullmatch=True), secret=st.text("abcXYZ123", min_size=6))
def test_credentials_in_a_url_are_refused_and_never_repeated(user, secret):
    with pytest.raises(InvalidURLError) as err:
        parse_endpoint_url(f"https://{user}:{secret}@api.example/v1")
    assert secret not in str(err.value)
    assert "***@api.example" in str(err.value)
