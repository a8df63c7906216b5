"""A variant file's expressions: exact arithmetic over a configuration's names, and every
refusal (at load or per case) naming where and what, hostile text included."""

from __future__ import annotations

import math
from fractions import Fraction

import pytest

from py_harness.config import ConfigError
from py_harness.expr import Expr, Number, as_bool, as_float, as_int, compile_expr

KNOWN = ("batch", "num_heads", "seq_q", "seq_k", "head_dim", "scale")
SCOPE: dict[str, Number] = {
    "batch": 2,
    "num_heads": 4,
    "seq_q": 129,
    "seq_k": 129,
    "head_dim": 64,
    "scale": 0.125,
}
WHERE = "forward.grid[0]"


def ev(text: str | int | float | bool, **scope: Number) -> Number:
    return compile_expr(text, KNOWN, WHERE)({**SCOPE, **scope})


def refused(text: object, *words: str, **scope: Number) -> ConfigError:
    """The ConfigError that compiling, or else evaluating, `text` raises; names WHERE."""
    with pytest.raises(ConfigError) as info:
        compile_expr(text, KNOWN, WHERE)({**SCOPE, **scope})  # type: ignore[arg-type]
    assert info.value.argument == WHERE
    for w in words:
        assert w in info.value.detail, (w, info.value.detail)
    return info.value


def refused_at_load(text: str, *words: str) -> ConfigError:
    with pytest.raises(ConfigError) as info:
        compile_expr(text, KNOWN, WHERE)
    assert info.value.argument == WHERE
    for w in words:
        assert w in info.value.detail, (w, info.value.detail)
    return info.value


# ---------------------------------------------------------------------------- values


@pytest.mark.parametrize(
    ("text", "want"),
    [
        ("ceil(129 / 64)", 3),
        ("ceil(seq_q / 64)", 3),
        ("floor(seq_q / 64)", 2),
        ("(7 / 2) * 2", 7),
        ("batch * num_heads", 8),
        ("batch * num_heads * seq_q * seq_q", 2 * 4 * 129 * 129),
        ("num_heads * head_dim", 256),
        ("seq_q // 64", 2),
        ("seq_q % 64", 1),
        ("-seq_q % 64", 63),  # Python's modulo
        ("2 ** 10", 1024),
        ("2 ** 63", 2**63),
        ("batch ** 0", 1),
        ("1 + 2 * 3 - 4", 3),
        ("-batch", -2),
        ("+batch", 2),
        ("True + True", 2),  # a bool counts as 0/1
        ("(seq_q == seq_k) * 10", 10),
    ],
)
def test_int_arithmetic_is_exact(text: str, want: int) -> None:
    got = ev(text)
    assert got == want
    assert type(got) is int


def test_division_is_an_exact_fraction() -> None:
    assert ev("1 / 3") == Fraction(1, 3)
    assert type(ev("1 / 3")) is Fraction
    assert ev("1 / 3 + 1 / 3 + 1 / 3") == 1
    assert type(ev("1 / 3 + 1 / 3 + 1 / 3")) is int  # normalised
    assert type(ev("(7 / 2) * 2")) is int
    assert ev("seq_q / 64") == Fraction(129, 64)
    assert ev("(seq_q / 64) // 1") == 2
    assert ev("(seq_q / 64) % 1") == Fraction(1, 64)
    # exact where a float would not be: 0.1 + 0.2 != 0.3
    assert ev("1 / 10 + 2 / 10 == 3 / 10") is True


def test_a_float_anywhere_makes_a_float() -> None:
    assert ev("1 / sqrt(64)") == 0.125
    assert ev("1 / sqrt(head_dim)") == 0.125
    assert type(ev("1.0 / 3")) is float
    assert ev("1.0 / 4") == 0.25
    assert type(ev("batch * 1.0")) is float
    assert ev("scale * 8") == 1.0
    assert type(ev("scale * 8")) is float
    assert ev("1 / 3 + 0.5") == pytest.approx(1 / 3 + 0.5)
    assert ev("7.5 // 2") == 3.0
    assert ev("7.5 % 2") == 1.5
    assert ev("0.5 ** 2") == 0.25


def test_names_are_read_from_the_scope() -> None:
    e = compile_expr("batch * num_heads + head_dim", KNOWN, WHERE)
    assert isinstance(e, Expr)
    assert e.names == frozenset({"batch", "num_heads", "head_dim"})
    assert e.text == "batch * num_heads + head_dim"
    assert e.where == WHERE
    assert e(SCOPE) == 72
    assert e({"batch": 1, "num_heads": 1, "head_dim": 1}) == 2
    # a Fraction in the scope stays exact, a whole one becomes an int
    assert ev("seq_q * 2", seq_q=Fraction(3, 2)) == 3
    assert type(ev("seq_q * 2", seq_q=Fraction(3, 2))) is int


def test_function_names_are_not_values_and_true_is_not_special() -> None:
    e = compile_expr("max + 1", ["max"], WHERE)  # a known name may be called like a function
    assert e({"max": 1}) == 2
    assert compile_expr("max(max, 3)", ["max"], WHERE)({"max": 5}) == 5
    assert compile_expr("true", ["true"], WHERE)({"true": 0}) == 0
    assert ev("True") is True and ev("False") is False
    refused_at_load("true", "unknown name 'true'", "True and False")


@pytest.mark.parametrize(
    ("source", "want"),
    [(64, 64), (0.125, 0.125), (True, True), (False, False), (-3, -3)],
)
def test_a_toml_constant_is_a_constant_expression(source: int | float | bool, want: Number) -> None:
    e = compile_expr(source, KNOWN, WHERE)
    assert e.text == str(source)
    assert e.names == frozenset()
    assert e({}) == want
    assert type(e({})) is type(want)


@pytest.mark.parametrize(
    ("text", "want"),
    [
        ("seq_q == seq_k", True),
        ("seq_q != seq_k", False),
        ("batch < 3", True),
        ("batch <= 2", True),
        ("batch > 2", False),
        ("batch >= 3", False),
        ("1 < batch < 3", True),
        ("1 < batch < 2", False),
        ("0 <= batch <= num_heads <= head_dim", True),
        ("0 <= batch <= head_dim <= num_heads", False),
        ("1 / 2 == 0.5", True),
        ("seq_q / 64 > 2", True),
    ],
)
def test_comparisons(text: str, want: bool) -> None:
    got = ev(text)
    assert got is want


def test_chained_comparison_evaluates_the_middle_once_and_stops_early() -> None:
    # stops early: the right side would divide by zero
    assert ev("3 < batch < seq_q / (batch - 2)") is False
    assert ev("3 < batch < 1 / 0") is False
    refused("1 < batch < seq_q / (batch - 2)", "division by zero")


@pytest.mark.parametrize(
    ("text", "want"),
    [
        ("head_dim in (32, 64)", True),
        ("head_dim in (32, 128)", False),
        ("head_dim not in (32, 128)", True),
        ("head_dim in [16, 32, 64]", True),
        ("head_dim not in [64]", False),
        ("head_dim in (num_heads * 16, 1)", True),
        ("head_dim in ()", False),
        ("head_dim in (64.0,)", True),
        ("batch in range(3)", True),
        ("batch in range(2)", False),
        ("batch in range(1, 9)", True),
        ("batch in range(0, 10, 2)", True),
        ("batch in range(1, 10, 2)", False),
        ("batch not in range(1, 10, 2)", True),
        ("head_dim in range(head_dim, head_dim + 1)", True),
        ("2.0 in range(3)", True),
        ("2.5 in range(3)", False),
        ("1 / 2 in range(3)", False),
        ("4 / 2 in range(3)", True),
        ("True in range(2)", True),
        ("seq_q in range(0, 2 ** 63, 129)", True),  # no scan of a huge range
        ("129.0 in range(0, 2 ** 63, 129)", True),
    ],
)
def test_in(text: str, want: bool) -> None:
    assert ev(text) is want


def test_and_or_not() -> None:
    assert ev("seq_q % 64 == 0 and batch <= 8") is False
    assert ev("seq_q % 64 == 1 and batch <= 8") is True
    assert ev("seq_q % 64 == 0 or batch <= 8") is True
    assert ev("not batch") is False
    assert ev("not (batch - 2)") is True
    assert ev("not not batch") is True
    # as Python: short-circuit, and the deciding value
    assert ev("batch == 1 and seq_q / (batch - 2) > 0") is False
    assert ev("batch == 2 or seq_q / (batch - 2) > 0") is True
    assert ev("0 or 5") == 5
    assert ev("batch and 3") == 3
    assert ev("1 and 0 and 2") == 0
    assert ev("0 or 0.0 or batch") == 2


def test_conditional() -> None:
    assert ev("64 if head_dim <= 64 else 32") == 64
    assert ev("64 if head_dim > 64 else 32") == 32
    # only the chosen branch is evaluated
    assert ev("1 if batch == 2 else seq_q / (batch - 2)") == 1
    assert ev("seq_q / (batch - 2) if batch != 2 else 0") == 0


@pytest.mark.parametrize(
    ("text", "want", "kind"),
    [
        ("ceil(129 / 64)", 3, int),
        ("ceil(-129 / 64)", -2, int),
        ("ceil(2.1)", 3, int),
        ("ceil(5)", 5, int),
        ("floor(129 / 64)", 2, int),
        ("floor(-129 / 64)", -3, int),
        ("floor(2.9)", 2, int),
        ("min(3, batch)", 2, int),
        ("min(3, 1 / 2, 7)", Fraction(1, 2), Fraction),
        ("max(3, batch, 2.5)", 3, int),
        ("max(seq_q, seq_k, 1)", 129, int),
        ("abs(-5)", 5, int),
        ("abs(-5 / 2)", Fraction(5, 2), Fraction),
        ("abs(-2.5)", 2.5, float),
        ("sqrt(64)", 8.0, float),
        ("sqrt(1 / 4)", 0.5, float),
        ("log(1)", 0.0, float),
        ("log2(head_dim)", 6.0, float),
        ("log2(1 / 8)", -3.0, float),
        ("exp(0)", 1.0, float),
        ("int(7 / 2)", 3, int),
        ("int(-7 / 2)", -3, int),  # toward zero
        ("int(2.9)", 2, int),
        ("int(True)", 1, int),
        ("round(7 / 2)", 4, int),
        ("round(5 / 2)", 2, int),  # Python's: ties to even
        ("round(2.6)", 3, int),
        ("round(2)", 2, int),
    ],
)
def test_functions(text: str, want: Number, kind: type) -> None:
    got = ev(text)
    assert got == want
    assert type(got) is kind


def test_float_functions() -> None:
    assert math.isclose(ev("exp(1)"), math.e)
    assert math.isclose(ev("log(exp(2))"), 2.0)
    assert ev("sqrt(2 ** 62)") == 2.0**31


def test_the_result_is_checked_once_per_call_and_fast_enough() -> None:
    e = compile_expr("ceil(seq_q / 64) * batch * num_heads", KNOWN, WHERE)
    for seq_q in range(1, 2000):
        assert e({**SCOPE, "seq_q": seq_q}) == -(-seq_q // 64) * 8


# ---------------------------------------------------------------------------- load-time refusals


def test_an_unknown_name_lists_the_known_ones_sorted() -> None:
    err = refused_at_load("ceil(seqq / 64)", "unknown name 'seqq' in 'ceil(seqq / 64)'")
    assert err.detail.endswith("known: batch, head_dim, num_heads, scale, seq_k, seq_q")
    assert str(err).startswith(f"{WHERE}: ")
    with pytest.raises(ConfigError, match=r"known: \(none\)"):
        compile_expr("x", [], WHERE)


@pytest.mark.parametrize(
    ("text", "words"),
    [
        ("ceil(seq_q / )", ["syntax error", "'ceil(seq_q / )'", "column 14"]),
        ("1 +", ["syntax error", "'1 +'"]),
        ("", ["syntax error"]),
        ("batch batch", ["syntax error"]),
        ("batch = 1", ["syntax error"]),
        ("batch\x00", ["null bytes"]),
        ("seq_q.bit_length()", ["attribute access is not allowed"]),
        ("ceil.__name__", ["attribute access is not allowed"]),
        ("print(1)", ["calls: only ceil, floor", "not print"]),
        ("pow(2, 3)", ["calls: only", "not pow"]),
        ("range(3)", ["only allowed on the right of 'in'"]),
        ("ceil(1, 2)", ["takes 1 argument, got 2"]),
        ("sqrt()", ["takes 1 argument, got 0"]),
        ("min(1)", ["takes 2 or more arguments"]),
        ("max()", ["takes 2 or more arguments"]),
        ("round(2.5, 1)", ["takes 1 argument, got 2"]),
        ("ceil(x=1)", ["keyword"]),
        ("min(*(1, 2))", ["* unpacking is not allowed"]),
        ("batch in range(1, 2, 3, 4)", ["range(...) takes 1 to 3 arguments"]),
        ("batch in range()", ["range(...) takes 1 to 3 arguments"]),
        ("batch in range(stop=3)", ["range(...) takes 1 to 3 arguments"]),
        ("batch in seq_q", ["right side of 'in'"]),
        ("batch in {1, 2}", ["right side of 'in'"]),
        ("batch in (1, 2) == True", ["cannot be chained"]),
        ("(1, 2)", ["a tuple is only allowed on the right of 'in'"]),
        ("[1, 2]", ["a list is only allowed on the right of 'in'"]),
        ("batch is 2", ["'is' is not allowed"]),
        ("batch is not 2", ["'is' is not allowed"]),
        ("batch & 1", ["operator '&' is not allowed"]),
        ("batch | 1", ["operator '|' is not allowed"]),
        ("batch ^ 1", ["operator '^' is not allowed"]),
        ("batch << 1", ["operator '<<' is not allowed"]),
        ("batch >> 1", ["operator '>>' is not allowed"]),
        ("batch @ batch", ["operator '@' is not allowed"]),
        ("~batch", ["operator '~' is not allowed"]),
        ("'64'", ["strings are not allowed"]),
        ("b'64'", ["strings are not allowed"]),
        ("f'{batch}'", ["strings are not allowed"]),
        ("None", ["None is not allowed"]),
        ("...", ["Ellipsis is not allowed"]),
        ("2j", ["complex numbers are not allowed"]),
        ("1e999", ["not finite"]),
        ("18446744073709551616", ["2**64 or more"]),
        ("{1: 2}", ["dicts are not allowed"]),
        ("{1, 2}", ["sets are not allowed"]),
        ("(x := 1)", ["assignment (:=) is not allowed"]),
        ("{x for x in y}", ["comprehensions are not allowed"]),
        ("(x for x in y)", ["comprehensions are not allowed"]),
    ],
)
def test_constructs_outside_the_whitelist_are_refused_at_load(text: str, words: list[str]) -> None:
    refused_at_load(text, *words)


@pytest.mark.parametrize("source", [None, [1, 2], {"a": 1}, b"batch", 1j, Fraction(1, 2)])
def test_a_source_that_is_neither_text_nor_a_number(source: object) -> None:
    with pytest.raises(ConfigError) as info:
        compile_expr(source, KNOWN, WHERE)  # type: ignore[arg-type]
    assert info.value.argument == WHERE
    assert "must be a number or an expression string" in info.value.detail


@pytest.mark.parametrize("source", [math.inf, -math.inf, math.nan, 2**64, -(2**64)])
def test_a_constant_out_of_range(source: float | int) -> None:
    with pytest.raises(ConfigError) as info:
        compile_expr(source, KNOWN, WHERE)
    assert info.value.argument == WHERE


def test_length_and_depth_limits() -> None:
    refused_at_load("x" * 10_000, "longer than 400 characters (10000)")
    refused_at_load("1+" * 200 + "1", "longer than 400")
    # brackets make no AST node: counted on the text
    refused_at_load("(" * 40 + "batch" + ")" * 40, "nested deeper than 32 levels")
    refused_at_load("[" * 40 + "]" * 40, "nested deeper than 32 levels")
    assert ev("(" * 32 + "batch" + ")" * 32) == 2
    # and the nesting of operations
    refused_at_load("-" * 50 + "1", "nested deeper than 32 levels")
    refused_at_load("not " * 40 + "batch", "nested deeper than 32 levels")
    assert ev("-" * 31 + "1") == -1
    # a flat sum is a chain of operations too: 32 terms fit, 33 do not
    assert ev(" + ".join(["batch"] * 32)) == 64
    refused_at_load(" + ".join(["batch"] * 33), "nested deeper than 32 levels")
    refused_at_load("abs(" * 33 + "1" + ")" * 33, "nested deeper than 32 levels")


# ---------------------------------------------------------------------------- hostile inputs


@pytest.mark.parametrize(
    ("text", "words"),
    [
        ("__import__('os')", ["calls: only", "not __import__"]),
        ("__import__('os').system('true')", ["attribute access is not allowed"]),
        ("(1).__class__", ["attribute access is not allowed"]),
        ("().__class__.__bases__[0].__subclasses__()", ["not allowed"]),
        ("[x for x in y]", ["comprehensions are not allowed"]),
        ("lambda: 1", ["lambda is not allowed"]),
        ("a[0]", ["indexing is not allowed"]),
        ("batch[0]", ["indexing is not allowed"]),
        ("(lambda: 1)()", ["lambda is not allowed"]),
        ("eval('1')", ["not eval"]),
        ("open('/etc/passwd')", ["not open"]),
        ("globals()", ["not globals"]),
        ("__builtins__", ["unknown name '__builtins__'"]),
        ("(" * 100 + "1" + ")" * 100, ["nested deeper than 32 levels"]),
        ("x" * 10_000, ["longer than 400 characters"]),
    ],
)
def test_hostile_text_is_refused_at_load(text: str, words: list[str]) -> None:
    refused_at_load(text, *words)


@pytest.mark.parametrize(
    ("text", "words"),
    [
        ("2 ** 10 ** 10", ["exponent must be an int in [0, 64]", "10000000000"]),
        ("9 ** 99", ["exponent must be an int in [0, 64], got 99"]),
        ("2 ** 64", ["reached 2**64"]),
        ("2 ** -1", ["exponent must be an int in [0, 64]"]),
        ("2 ** 0.5", ["exponent must be an int in [0, 64]"]),
        ("(2 ** 63) ** 2", ["reached 2**64"]),
        ("(1 / 3) ** 64", ["numerator or denominator reached 2**64"]),
        ("10.0 ** 30", ["reached 2**64"]),
        ("2 ** 63 * 2", ["reached 2**64"]),
        ("2 ** 63 + 2 ** 63", ["reached 2**64"]),
        ("-(2 ** 63) - 2 ** 63", ["reached 2**64"]),
        ("ceil(1e300)", ["reached 2**64"]),
        ("(1 / 2 ** 40) / 2 ** 40", ["numerator or denominator reached 2**64"]),
    ],
)
def test_huge_numbers_are_refused(text: str, words: list[str]) -> None:
    # no names: refused already when compiled
    refused_at_load(text, *words)


def test_huge_numbers_from_names_are_refused_per_case() -> None:
    e = compile_expr("seq_q ** head_dim", KNOWN, WHERE)
    with pytest.raises(ConfigError) as info:
        e(SCOPE)
    assert info.value.argument == WHERE
    assert "reached 2**64" in info.value.detail
    assert "head_dim=64, seq_q=129" in info.value.detail
    refused("seq_q ** batch", "exponent must be an int in [0, 64], got 65", batch=65)
    refused("batch * 2", "reached 2**64", batch=2**64)


# ---------------------------------------------------------------------------- per-case refusals


def test_division_by_zero_names_the_values() -> None:
    e = compile_expr("seq_q / (batch - 1)", KNOWN, WHERE)
    assert e({"seq_q": 17, "batch": 2}) == 17
    with pytest.raises(ConfigError) as info:
        e({"seq_q": 17, "batch": 1})
    assert info.value.argument == WHERE
    assert info.value.detail == "division by zero in 'seq_q / (batch - 1)' (batch=1, seq_q=17)"
    refused("seq_q // (batch - 2)", "division by zero")
    refused("seq_q % (batch - 2)", "modulo by zero", "(batch=2, seq_q=129)")
    refused("seq_q / 0.0", "division by zero")
    refused("1 / 0", "division by zero in '1 / 0'")  # constant: at load
    refused_at_load("1 / 0", "division by zero")


@pytest.mark.parametrize(
    ("text", "words"),
    [
        ("sqrt(batch - 3)", ["sqrt of a negative number (-1)", "(batch=2)"]),
        ("log(batch - 2)", ["log of a non-positive number (0)"]),
        ("log(-scale)", ["log of a non-positive number (-0.125)", "(scale=0.125)"]),
        ("log2(batch - 3)", ["log2 of a non-positive number"]),
        ("exp(head_dim * 100)", ["overflows"]),
        ("batch in range(0, 9, batch - 2)", ["step must not be zero"]),
        ("batch in range(scale)", ["range(...) takes ints, got 0.125"]),
        ("ceil(scale * 1e308 * 100)", ["ceil of inf"]),
        ("scale * 1e308 * 100", ["the result is inf"]),
    ],
)
def test_math_errors_are_refused_per_case(text: str, words: list[str]) -> None:
    compile_expr(text, KNOWN, WHERE)  # fine at load
    refused(text, *words)


def test_a_missing_or_non_number_name_is_refused() -> None:
    e = compile_expr("seq_q * batch", KNOWN, WHERE)
    with pytest.raises(ConfigError) as info:
        e({"seq_q": 3})
    assert info.value.argument == WHERE
    assert "name 'batch' is not set in 'seq_q * batch'" in info.value.detail
    assert "(seq_q=3)" in info.value.detail
    with pytest.raises(ConfigError, match="'batch' is not a number"):
        e({"seq_q": 3, "batch": "2"})  # type: ignore[dict-item]


# ---------------------------------------------------------------------------- conversions


def test_as_int() -> None:
    assert as_int(True, "x") == 1 and type(as_int(True, "x")) is int
    assert as_int(7, "x") == 7
    assert as_int(Fraction(8, 2), "x") == 4
    assert as_int(12.0, "x") == 12
    assert as_int(ev("ceil(seq_q / 64)"), "x", 1, 65535) == 3
    for bad, shown in [(12.5, "12.5"), (Fraction(5, 2), "5/2"), (math.inf, "inf")]:
        with pytest.raises(ConfigError) as info:
            as_int(bad, "params.T")
        assert info.value.argument == "params.T"
        assert info.value.detail == f"must be a whole number, got {shown}"
    with pytest.raises(ConfigError) as info:
        as_int(-1, "params.T", 0, 2**32 - 1)
    assert info.value.detail == "must be in [0, 4294967295], got -1"
    with pytest.raises(ConfigError, match="must be >= 1, got 0"):
        as_int(0, "x", lo=1)
    with pytest.raises(ConfigError, match="must be <= 8, got 9"):
        as_int(9, "x", hi=8)
    with pytest.raises(ConfigError, match="must be a whole number"):
        as_int("3", "x")  # type: ignore[arg-type]


def test_as_float() -> None:
    assert as_float(3, "x") == 3.0 and type(as_float(3, "x")) is float
    assert as_float(Fraction(1, 8), "x") == 0.125
    assert as_float(True, "x") == 1.0
    assert as_float(ev("1 / sqrt(head_dim)"), "x") == 0.125
    for bad in (math.inf, math.nan, "1.0"):
        with pytest.raises(ConfigError) as info:
            as_float(bad, "params.scale")  # type: ignore[arg-type]
        assert info.value.argument == "params.scale"


def test_as_bool() -> None:
    assert as_bool(True, "x") is True
    assert as_bool(0, "x") is False
    assert as_bool(1, "x") is True
    assert as_bool(ev("head_dim in (32, 64)"), "x") is True
    for bad in (2, -1, 0.0, Fraction(1, 2)):
        with pytest.raises(ConfigError) as info:
            as_bool(bad, "envelope[0]")
        assert info.value.argument == "envelope[0]"
        assert "must be a bool" in info.value.detail
