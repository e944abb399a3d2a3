"""The go-yaml v2 style emitter: the formatting users diff against crossplane render."""

import yaml
from hypothesis import given, settings
from hypothesis import strategies as st
from modelplane.goyaml import dump, dump_all, format_float, sorted_keys


def test_keys_sort_like_go_yaml():
    keys = ["b10", "b9", "B", "_x", "a-b", "a", "apiVersion", "a1", "a10", "a2"]
    assert sorted_keys(dict.fromkeys(keys)) == [
        "_x", "B", "a", "a-b", "a1", "a2", "a10", "apiVersion", "b9", "b10",
    ]  # fmt: skip


def test_ambiguous_strings_are_double_quoted():
    for text in ["", "true", "yes", "on", "null", "~", "123", "1.5", "1e3", "0x1F", "n",
                 "2024-01-01T00:00:00Z", "2024-01-01", "1:20", "-.inf"]:  # fmt: skip
        assert dump({"k": text}) == f'k: "{text}"\n', text


def test_strings_that_cannot_be_plain_are_single_quoted():
    assert dump({"k": "a: b"}) == "k: 'a: b'\n"
    assert dump({"k": "x #y"}) == "k: 'x #y'\n"
    assert dump({"k": "- x"}) == "k: '- x'\n"
    assert dump({"k": "*star"}) == "k: '*star'\n"
    assert dump({"k": "it's: here"}) == "k: 'it''s: here'\n"
    assert dump({"k": " padded"}) == "k: ' padded'\n"


def test_ordinary_strings_stay_plain():
    for text in ["Ada Lovelace", "23034Mi", "1Gi", "-x", "gpu.nvidia.com", "a:b", "v1.2.3"]:
        assert dump({"k": text}) == f"k: {text}\n", text


def test_multi_line_strings_are_literal_blocks():
    assert dump({"k": "a\nb\n"}) == "k: |\n  a\n  b\n"
    assert dump({"k": "a\nb"}) == "k: |-\n  a\n  b\n"
    assert dump({"k": {"x": "a\n\nb\n"}}) == "k:\n  x: |\n    a\n\n    b\n"


def test_lists_are_indentless_and_empty_collections_are_flow():
    doc = {"m": {"items": [{"a": 1, "b": [1, 2]}, [3]]}, "e": [], "f": {}}
    assert dump(doc) == (
        "e: []\nf: {}\nm:\n  items:\n  - a: 1\n    b:\n    - 1\n    - 2\n  - - 3\n"
    )


def test_numbers_print_like_json_then_yaml():
    assert dump({"a": 9001.0, "b": 1.5, "c": 3, "d": None, "e": True}) == (
        "a: 9001\nb: 1.5\nc: 3\nd: null\ne: true\n"
    )
    assert format_float(1234567.5) == "1.2345675e+06"
    assert format_float(0.00001) == "1e-05"
    assert format_float(0.0001) == "0.0001"
    assert format_float(-2.5) == "-2.5"
    assert format_float(1e21) == "1e+21"


def test_long_lines_wrap_at_spaces_past_column_80():
    message = "word " * 30
    text = dump({"message": message.strip()})
    lines = text.splitlines()
    assert len(lines) > 1
    assert lines[1].startswith("  word")
    assert all(len(line) <= 90 for line in lines)
    assert yaml.safe_load(text) == {"message": message.strip()}


def test_stream_has_a_separator_before_every_document():
    assert dump_all([{"a": 1}, {"b": 2}]) == "---\na: 1\n---\nb: 2\n"


_text = st.text(alphabet=st.characters(codec="utf-8", exclude_categories=("Cs",)), max_size=120)
_value = st.recursive(
    st.none() | st.booleans() | st.integers(-(2**53), 2**53) | _text,
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(_text, inner, max_size=4),
    max_leaves=20,
)


@settings(max_examples=50, deadline=None)
@given(st.dictionaries(_text, _value, max_size=5))
def test_output_reads_back_as_the_same_data(document):
    assert yaml.safe_load(dump(document)) == document
