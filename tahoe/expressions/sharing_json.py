"""The Delta Sharing JSON predicate tree (spec "JSON predicates for Filtering") to and from the expression tree
(`to_sharing_json`, `from_sharing_json`).

  1. Ops: `column`, `literal`, `isNull`, `equal`, `lessThan`, `lessThanOrEqual`, `greaterThan`,
     `greaterThanOrEqual`, `and` / `or` (two or more children), `not`.
  2. Value types: bool, int, long, string, date, float, double, timestamp; a column's says how it is read
     (`json_column_types`), a literal's value is a string read as its type.
  3. To JSON: `<>`, `IS NOT NULL`, `IN`, `BETWEEN` as `not` / `or` / `and` of the ops; comparisons only
     between columns and constants; anything else raises AnalysisException (`partial=True` drops such
     top-level conjuncts: a weaker hint, still correct)."""

from __future__ import annotations

import datetime as _dt
import math
from typing import Any, Mapping

from ..errors import AnalysisException, DeltaError
from ..protocol.schema import (
    BOOLEAN, DATE, DOUBLE, FLOAT, INTEGER, LONG, STRING, TIMESTAMP, DataType, DecimalType, PrimitiveType, StructType,
)
from .tree import (
    And, Between, Cast, Column, Comparison, Expression, In, IsNull, Literal, Not, Or, conjuncts,
)
from .evaluate import constant_value

__all__ = ["from_sharing_json", "to_sharing_json", "json_column_types", "VALUE_TYPES"]

VALUE_TYPES: dict[str, DataType] = {
    "bool": BOOLEAN, "boolean": BOOLEAN, "int": INTEGER, "long": LONG, "string": STRING, "date": DATE,
    "float": FLOAT, "double": DOUBLE, "timestamp": TIMESTAMP,
}
_OPS = {"equal": "=", "lessThan": "<", "lessThanOrEqual": "<=", "greaterThan": ">", "greaterThanOrEqual": ">="}
_JSON_OPS = {v: k for k, v in _OPS.items()}
_FLIP = {"=": "=", "<": ">", "<=": ">=", ">": "<", ">=": "<="}


def _bad(msg: str) -> AnalysisException:
    return AnalysisException(f"invalid JSON predicate: {msg}")


def _value(raw: Any, vt: str) -> Any:
    """A literal's value (a string, or a JSON scalar) as the Python value of its valueType: the
    string cast to the type as Spark casts it (a timestamp without an offset is UTC)."""
    if raw is None:
        return None
    if isinstance(raw, (dict, list)):
        raise _bad(f"literal {raw!r} is not a scalar")
    text = ("true" if raw else "false") if isinstance(raw, bool) else str(raw)
    try:
        return constant_value(Cast(Literal(text, STRING), VALUE_TYPES[vt]), time_zone="UTC")[0]
    except DeltaError as e:
        raise _bad(f"literal {raw!r} is not a valid {vt}: {e}") from None


def from_sharing_json(obj: Any) -> Expression:
    """The expression of a JSON predicate tree (a dict, or its JSON text)."""
    if isinstance(obj, (str, bytes)):
        import json

        try:
            obj = json.loads(obj)
        except ValueError as e:
            raise _bad(f"not JSON: {e}") from None

    def conv(node: Any) -> Expression:
        if not isinstance(node, dict) or not isinstance(node.get("op"), str):
            raise _bad(f"every node needs an op: {str(node)[:100]}")
        op = node["op"]
        kids = node.get("children") or []
        if not isinstance(kids, list):
            raise _bad("children must be a list")
        if op in ("column", "literal"):
            vt = node.get("valueType")
            if vt not in VALUE_TYPES:
                raise _bad(f"{op} needs a known valueType, got {vt!r}")
            if kids:
                raise _bad(f"a {op} has no children")
            if op == "column":
                name = node.get("name")
                if not isinstance(name, str) or not name:
                    raise _bad("a column needs a name")
                return Column(tuple(name.split(".")))
            if "value" not in node:
                raise _bad("a literal needs a value")
            return Literal(_value(node["value"], vt), VALUE_TYPES[vt])
        if op in _OPS:
            if len(kids) != 2 or any(not isinstance(k, dict) or k.get("op") not in ("column", "literal") for k in kids):
                raise _bad(f"{op} needs two leaf children (column or literal)")
            return Comparison(_OPS[op], conv(kids[0]), conv(kids[1]))
        if op == "isNull":
            if len(kids) != 1 or not isinstance(kids[0], dict) or kids[0].get("op") != "column":
                raise _bad("isNull needs one column child")
            return IsNull(conv(kids[0]))
        if op == "not":
            if len(kids) != 1:
                raise _bad("not needs one child")
            return Not(conv(kids[0]))
        if op in ("and", "or"):
            if len(kids) < 2:
                raise _bad(f"{op} needs at least two children")
            out = conv(kids[0])
            for k in kids[1:]:
                out = And(out, conv(k)) if op == "and" else Or(out, conv(k))
            return out
        raise _bad(f"unknown op {op!r}")

    return conv(obj)


def json_column_types(obj: Any) -> dict[str, DataType]:
    """The type each column of a JSON predicate tree is read as (its valueType), by name."""
    out: dict[str, DataType] = {}

    def walk(node):
        if isinstance(node, dict):
            if node.get("op") == "column" and node.get("valueType") in VALUE_TYPES and isinstance(node.get("name"), str):
                out.setdefault(node["name"], VALUE_TYPES[node["valueType"]])
            for k in node.get("children") or []:
                walk(k)
    walk(obj)
    return out


def _value_type(t: DataType) -> str | None:
    if isinstance(t, DecimalType):
        return "double"
    if not isinstance(t, PrimitiveType):
        return None
    return {"long": "long", "integer": "int", "short": "int", "byte": "int", "string": "string", "date": "date",
            "float": "float", "double": "double", "boolean": "bool", "timestamp": "timestamp",
            "timestamp_ntz": "timestamp"}.get(t.name)


def _text(v: Any, vt: str) -> str:
    if vt == "bool":
        return "true" if v else "false"
    if vt in ("float", "double"):
        f = float(v)
        if math.isnan(f) or math.isinf(f):
            raise AnalysisException(f"{f} cannot be a JSON predicate literal")
        return repr(f)
    if vt == "timestamp":
        if isinstance(v, _dt.datetime):
            d = v if v.tzinfo else v.replace(tzinfo=_dt.timezone.utc)
            d = d.astimezone(_dt.timezone.utc).replace(tzinfo=None)
            # microseconds when there are any: cutting them would move the bound (and skip files)
            return d.isoformat(timespec="microseconds" if d.microsecond % 1000 else "milliseconds") + "Z"
        return str(v)
    if vt == "date":
        return v.isoformat() if isinstance(v, _dt.date) else str(v)
    return str(v)


def to_sharing_json(expr: Expression, types: StructType | Mapping[str, DataType], *, partial: bool = False) -> dict:
    """The JSON predicate tree of `expr`; `types` gives each column's type (the table schema,
    or name → type). AnalysisException for what JSON cannot say, unless `partial`."""
    if isinstance(types, StructType):
        lookup = {f.name.lower(): f.type for f in types.fields}
    else:
        lookup = {k.lower(): v for k, v in types.items()}

    def column(c: Expression) -> tuple[dict, str]:
        if not isinstance(c, Column):
            raise AnalysisException(f"{c.to_sql()} is not a column; JSON predicates compare columns with literals")
        name = ".".join(c.parts)
        t = lookup.get(name.lower())
        vt = _value_type(t) if t is not None else None
        if vt is None:
            raise AnalysisException(f"column {c.to_sql()} has no JSON predicate value type"
                                    f"{'' if t is None else f' (it is {t})'}")
        return {"op": "column", "name": name, "valueType": vt}, vt

    def literal(e: Expression, vt: str) -> dict:
        """A constant read as the column's type (as Spark casts a literal compared with it)."""
        if e.columns():
            raise AnalysisException(f"{e.to_sql()} is neither a column nor a constant")
        target = VALUE_TYPES[vt]
        if isinstance(e, Literal) and (e.type == target or e.value is None):
            v = e.value
        else:
            v, _ = constant_value(Cast(e, target))
        if v is None:
            raise AnalysisException("NULL cannot be a JSON predicate literal (a comparison with NULL is never true)")
        return {"op": "literal", "value": _text(v, vt), "valueType": vt}

    def cmp(op: str, a: Expression, b: Expression) -> dict:
        if isinstance(a, Column):
            ja, vt = column(a)
            return {"op": _JSON_OPS[op], "children": [ja, literal(b, vt) if not isinstance(b, Column) else column(b)[0]]}
        if isinstance(b, Column):
            jb, vt = column(b)
            return {"op": _JSON_OPS[op], "children": [literal(a, vt), jb]}
        raise AnalysisException(f"a JSON predicate compares a column: {a.to_sql()} {op} {b.to_sql()}")

    def nary(op: str, parts: list[dict]) -> dict:
        flat: list[dict] = []
        for p in parts:
            flat.extend(p["children"] if p.get("op") == op else [p])
        return flat[0] if len(flat) == 1 else {"op": op, "children": flat}

    def conv(e: Expression) -> dict:
        if isinstance(e, And):
            return nary("and", [conv(e.left), conv(e.right)])
        if isinstance(e, Or):
            return nary("or", [conv(e.left), conv(e.right)])
        if isinstance(e, Not):
            return {"op": "not", "children": [conv(e.child)]}
        if isinstance(e, IsNull):
            return {"op": "isNull", "children": [column(e.child)[0]]}
        if isinstance(e, Comparison):
            if e.op == "<>":
                return {"op": "not", "children": [cmp("=", e.left, e.right)]}
            if e.op == "<=>":
                raise AnalysisException(f"<=> has no JSON predicate form: {e.to_sql()}")
            return cmp(e.op, e.left, e.right)
        if isinstance(e, In):
            return nary("or", [cmp("=", e.value, i) for i in e.items])
        if isinstance(e, Between):
            return nary("and", [cmp(">=", e.value, e.low), cmp("<=", e.value, e.high)])
        raise AnalysisException(f"{e.to_sql()} has no JSON predicate form")

    if not partial:
        return conv(expr)
    kept = []
    for c in conjuncts(expr):
        try:
            kept.append(conv(c))
        except AnalysisException:
            continue
    if not kept:
        raise AnalysisException(f"no part of {expr.to_sql()} has a JSON predicate form")
    return nary("and", kept)
