"""The Delta Sharing JSON predicate tree ↔ expressions: the spec's examples round trip, SQL
renders to the spec's ops, invalid trees are refused."""

from __future__ import annotations

import datetime as dt
import json

import pyarrow as pa
import pytest

from tahoe.errors import AnalysisException
from tahoe.expressions import (
    And, Column, Comparison, IsNull, Literal, Not, Scope, from_sharing_json, json_column_types, matches, parse,
    to_sharing_json,
)
from tahoe.protocol.schema import DATE, INTEGER, LONG, STRING, StructField, StructType

# the three examples of the spec's "JSON predicates for Filtering" (the third has a trailing comma
# after its only child in the spec, which JSON does not allow; it is removed here)
SPEC_EXAMPLES = [
    """{"op": "equal", "children": [
         {"op": "column", "name":"hireDate", "valueType":"date"},
         {"op":"literal","value":"2021-04-29","valueType":"date"}]}""",
    """{"op":"and", "children":[
         {"op":"equal", "children":[
            {"op":"column","name":"hireDate","valueType":"date"},
            {"op":"literal","value":"2021-04-29","valueType":"date"}]},
         {"op":"lessThan","children":[
            {"op":"column","name":"id","valueType":"int"},
            {"op":"literal","value":"25","valueType":"int"}]}]}""",
    """{"op": "not", "children": [
         {"op": "isNull", "children":[{"op":"column","name":"id","valueType":"int"}]}]}""",
]
HIRE = Comparison("=", Column(("hireDate",)), Literal(dt.date(2021, 4, 29), DATE))
EXPECTED = [HIRE, And(HIRE, Comparison("<", Column(("id",)), Literal(25, INTEGER))), Not(IsNull(Column(("id",))))]


@pytest.mark.parametrize("i", range(3))
def test_spec_examples_round_trip(i):
    obj = json.loads(SPEC_EXAMPLES[i])
    e = from_sharing_json(obj)
    assert e == EXPECTED[i]
    assert to_sharing_json(e, json_column_types(obj)) == obj
    assert from_sharing_json(SPEC_EXAMPLES[i]) == e   # the JSON text too


def test_spec_examples_select_the_rows_they_describe():
    rows = pa.table({"hireDate": pa.array([dt.date(2021, 4, 29), dt.date(2021, 4, 30), None]),
                     "id": pa.array([24, 1, None], pa.int32())})
    got = [matches(from_sharing_json(t), Scope.of(rows)).to_pylist() for t in SPEC_EXAMPLES]
    assert got == [[True, False, False], [True, False, False], [True, True, False]]


def test_sql_to_json_ops():
    schema = StructType([StructField("hireDate", DATE), StructField("id", LONG), StructField("s", STRING)])
    col = lambda n, vt: {"op": "column", "name": n, "valueType": vt}  # noqa: E731
    lit = lambda v, vt: {"op": "literal", "value": v, "valueType": vt}  # noqa: E731
    assert to_sharing_json(parse("hireDate = '2021-04-29' AND id < 25 AND s IS NOT NULL"), schema) == {
        "op": "and", "children": [
            {"op": "equal", "children": [col("hireDate", "date"), lit("2021-04-29", "date")]},
            {"op": "lessThan", "children": [col("id", "long"), lit("25", "long")]},
            {"op": "not", "children": [{"op": "isNull", "children": [col("s", "string")]}]}]}
    assert to_sharing_json(parse("id <> 3 OR 10 <= id"), schema) == {"op": "or", "children": [
        {"op": "not", "children": [{"op": "equal", "children": [col("id", "long"), lit("3", "long")]}]},
        {"op": "lessThanOrEqual", "children": [lit("10", "long"), col("id", "long")]}]}
    assert to_sharing_json(parse("id IN (1, 2)"), schema) == {"op": "or", "children": [
        {"op": "equal", "children": [col("id", "long"), lit("1", "long")]},
        {"op": "equal", "children": [col("id", "long"), lit("2", "long")]}]}
    assert to_sharing_json(parse("id BETWEEN 1 AND 2"), schema)["op"] == "and"
    with pytest.raises(AnalysisException, match="JSON"):
        to_sharing_json(parse("id + 1 > 2"), schema)
    # partial: what JSON cannot say is left out (a weaker hint)
    assert to_sharing_json(parse("upper(s) = 'A' AND id = 1"), schema, partial=True) == \
        {"op": "equal", "children": [col("id", "long"), lit("1", "long")]}


@pytest.mark.parametrize("tree", [
    {"op": "and", "children": [{"op": "column", "name": "x", "valueType": "long"}]},
    {"op": "equal", "children": [{"op": "column", "name": "x", "valueType": "long"},
                                 {"op": "literal", "value": "abc", "valueType": "long"}]},
    {"op": "equal", "children": [{"op": "column", "name": "x", "valueType": "decimal"},
                                 {"op": "literal", "value": "1", "valueType": "long"}]},
    {"op": "isNull", "children": [{"op": "literal", "value": "1", "valueType": "long"}]},
    {"op": "like", "children": []},
    {"children": []},
    "{",
])
def test_invalid_trees_are_refused(tree):
    with pytest.raises(AnalysisException, match="invalid JSON predicate"):
        from_sharing_json(tree)
