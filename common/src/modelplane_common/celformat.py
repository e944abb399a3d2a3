"""The formats of Kubernetes' CEL ``format`` library, with apimachinery's error messages.

``format.dns1123Label().validate(s)`` (and ``format.named("dns1123Label")``) check a string
the way Kubernetes' own API validation does and report the same messages, so a rule's
``messageExpression`` built from them reads as it would on a cluster.
"""

from __future__ import annotations

import base64
import binascii
import datetime
import re
import urllib.parse
from collections.abc import Callable
from typing import NamedTuple


def _size(value: str) -> int:
    """Go measures strings in bytes."""
    return len(value.encode())


def _regex_error(message: str, pattern: str, *examples: str) -> str:
    # apimachinery's RegexError, including its doubled space before "or".
    shown = "".join(("" if i == 0 else " or ") + f"'{e}', " for i, e in enumerate(examples))
    return f"{message} (e.g. {shown}regex used for validation is '{pattern}')"


def _max_length(limit: int) -> str:
    return f"must be no more than {limit} characters"


_LABEL = "[a-z0-9]([-a-z0-9]*[a-z0-9])?"
_SUBDOMAIN = _LABEL + r"(\." + _LABEL + ")*"
_DNS1035 = "[a-z]([-a-z0-9]*[a-z0-9])?"
_QUALIFIED = "([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]"
_LABEL_VALUE = "(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?"
# kube-openapi's UUID pattern: hyphens optional, either case.
_UUID = re.compile(r"(?i)[0-9a-f]{8}-?[0-9a-f]{4}-?[0-9a-f]{4}-?[0-9a-f]{4}-?[0-9a-f]{12}")


def _checker(pattern: str, limit: int, message: str, *examples: str) -> Callable[[str], list[str]]:
    compiled = re.compile(pattern)

    def check(value: str) -> list[str]:
        errors = [_max_length(limit)] if _size(value) > limit else []
        if not compiled.fullmatch(value):
            errors.append(_regex_error(message, pattern, *examples))
        return errors

    return check


dns1123_label = _checker(
    _LABEL,
    63,
    "a lowercase RFC 1123 label must consist of lower case alphanumeric characters or '-', "
    "and must start and end with an alphanumeric character",
    "my-name",
    "123-abc",
)
dns1123_subdomain = _checker(
    _SUBDOMAIN,
    253,
    "a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or "
    "'.', and must start and end with an alphanumeric character",
    "example.com",
)
dns1035_label = _checker(
    _DNS1035,
    63,
    "a DNS-1035 label must consist of lower case alphanumeric characters or '-', start with "
    "an alphabetic character, and end with an alphanumeric character",
    "my-name",
    "abc-123",
)


_label_value = _checker(
    _LABEL_VALUE,
    63,
    "a valid label must be an empty string or consist of alphanumeric characters, '-', '_' or "
    "'.', and must start and end with an alphanumeric character",
    "MyValue",
    "my_value",
    "12345",
)


_QUALIFIED_MESSAGE = (
    "must consist of alphanumeric characters, '-', '_' or '.', and must start and end with an "
    "alphanumeric character"
)


def _qualified_name(value: str) -> list[str]:
    """apimachinery's IsQualifiedName: an optional DNS subdomain prefix and a name."""
    parts = value.split("/")
    pattern_error = _regex_error(_QUALIFIED_MESSAGE, _QUALIFIED, "MyName", "my.name", "123-abc")
    if len(parts) > 2:
        return [
            f"a qualified name {pattern_error} with an optional DNS subdomain prefix and '/' "
            "(e.g. 'example.com/MyName')"
        ]
    errors: list[str] = []
    if len(parts) == 2:
        prefix = parts[0]
        if not prefix:
            errors.append("prefix part must be non-empty")
        else:
            errors += ["prefix part " + e for e in dns1123_subdomain(prefix)]
    name = parts[-1]
    if not name:
        errors.append("name part must be non-empty")
    elif _size(name) > 63:
        errors.append("name part " + _max_length(63))
    if not re.fullmatch(_QUALIFIED, name):
        errors.append("name part " + pattern_error)
    return errors


def _prefix(check: Callable[[str], list[str]]) -> Callable[[str], list[str]]:
    """A generateName prefix may end in '-': apimachinery's maskTrailingDash replaces the last
    two characters with 'a' before checking."""
    return lambda value: check(
        value[:-2] + "a" if len(value) > 1 and value.endswith("-") else value
    )


class RequestURI(NamedTuple):
    scheme: str
    host: str  # with its port
    path: str
    query: str


_SCHEME = re.compile(r"([A-Za-z][A-Za-z0-9+.-]*):")
# Characters Go leaves as they are in an escaped path (url.validEncoded).
_PATH_SAFE = "/-._~!$&'()*+,;=:@[]%"


def parse_request_uri(text: str) -> RequestURI:
    """Go's url.ParseRequestURI, which Kubernetes' url() and format.uri() use: an absolute URI
    or an absolute path; the text after '#' stays part of the path or query. ValueError with
    Go's message otherwise."""

    def failure(reason: str) -> ValueError:
        return ValueError(f'parse "{text}": {reason}')

    if any(ord(c) < 0x20 or ord(c) == 0x7F for c in text):
        raise failure("net/url: invalid control character in URL")
    if not text:
        raise failure("empty url")
    if text.startswith(":"):
        raise failure("missing protocol scheme")
    scheme = _SCHEME.match(text)
    rest, _, query = text[scheme.end() if scheme else 0 :].partition("?")
    if not rest.startswith("/"):
        if scheme:  # an opaque URI such as mailto:someone
            return RequestURI(scheme.group(1).lower(), "", "", query)
        raise failure("invalid URI for request")
    host = ""
    if scheme and rest.startswith("//"):
        host, slash, path = rest[2:].partition("/")
        host, rest = host.rpartition("@")[2], slash + path
        port = host.rpartition("]")[2] if host.startswith("[") else host
        if ":" in port and not port.rpartition(":")[2].isdigit() and not port.endswith(":"):
            raise failure(f'invalid port ":{port.rpartition(":")[2]}" after host')
        if " " in host:
            raise failure('invalid character " " in host name')
    if bad := re.search(r"%(?![0-9A-Fa-f]{2}).{0,2}", rest):
        raise failure(f'invalid URL escape "{bad.group(0)}"')
    return RequestURI(scheme.group(1).lower() if scheme else "", host, rest, query)


def escaped_path(path: str) -> str:
    """Go's URL.EscapedPath: the path as written when validly encoded, escaped otherwise."""
    if all(c.isascii() and (c.isalnum() or c in _PATH_SAFE) for c in path):
        return path
    return urllib.parse.quote(path, safe=_PATH_SAFE.replace("%", ""))


def _uri(value: str) -> list[str]:
    try:
        parse_request_uri(value)
    except ValueError as err:
        return [str(err)]
    return []


def _uuid(value: str) -> list[str]:
    return [] if _UUID.fullmatch(value) else ["does not match the UUID format"]


def _byte(value: str) -> list[str]:
    try:
        base64.b64decode(value, validate=True)
    except (binascii.Error, ValueError):
        return ["invalid base64"]
    return []


def _date(value: str) -> list[str]:
    """Go's time.Parse("2006-01-02"): exactly that shape, and a real day."""
    try:
        if not re.fullmatch(r"\d{4}-\d{2}-\d{2}", value):
            raise ValueError(value)
        datetime.date.fromisoformat(value)
    except ValueError:
        return ["invalid date"]
    return []


_DATETIME = re.compile(r"\d{4}-\d{2}-\d{2}[Tt]\d{2}:\d{2}:\d{2}(\.\d+)?([Zz]|[+-]\d{2}:\d{2})")


def _datetime(value: str) -> list[str]:
    if not _DATETIME.fullmatch(value):
        return ["invalid datetime"]
    try:
        datetime.datetime.fromisoformat(value.upper().replace("Z", "+00:00"))
    except ValueError:
        return ["invalid datetime"]
    return []


FORMATS: dict[str, Callable[[str], list[str]]] = {
    "dns1123Label": dns1123_label,
    "dns1123Subdomain": dns1123_subdomain,
    "dns1035Label": dns1035_label,
    "qualifiedName": _qualified_name,
    "dns1123LabelPrefix": _prefix(dns1123_label),
    "dns1123SubdomainPrefix": _prefix(dns1123_subdomain),
    "dns1035LabelPrefix": _prefix(dns1035_label),
    "labelValue": _label_value,
    "uri": _uri,
    "uuid": _uuid,
    "byte": _byte,
    "date": _date,
    "datetime": _datetime,
}
