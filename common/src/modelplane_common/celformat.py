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
_UUID = re.compile(r"^[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}$")


def _checker(pattern: str, limit: int, message: str, *examples: str) -> Callable[[str], list[str]]:
    compiled = re.compile(f"^{pattern}$")

    def check(value: str) -> list[str]:
        errors = [_max_length(limit)] if len(value) > limit else []
        if not compiled.match(value):
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


def _label_value(value: str) -> list[str]:
    errors = [_max_length(63)] if len(value) > 63 else []
    if not re.match(f"^{_LABEL_VALUE}$", value):
        errors.append(
            _regex_error(
                "a valid label must be an empty string or consist of alphanumeric characters, "
                "'-', '_' or '.', and must start and end with an alphanumeric character",
                _LABEL_VALUE,
                "MyValue",
                "my_value",
                "12345",
            )
        )
    return errors


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
    elif len(name) > 63:
        errors.append("name part " + _max_length(63))
    if not re.match(f"^{_QUALIFIED}$", name):
        errors.append("name part " + pattern_error)
    return errors


def _prefix(check: Callable[[str], list[str]]) -> Callable[[str], list[str]]:
    """A generateName prefix: the name it will become may end in '-' (apimachinery masks it)."""
    return lambda value: check(value[:-1] + "a" if value.endswith("-") else value)


def parse_request_uri(text: str) -> urllib.parse.SplitResult:
    """Go's url.ParseRequestURI, as Kubernetes' url() uses: absolute URL or absolute path."""
    if any(c in text for c in " \t\n\r") or "#" in text:
        raise ValueError(f"URL parse error: {text!r}")
    parts = urllib.parse.urlsplit(text)
    if not (parts.scheme and (parts.netloc or parts.path.startswith("/"))) and not (
        not parts.scheme and text.startswith("/")
    ):
        raise ValueError(f"URL parse error: invalid URI for request {text!r}")
    _ = parts.port  # raises ValueError on a bad port
    return parts


def _uri(value: str) -> list[str]:
    try:
        parse_request_uri(value)
    except ValueError:
        return ["invalid URI"]
    return []


def _uuid(value: str) -> list[str]:
    return [] if _UUID.match(value) else ["does not match the UUID format"]


def _byte(value: str) -> list[str]:
    try:
        base64.b64decode(value, validate=True)
    except (binascii.Error, ValueError):
        return ["invalid base64"]
    return []


def _date(value: str) -> list[str]:
    try:
        datetime.date.fromisoformat(value)
    except ValueError:
        return ["invalid date"]
    return [] if len(value) == 10 else ["invalid date"]


_DATETIME = re.compile(r"^\d{4}-\d{2}-\d{2}[Tt]\d{2}:\d{2}:\d{2}(\.\d+)?([Zz]|[+-]\d{2}:\d{2})$")


def _datetime(value: str) -> list[str]:
    if not _DATETIME.match(value):
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
