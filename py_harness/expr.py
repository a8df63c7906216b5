"""Small arithmetic expressions over a configuration's names, for kernels declared in a file.

A variant file gives dispatch grids ("ceil(seq_q / 64)"), uniform field values
("1 / sqrt(head_dim)"), buffer sizes and envelope constraints ("seq_q % 64 == 0 and batch <= 8")
as text. Such a file is untrusted input, so this is not eval(): the text is parsed with `ast`,
every node is checked against a whitelist (names the caller knows, number literals, arithmetic,
comparisons, a few math functions) and compiled once into nested closures, refused at load
time naming where and what; evaluation per case refuses division by zero and the like naming
the values it read. Integers and exact fractions stay exact (ceil(129 / 64) == 3), and
integers are kept below 2**64 in magnitude, so a hostile file cannot build huge numbers.

Pure Python (stdlib only): this module runs inside Pyodide.
"""

from __future__ import annotations

import ast
import math
import operator
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from fractions import Fraction

from .config import ConfigError

Number = int | float | bool | Fraction

MAX_TEXT = 400
MAX_DEPTH = 32
# Every int, and an exact fraction's numerator and denominator, stays below this in
# magnitude: far above any size a kernel can use, and small enough that no expression
# within MAX_TEXT characters can make Python's big integers costly.
INT_LIMIT = 2**64
MAX_EXPONENT = 64

_Eval = Callable[[Mapping[str, Number]], Number]


class _Fail(Exception):
    """An evaluation error; Expr.__call__ adds the text and the names' values."""


@dataclass(frozen=True)
class Expr:
    """A compiled expression: call it with a scope (name -> number) to evaluate it."""

    text: str  # the source text, as given (str() of a number for numbers)
    names: frozenset[str]  # the scope names it reads
    where: str  # what it is, for errors, e.g. "forward.grid[0]" or "params.T"
    _eval: _Eval = field(repr=False, compare=False)

    def __call__(self, scope: Mapping[str, Number]) -> Number:
        try:
            value = self._eval(scope)
        except _Fail as e:
            raise ConfigError(self.where, self._message(str(e), scope)) from None
        except (ArithmeticError, ValueError) as e:  # a case the helpers below do not check
            raise ConfigError(self.where, self._message(f"{type(e).__name__}: {e}", scope)) from e
        if type(value) is float and not math.isfinite(value):
            raise ConfigError(self.where, self._message(f"the result is {value}", scope))
        return value

    def _message(self, problem: str, scope: Mapping[str, Number]) -> str:
        shown = ", ".join(f"{n}={scope[n]}" for n in sorted(self.names) if n in scope)
        return f"{problem} in {self.text!r}" + (f" ({shown})" if shown else "")


def compile_expr(source: str | int | float | bool, known: Iterable[str], where: str) -> Expr:
    """Parse and check `source` (an expression string, or a TOML number as a constant) against
    the names in `known`; refuse bad syntax, unknown names and constructs outside the
    whitelist with ConfigError(where, ...). An expression without names is evaluated here, so
    "1 / 0" is refused when the file is loaded rather than per case."""
    if isinstance(source, bool | int | float):
        value = _constant(source, where)
        return Expr(str(source), frozenset(), where, lambda scope: value)
    if not isinstance(source, str):
        raise ConfigError(
            where,
            f"must be a number or an expression string, got {type(source).__name__} {source!r}",
        )
    text = source
    if len(text) > MAX_TEXT:
        raise ConfigError(
            where, f"longer than {MAX_TEXT} characters ({len(text)}): {text[:40]!r}..."
        )
    # The parser accepts brackets up to ~200 deep, and brackets make no AST node of their own,
    # so their depth is counted on the text (over-counting only inside comments).
    depth = deepest = 0
    for ch in text:
        if ch in "([{":
            depth += 1
            deepest = max(deepest, depth)
        elif ch in ")]}":
            depth -= 1
    if deepest > MAX_DEPTH:
        raise ConfigError(where, f"nested deeper than {MAX_DEPTH} levels in {text!r}")
    try:
        # stripped: eval mode refuses leading spaces as an "unexpected indent"
        tree = ast.parse(text.strip(), mode="eval")
    except SyntaxError as e:
        # the column in the text as given, before the strip
        shift = len(text) - len(text.lstrip()) if e.lineno == 1 else 0
        at = f" at column {e.offset + shift}" if e.offset else ""
        raise ConfigError(where, f"syntax error in {text!r}: {e.msg}{at}") from None
    except (ValueError, RecursionError, MemoryError) as e:  # null bytes; pathological nesting
        raise ConfigError(where, f"cannot parse {text!r}: {e}") from None
    compiler = _Compiler(text, frozenset(known), where)
    fn = compiler.compile(tree.body, 1)
    expr = Expr(text, frozenset(compiler.names), where, fn)
    if not expr.names:
        value = expr({})  # refuses 1 / 0, 9 ** 99 now
        return Expr(text, expr.names, where, lambda scope: value)
    return expr


def as_int(value: Number, where: str, lo: int | None = None, hi: int | None = None) -> int:
    """`value` as an int (a bool is 0/1; a whole float or Fraction converts), within [lo, hi]
    where given; else ConfigError(where, ...)."""
    if isinstance(value, int):  # a bool too: 0/1
        out = int(value)
    elif isinstance(value, Fraction) and value.denominator == 1:
        out = value.numerator
    elif isinstance(value, float) and value.is_integer():  # False for inf and nan
        out = int(value)
    elif isinstance(value, Fraction | float):
        raise ConfigError(where, f"must be a whole number, got {value}")
    else:
        raise ConfigError(where, f"must be a whole number, got {type(value).__name__} {value!r}")
    if lo is not None and hi is not None:
        if not lo <= out <= hi:
            raise ConfigError(where, f"must be in [{lo}, {hi}], got {out}")
    elif lo is not None and out < lo:
        raise ConfigError(where, f"must be >= {lo}, got {out}")
    elif hi is not None and out > hi:
        raise ConfigError(where, f"must be <= {hi}, got {out}")
    return out


def as_float(value: Number, where: str) -> float:
    """`value` as a finite float; else ConfigError(where, ...)."""
    if not isinstance(value, int | float | Fraction):
        raise ConfigError(where, f"must be a number, got {type(value).__name__} {value!r}")
    try:
        out = float(value)
    except OverflowError:
        raise ConfigError(where, f"must be a finite number, got {value}") from None
    if not math.isfinite(out):
        raise ConfigError(where, f"must be a finite number, got {value}")
    return out


def as_bool(value: Number, where: str) -> bool:
    """`value` as a bool: a bool, or the int 0 or 1; else ConfigError(where, ...)."""
    if isinstance(value, bool):
        return value
    if isinstance(value, int) and value in (0, 1):
        return bool(value)
    raise ConfigError(where, f"must be a bool (or 0 or 1), got {value}")


# ---------------------------------------------------------------------------- values


def _check(value: Number) -> Number:
    """The result of an operation, normalised (a whole Fraction becomes an int) and kept
    within INT_LIMIT; floats pass (Expr.__call__ refuses a non-finite result)."""
    t = type(value)
    if t is int:
        if -INT_LIMIT < value < INT_LIMIT:
            return value
        raise _Fail("an integer reached 2**64 in magnitude")
    if t is Fraction:
        if value.denominator == 1:
            return _check(value.numerator)
        if -INT_LIMIT < value.numerator < INT_LIMIT and value.denominator < INT_LIMIT:
            return value
        raise _Fail(
            "an exact fraction's numerator or denominator reached 2**64 "
            "(a float, e.g. 1.0 / x, divides inexactly)"
        )
    return value


def _constant(value: object, where: str) -> Number:
    """A literal (TOML or in the text) as a Number within the limits."""
    if isinstance(value, bool):
        return bool(value)
    if isinstance(value, int):
        if -INT_LIMIT < value < INT_LIMIT:
            return int(value)
        raise ConfigError(where, f"integer {value} is 2**64 or more in magnitude")
    if isinstance(value, float):
        if math.isfinite(value):
            return float(value)
        raise ConfigError(where, f"must be a finite number, got {value}")
    raise ConfigError(where, f"must be a number, got {value!r}")


def _add(a: Number, b: Number) -> Number:
    return _check(a + b)


def _sub(a: Number, b: Number) -> Number:
    return _check(a - b)


def _mul(a: Number, b: Number) -> Number:
    return _check(a * b)


def _div(a: Number, b: Number) -> Number:
    if b == 0:
        raise _Fail("division by zero")
    if type(a) is float or type(b) is float:
        return a / b
    if type(a) is int and type(b) is int:  # the common case, without Fraction's arithmetic
        q, r = divmod(a, b)
        return q if r == 0 else _check(Fraction(a, b))
    return _check(Fraction(a) / b)  # exact between ints, bools and Fractions


def _floordiv(a: Number, b: Number) -> Number:
    if b == 0:
        raise _Fail("division by zero")
    return _check(a // b)


def _mod(a: Number, b: Number) -> Number:
    if b == 0:
        raise _Fail("modulo by zero")
    return _check(a % b)


def _pow(a: Number, b: Number) -> Number:
    if type(b) not in (int, bool) or not 0 <= b <= MAX_EXPONENT:
        raise _Fail(f"the exponent must be an int in [0, {MAX_EXPONENT}], got {b}")
    # a < 2**64 and b <= 64 bound an exact result to 4096 bits: cheap to compute, then refuse
    try:
        out = a**b
    except OverflowError:
        raise _Fail("the result of ** reached 2**64 in magnitude") from None
    if not abs(out) < INT_LIMIT:
        raise _Fail("the result of ** reached 2**64 in magnitude")
    return _check(out)


_BINARY: dict[type[ast.operator], Callable[[Number, Number], Number]] = {
    ast.Add: _add,
    ast.Sub: _sub,
    ast.Mult: _mul,
    ast.Div: _div,
    ast.FloorDiv: _floordiv,
    ast.Mod: _mod,
    ast.Pow: _pow,
}
_REFUSED_BINARY = {
    ast.BitAnd: "&",
    ast.BitOr: "|",
    ast.BitXor: "^",
    ast.LShift: "<<",
    ast.RShift: ">>",
    ast.MatMult: "@",
}
_COMPARE: dict[type[ast.cmpop], Callable[[Number, Number], bool]] = {
    ast.Eq: operator.eq,
    ast.NotEq: operator.ne,
    ast.Lt: operator.lt,
    ast.LtE: operator.le,
    ast.Gt: operator.gt,
    ast.GtE: operator.ge,
}


def _finite(name: str, x: Number) -> Number:
    if type(x) is float and not math.isfinite(x):
        raise _Fail(f"{name} of {x}")
    return x


def _ceil(x: Number) -> Number:
    return _check(math.ceil(_finite("ceil", x)))  # exact on a Fraction


def _floor(x: Number) -> Number:
    return _check(math.floor(_finite("floor", x)))


def _int(x: Number) -> Number:
    return _check(int(_finite("int", x)))  # toward zero, as Python's int()


def _round(x: Number) -> Number:
    return _check(round(_finite("round", x)))  # Python's: ties to even, round(2.5) == 2


def _abs(x: Number) -> Number:
    return _check(abs(x))


def _sqrt(x: Number) -> Number:
    if x < 0:
        raise _Fail(f"sqrt of a negative number ({x})")
    return math.sqrt(x)


def _log(x: Number) -> Number:
    if not x > 0:
        raise _Fail(f"log of a non-positive number ({x})")
    return math.log(x)


def _log2(x: Number) -> Number:
    if not x > 0:
        raise _Fail(f"log2 of a non-positive number ({x})")
    return math.log2(x)


def _exp(x: Number) -> Number:
    try:
        return math.exp(x)
    except OverflowError:
        raise _Fail(f"exp({x}) overflows") from None


# name -> (the function, its argument count; None: 2 or more)
_FUNCTIONS: dict[str, tuple[Callable[..., Number], int | None]] = {
    "ceil": (_ceil, 1),
    "floor": (_floor, 1),
    "min": (min, None),
    "max": (max, None),
    "abs": (_abs, 1),
    "sqrt": (_sqrt, 1),
    "log": (_log, 1),
    "log2": (_log2, 1),
    "exp": (_exp, 1),
    "int": (_int, 1),
    "round": (_round, 1),
}
_CALLS = "calls: only " + ", ".join(_FUNCTIONS) + " (and range(...) on the right of 'in')"

# What each refused construct is, in the words an error gives.
_REFUSED: dict[type[ast.AST], str] = {
    ast.Attribute: "attribute access is not allowed",
    ast.Subscript: "indexing is not allowed",
    ast.Slice: "slices are not allowed",
    ast.Lambda: "lambda is not allowed",
    ast.ListComp: "comprehensions are not allowed",
    ast.SetComp: "comprehensions are not allowed",
    ast.DictComp: "comprehensions are not allowed",
    ast.GeneratorExp: "comprehensions are not allowed",
    ast.NamedExpr: "assignment (:=) is not allowed",
    ast.Dict: "dicts are not allowed",
    ast.Set: "sets are not allowed",
    ast.JoinedStr: "strings are not allowed",
    ast.Starred: "* unpacking is not allowed",
    ast.Await: "await is not allowed",
    ast.Yield: "yield is not allowed",
    ast.YieldFrom: "yield is not allowed",
    ast.Tuple: "a tuple is only allowed on the right of 'in' or 'not in'",
    ast.List: "a list is only allowed on the right of 'in' or 'not in'",
}


def _range_arg(x: Number) -> int:
    if type(x) is bool:
        return int(x)
    if type(x) is not int:
        raise _Fail(f"range(...) takes ints, got {x}")
    return x


def _in_range(x: Number, r: range) -> bool:
    # Only an int meets range's fast test; Python would scan the range for a float.
    t = type(x)
    if t is int or t is bool:
        return x in r
    if t is float:
        return x.is_integer() and int(x) in r
    return False  # a Fraction is never whole here (whole ones became ints)


def _read(name: str) -> _Eval:
    def read(scope: Mapping[str, Number]) -> Number:
        try:
            v = scope[name]
        except KeyError:
            raise _Fail(f"name {name!r} is not set") from None
        t = type(v)
        if t is int or t is float or t is bool or t is Fraction:
            return _check(v)
        # subclasses (an IntEnum, NumPy's float64) as the plain type, so arithmetic stays ours
        if isinstance(v, bool):
            return bool(v)
        if isinstance(v, int):
            return _check(int(v))
        if isinstance(v, float):
            return float(v)
        if isinstance(v, Fraction):
            return _check(Fraction(v))
        raise _Fail(f"name {name!r} is not a number: {v!r}")

    return read


# ---------------------------------------------------------------------------- compiling


class _Compiler:
    """Checks an AST node by node and builds its closure; collects the names it reads."""

    def __init__(self, text: str, known: frozenset[str], where: str) -> None:
        self.text = text
        self.known = known
        self.where = where
        self.names: set[str] = set()

    def refuse(self, problem: str, after: str = "") -> ConfigError:
        return ConfigError(self.where, f"{problem} in {self.text!r}{after}")

    def compile(self, node: ast.expr, depth: int) -> _Eval:
        if depth > MAX_DEPTH:
            raise self.refuse(f"nested deeper than {MAX_DEPTH} levels")
        d = depth + 1
        if isinstance(node, ast.Constant):
            return self.constant(node.value)
        if isinstance(node, ast.Name):
            return self.name(node.id)
        if isinstance(node, ast.BinOp):
            return self.binary(node, d)
        if isinstance(node, ast.UnaryOp):
            return self.unary(node, d)
        if isinstance(node, ast.Compare):
            return self.compare(node, d)
        if isinstance(node, ast.BoolOp):
            return self.boolean(node, d)
        if isinstance(node, ast.IfExp):
            test, body, orelse = (self.compile(n, d) for n in (node.test, node.body, node.orelse))
            return lambda s: body(s) if test(s) else orelse(s)
        if isinstance(node, ast.Call):
            return self.call(node, d)
        raise self.refuse(_REFUSED.get(type(node), f"{type(node).__name__} is not allowed"))

    def constant(self, value: object) -> _Eval:
        if isinstance(value, str | bytes):
            raise self.refuse("strings are not allowed")
        if isinstance(value, complex):
            raise self.refuse("complex numbers are not allowed")
        if not isinstance(value, bool | int | float):
            raise self.refuse(f"{value!r} is not allowed (only number literals and True/False)")
        if isinstance(value, int) and not isinstance(value, bool) and abs(value) >= INT_LIMIT:
            raise self.refuse(f"the literal {value} is 2**64 or more in magnitude")
        if isinstance(value, float) and not math.isfinite(value):
            raise self.refuse(f"the literal {value} is not finite")
        return lambda s: value

    def name(self, name: str) -> _Eval:
        if name not in self.known:
            known = ", ".join(sorted(self.known)) or "(none)"
            hint = "; True and False are the bools" if name in ("true", "false") else ""
            raise self.refuse(f"unknown name {name!r}", f"; known: {known}{hint}")
        self.names.add(name)
        return _read(name)

    def binary(self, node: ast.BinOp, d: int) -> _Eval:
        op = _BINARY.get(type(node.op))
        if op is None:
            symbol = _REFUSED_BINARY.get(type(node.op), type(node.op).__name__)
            raise self.refuse(f"operator '{symbol}' is not allowed")
        left, right = self.compile(node.left, d), self.compile(node.right, d)
        return lambda s: op(left(s), right(s))

    def unary(self, node: ast.UnaryOp, d: int) -> _Eval:
        operand = self.compile(node.operand, d)
        if isinstance(node.op, ast.USub):
            return lambda s: _check(-operand(s))
        if isinstance(node.op, ast.UAdd):
            return lambda s: _check(+operand(s))  # a bool becomes 0/1
        if isinstance(node.op, ast.Not):
            return lambda s: not operand(s)
        raise self.refuse("operator '~' is not allowed")

    def compare(self, node: ast.Compare, d: int) -> _Eval:
        if any(isinstance(op, ast.In | ast.NotIn) for op in node.ops):
            return self.membership(node, d)
        ops = []
        for op in node.ops:
            f = _COMPARE.get(type(op))
            if f is None:
                raise self.refuse("'is' is not allowed (use == or !=)")
            ops.append(f)
        left = self.compile(node.left, d)
        rights = [self.compile(n, d) for n in node.comparators]
        if len(ops) == 1:
            op, right = ops[0], rights[0]
            return lambda s: op(left(s), right(s))
        pairs = list(zip(ops, rights, strict=True))

        def chain(s: Mapping[str, Number]) -> bool:
            # as Python: a < b < c is a < b and b < c, with b evaluated once
            a = left(s)
            for op, right in pairs:
                b = right(s)
                if not op(a, b):
                    return False
                a = b
            return True

        return chain

    def membership(self, node: ast.Compare, d: int) -> _Eval:
        if len(node.ops) != 1:
            raise self.refuse("'in' and 'not in' cannot be chained with other comparisons")
        negate = isinstance(node.ops[0], ast.NotIn)
        left = self.compile(node.left, d)
        right = node.comparators[0]
        if isinstance(right, ast.Tuple | ast.List):
            if d + 1 > MAX_DEPTH:
                raise self.refuse(f"nested deeper than {MAX_DEPTH} levels")
            items = [self.compile(n, d + 1) for n in right.elts]

            def among(s: Mapping[str, Number]) -> bool:
                x = left(s)
                values = [f(s) for f in items]  # all of them, as Python builds the tuple
                return (x in values) != negate

            return among
        if (
            isinstance(right, ast.Call)
            and isinstance(right.func, ast.Name)
            and right.func.id == "range"
        ):
            if right.keywords or not 1 <= len(right.args) <= 3:
                raise self.refuse("range(...) takes 1 to 3 arguments, without keywords")
            if d + 1 > MAX_DEPTH:
                raise self.refuse(f"nested deeper than {MAX_DEPTH} levels")
            args = [self.compile(n, d + 1) for n in right.args]

            def in_range(s: Mapping[str, Number]) -> bool:
                x = left(s)
                bounds = [_range_arg(f(s)) for f in args]
                if len(bounds) == 3 and bounds[2] == 0:
                    raise _Fail("range(...) step must not be zero")
                return _in_range(x, range(*bounds)) != negate

            return in_range
        raise self.refuse(
            "the right side of 'in' must be a tuple or list of expressions, or range(...)"
        )

    def boolean(self, node: ast.BoolOp, d: int) -> _Eval:
        values = [self.compile(n, d) for n in node.values]
        if isinstance(node.op, ast.And):

            def all_of(s: Mapping[str, Number]) -> Number:
                # as Python: the first false value, else the last
                for f in values:
                    v = f(s)
                    if not v:
                        return v
                return v

            return all_of

        def any_of(s: Mapping[str, Number]) -> Number:
            for f in values:
                v = f(s)
                if v:
                    return v
            return v

        return any_of

    def call(self, node: ast.Call, d: int) -> _Eval:
        if not isinstance(node.func, ast.Name):
            self.compile(node.func, d)  # for its own words, e.g. attribute access
            raise self.refuse(_CALLS)
        name = node.func.id
        if name == "range":
            raise self.refuse("range(...) is only allowed on the right of 'in' or 'not in'")
        if name not in _FUNCTIONS:
            raise self.refuse(f"{_CALLS}, not {name}")
        if node.keywords:
            raise self.refuse(f"{name}(...) takes no keyword arguments")
        if any(isinstance(n, ast.Starred) for n in node.args):
            raise self.refuse(_REFUSED[ast.Starred])
        fn, arity = _FUNCTIONS[name]
        if arity is None and len(node.args) < 2:
            raise self.refuse(f"{name}(...) takes 2 or more arguments, got {len(node.args)}")
        if arity is not None and len(node.args) != arity:
            raise self.refuse(f"{name}(...) takes {arity} argument, got {len(node.args)}")
        args = [self.compile(n, d) for n in node.args]
        if len(args) == 1:
            (arg,) = args
            return lambda s: fn(arg(s))
        return lambda s: fn(*[f(s) for f in args])
