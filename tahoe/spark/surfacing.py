"""How tahoe's errors reach a Spark user: named first, with Spark's report kept. An error raised inside the
`delta` data source reaches the caller as a Spark exception naming tahoe's error only at its end.

  1. `surfaced(exc)` returns an exception that is both tahoe's class and Spark's original one, with tahoe's
     message; Spark's full report is attached as a note and kept as `.spark_error`.
  2. `DATA_SOURCE_NOT_FOUND` on `delta` gets a first line saying to register tahoe's source.
  3. The calls where a data-source error reaches the caller (`load`, `save`, `saveAsTable`, `insertInto`,
     `DataFrameWriterV2`'s terminal methods, `SparkSession.sql`) pass errors through `surfaced`
     (`tahoe.spark.patches`); errors raised later by an action are not rewritten."""

from __future__ import annotations

import importlib
import re

from ..errors import DeltaError

__all__ = ["surfaced", "spark_facing", "restated", "REGISTER_HINT"]

REGISTER_HINT = ("the `delta` data source is not registered in this Spark session: tahoe provides "
                 "format('delta') as a Python data source, which Spark finds by itself where tahoe is "
                 "installed with pip (its module pyspark_tahoe_delta); elsewhere (tahoe shipped with "
                 "addPyFile) call tahoe.spark.register(spark) once per session")

_ERROR_LINE = re.compile(r"^(tahoe(?:\.\w+)*)\.(\w+): ", re.M)
_NOT_FOUND = re.compile(r"\[DATA_SOURCE_NOT_FOUND\][^\n]*data source: delta\b", re.I)
_STOP = re.compile(r"^(\s*$| SQLSTATE|\s+at |JVM stacktrace|Caused by|Driver stacktrace|\tat )")

_CONDITION = re.compile(r"^\[([A-Z_][A-Z0-9_]*(?:\.[A-Z0-9_]+)?)\] ")

_classes: dict[tuple[type, type], type] = {}


def _worker_python_hint() -> str:
    """When Spark's Python workers may run another interpreter than this one (PySpark's default:
    `python3` from PATH, unless PYSPARK_PYTHON says otherwise), the words that say so — Spark
    discovers `delta` by importing pyspark_tahoe_delta in a worker."""
    import os
    import shutil
    import sys

    if os.environ.get("PYSPARK_PYTHON"):
        return ""
    worker = shutil.which("python3")
    if worker is None or os.path.abspath(worker) == os.path.abspath(sys.executable):
        return ""
    return (f"; Spark's Python workers run {worker} (PySpark's default: python3 from PATH), not this "
            f"interpreter ({sys.executable}): if tahoe is not installed there, set PYSPARK_PYTHON={sys.executable}")


def _tahoe_error_in(text: str) -> tuple[type, str] | None:
    found = None
    for m in _ERROR_LINE.finditer(text):
        found = m
    if found is None:
        return None
    try:
        cls = getattr(importlib.import_module(found.group(1)), found.group(2), None)
    except ImportError:
        return None
    if not (isinstance(cls, type) and issubclass(cls, DeltaError)):
        return None
    rest = text[found.end():].split("\n")
    lines = [rest[0]]
    for line in rest[1:]:
        if _STOP.match(line):
            break
        lines.append(line)
    return cls, "\n".join(lines).rstrip()


def _both(tahoe_cls: type, spark_cls: type) -> type:
    key = (tahoe_cls, spark_cls)
    if key not in _classes:
        def __str__(self) -> str:
            return self._tahoe_message

        def getCondition(self):   # noqa: N802 - PySpark's name: delta-spark's class where tahoe has one
            return getattr(self, "error_class", None) or spark_cls.getCondition(self)

        def getErrorClass(self):   # noqa: N802
            return getattr(self, "error_class", None) or spark_cls.getErrorClass(self)

        _classes[key] = type(tahoe_cls.__name__, (tahoe_cls, spark_cls),
                             {"__module__": tahoe_cls.__module__, "__qualname__": tahoe_cls.__qualname__,
                              "__str__": __str__, "__doc__": tahoe_cls.__doc__, "getCondition": getCondition,
                              "getErrorClass": getErrorClass})
    return _classes[key]


def _copy_as(cls: type, exc: BaseException, message: str, args: tuple) -> BaseException:
    new = BaseException.__new__(cls)
    new.__dict__.update(exc.__dict__)
    new.args = args
    new._tahoe_message = message
    new.spark_error = exc
    return new.with_traceback(exc.__traceback__)


def spark_facing(exc: DeltaError) -> BaseException:
    """A tahoe error raised in the user's process (tahoe's SQL statements, catalog calls) as an
    exception that is both tahoe's class and PySpark's AnalysisException (ParseException for a
    parse error): delta-spark code that catches Spark's classes keeps working, and the message
    is tahoe's. The original is kept as `__cause__`-free context (`.tahoe_error`)."""
    from pyspark.errors import AnalysisException as SparkAnalysisException, ParseException as SparkParseException

    from ..errors import ParseException

    spark_cls = SparkParseException if isinstance(exc, ParseException) else SparkAnalysisException
    try:
        cls = _both(type(exc), spark_cls)
        new = BaseException.__new__(cls)
    except TypeError:   # classes that cannot be combined: tahoe's error as it is
        return exc
    new.__dict__.update(exc.__dict__)
    message = str(exc)
    new.args = (message,)
    new._tahoe_message = message
    new._message = message
    new._errorClass = getattr(exc, "error_class", None)
    new._messageParameters = {}
    new._contexts = []
    new.tahoe_error = exc
    return new.with_traceback(exc.__traceback__)


def restated(exc: BaseException, tahoe_cls: type, message: str) -> BaseException:
    """Spark's `exc` told again as `message`: an exception of tahoe's class and of `exc`'s class
    alike (Spark's condition and parameters kept), Spark's report a note and `.spark_error`;
    `exc` itself when the two classes cannot be combined."""
    try:
        new = _copy_as(_both(tahoe_cls, type(exc)), exc, message, (message,))
    except TypeError:
        return exc
    new.add_note("Spark's report of it:\n" + str(exc))
    return new


def surfaced(exc: BaseException) -> BaseException | None:
    """`exc` rewritten so that its message names the problem first (see the module docstring);
    None when it carries no tahoe error and is no missing-`delta`-source error."""
    if isinstance(exc, DeltaError):
        return None
    try:
        text = str(exc)
    except Exception:  # noqa: BLE001 - a Py4J error whose JVM side is gone
        return None
    found = _tahoe_error_in(text)
    if found is not None:
        cls, message = found
        try:
            new = _copy_as(_both(cls, type(exc)), exc, message, (message,))
        except TypeError:  # classes that cannot be combined: tahoe's class alone
            try:
                new = cls(message)
            except TypeError:  # a class whose constructor wants more than the message
                new = cls.__new__(cls)
                new.args = (message,)
            new.spark_error = exc
        condition = _CONDITION.match(message)
        if condition is not None:     # delta-spark's error class, as the message names it
            new.error_class = condition.group(1)
        new.add_note("Spark's report of it (the data source's traceback included):\n" + text)
        return new
    if _NOT_FOUND.search(text):
        message = REGISTER_HINT + _worker_python_hint() + "\n" + text

        def __str__(self) -> str:
            return self._tahoe_message

        cls = type(type(exc).__name__, (type(exc),), {"__module__": type(exc).__module__, "__str__": __str__})
        return _copy_as(cls, exc, message, exc.args)
    return None
