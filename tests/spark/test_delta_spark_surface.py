"""The delta-spark Python API, name by name: `delta.tables`, `delta.exceptions`, `delta.pip_utils`
and `delta` of delta-spark 4.4.1, against tahoe's mirrors `tahoe.spark.tables`,
`tahoe.spark.exceptions`, `tahoe.spark.pip_utils` and `tahoe.spark` (a delta-spark user replaces
`delta.` by `tahoe.spark.` in the imports).

The pinned lists below were written from delta-spark 4.4.1's sources (python/delta/tables.py,
exceptions/__init__.py, pip_utils.py, __init__.py: every public class and function, every public
method with its parameters' names, kinds and defaults, and its return annotation), not from
tahoe's. A difference fails unless DIFFERENCES names it — and the README lists each with its
reason (checked below).
"""

from __future__ import annotations

import inspect
from pathlib import Path

import pytest

README = (Path(__file__).resolve().parents[2] / "README.md").read_text()

MODULES = {
    "delta": ["DeltaTable", "configure_spark_with_delta_pip", "__version__"],
    "delta.tables": ["DeltaMergeBuilder", "DeltaOptimizeBuilder", "DeltaTable", "DeltaTableBuilder", "IdentityGenerator"],
    "delta.exceptions": ["DeltaConcurrentModificationException", "ConcurrentWriteException", "MetadataChangedException",
                         "ProtocolChangedException", "ConcurrentAppendException", "ConcurrentDeleteReadException",
                         "ConcurrentDeleteDeleteException", "ConcurrentTransactionException"],
    "delta.pip_utils": ["configure_spark_with_delta_pip"],
}

# (class, method, kind, ((parameter, kind, default repr or None), ...) without self/cls, return annotation)
METHODS = [
    ("DeltaTable", "toDF", "method", (), 'DataFrame'),
    ("DeltaTable", "alias", "method", (('aliasName', 'POSITIONAL_OR_KEYWORD', None),), 'DeltaTable'),
    ("DeltaTable", "generate", "method", (('mode', 'POSITIONAL_OR_KEYWORD', None),), 'None'),
    ("DeltaTable", "delete", "method", (('condition', 'POSITIONAL_OR_KEYWORD', 'None'),), 'None'),
    ("DeltaTable", "update", "method", (('condition', 'POSITIONAL_OR_KEYWORD', 'None'), ('set', 'POSITIONAL_OR_KEYWORD', 'None')), 'None'),
    ("DeltaTable", "merge", "method", (('source', 'POSITIONAL_OR_KEYWORD', None), ('condition', 'POSITIONAL_OR_KEYWORD', None)), 'DeltaMergeBuilder'),
    ("DeltaTable", "vacuum", "method", (('retentionHours', 'POSITIONAL_OR_KEYWORD', 'None'),), 'DataFrame'),
    ("DeltaTable", "history", "method", (('limit', 'POSITIONAL_OR_KEYWORD', 'None'),), 'DataFrame'),
    ("DeltaTable", "detail", "method", (), 'DataFrame'),
    ("DeltaTable", "convertToDelta", "classmethod", (('sparkSession', 'POSITIONAL_OR_KEYWORD', None), ('identifier', 'POSITIONAL_OR_KEYWORD', None), ('partitionSchema', 'POSITIONAL_OR_KEYWORD', 'None')), 'DeltaTable'),
    ("DeltaTable", "forPath", "classmethod", (('sparkSession', 'POSITIONAL_OR_KEYWORD', None), ('path', 'POSITIONAL_OR_KEYWORD', None), ('hadoopConf', 'POSITIONAL_OR_KEYWORD', '{}')), 'DeltaTable'),
    ("DeltaTable", "forName", "classmethod", (('sparkSession', 'POSITIONAL_OR_KEYWORD', None), ('tableOrViewName', 'POSITIONAL_OR_KEYWORD', None)), 'DeltaTable'),
    ("DeltaTable", "create", "classmethod", (('sparkSession', 'POSITIONAL_OR_KEYWORD', 'None'),), 'DeltaTableBuilder'),
    ("DeltaTable", "createIfNotExists", "classmethod", (('sparkSession', 'POSITIONAL_OR_KEYWORD', 'None'),), 'DeltaTableBuilder'),
    ("DeltaTable", "replace", "classmethod", (('sparkSession', 'POSITIONAL_OR_KEYWORD', 'None'),), 'DeltaTableBuilder'),
    ("DeltaTable", "createOrReplace", "classmethod", (('sparkSession', 'POSITIONAL_OR_KEYWORD', 'None'),), 'DeltaTableBuilder'),
    ("DeltaTable", "isDeltaTable", "classmethod", (('sparkSession', 'POSITIONAL_OR_KEYWORD', None), ('identifier', 'POSITIONAL_OR_KEYWORD', None)), 'bool'),
    ("DeltaTable", "upgradeTableProtocol", "method", (('readerVersion', 'POSITIONAL_OR_KEYWORD', None), ('writerVersion', 'POSITIONAL_OR_KEYWORD', None)), 'None'),
    ("DeltaTable", "addFeatureSupport", "method", (('featureName', 'POSITIONAL_OR_KEYWORD', None),), 'None'),
    ("DeltaTable", "dropFeatureSupport", "method", (('featureName', 'POSITIONAL_OR_KEYWORD', None), ('truncateHistory', 'POSITIONAL_OR_KEYWORD', 'None')), 'None'),
    ("DeltaTable", "restoreToVersion", "method", (('version', 'POSITIONAL_OR_KEYWORD', None),), 'DataFrame'),
    ("DeltaTable", "restoreToTimestamp", "method", (('timestamp', 'POSITIONAL_OR_KEYWORD', None),), 'DataFrame'),
    ("DeltaTable", "optimize", "method", (), 'DeltaOptimizeBuilder'),
    ("DeltaTable", "clone", "method", (('target', 'POSITIONAL_OR_KEYWORD', None), ('isShallow', 'POSITIONAL_OR_KEYWORD', 'False'), ('replace', 'POSITIONAL_OR_KEYWORD', 'False'), ('properties', 'POSITIONAL_OR_KEYWORD', 'None')), 'DeltaTable'),
    ("DeltaTable", "cloneAtVersion", "method", (('version', 'POSITIONAL_OR_KEYWORD', None), ('target', 'POSITIONAL_OR_KEYWORD', None), ('isShallow', 'POSITIONAL_OR_KEYWORD', 'False'), ('replace', 'POSITIONAL_OR_KEYWORD', 'False'), ('properties', 'POSITIONAL_OR_KEYWORD', 'None')), 'DeltaTable'),
    ("DeltaTable", "cloneAtTimestamp", "method", (('timestamp', 'POSITIONAL_OR_KEYWORD', None), ('target', 'POSITIONAL_OR_KEYWORD', None), ('isShallow', 'POSITIONAL_OR_KEYWORD', 'False'), ('replace', 'POSITIONAL_OR_KEYWORD', 'False'), ('properties', 'POSITIONAL_OR_KEYWORD', 'None')), 'DeltaTable'),
    ("DeltaMergeBuilder", "whenMatchedUpdate", "method", (('condition', 'POSITIONAL_OR_KEYWORD', 'None'), ('set', 'POSITIONAL_OR_KEYWORD', 'None')), 'DeltaMergeBuilder'),
    ("DeltaMergeBuilder", "whenMatchedUpdateAll", "method", (('condition', 'POSITIONAL_OR_KEYWORD', 'None'),), 'DeltaMergeBuilder'),
    ("DeltaMergeBuilder", "whenMatchedDelete", "method", (('condition', 'POSITIONAL_OR_KEYWORD', 'None'),), 'DeltaMergeBuilder'),
    ("DeltaMergeBuilder", "whenNotMatchedInsert", "method", (('condition', 'POSITIONAL_OR_KEYWORD', 'None'), ('values', 'POSITIONAL_OR_KEYWORD', 'None')), 'DeltaMergeBuilder'),
    ("DeltaMergeBuilder", "whenNotMatchedInsertAll", "method", (('condition', 'POSITIONAL_OR_KEYWORD', 'None'),), 'DeltaMergeBuilder'),
    ("DeltaMergeBuilder", "whenNotMatchedBySourceUpdate", "method", (('condition', 'POSITIONAL_OR_KEYWORD', 'None'), ('set', 'POSITIONAL_OR_KEYWORD', 'None')), 'DeltaMergeBuilder'),
    ("DeltaMergeBuilder", "whenNotMatchedBySourceDelete", "method", (('condition', 'POSITIONAL_OR_KEYWORD', 'None'),), 'DeltaMergeBuilder'),
    ("DeltaMergeBuilder", "withSchemaEvolution", "method", (), 'DeltaMergeBuilder'),
    ("DeltaMergeBuilder", "execute", "method", (), 'DataFrame'),
    ("DeltaTableBuilder", "tableName", "method", (('identifier', 'POSITIONAL_OR_KEYWORD', None),), 'DeltaTableBuilder'),
    ("DeltaTableBuilder", "location", "method", (('location', 'POSITIONAL_OR_KEYWORD', None),), 'DeltaTableBuilder'),
    ("DeltaTableBuilder", "comment", "method", (('comment', 'POSITIONAL_OR_KEYWORD', None),), 'DeltaTableBuilder'),
    ("DeltaTableBuilder", "addColumn", "method", (('colName', 'POSITIONAL_OR_KEYWORD', None), ('dataType', 'POSITIONAL_OR_KEYWORD', None), ('nullable', 'POSITIONAL_OR_KEYWORD', 'True'), ('generatedAlwaysAs', 'POSITIONAL_OR_KEYWORD', 'None'), ('generatedByDefaultAs', 'POSITIONAL_OR_KEYWORD', 'None'), ('comment', 'POSITIONAL_OR_KEYWORD', 'None')), 'DeltaTableBuilder'),
    ("DeltaTableBuilder", "addColumns", "method", (('cols', 'POSITIONAL_OR_KEYWORD', None),), 'DeltaTableBuilder'),
    ("DeltaTableBuilder", "partitionedBy", "method", (('cols', 'VAR_POSITIONAL', None),), 'DeltaTableBuilder'),
    ("DeltaTableBuilder", "clusterBy", "method", (('cols', 'VAR_POSITIONAL', None),), 'DeltaTableBuilder'),
    ("DeltaTableBuilder", "property", "method", (('key', 'POSITIONAL_OR_KEYWORD', None), ('value', 'POSITIONAL_OR_KEYWORD', None)), 'DeltaTableBuilder'),
    ("DeltaTableBuilder", "execute", "method", (), 'DeltaTable'),
    ("DeltaOptimizeBuilder", "where", "method", (('partitionFilter', 'POSITIONAL_OR_KEYWORD', None),), 'DeltaOptimizeBuilder'),
    ("DeltaOptimizeBuilder", "executeCompaction", "method", (), 'DataFrame'),
    ("DeltaOptimizeBuilder", "executeZOrderBy", "method", (('cols', 'VAR_POSITIONAL', None),), 'DataFrame'),
    ("IdentityGenerator", "__init__", "method", (('start', 'POSITIONAL_OR_KEYWORD', '1'), ('step', 'POSITIONAL_OR_KEYWORD', '1')), 'None'),
]

FUNCTIONS = {
    "configure_spark_with_delta_pip": ((("spark_session_builder", "POSITIONAL_OR_KEYWORD", None),
                                        ("extra_packages", "POSITIONAL_OR_KEYWORD", "None")), "Builder"),
}

# tahoe's differences from delta-spark 4.4.1, each listed in the README's delta-spark section with
# its reason: (class, method) -> what differs
DIFFERENCES = {
    ("DeltaTable", "convertToDelta"): ("extra parameter", "collectStats"),   # after delta-spark's, with a default
    ("DeltaTable", "delete"): ("returns", "DataFrame | None"),   # None on classic Spark, a DataFrame over Spark
    ("DeltaTable", "update"): ("returns", "DataFrame | None"),   # Connect: delta-spark's two clients return one each
    ("DeltaTable", "vacuum"): ("returns", "DataFrame | None"),
}


def _tahoe(module: str):
    import importlib

    return importlib.import_module("tahoe.spark" + module[len("delta"):])


def _signature(fn) -> tuple[tuple, str | None]:
    s = inspect.signature(fn)
    params = tuple((n, p.kind.name, None if p.default is inspect.Parameter.empty else repr(p.default))
                   for n, p in s.parameters.items() if n not in ("self", "cls"))
    ret = s.return_annotation
    if ret is inspect.Signature.empty:
        return params, None
    ret = ret if isinstance(ret, str) else getattr(ret, "__name__", str(ret))
    ret = ret.strip("'\"")
    return params, ret if "|" in ret else ret.split(".")[-1]


@pytest.mark.parametrize("module", sorted(MODULES))
def test_every_public_name_is_there(module):
    mod = _tahoe(module)
    missing = [n for n in MODULES[module] if not hasattr(mod, n)]
    assert missing == [], f"{module}: {missing}"


@pytest.mark.parametrize("cls,method,kind,params,ret", METHODS, ids=[f"{m[0]}.{m[1]}" for m in METHODS])
def test_every_method_as_delta_spark_declares_it(cls, method, kind, params, ret):
    import tahoe.spark.tables as tables

    c = getattr(tables, cls)
    attr = inspect.getattr_static(c, method)
    got_kind = "classmethod" if isinstance(attr, classmethod) else "staticmethod" if isinstance(attr, staticmethod) \
        else "method"
    assert got_kind == kind
    got_params, got_ret = _signature(getattr(c, method))
    what, detail = DIFFERENCES.get((cls, method), (None, None))
    if what == "extra parameter":
        assert got_params[:len(params)] == params and [p[0] for p in got_params[len(params):]] == [detail]
        assert got_params[-1][2] is not None            # with a default: delta-spark code never passes it
    else:
        assert got_params == params
    assert got_ret == (detail if what == "returns" else ret)


def test_functions_and_exceptions():
    from tahoe.spark import pip_utils
    import tahoe.spark.exceptions as exceptions
    from tahoe.errors import DeltaError

    for name, (params, ret) in FUNCTIONS.items():
        assert _signature(getattr(pip_utils, name)) == (params, ret)
    for name in MODULES["delta.exceptions"]:
        cls = getattr(exceptions, name)
        assert isinstance(cls, type) and issubclass(cls, DeltaError)   # delta-spark's: PySparkException


def test_every_difference_is_in_the_readme():
    section = README[README.index("### Differences from delta-spark"):]
    for (cls, method), (what, detail) in DIFFERENCES.items():
        line = next((ln for ln in section.splitlines() if f"`{method}`" in ln), "")
        assert line and (detail in line or what == "returns"), (cls, method, what, detail)


def test_conflict_exceptions_carry_delta_sparks_error_classes():
    """delta-spark's DeltaThrowable error classes of its conflict exceptions (getErrorClass)."""
    import tahoe.spark.exceptions as exceptions

    assert {n: getattr(exceptions, n).error_class for n in MODULES["delta.exceptions"][1:]} == {
        "ConcurrentWriteException": "DELTA_CONCURRENT_WRITE",
        "MetadataChangedException": "DELTA_METADATA_CHANGED",
        "ProtocolChangedException": "DELTA_PROTOCOL_CHANGED",
        "ConcurrentAppendException": "DELTA_CONCURRENT_APPEND",
        "ConcurrentDeleteReadException": "DELTA_CONCURRENT_DELETE_READ",
        "ConcurrentDeleteDeleteException": "DELTA_CONCURRENT_DELETE_DELETE",
        "ConcurrentTransactionException": "DELTA_CONCURRENT_TRANSACTION",
    }
