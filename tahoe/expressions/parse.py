"""Parsing Spark SQL expressions into the expression tree (`tahoe.expressions.tree`) with sqlglot's Spark
dialect: the one place tahoe parses SQL.

  1. Spark's literal typing: `5` INT (BIGINT beyond 32 bits), `5L`, `5S`, `5Y`, `1.5` DECIMAL(2,1), `1.5D` /
     `1e3` DOUBLE, `1.5F`, `1.5BD`; `TIMESTAMP '...'` stays a CAST (the session zone decides).
  2. Negated forms (`NOT IN`, `NOT LIKE`, `IS NOT NULL`, `NOT BETWEEN`) become NOT; `x IS TRUE` is `x <=> TRUE`.
  3. Functions with a typed node become `Func`; anything else Spark accepts becomes `Opaque`.
  4. Text that does not parse, or is not one expression, raises ParseException naming it."""

from __future__ import annotations

import datetime as _dt
import functools
import re
from decimal import ROUND_HALF_UP, Context, Decimal, InvalidOperation

from ..errors import AnalysisException, ParseException
from ..protocol.schema import (
    BINARY, BOOLEAN, BYTE, DATE, DOUBLE, FLOAT, INTEGER, LONG, SHORT, STRING, TIMESTAMP, TIMESTAMP_NTZ, VOID,
    DataType, DecimalType, PrimitiveType,
)
from .coercion import to_float32
from .tree import (
    And, Arithmetic, Between, Case, Cast, Column, Comparison, Expression, Func, In, IsNull, Like, Literal,
    Negate, Not, Opaque, Or, decimal_type_of,
)

__all__ = ["parse", "parse_type", "creates_table_using", "tokenize", "Token"]

_MAX_TEXT = 1_000_000


def parse(text: str | Expression) -> Expression:
    """The expression tree of a Spark SQL expression (an Expression is returned as is). Trees
    are immutable, so the most recent texts are remembered."""
    if isinstance(text, Expression):
        return text
    if not isinstance(text, str):
        raise ParseException(f"an expression must be SQL text, got {type(text).__name__}")
    return _parse(text)


@functools.lru_cache(maxsize=512)
def _parse(text: str) -> Expression:
    if not text.strip():
        raise ParseException("[PARSE_EMPTY_STATEMENT] the expression is empty")
    if len(text) > _MAX_TEXT:
        raise ParseException(f"the expression is too long ({len(text)} characters)")
    import sqlglot
    from sqlglot import exp
    from sqlglot.errors import SqlglotError

    try:
        trees = sqlglot.parse(text, read="spark")
    except SqlglotError as e:
        raise ParseException(f"[PARSE_SYNTAX_ERROR] cannot parse the expression {text!r}: {_first_line(e)}") from None
    except RecursionError:
        raise ParseException(f"the expression {text[:200]!r} is nested too deeply") from None
    trees = [t for t in trees if t is not None]
    if len(trees) != 1:
        raise ParseException(f"[PARSE_SYNTAX_ERROR] {text!r} is not one expression")
    tree = trees[0]
    if isinstance(tree, (exp.Query, exp.DDL, exp.DML, exp.Command, exp.Alias)):
        raise ParseException(f"[PARSE_SYNTAX_ERROR] {text!r} is a statement, not an expression")
    try:
        return _Converter(text).convert(tree)
    except RecursionError:
        raise ParseException(f"the expression {text[:200]!r} is nested too deeply") from None


def _first_line(e: Exception) -> str:
    msg = str(e).strip()
    return msg.splitlines()[0] if msg else type(e).__name__


# --- types -------------------------------------------------------------------------------------

def _dtypes():
    from sqlglot.expressions import DataType as D

    T = D.Type
    return {
        T.BIGINT: LONG, T.INT: INTEGER, T.SMALLINT: SHORT, T.TINYINT: BYTE, T.FLOAT: FLOAT, T.DOUBLE: DOUBLE,
        T.BOOLEAN: BOOLEAN, T.TEXT: STRING, T.VARCHAR: STRING, T.CHAR: STRING, T.NVARCHAR: STRING,
        T.NCHAR: STRING, T.BINARY: BINARY, T.VARBINARY: BINARY, T.DATE: DATE, T.TIMESTAMP: TIMESTAMP,
        T.TIMESTAMPTZ: TIMESTAMP, T.TIMESTAMPLTZ: TIMESTAMP, T.TIMESTAMPNTZ: TIMESTAMP_NTZ,
    }


def _to_type(node) -> DataType | None:
    """The tahoe type of a sqlglot DataType node (None: a type the tree does not model)."""
    from sqlglot.expressions import DataType as D

    t = node.this
    if t in (D.Type.DECIMAL, getattr(D.Type, "BIGDECIMAL", None)):
        params = [p.this if hasattr(p, "this") else p for p in node.expressions]
        try:
            nums = [int(p.name if hasattr(p, "name") else p) for p in params]
        except (TypeError, ValueError):
            return None
        precision = nums[0] if nums else 10
        scale = nums[1] if len(nums) > 1 else 0
        try:
            return DecimalType(precision, scale)
        except Exception:   # out of range: Spark refuses it too
            raise AnalysisException(f"[DECIMAL_PRECISION_EXCEEDS_MAX_PRECISION] DECIMAL({precision},{scale})") from None
    return _dtypes().get(t)


def parse_type(text: str) -> DataType:
    """A Spark SQL type name (`BIGINT`, `DECIMAL(10,2)`, `TIMESTAMP_NTZ`, ...) as a tahoe type."""
    from sqlglot import exp
    from sqlglot.errors import SqlglotError

    try:
        node = exp.DataType.build(text, dialect="spark")
    except (SqlglotError, ValueError):
        raise ParseException(f"[PARSE_SYNTAX_ERROR] {text!r} is not a type") from None
    t = _to_type(node)
    if t is None:
        raise AnalysisException(f"type {text!r} is not supported in expressions")
    return t


# --- conversion --------------------------------------------------------------------------------

_INT_TEXT = re.compile(r"[+-]?\d+")
_INT32 = (-(1 << 31), (1 << 31) - 1)
_INT64 = (-(1 << 63), (1 << 63) - 1)


def _number_literal(text: str) -> Literal:
    """A numeric literal typed as Spark types it."""
    t = text.strip()
    low = t.lower()
    if "e" in low:
        return Literal(float(t), DOUBLE)
    if "." in t:
        try:
            d = Decimal(t)
        except InvalidOperation:
            raise ParseException(f"invalid number {text!r}") from None
        return Literal(d, decimal_type_of(d))
    v = int(t)
    if _INT32[0] <= v <= _INT32[1]:
        return Literal(v, INTEGER)
    if _INT64[0] <= v <= _INT64[1]:
        return Literal(v, LONG)
    d = Decimal(v)
    return Literal(d, decimal_type_of(d))


def _fold_literal_cast(lit: Literal, to: DataType, text: str | None = None) -> Literal | None:
    """A literal cast whose result does not depend on the session (numbers, strings to numbers,
    dates and booleans) folded into a literal of the target type; None when it cannot be.
    `text` is a numeric literal's text as written (`1.00000005960464477539062501E0`), so a FLOAT is
    rounded once, from the exact value, as Java's Float.parseFloat does."""
    v, src = lit.value, lit.type
    if v is None:
        return Literal(None, to)
    name = to.name if isinstance(to, PrimitiveType) else None
    try:
        if isinstance(to, DecimalType):
            d = Decimal(str(v).strip()) if isinstance(v, (str, int, Decimal)) else None
            if d is None or not d.is_finite():
                return None
            q = d.quantize(Decimal(1).scaleb(-to.scale), rounding=ROUND_HALF_UP, context=Context(prec=100))
            if len(q.as_tuple().digits) > to.precision and q != 0:
                return None
            return Literal(q, to)
        if name in ("long", "integer", "short", "byte"):
            if isinstance(v, bool) or not isinstance(v, (int, Decimal, str)):
                return None
            if isinstance(v, Decimal) and v != v.to_integral_value():
                return None
            if isinstance(v, str) and not _INT_TEXT.fullmatch(v.strip()):
                return None
            i = int(Decimal(str(v).strip()))
            lo, hi = {"long": _INT64, "integer": _INT32, "short": (-(1 << 15), (1 << 15) - 1),
                      "byte": (-128, 127)}[name]
            return Literal(i, to) if lo <= i <= hi else None
        if name in ("double", "float"):
            if isinstance(v, bool) or not isinstance(v, (int, float, Decimal, str)):
                return None
            if isinstance(v, str) and "_" in v:
                return None   # Python reads 1_000, Spark does not
            exact = text if text is not None else v
            if name == "float":
                return Literal(to_float32(exact), to)
            return Literal(float(exact.strip()) if isinstance(exact, str) else float(exact), to)
        if name == "date" and isinstance(v, str):
            return Literal(_dt.date.fromisoformat(v.strip()), DATE)
        if name == "string" and src == STRING:
            return lit
        if name == "boolean" and isinstance(v, str) and v.strip().lower() in ("true", "false"):
            return Literal(v.strip().lower() == "true", BOOLEAN)
    except (ValueError, InvalidOperation, ArithmeticError):
        return None
    return None


class _Converter:
    def __init__(self, text: str):
        self.text = text
        from sqlglot import exp

        self.exp = exp
        self.cmp = {exp.EQ: "=", exp.NEQ: "<>", exp.LT: "<", exp.LTE: "<=", exp.GT: ">", exp.GTE: ">=",
                    exp.NullSafeEQ: "<=>"}
        self.arith = {exp.Add: "+", exp.Sub: "-", exp.Mul: "*", exp.Div: "/", exp.Mod: "%", exp.IntDiv: "div"}
        # sqlglot's typed function nodes → (Spark name, how to read the arguments)
        self.unary = {exp.Lower: "lower", exp.Upper: "upper", exp.Length: "length", exp.Abs: "abs",
                      exp.IsNan: "isnan", exp.Floor: "floor", exp.Ceil: "ceil", exp.Hour: "hour",
                      exp.Minute: "minute", exp.Second: "second", exp.Sqrt: "sqrt", exp.Exp: "exp",
                      exp.Ln: "ln", exp.Sign: "sign", exp.Negative: "negative"}
        self.date_part = {exp.Year: "year", exp.Month: "month", exp.Day: "day", exp.DayOfMonth: "day"}
        self.binary = {exp.Nullif: "nullif", exp.Nanvl: "nanvl", exp.StartsWith: "startswith",
                       exp.EndsWith: "endswith", exp.Contains: "contains", exp.Pow: "power"}

    def opaque(self, node, what: str = "") -> Opaque:
        exp = self.exp
        lambda_params = set()
        for lam in node.find_all(exp.Lambda):
            for p in lam.expressions:
                lambda_params.add(p.name.lower())
        refs: list[Column] = []
        for c in node.find_all(exp.Column, exp.Dot):
            if isinstance(c, exp.Dot) and not isinstance(c.parent, exp.Dot) and isinstance(c.this, (exp.Column, exp.Dot)):
                parts = self.column_parts(c)
            elif isinstance(c, exp.Column) and not isinstance(c.parent, exp.Dot):
                parts = self.column_parts(c)
            else:
                continue
            if parts is None or parts[0].lower() in lambda_params:
                continue
            ref = Column(tuple(parts))
            if ref not in refs:
                refs.append(ref)
        name = what or (node.sql_name().lower() if isinstance(node, exp.Func) else type(node).__name__.lower())
        return Opaque(node.sql(dialect="spark"), tuple(refs), name)

    def column_parts(self, node) -> list[str] | None:
        exp = self.exp
        if isinstance(node, exp.Column):
            return [p.name for p in node.parts]
        if isinstance(node, exp.Dot):
            left = self.column_parts(node.this)
            if left is None or not isinstance(node.expression, exp.Identifier):
                return None
            return left + [node.expression.name]
        return None

    def args(self, node) -> list:
        return [self.convert(a) for a in node]

    def convert(self, n) -> Expression:
        exp = self.exp
        t = type(n)
        if t is exp.Paren:
            return self.convert(n.this)
        if t is exp.Column or t is exp.Dot:
            parts = self.column_parts(n)
            if parts is None:
                return self.opaque(n)
            return Column(tuple(parts))
        if t is exp.Literal:
            return Literal(n.this, STRING) if n.is_string else _number_literal(n.this)
        if t is exp.Boolean:
            return Literal(bool(n.this), BOOLEAN)
        if t is exp.Null:
            return Literal(None, VOID)
        if t is exp.HexString:
            try:
                return Literal(bytes.fromhex(n.this if len(n.this) % 2 == 0 else "0" + n.this), BINARY)
            except ValueError:
                raise ParseException(f"invalid binary literal X'{n.this}' in {self.text!r}") from None
        if t is exp.Neg:
            suffixed = self.suffixed_literal(n.this)
            if suffixed is not None:   # -9223372036854775808L: the sign belongs to the literal
                folded = _fold_literal_cast(_number_literal("-" + suffixed[0]), suffixed[1], "-" + suffixed[0])
                if folded is not None:
                    return folded
            inner = self.convert(n.this)
            if isinstance(inner, Literal) and inner.value is not None and not isinstance(inner.value, (bool, str)) \
                    and isinstance(inner.value, (int, float, Decimal)):
                # copy_negate: exact (a Decimal's unary minus would round to the context's 28 digits)
                v = inner.value.copy_negate() if isinstance(inner.value, Decimal) else -inner.value
                if isinstance(v, int) and inner.type == LONG and _INT32[0] <= v <= _INT32[1] \
                        and not isinstance(n.this, (exp.Cast, exp.TryCast)):
                    return Literal(v, INTEGER)   # -2147483648 is an INT literal
                return Literal(v, inner.type, inner.folded)
            return Negate(inner)
        if t is exp.Not:
            return Not(self.convert(n.this))
        if t is exp.And:
            return And(self.convert(n.left), self.convert(n.right))
        if t is exp.Or:
            return Or(self.convert(n.left), self.convert(n.right))
        if t in self.cmp:
            return Comparison(self.cmp[t], self.convert(n.left), self.convert(n.right))
        if t in self.arith:
            return Arithmetic(self.arith[t], self.convert(n.left), self.convert(n.right))
        if t is exp.Is:
            e = n.expression
            if isinstance(e, exp.Null):
                return IsNull(self.convert(n.this))
            if isinstance(e, exp.Boolean):
                return Comparison("<=>", self.convert(n.this), Literal(bool(e.this), BOOLEAN))
            return self.opaque(n, "is")
        if t is exp.In:
            if n.args.get("query") is not None or n.args.get("unnest") is not None or n.args.get("field") is not None:
                return self.opaque(n, "in (subquery)")
            return In(self.convert(n.this), tuple(self.args(n.expressions)))
        if t is exp.Between:
            return Between(self.convert(n.this), self.convert(n.args["low"]), self.convert(n.args["high"]))
        if t is exp.Escape and isinstance(n.this, (exp.Like, exp.ILike)):
            esc = n.expression
            if not (isinstance(esc, exp.Literal) and esc.is_string and len(esc.this) == 1):
                raise ParseException(f"the ESCAPE of {self.text!r} must be one character")
            return self.like(n.this, esc.this)
        if t is exp.Like or t is exp.ILike:
            return self.like(n, None)
        if t is exp.RegexpLike:
            return Func("rlike", (self.convert(n.this), self.convert(n.expression)))
        if t is exp.DPipe:
            return Func("concat", (self.convert(n.this), self.convert(n.expression)))
        if t is exp.Case:
            operand = self.convert(n.this) if n.this is not None else None
            branches = tuple((self.convert(i.this), self.convert(i.args["true"])) for i in n.args.get("ifs") or [])
            default = n.args.get("default")
            return Case(operand, branches, self.convert(default) if default is not None else None)
        if t is exp.If:
            f = n.args.get("false")
            args = [self.convert(n.this), self.convert(n.args["true"])]
            args.append(self.convert(f) if f is not None else Literal(None, VOID))
            return Func("if", tuple(args))
        if t is exp.Cast or t is exp.TryCast:
            return self.cast(n)
        if t is exp.Coalesce:
            return Func("coalesce", tuple(self.args([n.this, *n.expressions])))
        if t is exp.Greatest or t is exp.Least:
            return Func("greatest" if t is exp.Greatest else "least", tuple(self.args([n.this, *n.expressions])))
        if t is exp.Concat:
            return Func("concat", tuple(self.args(n.expressions)))
        if t is exp.ConcatWs:
            return Func("concat_ws", tuple(self.args(n.expressions)))
        if t is exp.Substring:
            args = [self.convert(n.this), self.convert(n.args["start"]) if n.args.get("start") is not None
                    else Literal(1, INTEGER)]
            if n.args.get("length") is not None:
                args.append(self.convert(n.args["length"]))
            return Func("substring", tuple(args))
        if t is exp.Trim:
            if n.args.get("expression") is not None or n.args.get("collation") is not None:
                return self.opaque(n, "trim")
            pos = str(n.args.get("position") or "").upper()
            name = {"LEADING": "ltrim", "TRAILING": "rtrim"}.get(pos, "trim")
            return Func(name, (self.convert(n.this),))
        if t is exp.Round:
            args = [self.convert(n.this)]
            if n.args.get("decimals") is not None:
                args.append(self.convert(n.args["decimals"]))
            return Func("round", tuple(args))
        if t is exp.Replace:
            return Func("replace", (self.convert(n.this), self.convert(n.expression),
                                    self.convert(n.args["replacement"])))
        if t in self.unary and not any(v is not None for k, v in n.args.items() if k != "this"):
            return Func(self.unary[t], (self.convert(n.this),))
        if t in self.date_part:
            inner = n.this
            if isinstance(inner, exp.TsOrDsToDate) and not inner.args.get("format"):
                inner = inner.this   # sqlglot wraps the argument of year(x) in to_date(x)
            return Func(self.date_part[t], (self.convert(inner),))
        if t is exp.TsOrDsToDate:
            if n.args.get("format") is not None:
                return self.opaque(n, "to_date")
            return Func("to_date", (self.convert(n.this),))
        if t in self.binary:
            return Func(self.binary[t], (self.convert(n.this), self.convert(n.expression)))
        if t is exp.Anonymous:
            name = str(n.this).lower()
            if name == "isnull" and len(n.expressions) == 1:
                return IsNull(self.convert(n.expressions[0]))
            if name == "isnotnull" and len(n.expressions) == 1:
                return Not(IsNull(self.convert(n.expressions[0])))
            if not name.replace("_", "").isalnum():
                return self.opaque(n)
            return Func(name, tuple(self.args(n.expressions)))
        return self.opaque(n)

    def like(self, n, escape: str | None) -> Expression:
        exp = self.exp
        pat = n.expression
        if isinstance(pat, (exp.Any, exp.All)):
            node = self.opaque(n if escape is None else n.parent, "like any/all")
            return Not(node) if n.args.get("negate") else node
        e: Expression = Like(self.convert(n.this), self.convert(pat), escape, isinstance(n, exp.ILike))
        return Not(e) if n.args.get("negate") else e

    def suffixed_literal(self, n) -> tuple[str, DataType] | None:
        """(digits, type) of a number with a type suffix (`5L`, `1.5F`, `2.5BD`): sqlglot reads
        it as a cast without a `format` argument, an explicit CAST always has one."""
        exp = self.exp
        if not isinstance(n, (exp.Cast, exp.TryCast)) or "format" in n.args or n.args.get("safe"):
            return None
        inner = n.this
        if not isinstance(inner, exp.Literal):
            return None
        to = _to_type(n.args["to"])
        return (str(inner.this), to) if to is not None else None

    def cast(self, n) -> Expression:
        to = _to_type(n.args["to"])
        if to is None:
            return self.opaque(n, "cast")
        safe = bool(n.args.get("safe"))
        child = self.convert(n.this)
        if isinstance(child, Literal) and not safe:
            text = n.this.this if isinstance(n.this, self.exp.Literal) and not n.this.is_string else None
            folded = _fold_literal_cast(child, to, text)
            if folded is not None:
                if self.suffixed_literal(n) is None:   # an explicit CAST: not a literal to Spark
                    folded = Literal(folded.value, folded.type, True)
                return folded
        return Cast(child, to, safe)


def creates_table_using(sql: str, provider: str) -> bool:
    """Whether the SQL statement `sql` is a CREATE / REPLACE TABLE ... USING `provider` (tokenized,
    so a string literal or a comment naming the provider does not count)."""
    if provider.lower() not in sql.lower():
        return False
    try:
        from sqlglot.dialects.spark import Spark
        from sqlglot.tokens import TokenType

        tokens = Spark().tokenize(sql)
    except Exception:  # noqa: BLE001 - not tokenizable: Spark reports its own error
        return False
    words = [(t.token_type, t.text.lower()) for t in tokens]
    head = [w for _, w in words[:6]]
    if not head or head[0] not in ("create", "replace") or "table" not in head:
        return False
    return any(w == "using" and nxt[1].strip("`") == provider.lower() and nxt[0] != TokenType.STRING
               for (_, w), nxt in zip(words, words[1:]))


class Token(tuple):
    """A lexical token of a SQL statement: `kind` ('word': a keyword or unquoted identifier;
    'ident': a backquoted identifier; 'string'; 'number'; 'op': punctuation and operators),
    `value` (a word as written, an identifier or string without quotes and escapes, the text of
    anything else), and its span `start`..`end` (exclusive) in the statement's text."""

    __slots__ = ()

    def __new__(cls, kind: str, value: str, start: int, end: int):
        return tuple.__new__(cls, (kind, value, start, end))

    kind = property(lambda self: self[0])
    value = property(lambda self: self[1])
    start = property(lambda self: self[2])
    end = property(lambda self: self[3])

    def is_word(self, *words: str) -> bool:
        """Whether this is an unquoted word equal (case-insensitively) to one of `words`."""
        return self[0] == "word" and self[1].upper() in words

    def __repr__(self) -> str:
        return f"Token({self[0]}, {self[1]!r}, {self[2]}..{self[3]})"


@functools.lru_cache(maxsize=1)
def _statement_tokenizer():
    from sqlglot.dialects.spark import Spark

    class _Tokenizer(Spark.Tokenizer):
        COMMANDS: set = set()   # VACUUM, SHOW, ... tokenized like any statement, not swallowed whole

    return _Tokenizer()


def tokenize(sql: str) -> list[Token]:
    """The tokens of a Spark SQL statement, with their positions — for the statement grammars
    that cut a statement into parts and hand embedded expressions and queries on as text
    (`tahoe.spark.sql`). Comments are dropped. Raises ParseException for text that does not
    tokenize (an unterminated string, say)."""
    if len(sql) > _MAX_TEXT:
        raise ParseException(f"the statement is too long ({len(sql)} characters)")
    from sqlglot.tokens import TokenType

    try:
        raw = _statement_tokenizer().tokenize(sql)
    except Exception as e:  # noqa: BLE001 - sqlglot's TokenError
        raise ParseException(f"[PARSE_SYNTAX_ERROR] {_first_line(e)}") from None
    out: list[Token] = []
    last_start = -1
    for t in raw:
        start, end = t.start, t.end + 1
        if start <= last_start:
            continue   # a token sqlglot synthesized from the previous one (5L -> 5 :: BIGINT)
        last_start = start
        text = sql[start:end]
        if t.token_type == TokenType.STRING:
            out.append(Token("string", t.text, start, end))
        elif t.token_type == TokenType.IDENTIFIER:
            out.append(Token("ident", t.text, start, end))
        elif t.token_type == TokenType.NUMBER:
            out.append(Token("number", text, start, end))
        elif text[:1].isalpha() or text[:1] == "_":
            pos = start
            for word in text.split():   # multi-word keywords (PARTITIONED BY, ORDER BY) as words
                at = sql.index(word, pos)
                out.append(Token("word", word, at, at + len(word)))
                pos = at + len(word)
        else:
            out.append(Token("op", text, start, end))
    return out
