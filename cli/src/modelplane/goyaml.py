"""YAML the way ``crossplane render`` prints it (Go ``json.Marshal`` then go-yaml v2).

PyYAML's defaults differ from go-yaml in ways a user diffing the two outputs notices: key order,
single- versus double-quoting, indented lists, ``9001.0``. This small emitter follows go-yaml
v2's visible rules (spec ``render.md`` §2.6):

- map keys sorted in go-yaml order (digit runs compare numerically, non-letters first);
- two-space indentation, list items at their parent key's column;
- a string that would read back as another type (``"true"``, ``"123"``, ``""``, a timestamp)
  is double-quoted; one that cannot be plain (``': '``, leading ``-``/``*``/``&``...) is
  single-quoted; a multi-line one is a literal block;
- whole-number floats print as integers; long plain and quoted lines wrap at spaces past
  column 80.
"""

from __future__ import annotations

import functools
import math
import re
from collections.abc import Iterable
from decimal import Decimal
from typing import Any

BEST_WIDTH = 80
INDENT = 2

_NULLS = {"", "~", "null", "Null", "NULL"}
_BOOLS = {
    *[
        "y",
        "Y",
        "yes",
        "Yes",
        "YES",
        "n",
        "N",
        "no",
        "No",
        "NO",
        "true",
        "True",
        "TRUE",
        "false",
        "False",
        "FALSE",
    ],
    *["on", "On", "ON", "off", "Off", "OFF"],
}
_SPECIAL_FLOATS = {
    *[
        ".inf",
        ".Inf",
        ".INF",
        "+.inf",
        "+.Inf",
        "+.INF",
        "-.inf",
        "-.Inf",
        "-.INF",
        ".nan",
        ".NaN",
        ".NAN",
    ],
}
_INT = re.compile(r"[-+]?(0[bB][01]+|0[oO][0-7]+|0[xX][0-9a-fA-F]+|0[0-7]*|[1-9][0-9]*)")
_FLOAT = re.compile(r"[-+]?(\d+\.?\d*|\.\d+)([eE][-+]?\d+)?|[-+]?(?i:inf|infinity|nan)")
_DATE = r"\d{4}-\d{1,2}-\d{1,2}"
_TIMESTAMP = re.compile(
    rf"{_DATE}|{_DATE}[Tt]\d{{1,2}}:\d{{1,2}}:\d{{1,2}}(\.\d+)?(Z|[-+]\d{{2}}:\d{{2}})"
    rf"|{_DATE} \d{{1,2}}:\d{{1,2}}:\d{{1,2}}(\.\d+)?"
)
_BASE60 = re.compile(r"[-+]?[0-9][0-9_]*(?::[0-5]?[0-9])+(?:\.[0-9_]*)?")

_BREAKS = "\n\r\x85\u2028\u2029"
_ESCAPES = {
    "\0": "0",
    "\a": "a",
    "\b": "b",
    "\t": "t",
    "\n": "n",
    "\v": "v",
    "\f": "f",
    "\r": "r",
    "\x1b": "e",
    '"': '"',
    "\\": "\\",
    "\x85": "N",
    "\xa0": "_",
    "\u2028": "L",
    "\u2029": "P",
}


# --------------------------------------------------------------------------------------------
# Key order


def _is_digit(ch: str) -> bool:
    return "0" <= ch <= "9"


def _key_less(a: str, b: str) -> bool:
    for i in range(min(len(a), len(b))):
        if a[i] == b[i]:
            continue
        a_letter, b_letter = a[i].isalpha(), b[i].isalpha()
        if a_letter and b_letter:
            return a[i] < b[i]
        if a_letter or b_letter:
            return b_letter
        a_end, b_end = i, i
        while a_end < len(a) and _is_digit(a[a_end]):
            a_end += 1
        while b_end < len(b) and _is_digit(b[b_end]):
            b_end += 1
        a_num = int(a[i:a_end]) if a_end > i else 0
        b_num = int(b[i:b_end]) if b_end > i else 0
        if a_num != b_num:
            return a_num < b_num
        if a_end != b_end:
            return a_end < b_end
        return a[i] < b[i]
    return len(a) < len(b)


def _compare_keys(a: str, b: str) -> int:
    if _key_less(a, b):
        return -1
    return 1 if _key_less(b, a) else 0


def sorted_keys(mapping: dict[str, Any]) -> list[str]:
    """The keys of ``mapping`` in go-yaml v2 order."""
    return sorted(mapping, key=functools.cmp_to_key(_compare_keys))


# --------------------------------------------------------------------------------------------
# Scalars


def _resolves_to_non_string(s: str) -> bool:
    """Whether go-yaml would read ``s``, written plain, as something other than a string."""
    # "=" is plain in go-yaml, but PyYAML reads it as a value tag: quote it for Python readers.
    if s in _NULLS or s in _BOOLS or s in _SPECIAL_FLOATS or s in ("<<", "="):
        return True
    if not s or not (_is_digit(s[0]) or s[0] in "+-."):
        return False
    plain = s.replace("_", "")
    if _INT.fullmatch(plain) or _FLOAT.fullmatch(plain):
        return True
    return bool(_is_digit(s[0]) and _TIMESTAMP.fullmatch(s))


def _printable(ch: str) -> bool:
    code = ord(ch)
    return (
        code == 0x0A
        or 0x20 <= code <= 0x7E
        or code == 0x85
        or 0xA0 <= code <= 0xD7FF
        or (0xE000 <= code <= 0xFFFD and code != 0xFEFF)
        or 0x10000 <= code <= 0x10FFFF
    )


class _Analysis:
    """Which styles a string may use (libyaml's scalar analysis, block context)."""

    def __init__(self, s: str) -> None:
        block_indicators = flow_indicators = False
        leading_space = leading_break = trailing_space = trailing_break = False
        break_space = space_break = special = line_breaks = False
        if s.startswith(("---", "...")):
            block_indicators = flow_indicators = True
        preceded_by_space = True
        previous_space = previous_break = False
        for i, ch in enumerate(s):
            followed_by_space = i + 1 >= len(s) or s[i + 1] in " \t" + _BREAKS
            if i == 0:
                if ch in "#,[]{}&*!|>'\"%@`":
                    flow_indicators = block_indicators = True
                if ch in "?:":
                    flow_indicators = True
                    block_indicators = block_indicators or followed_by_space
                if ch == "-" and followed_by_space:
                    flow_indicators = block_indicators = True
            else:
                if ch in ",?[]{}":
                    flow_indicators = True
                if ch == ":":
                    flow_indicators = True
                    block_indicators = block_indicators or followed_by_space
                if ch == "#" and preceded_by_space:
                    flow_indicators = block_indicators = True
            if not _printable(ch) or ch == "\ufeff":
                special = True
            if ch == " ":
                leading_space = leading_space or i == 0
                trailing_space = trailing_space or i == len(s) - 1
                break_space = break_space or previous_break
                previous_space, previous_break = True, False
            elif ch in _BREAKS:
                line_breaks = True
                leading_break = leading_break or i == 0
                trailing_break = trailing_break or i == len(s) - 1
                space_break = space_break or previous_space
                previous_space, previous_break = False, True
            else:
                previous_space = previous_break = False
            preceded_by_space = ch in " \t" + _BREAKS
        self.plain = True
        self.single = True
        self.block = True
        if leading_space or leading_break or trailing_space or trailing_break:
            self.plain = False
        if trailing_space:
            self.block = False
        if break_space:
            self.plain = self.single = False
        if space_break or special:
            self.plain = self.single = self.block = False
        if line_breaks or block_indicators:
            self.plain = False
        del flow_indicators  # flow context never occurs: collections are always block


class _Writer:
    def __init__(self) -> None:
        self.lines: list[str] = []
        self.line = ""

    def write(self, text: str) -> None:
        self.line += text

    def newline(self, indent: int = 0) -> None:
        self.lines.append(self.line)
        self.line = " " * indent

    def text(self) -> str:
        return "\n".join([*self.lines, self.line]) + "\n"


def _write_plain(w: _Writer, s: str, indent: int, allow_breaks: bool) -> None:
    spaces = False
    for i, ch in enumerate(s):
        if ch == " ":
            nxt = s[i + 1] if i + 1 < len(s) else ""
            if allow_breaks and not spaces and len(w.line) > BEST_WIDTH and nxt != " ":
                w.newline(indent)
            else:
                w.write(ch)
            spaces = True
        else:
            w.write(ch)
            spaces = False


def _write_single(w: _Writer, s: str, indent: int, allow_breaks: bool) -> None:
    w.write("'")
    spaces = False
    for i, ch in enumerate(s):
        if ch == " ":
            nxt = s[i + 1] if i + 1 < len(s) else ""
            if (
                allow_breaks
                and not spaces
                and len(w.line) > BEST_WIDTH
                and 0 < i < len(s) - 1
                and nxt != " "
            ):
                w.newline(indent)
            else:
                w.write(ch)
            spaces = True
        else:
            w.write("''" if ch == "'" else ch)
            spaces = False
    w.write("'")


def _escape(ch: str) -> str:
    if ch in _ESCAPES:
        return "\\" + _ESCAPES[ch]
    code = ord(ch)
    if code <= 0xFF:
        return f"\\x{code:02X}"
    if code <= 0xFFFF:
        return f"\\u{code:04X}"
    return f"\\U{code:08X}"


def _write_double(w: _Writer, s: str, indent: int, allow_breaks: bool) -> None:
    w.write('"')
    spaces = False
    for i, ch in enumerate(s):
        if not _printable(ch) or ch == "\ufeff" or ch in _BREAKS or ch in '"\\':
            w.write(_escape(ch))
            spaces = False
        elif ch == " ":
            if allow_breaks and not spaces and len(w.line) > BEST_WIDTH and 0 < i < len(s) - 1:
                w.newline(indent)
                if s[i + 1] == " ":
                    w.write("\\")
            else:
                w.write(ch)
            spaces = True
        else:
            w.write(ch)
            spaces = False
    w.write('"')


def _write_literal(w: _Writer, s: str, indent: int) -> None:
    hints = str(INDENT) if s[0] in " " + _BREAKS else ""
    if s[-1] not in _BREAKS:
        hints += "-"
    elif len(s) == 1 or s[-2] in _BREAKS:
        hints += "+"
    w.write("|" + hints)
    for line in s.split("\n")[: -1 if s.endswith("\n") else None]:
        w.newline(indent if line else 0)
        w.write(line)


def _write_string(w: _Writer, s: str, indent: int, key: bool = False) -> None:
    analysis = _Analysis(s)
    allow_breaks = not key
    if any(ch in _BREAKS for ch in s.replace("\n", "")):
        # Other line-break characters would be folded away by a reader: escape them.
        _write_double(w, s, indent, allow_breaks)
    elif "\n" in s:
        if analysis.block and not key:
            _write_literal(w, s, indent)
        else:
            _write_double(w, s, indent, allow_breaks)
    elif _resolves_to_non_string(s) or _BASE60.fullmatch(s):
        _write_double(w, s, indent, allow_breaks)
    elif analysis.plain:
        _write_plain(w, s, indent, allow_breaks)
    elif analysis.single:
        _write_single(w, s, indent, allow_breaks)
    else:
        _write_double(w, s, indent, allow_breaks)


def format_float(value: float) -> str:
    """A float as Go's json.Marshal then go-yaml would print it."""
    if math.isnan(value):
        return ".nan"
    if math.isinf(value):
        return ".inf" if value > 0 else "-.inf"
    if value.is_integer() and abs(value) < 1e21:
        return str(int(value))  # json.Marshal writes 9001, which YAML reads back as an int
    # go-yaml: strconv.FormatFloat(f, 'g', -1, 64), i.e. %e when exponent < -4 or >= 6.
    sign, digits, exponent = Decimal(repr(value)).normalize().as_tuple()
    assert isinstance(exponent, int)
    text = "".join(map(str, digits))
    exp = len(text) + exponent - 1
    prefix = "-" if sign else ""
    if exp < -4 or exp >= 6:
        mantissa = text[0] + ("." + text[1:] if len(text) > 1 else "")
        return f"{prefix}{mantissa}e{'-' if exp < 0 else '+'}{abs(exp):02d}"
    return prefix + repr(abs(value)).removesuffix(".0")


def _write_scalar(w: _Writer, value: Any, indent: int) -> None:
    if value is None:
        w.write("null")
    elif isinstance(value, bool):
        w.write("true" if value else "false")
    elif isinstance(value, int):
        w.write(str(value))
    elif isinstance(value, float):
        w.write(format_float(value))
    else:
        _write_string(w, str(value), indent)


# --------------------------------------------------------------------------------------------
# Collections


def _write_mapping(w: _Writer, mapping: dict[str, Any], indent: int, first_inline: bool) -> None:
    for n, key in enumerate(sorted_keys(mapping)):
        if n > 0 or not first_inline:
            w.newline(indent)
        _write_string(w, str(key), indent, key=True)
        w.write(":")
        _write_value(w, mapping[key], indent, in_mapping=True)


def _write_sequence(w: _Writer, items: list[Any], indent: int, first_inline: bool) -> None:
    for n, item in enumerate(items):
        if n > 0 or not first_inline:
            w.newline(indent)
        w.write("-")
        _write_value(w, item, indent, in_mapping=False)


def _write_value(w: _Writer, value: Any, indent: int, in_mapping: bool) -> None:
    """``value`` after a ``key:`` or ``-`` at column ``indent``."""
    if isinstance(value, dict) and value:
        if in_mapping:
            _write_mapping(w, value, indent + INDENT, first_inline=False)
        else:
            w.write(" ")
            _write_mapping(w, value, indent + INDENT, first_inline=True)
    elif isinstance(value, list | tuple) and value:
        if in_mapping:  # indentless: items at the key's column
            _write_sequence(w, list(value), indent, first_inline=False)
        else:
            w.write(" ")
            _write_sequence(w, list(value), indent + INDENT, first_inline=True)
    elif isinstance(value, dict):
        w.write(" {}")
    elif isinstance(value, list | tuple):
        w.write(" []")
    else:
        w.write(" ")
        _write_scalar(w, value, indent + INDENT)


def dump(document: Any) -> str:
    """One YAML document (without the ``---`` separator)."""
    w = _Writer()
    if isinstance(document, dict) and document:
        _write_mapping(w, document, 0, first_inline=True)
    elif isinstance(document, list | tuple) and document:
        _write_sequence(w, list(document), 0, first_inline=True)
    elif isinstance(document, dict):
        w.write("{}")
    elif isinstance(document, list | tuple):
        w.write("[]")
    else:
        _write_scalar(w, document, INDENT)
    return w.text()


def dump_all(documents: Iterable[Any]) -> str:
    """A stream with ``---`` before every document, as crossplane render prints it."""
    return "".join("---\n" + dump(document) for document in documents)
