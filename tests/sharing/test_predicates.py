"""Three-valued file pruning by JSON and SQL predicate hints: a file is dropped only when no row
of it can match."""

from __future__ import annotations

import json

from tahoe.protocol.schema import StructType
from tahoe.sharing.predicates import FileContext, parse_json_predicate, parse_sql_predicates


def col(n, t="long"):
    return {"op": "column", "name": n, "valueType": t}


def lit(v, t="long"):
    return {"op": "literal", "value": v, "valueType": t}


def ctx(stats=None, pv=None, parts=()):
    return FileContext(pv, stats, {}, set(parts))


S = {"numRecords": 10, "minValues": {"x": 5, "d": "2024-01-02", "s": "b"},
     "maxValues": {"x": 9, "d": "2024-01-05", "s": "m"}, "nullCount": {"x": 0, "d": 2, "s": 10}}


def keep(tree, c):
    return parse_json_predicate(json.dumps(tree)).may_match(c)


def test_comparisons_on_stats():
    c = ctx(S)
    assert keep({"op": "equal", "children": [col("x"), lit("7")]}, c)
    assert not keep({"op": "equal", "children": [col("x"), lit("4")]}, c)
    assert not keep({"op": "lessThan", "children": [col("x"), lit("5")]}, c)
    assert keep({"op": "lessThanOrEqual", "children": [col("x"), lit("5")]}, c)
    assert not keep({"op": "greaterThan", "children": [col("x"), lit("9")]}, c)
    assert keep({"op": "greaterThan", "children": [lit("6"), col("x")]}, c)
    assert not keep({"op": "equal", "children": [col("d", "date"), lit("2024-01-06", "date")]}, c)
    # all-null column: no comparison can be true, isNull surely true
    assert not keep({"op": "equal", "children": [col("s", "string"), lit("c", "string")]}, c)
    assert keep({"op": "isNull", "children": [col("s", "string")]}, c)
    assert not keep({"op": "isNull", "children": [col("x")]}, c)
    assert not keep({"op": "not", "children": [{"op": "isNull", "children": [col("s", "string")]}]}, c)


def test_logic_and_unknowns():
    c = ctx(S)
    f = {"op": "equal", "children": [col("x"), lit("100")]}
    t = {"op": "equal", "children": [col("x"), lit("6")]}
    assert not keep({"op": "and", "children": [f, t]}, c)
    assert keep({"op": "or", "children": [f, t]}, c)
    assert keep({"op": "not", "children": [t]}, c)  # some rows differ from 6
    # not(x >= 5): every row has x >= 5 → no row matches
    assert not keep({"op": "not", "children": [{"op": "greaterThanOrEqual", "children": [col("x"), lit("5")]}]}, c)
    # unknown column / no stats: keep
    assert keep({"op": "equal", "children": [col("nope"), lit("1")]}, c)
    assert keep(f, ctx(None))


def test_partition_values():
    c = ctx(None, {"p": "2024-01-01", "q": None}, ["p", "q"])
    assert keep({"op": "equal", "children": [col("p", "date"), lit("2024-01-01", "date")]}, c)
    assert not keep({"op": "equal", "children": [col("P", "date"), lit("2024-01-02", "date")]}, c)
    assert keep({"op": "isNull", "children": [col("q", "string")]}, c)
    assert not keep({"op": "equal", "children": [col("q", "string"), lit("x", "string")]}, c)


def test_invalid_trees():
    assert parse_json_predicate("{") is None
    assert parse_json_predicate(json.dumps({"op": "and", "children": [col("x")]})) is None
    assert parse_json_predicate(json.dumps({"op": "equal", "children": [col("x"), lit("abc")]})) is None
    deep = col("x")
    for _ in range(200):
        deep = {"op": "not", "children": [deep]}
    assert parse_json_predicate(json.dumps(deep)) is None


def test_sql_hints():
    schema = StructType.from_json(json.dumps({"type": "struct", "fields": [
        {"name": "x", "type": "long", "nullable": True, "metadata": {}},
        {"name": "s", "type": "string", "nullable": True, "metadata": {}}]}))
    p = parse_sql_predicates(["x > 20", "garbage ((", "s = 'c'"], schema)
    assert p is not None and p.tree["op"] == "and"
    assert not p.may_match(ctx(S))
    p = parse_sql_predicates(["x <> 7"], schema)
    assert p.may_match(ctx(S))
    p = parse_sql_predicates(["x IS NOT NULL"], schema)
    assert p.may_match(ctx(S))
    assert parse_sql_predicates(["((("], schema) is None
