"""Parse a ModelEndpoint's ``spec.url`` (routing.md §3.2).

compose-model-endpoint builds its Service and EndpointSlice from the result, and
compose-model-service takes each backendRef's port and Host rewrite from it, so both read the
URL exactly the same way.
"""

from __future__ import annotations

import dataclasses
import ipaddress
import re
from typing import Literal
from urllib.parse import urlsplit

AddressType = Literal["IPv4", "IPv6", "FQDN"]
DEFAULT_PORTS = {"http": 80, "https": 443}
# A DNS name as an EndpointSlice FQDN address accepts it: dot-separated RFC 1123 labels.
_DNS_LABEL = r"[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?"
_DNS_NAME = re.compile(rf"^{_DNS_LABEL}(\.{_DNS_LABEL})*$")


class InvalidURLError(ValueError):
    """``spec.url`` cannot be routed to; the message names the problem and the URL."""


@dataclasses.dataclass(frozen=True)
class EndpointURL:
    scheme: Literal["http", "https"]
    host: str  # without IPv6 brackets, lowercase
    port: int
    address_type: AddressType

    @property
    def is_dns_name(self) -> bool:
        return self.address_type == "FQDN"


def parse_endpoint_url(url: str) -> EndpointURL:
    """The scheme, host, port and address type of ``url``; InvalidURL when it cannot be used."""
    try:
        parts = urlsplit(url.strip())
    except ValueError as err:
        raise InvalidURLError(f"spec.url {_masked(url)!r} cannot be parsed: {err}") from err
    # Messages land in conditions and events: never repeat credentials embedded in the URL.
    url = _masked(url)
    try:
        port = parts.port
    except ValueError:
        raise InvalidURLError(
            f"spec.url {url!r} has a port that is not an integer in 1-65535"
        ) from None
    scheme = parts.scheme.lower()
    if scheme not in DEFAULT_PORTS:
        raise InvalidURLError(f"spec.url {url!r} must use the http or https scheme, not {scheme!r}")
    # A trailing dot (an absolute DNS name) is not valid in an EndpointSlice FQDN address.
    host = (parts.hostname or "").lower().rstrip(".")
    if not host:
        raise InvalidURLError(f"spec.url {url!r} has no host")
    if parts.username is not None or parts.password is not None:
        # Credentials in a URL would end up in plain text in composed objects.
        raise InvalidURLError(f"spec.url {url!r} must not carry credentials (user:password@)")
    if port is None:
        port = DEFAULT_PORTS[scheme]
    if not 1 <= port <= 65535:
        raise InvalidURLError(f"spec.url {url!r} has port {port}, outside 1-65535")
    address_type = _address_type(host, url)
    if scheme == "https" and address_type != "FQDN":
        raise InvalidURLError(
            f"spec.url {url!r} is https with an IP address host; TLS verification needs a DNS "
            "hostname"
        )
    return EndpointURL(scheme=scheme, host=host, port=port, address_type=address_type)  # type: ignore[arg-type]


def _address_type(host: str, url: str) -> AddressType:
    try:
        address = ipaddress.ip_address(host)
    except ValueError:
        if not _DNS_NAME.match(host) or len(host) > 253:
            raise InvalidURLError(
                f"spec.url {url!r} has host {host!r}, not a valid DNS name"
            ) from None
        return "FQDN"
    return "IPv4" if address.version == 4 else "IPv6"


def _masked(url: str) -> str:
    """``url`` with any ``user:password@`` part replaced by ``***@``."""
    scheme, sep, rest = url.partition("://")
    if not sep:
        return url
    authority, slash, path = rest.partition("/")
    if "@" in authority:
        authority = "***@" + authority.rpartition("@")[2]
    return f"{scheme}{sep}{authority}{slash}{path}"
