"""Spec model-deployment §3.4-3.5: the DRA CEL selector table, row by row."""

from __future__ import annotations

import md_fixtures as fixtures
import pytest
from modelplane_common import dracel
from modelplane_common.quantity import Quantity, QuantityError

A = 'device.attributes["gpu.nvidia.com"]'
C = 'device.capacity["gpu.nvidia.com"]'

# (row, selector, matches H200, L4, IB, BAD)
TABLE = [
    (1, 'device.driver == "gpu.nvidia.com"', "++--"),
    (2, f'{C}.memory.compareTo(quantity("80Gi")) >= 0', "+---"),
    (3, f'{C}.memory.isGreaterThan(quantity("141Gi"))', "----"),
    (4, f'{C}.memory.isLessThan(quantity("24Gi"))', "-+--"),
    (5, f'{C}.memory == quantity("144384Mi")', "+---"),
    (7, f'{A}.architecture == "Hopper"', "+---"),
    (8, f'{A}.architecture in ["Hopper", "Blackwell"]', "+---"),
    (9, f'{A}.cudaComputeCapability.isGreaterThan(semver("8.9.0"))', "+---"),
    (10, f'{A}.cudaComputeCapability.compareTo(semver("8.9.0")) >= 0', "++--"),
    (11, f"{A}.cudaComputeCapability.major() >= 9", "+---"),
    (12, f'{A}.cudaComputeCapability == "9.0.0"', "----"),
    (13, f'{A}.cudaComputeCapability.isGreaterThan(semver("9"))', "----"),
    (14, f"{A}.nvlinkDomainSize >= 8", "+---"),
    (15, f'"nvlinkDomainSize" in {A} && {A}.nvlinkDomainSize >= 8', "+---"),
    (16, f"{A}.migCapable", "+---"),
    (17, f"!{A}.migCapable", "-+--"),
    (18, f"{A}.nvlinkDomainSize", "----"),
    (19, 'device.attributes["resource.kubernetes.io"].pcieRoot == "pci0000:00"', "+---"),
    (20, f'"pcieRoot" in {A}', "----"),
    (21, '"nic.nvidia.com" in device.attributes', "--+-"),
    (22, 'device.attributes["nic.nvidia.com"].linkType == "infiniband"', "--+-"),
    (23, 'device.capacity["nic.nvidia.com"].bandwidth.compareTo(quantity("200G")) >= 0', "--+-"),
    (24, 'device.attributes["example.com"].size() == 0', "+++-"),
    (25, 'device.attributes["example.com"].foo == "x"', "----"),
    (26, f"sign({C}.memory) == 1", "++--"),
    (27, f"{C}.memory.asInteger() == 151397597184", "+---"),
    (28, f'{C}.memory.sub(quantity("1Gi")).isGreaterThan(quantity("139Gi"))', "+---"),
    (29, f'{C}.memory.compareTo(quantity("200K")) >= 0', "----"),
    (30, 'isSemver("9.0", true) && semver("v9.0", true) == semver("9.0.0")', "+++-"),
    (31, f'{A}.nvlinkDomainSize >= 8 || device.driver == "gpu.nvidia.com"', "++--"),
    (34, 'cel.bind(g, device.attributes["gpu.nvidia.com"], g.architecture == "Hopper")', "+---"),
]


def _device(raw: dict) -> dracel.CelDevice:
    return dracel.cel_device(raw["driver"], raw.get("attributes"), raw.get("capacity"))


@pytest.mark.parametrize(("row", "selector", "expected"), TABLE, ids=[f"row{r[0]}" for r in TABLE])
def test_selector_table(row, selector, expected):
    compiled = dracel.compile_selector(selector)
    devices = (fixtures.H200, fixtures.L4, fixtures.IB, fixtures.BAD)
    got = "".join("+" if dracel.matches(compiled, _device(d)) else "-" for d in devices)
    assert got == expected, f"row {row}: {selector}"


def test_row33_syntax_error_is_a_compile_error_naming_the_position():
    with pytest.raises(dracel.SelectorCompileError, match=r"<input>:1:\d+: Syntax error"):
        dracel.compile_selector("device.driver ==")


@pytest.mark.parametrize(
    ("selector", "message"),
    [
        # cel-go's messages for what Kubernetes does not compile.
        # Row 6: quantities have no ordering operators (the spec's table expects "no match";
        # Kubernetes rejects the selector, and reality wins: decision D8).
        (f'{C}.memory > quantity("1Gi")', "found no matching overload for '_>_'"),
        ('compareTo(quantity("1"), quantity("2")) == 0', "undeclared reference to 'compareTo'"),
        (f"{C}.memory.sign() == 1", "undeclared reference to 'sign'"),
        ('has(device.attributes["example.com"])', "invalid argument to has() macro"),
        ("frobnicate(device.driver)", "undeclared reference to 'frobnicate'"),
        ("gpu == 1", "undeclared reference to 'gpu'"),
        ('quantity("1", "2") == quantity("1")', "undeclared reference to 'quantity'"),
        ('["Hopper", 1].exists(a, a == device.driver)', "expected type 'string' but found 'int'"),
        ("", "empty expression"),
        # Row 32 (the spec expects "no match"): `device` is Kubernetes' typed DRADevice, so a
        # field it lacks is a compile error, as a misspelt one is (D8).
        ("device.count >= 1", "<input>:1:7: undefined field 'count'"),
        (
            'device.atributes["gpu.nvidia.com"].architecture == "Hopper"',
            "undefined field 'atributes'",
        ),
        ("device.driver == 1", "found no matching overload for '_==_' applied to '(string, int)'"),
        ("device.driver", "must evaluate to bool or the unknown type, not string"),
        # Capacity values are Quantities, as Kubernetes declares them.
        (
            f"{C}.memory > 5",
            "found no matching overload for '_>_' applied to '(kubernetes.Quantity, int)'",
        ),
    ],
)
def test_non_kubernetes_spellings_do_not_compile(selector, message):
    with pytest.raises(
        dracel.SelectorCompileError, match=message.replace("(", r"\(").replace(")", r"\)")
    ):
        dracel.compile_selector(selector)


def test_standard_macros_and_has_on_a_field_compile_and_evaluate():
    device = _device(fixtures.H200)
    for selector in (
        "has(device.driver)",
        "[1, 2, 3].all(x, x > 0)",
        '[device.driver].exists(d, d.startsWith("gpu."))',
        '["a", "b"].exists_one(s, s == "a")',
        '["a"].map(s, s + "x") == ["ax"]',
        "[1, 2, 3].filter(x, x > 1).size() == 2",
        f'{A}.architecture.matches("^Hop")',
        f"{C}.memory.isInteger() && {C}.memory.asApproximateFloat() > 1.0e11",
        f'{C}.memory.add(1).compareTo(quantity("141Gi")) == 1',
        f"{A}.cudaComputeCapability.minor() == 0 && {A}.cudaComputeCapability.patch() == 0",
        'isQuantity("1.5Gi") && !isQuantity("200K")',
        'semver("1.0.0-rc.1").isLessThan(semver("1.0.0"))',
        'semver("1.0.0+build.1") == semver("1.0.0")',
        'isSemver("v1.2.3", true) && !isSemver("v1.2.3") && !isSemver("01.2.3")',
        # The Kubernetes environment: strings extension, int/double comparison, dyn().
        'device.driver.lowerAscii() == "gpu.nvidia.com"',
        f"{A}.cudaComputeCapability.major() >= 9.0",
        f"dyn({A}.nvlinkDomainSize) > 7.5",
        '!isSemver("1.2-rc1", true)',
    ):
        assert dracel.matches(dracel.compile_selector(selector), device), selector


def test_a_device_with_unconvertible_data_satisfies_nothing():
    bad_capacity = dict(fixtures.L4, capacity={"memory": {"value": "lots"}})
    assert not dracel.matches(dracel.compile_selector("true"), _device(bad_capacity))
    assert not dracel.matches(dracel.compile_selector("true"), _device(fixtures.BAD))
    assert dracel.matches(dracel.compile_selector("true"), _device(fixtures.L4))


def test_a_compiled_expression_is_reused():
    first = dracel.compile_selector('device.driver == "reuse.example.com"')
    assert dracel.compile_selector('device.driver == "reuse.example.com"') is first


@pytest.mark.parametrize(
    ("left", "right"),
    [
        ("141Gi", "144384Mi"),
        ("1k", "1000"),
        ("1e3", "1k"),
        ("0.5", "500m"),
        ("1E", "1000P"),
        ("1n", "0.000000001"),
        ("0.1n", "1n"),
        ("1.5Gi", "1536Mi"),
        ("+1", "1"),
    ],
)
def test_equal_quantities(left, right):
    assert Quantity.parse(left) == Quantity.parse(right)


@pytest.mark.parametrize("text", ["200K", "", "1.2.3", "Gi", "1 Gi", "1gi", "1e", "--1", "1Ki1"])
def test_malformed_quantities(text):
    with pytest.raises(QuantityError):
        Quantity.parse(text)


def test_binary_quantities_saturate_at_int64_max():
    assert Quantity.parse("100000Ei").as_integer() == 2**63 - 1
    assert not Quantity.parse("10E").is_integer()  # decimal suffix: no saturation
