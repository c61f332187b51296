"""File pruning for `/query` (spec "SQL Expressions for Filtering", "JSON predicates for
Filtering").

Owns: parsing `jsonPredicateHints` (a JSON tree of ops) and the SQL `predicateHints` (a small SQL
subset, parsed with sqlglot into the same tree), and deciding per file whether it may hold a
matching row, from its partition values and its stats (minValues / maxValues / nullCount /
numRecords).

Evaluation on files is three-valued and conservative: for a predicate p we compute `may_true(p)` (some row
of the file might satisfy p) and `may_false(p)` (some row might make p false). A file is dropped
only when `may_true(root)` is surely False. Anything unknown (missing stats, an uncastable value, a
column-to-column comparison) counts as "might". An invalid tree means no filtering at all.

Rows: the client applies the hints it sends to the rows it returns (`json_predicate` refuses an
invalid tree by name; `row_filter` compiles a tree to a pyarrow compute expression).
"""

from __future__ import annotations

import json
from datetime import date, datetime, timedelta, timezone
from typing import Any

from ..errors import DeltaError

__all__ = ["Predicate", "PredicateError", "parse_json_predicate", "parse_sql_predicates", "FileContext",
           "json_predicate", "row_filter"]

_LEAF = {"column", "literal"}
_CMP = {"equal", "lessThan", "lessThanOrEqual", "greaterThan", "greaterThanOrEqual"}
_TYPES = {"bool", "boolean", "int", "long", "string", "date", "float", "double", "timestamp"}
_MAX_DEPTH = 64
_MAX_NODES = 10_000


class PredicateError(DeltaError, ValueError):
    """A predicate tree that cannot be used (filtering is skipped)."""


def _convert(value: Any, vt: str) -> Any:
    """A value (a literal's string, a partition value string, a stat) as a comparable Python value."""
    if value is None:
        return None
    if vt in ("int", "long"):
        return int(value) if not isinstance(value, str) else int(value.strip())
    if vt in ("float", "double"):
        return float(value)
    if vt in ("bool", "boolean"):
        if isinstance(value, bool):
            return value
        s = str(value).strip().lower()
        if s in ("true", "false"):
            return s == "true"
        raise ValueError(f"not a boolean: {value!r}")
    if vt == "string":
        return str(value)
    if vt == "date":
        if isinstance(value, date):
            return value
        return date.fromisoformat(str(value).strip()[:10])
    if vt == "timestamp":
        if isinstance(value, (int, float)):
            return int(value)
        s = str(value).strip().replace(" ", "T")
        if s.endswith("Z"):
            s = s[:-1] + "+00:00"
        dt = datetime.fromisoformat(s)
        if dt.tzinfo is None:
            dt = dt.replace(tzinfo=timezone.utc)
        return (dt - datetime(1970, 1, 1, tzinfo=timezone.utc)) // timedelta(microseconds=1)
    raise ValueError(f"unsupported valueType {vt!r}")


class Predicate:
    """A validated predicate tree (the spec's JSON shape)."""

    def __init__(self, tree: dict):
        self.tree = tree
        self._count = 0
        self._validate(tree, 0)

    def _validate(self, node: Any, depth: int) -> None:
        self._count += 1
        if depth > _MAX_DEPTH or self._count > _MAX_NODES:
            raise PredicateError("predicate too deep or too large")
        if not isinstance(node, dict) or not isinstance(node.get("op"), str):
            raise PredicateError("every node needs an op")
        op = node["op"]
        kids = node.get("children") or []
        if not isinstance(kids, list):
            raise PredicateError("children must be a list")
        if op == "column":
            if not isinstance(node.get("name"), str) or node.get("valueType") not in _TYPES:
                raise PredicateError("column needs name and a known valueType")
        elif op == "literal":
            if node.get("valueType") not in _TYPES or "value" not in node:
                raise PredicateError("literal needs value and a known valueType")
            try:
                _convert(node["value"], node["valueType"])
            except (ValueError, TypeError) as e:
                raise PredicateError(f"bad literal: {e}") from None
        elif op in _CMP:
            if len(kids) != 2 or any(not isinstance(k, dict) or k.get("op") not in _LEAF for k in kids):
                raise PredicateError(f"{op} needs two leaf children")
        elif op == "isNull":
            if len(kids) != 1 or not isinstance(kids[0], dict) or kids[0].get("op") != "column":
                raise PredicateError("isNull needs one column child")
        elif op == "not":
            if len(kids) != 1:
                raise PredicateError("not needs one child")
        elif op in ("and", "or"):
            if len(kids) < 2:
                raise PredicateError(f"{op} needs at least two children")
        else:
            raise PredicateError(f"unknown op {op!r}")
        for k in kids:
            self._validate(k, depth + 1)

    def may_match(self, ctx: "FileContext") -> bool:
        try:
            return _may(self.tree, ctx)[0]
        except Exception:
            return True


class FileContext:
    """What is known about one file: partition values and parsed stats; column names are matched
    case-insensitively and mapped to physical names (column mapping) by `physical`."""

    __slots__ = ("pv", "stats", "physical", "partition_cols")

    def __init__(self, partition_values: dict | None, stats: dict | None, physical: dict[str, str],
                 partition_cols: set[str]):
        self.pv = {k.lower(): v for k, v in (partition_values or {}).items()}
        self.stats = stats or {}
        self.physical = physical
        self.partition_cols = partition_cols

    def column(self, name: str, vt: str):
        """(min, max, may_have_null, may_have_value) of the column in this file."""
        lname = name.lower()
        phys = self.physical.get(lname, name)
        if lname in self.partition_cols:
            raw = self.pv.get(phys.lower(), self.pv.get(lname))
            if raw is None or raw == "":
                return None, None, True, False
            v = _convert(raw, vt)
            return v, v, False, True
        parts = phys.split(".")

        def get(section):
            d = self.stats.get(section)
            for p in parts:
                if not isinstance(d, dict):
                    return None
                d = next((d[k] for k in d if k.lower() == p.lower()), None)
            return d

        n = self.stats.get("numRecords")
        nc = get("nullCount")
        lo, hi = get("minValues"), get("maxValues")
        if isinstance(lo, dict) or isinstance(hi, dict):
            lo = hi = None
        lo = _convert(lo, vt) if lo is not None else None
        hi = _convert(hi, vt) if hi is not None else None
        if vt == "timestamp" and hi is not None:
            hi += 1000  # stats are truncated to milliseconds
        may_null = True if not isinstance(nc, int) else nc > 0
        may_value = True
        if isinstance(nc, int) and isinstance(n, int) and nc >= n:
            may_value = False
        if isinstance(n, int) and n == 0:
            may_null = may_value = False
        return lo, hi, may_null, may_value


def _leaf(node: dict, ctx: FileContext):
    if node["op"] == "literal":
        v = _convert(node["value"], node["valueType"])
        return v, v, v is None, v is not None
    return ctx.column(node["name"], node["valueType"])


def _cmp_possible(op: str, alo, ahi, blo, bhi) -> tuple[bool, bool]:
    """(may be true, may be false) of `a op b` for a in [alo, ahi], b in [blo, bhi]; None bounds
    are unknown."""
    unknown = alo is None or ahi is None or blo is None or bhi is None
    if unknown:
        return True, True
    if op == "equal":
        t = not (ahi < blo or alo > bhi)
        f = not (alo == ahi == blo == bhi)
    elif op == "lessThan":
        t = alo < bhi
        f = ahi >= blo
    elif op == "lessThanOrEqual":
        t = alo <= bhi
        f = ahi > blo
    elif op == "greaterThan":
        t = ahi > blo
        f = alo <= bhi
    else:  # greaterThanOrEqual
        t = ahi >= blo
        f = alo < bhi
    return t, f


def _may(node: dict, ctx: FileContext) -> tuple[bool, bool]:
    op = node["op"]
    if op == "and":
        rs = [_may(k, ctx) for k in node["children"]]
        return all(r[0] for r in rs), any(r[1] for r in rs)
    if op == "or":
        rs = [_may(k, ctx) for k in node["children"]]
        return any(r[0] for r in rs), all(r[1] for r in rs)
    if op == "not":
        t, f = _may(node["children"][0], ctx)
        return f, t
    if op == "isNull":
        try:
            _, _, may_null, may_value = _leaf(node["children"][0], ctx)
        except (ValueError, TypeError):
            return True, True
        return may_null, may_value
    if op in _CMP:
        a, b = node["children"]
        try:
            alo, ahi, _, aval = _leaf(a, ctx)
            blo, bhi, _, bval = _leaf(b, ctx)
        except (ValueError, TypeError):
            return True, True
        if not aval or not bval:  # comparisons with null are null: neither true nor false
            return False, False
        try:
            return _cmp_possible(op, alo, ahi, blo, bhi)
        except TypeError:
            return True, True
    return True, True


def parse_json_predicate(text: Any) -> Predicate | None:
    """A Predicate from `jsonPredicateHints` (a JSON string, or an already-decoded object); None
    when it is absent or invalid (no filtering)."""
    if text is None:
        return None
    try:
        tree = json.loads(text) if isinstance(text, str) else text
        return Predicate(tree)
    except (ValueError, PredicateError, RecursionError):
        return None


# --- SQL hints --------------------------------------------------------------------------------------

_SQL_TYPE = {"string": "string", "integer": "int", "int": "int", "long": "long", "short": "int", "byte": "int",
             "float": "float", "double": "double", "boolean": "bool", "date": "date", "timestamp": "timestamp",
             "timestamp_ntz": "timestamp"}


def _sql_to_tree(e, types: dict[str, str]) -> dict:
    from sqlglot import exp

    def leaf(x, other):
        if isinstance(x, exp.Column):
            name = x.name
            vt = types.get(name.lower())
            if vt is None:
                raise PredicateError(f"unknown column {name}")
            return {"op": "column", "name": name, "valueType": vt}
        if isinstance(x, exp.Literal) or isinstance(x, exp.Boolean) or isinstance(x, exp.Cast) or isinstance(x, exp.Neg):
            col = other if isinstance(other, exp.Column) else None
            vt = types.get(col.name.lower()) if col is not None else None
            if vt is None:
                raise PredicateError("literal compared with a non-column")
            if isinstance(x, exp.Cast):
                x = x.this
            if isinstance(x, exp.Boolean):
                val = "true" if x.this else "false"
            elif isinstance(x, exp.Neg):
                val = "-" + x.this.name
            else:
                val = x.name
            return {"op": "literal", "value": val, "valueType": vt}
        raise PredicateError(f"unsupported operand {x.sql()}")

    cmp = {exp.EQ: "equal", exp.LT: "lessThan", exp.LTE: "lessThanOrEqual", exp.GT: "greaterThan",
           exp.GTE: "greaterThanOrEqual"}
    if isinstance(e, exp.Paren):
        return _sql_to_tree(e.this, types)
    if isinstance(e, exp.And):
        return {"op": "and", "children": [_sql_to_tree(e.left, types), _sql_to_tree(e.right, types)]}
    if isinstance(e, exp.Or):
        return {"op": "or", "children": [_sql_to_tree(e.left, types), _sql_to_tree(e.right, types)]}
    if isinstance(e, exp.Not):
        return {"op": "not", "children": [_sql_to_tree(e.this, types)]}
    if isinstance(e, exp.Is) and isinstance(e.expression, exp.Null):
        return {"op": "isNull", "children": [leaf(e.this, None)]}
    if isinstance(e, exp.NEQ):
        return {"op": "not", "children": [_sql_to_tree(exp.EQ(this=e.left, expression=e.right), types)]}
    for cls, op in cmp.items():
        if isinstance(e, cls):
            return {"op": op, "children": [leaf(e.left, e.right), leaf(e.right, e.left)]}
    raise PredicateError(f"unsupported SQL expression {e.sql()}")


def parse_sql_predicates(hints: Any, schema) -> Predicate | None:
    """The conjunction of the SQL hints that parse (others are skipped); None when none does.
    Column value types come from the table schema (top-level primitive columns only)."""
    if not isinstance(hints, list):
        return None
    import sqlglot

    types = {}
    for f in schema.fields:
        t = getattr(f.type, "name", None) or str(f.type)
        t = str(t).lower()
        if t.startswith("decimal"):
            t = "double"
        if t in _SQL_TYPE:
            types[f.name.lower()] = _SQL_TYPE[t]
    trees = []
    for h in hints:
        if not isinstance(h, str) or len(h) > 10_000:
            continue
        try:
            trees.append(Predicate(_sql_to_tree(sqlglot.parse_one(h), types)).tree)
        except Exception:
            continue
    if not trees:
        return None
    return Predicate(trees[0] if len(trees) == 1 else {"op": "and", "children": trees})


# --- rows (the client applies the hints it sends to the rows it returns) ----------------------------

def json_predicate(text: Any) -> Predicate:
    """A Predicate from `jsonPredicateHints` (a JSON string or object), or PredicateError saying
    what is wrong with it (the client refuses hints it cannot apply)."""
    try:
        tree = json.loads(text) if isinstance(text, (str, bytes)) else text
    except ValueError as e:
        raise PredicateError(f"jsonPredicateHints is not valid JSON: {e}") from None
    return Predicate(tree)


_ARROW_TYPE = {"bool": "bool_", "boolean": "bool_", "int": "int32", "long": "int64", "string": "string",
               "date": "date32", "float": "float32", "double": "float64"}


def _arrow_type(vt: str):
    import pyarrow as pa

    if vt == "timestamp":
        return pa.timestamp("us", tz="UTC")
    return getattr(pa, _ARROW_TYPE[vt])()


def row_filter(pred: Predicate, columns: dict[str, Any]):
    """`pred` as a `pyarrow.compute.Expression` over rows: SQL semantics (a comparison with null
    is null, `and`/`or`/`not` three-valued; filtering keeps the rows where it is true). `columns`
    maps the table's column names to their Arrow types; names match case-insensitively (nested
    fields by dotted names). Column values are cast to the node's valueType, as the spec says."""
    import pyarrow as pa
    import pyarrow.compute as pc

    by_lower = {n.lower(): n for n in columns}

    def column(node: dict):
        name = node["name"]
        real = by_lower.get(name.lower())
        if real is not None:
            f, typ = pc.field(real), columns[real]
        else:
            parts = name.split(".")
            top = by_lower.get(parts[0].lower())
            if top is None or len(parts) == 1:
                raise PredicateError(f"the predicate names column {name!r}, which the table does not have")
            typ = columns[top]
            path = [top]
            for p in parts[1:]:
                if not pa.types.is_struct(typ):
                    raise PredicateError(f"the predicate names column {name!r}, which the table does not have")
                child = next((typ.field(i) for i in range(typ.num_fields) if typ.field(i).name.lower() == p.lower()),
                             None)
                if child is None:
                    raise PredicateError(f"the predicate names column {name!r}, which the table does not have")
                path.append(child.name)
                typ = child.type
            f = pc.field(*path)
        want = _arrow_type(node["valueType"])
        if typ == want:
            return f
        if pa.types.is_timestamp(typ) and pa.types.is_timestamp(want) and typ.tz is None:
            return f.cast(pa.timestamp(typ.unit, tz="UTC")).cast(want)
        return f.cast(want)

    def literal(node: dict):
        vt = node["valueType"]
        v = _convert(node["value"], vt)
        return pc.scalar(pa.scalar(v, _arrow_type(vt)))

    def build(node: dict):
        op = node["op"]
        if op == "column":
            return column(node)
        if op == "literal":
            return literal(node)
        kids = node.get("children") or []
        if op == "and":
            out = build(kids[0])
            for k in kids[1:]:
                out = out & build(k)
            return out
        if op == "or":
            out = build(kids[0])
            for k in kids[1:]:
                out = out | build(k)
            return out
        if op == "not":
            return ~build(kids[0])
        if op == "isNull":
            return build(kids[0]).is_null()
        a, b = build(kids[0]), build(kids[1])
        return {"equal": lambda: a == b, "lessThan": lambda: a < b, "lessThanOrEqual": lambda: a <= b,
                "greaterThan": lambda: a > b, "greaterThanOrEqual": lambda: a >= b}[op]()

    return build(pred.tree)
