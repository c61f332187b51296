"""The Arrow compute functions the log core calls, taken straight from pyarrow's function registry
(`pyarrow._compute.call_function`, with pyarrow's own option classes).

Importing `pyarrow.compute` builds a Python wrapper for each of the registry's functions, a noticeable part
of a file listing's start-up where the log needs a few dozen. So the log imports this module as `pc`, and
calls `take`, `filter` and `cast` here rather than as Array/Table methods (which import `pyarrow.compute`).
Each function keeps `pyarrow.compute`'s name, arguments and defaults."""

from __future__ import annotations

import sys

import pyarrow as pa
from pyarrow._compute import (
    CastOptions, DictionaryEncodeOptions, ExtractRegexOptions, FilterOptions, IndexOptions, JoinOptions,
    MatchSubstringOptions, NullOptions, ReplaceSubstringOptions, ScalarAggregateOptions, SetLookupOptions,
    SliceOptions, StructFieldOptions, call_function,
)

__all__ = [
    "and_", "any", "all", "binary_join_element_wise", "binary_length", "cast", "count_substring", "dictionary_encode",
    "equal", "extract_regex", "fill_null", "filter", "find_substring", "if_else", "index", "index_in",
    "indices_nonzero", "invert", "is_in", "is_null", "is_valid", "match_substring", "match_substring_regex", "max",
    "not_equal", "or_", "replace_substring_regex", "starts_with", "struct_field", "sum", "take", "unique",
    "utf8_slice_codeunits", "cast_table",
]


def _call(name: str, args: list, options=None, memory_pool=None):
    return call_function(name, args, options, memory_pool)


# --- element-wise ----------------------------------------------------------------------------------

def is_valid(x, *, memory_pool=None):
    return _call("is_valid", [x], memory_pool=memory_pool)


def is_null(x, *, nan_is_null: bool = False, memory_pool=None):
    return _call("is_null", [x], NullOptions(nan_is_null=nan_is_null), memory_pool)


def invert(x, *, memory_pool=None):
    return _call("invert", [x], memory_pool=memory_pool)


def and_(x, y, *, memory_pool=None):
    return _call("and", [x, y], memory_pool=memory_pool)


def or_(x, y, *, memory_pool=None):
    return _call("or", [x, y], memory_pool=memory_pool)


def equal(x, y, *, memory_pool=None):
    return _call("equal", [x, y], memory_pool=memory_pool)


def not_equal(x, y, *, memory_pool=None):
    return _call("not_equal", [x, y], memory_pool=memory_pool)


def if_else(cond, left, right, *, memory_pool=None):
    return _call("if_else", [cond, left, right], memory_pool=memory_pool)


def fill_null(values, fill_value, *, memory_pool=None):
    """`pyarrow.compute.fill_null` with an Arrow scalar or array as the fill value."""
    return _call("coalesce", [values, fill_value], memory_pool=memory_pool)


def struct_field(values, indices, *, memory_pool=None):
    return _call("struct_field", [values], StructFieldOptions(indices), memory_pool)


def binary_length(strings, *, memory_pool=None):
    return _call("binary_length", [strings], memory_pool=memory_pool)


def binary_join_element_wise(*strings, null_handling: str = "emit_null", null_replacement: str = "",
                             memory_pool=None):
    return _call("binary_join_element_wise", list(strings), JoinOptions(null_handling, null_replacement),
                 memory_pool)


def starts_with(strings, pattern: str, *, ignore_case: bool = False, memory_pool=None):
    return _call("starts_with", [strings], MatchSubstringOptions(pattern, ignore_case=ignore_case), memory_pool)


def match_substring(strings, pattern: str, *, ignore_case: bool = False, memory_pool=None):
    return _call("match_substring", [strings], MatchSubstringOptions(pattern, ignore_case=ignore_case), memory_pool)


def match_substring_regex(strings, pattern: str, *, ignore_case: bool = False, memory_pool=None):
    return _call("match_substring_regex", [strings], MatchSubstringOptions(pattern, ignore_case=ignore_case),
                 memory_pool)


def find_substring(strings, pattern: str, *, ignore_case: bool = False, memory_pool=None):
    return _call("find_substring", [strings], MatchSubstringOptions(pattern, ignore_case=ignore_case), memory_pool)


def count_substring(strings, pattern: str, *, ignore_case: bool = False, memory_pool=None):
    return _call("count_substring", [strings], MatchSubstringOptions(pattern, ignore_case=ignore_case), memory_pool)


def extract_regex(strings, pattern: str, *, memory_pool=None):
    return _call("extract_regex", [strings], ExtractRegexOptions(pattern), memory_pool)


def replace_substring_regex(strings, pattern: str, replacement: str, *, max_replacements=None, memory_pool=None):
    return _call("replace_substring_regex", [strings],
                 ReplaceSubstringOptions(pattern, replacement, max_replacements=max_replacements), memory_pool)


def utf8_slice_codeunits(strings, start: int, stop: int | None = None, step: int = 1, *, memory_pool=None):
    return _call("utf8_slice_codeunits", [strings], SliceOptions(start, sys.maxsize if stop is None else stop, step),
                 memory_pool)


def is_in(values, value_set, *, skip_nulls: bool = False, memory_pool=None):
    return _call("is_in", [values], SetLookupOptions(value_set, skip_nulls=skip_nulls), memory_pool)


def index_in(values, value_set, *, skip_nulls: bool = False, memory_pool=None):
    return _call("index_in", [values], SetLookupOptions(value_set, skip_nulls=skip_nulls), memory_pool)


def cast(arr, target_type, *, safe: bool = True, memory_pool=None):
    """`arr.cast(target_type)` of an array or a chunked array."""
    return _call("cast", [arr], CastOptions(target_type, allow_int_overflow=not safe, allow_time_truncate=not safe,
                                            allow_time_overflow=not safe, allow_decimal_truncate=not safe,
                                            allow_float_truncate=not safe, allow_invalid_utf8=not safe),
                 memory_pool)


def cast_table(t: pa.Table, schema: pa.Schema) -> pa.Table:
    """`t.cast(schema)`: each column cast to its field's type (same names, same order)."""
    if t.schema.names != schema.names:
        raise ValueError(f"cannot cast a table of columns {t.schema.names} to {schema.names}")
    cols = [c if c.type == f.type else cast(c, f.type) for c, f in zip(t.columns, schema)]
    return pa.Table.from_arrays(cols, schema=schema)


# --- selections ------------------------------------------------------------------------------------

def take(data, indices, *, memory_pool=None):
    """`data.take(indices)` of an array, chunked array or table."""
    return _call("take", [data, indices], memory_pool=memory_pool)


def filter(data, mask, *, null_selection_behavior: str = "drop", memory_pool=None):  # noqa: A001 - pyarrow's name
    """`data.filter(mask)` of an array, chunked array or table."""
    return _call("filter", [data, mask], FilterOptions(null_selection_behavior), memory_pool)


def indices_nonzero(values, *, memory_pool=None):
    return _call("indices_nonzero", [values], memory_pool=memory_pool)


def unique(values, *, memory_pool=None):
    return _call("unique", [values], memory_pool=memory_pool)


def dictionary_encode(values, *, null_encoding: str = "mask", memory_pool=None):
    return _call("dictionary_encode", [values], DictionaryEncodeOptions(null_encoding), memory_pool)


def index(data, value, *, memory_pool=None) -> pa.Int64Scalar:
    """The first position of `value` (an Arrow scalar) in `data`, -1 when absent."""
    return _call("index", [data], IndexOptions(value), memory_pool)


# --- aggregates ------------------------------------------------------------------------------------

def any(values, *, skip_nulls: bool = True, min_count: int = 1, memory_pool=None):  # noqa: A001 - pyarrow's name
    return _call("any", [values], ScalarAggregateOptions(skip_nulls=skip_nulls, min_count=min_count), memory_pool)


def all(values, *, skip_nulls: bool = True, min_count: int = 1, memory_pool=None):  # noqa: A001 - pyarrow's name
    return _call("all", [values], ScalarAggregateOptions(skip_nulls=skip_nulls, min_count=min_count), memory_pool)


def max(values, *, skip_nulls: bool = True, min_count: int = 1, memory_pool=None):  # noqa: A001 - pyarrow's name
    return _call("max", [values], ScalarAggregateOptions(skip_nulls=skip_nulls, min_count=min_count), memory_pool)


def sum(values, *, skip_nulls: bool = True, min_count: int = 1, memory_pool=None):  # noqa: A001 - pyarrow's name
    return _call("sum", [values], ScalarAggregateOptions(skip_nulls=skip_nulls, min_count=min_count), memory_pool)
