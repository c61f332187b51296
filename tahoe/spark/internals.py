"""Every reach into PySpark's private attributes, in one place, each failing loudly.

tahoe needs a few things PySpark has no public API for: a writer's format, save mode and options,
the DataFrame behind a writer, the session behind a reader or writer, a classic Column's analyzed
SQL text, a DataFrame's alias. Each is one function here, for classic PySpark (the JVM objects
behind `_jwrite`, `_jreader`, `_jdf`) and Spark Connect (the client-side plan objects). Where
PySpark no longer has what a function reads, it raises `PySparkInternalsError` naming the
attribute and the PySpark version — never a silent fallback. tests/spark/test_internals.py calls
every function against the installed PySpark, classic and Connect.
"""

from __future__ import annotations

import contextlib
import threading
from typing import Any, Iterator

from ..errors import DeltaError

__all__ = ["PySparkInternalsError", "is_connect", "session_of", "writer_format", "writer_mode", "writer_options",
           "writer_dataframe", "stream_writer_format", "stream_writer_dataframe", "stream_writer_output_mode", "clear_stream_partitioning", "reader_format",
           "reader_schema_given", "v2_table_name", "column_sql", "column_name", "dataframe_alias",
           "plan_size_in_bytes", "release_checkpoint", "jvm_has_class", "with_active_session", "ensure_thread_session",
           "connect_dataframe", "connect_plan_id", "with_hidden_output", "jvm_stream_source_dataframe",
           "jvm_offset", "jvm_read_limit", "python_read_limit", "jvm_streaming_batch", "parquet_scan",
           "internal_columns", "python_scans_scoped",
           "spark_conf_with_prefix", "runtime_conf_with_prefix"]


class PySparkInternalsError(DeltaError):
    """PySpark lacks a private attribute tahoe reads (a PySpark version tahoe was not built for)."""


def _missing(what: str, cause: BaseException) -> PySparkInternalsError:
    try:
        import pyspark

        version = pyspark.__version__
    except Exception:  # noqa: BLE001 - no version to name
        version = "?"
    return PySparkInternalsError(f"tahoe reads PySpark's private {what}, which PySpark {version} does not have "
                                 f"({type(cause).__name__}: {cause}); tahoe supports PySpark 4.0-4.3")


def _attr(obj: Any, name: str) -> Any:
    try:
        return getattr(obj, name)
    except AttributeError as e:
        raise _missing(f"{type(obj).__module__}.{type(obj).__name__}.{name}", e) from None


def _jcall(what: str, fn: Any) -> Any:
    """A call into the JVM through py4j: a missing method fails with a Py4JError at the call."""
    from py4j.protocol import Py4JError

    try:
        return fn()
    except Py4JError as e:
        raise _missing(what, e) from None


def _pyspark_class(obj: Any) -> type:
    for cls in type(obj).__mro__:
        if cls.__module__.startswith("pyspark."):
            return cls
    return type(obj)


def is_connect(obj: Any) -> bool:
    """Whether `obj` (a session, DataFrame, reader, writer, Column) is Spark Connect's."""
    return _pyspark_class(obj).__module__.startswith("pyspark.sql.connect.")


# the attribute that holds the session, per PySpark class (classic, Spark Connect)
_SESSION_ATTR = {
    "DataFrameReader": ("_spark", "_client"),
    "DataFrameWriter": ("_spark", "_spark"),
    "DataFrameWriterV2": ("_spark", "_spark"),
    "DataStreamReader": ("_spark", "_client"),
    "DataStreamWriter": ("_spark", "_session"),
}


def session_of(obj: Any) -> Any:
    """The SparkSession of a reader or writer (classic or Connect); a session is its own."""
    cls = _pyspark_class(obj)
    if cls.__name__ == "SparkSession":
        return obj
    attrs = _SESSION_ATTR.get(cls.__name__)
    if attrs is None:
        raise PySparkInternalsError(f"tahoe does not know where PySpark's {cls.__name__} keeps its session")
    return _attr(obj, attrs[1] if is_connect(obj) else attrs[0])


def writer_format(w: Any) -> str:
    """A DataFrameWriter's format as set (lower case; "" when none was set)."""
    if is_connect(w):
        fmt = _attr(_attr(w, "_write"), "source")
    else:
        jwrite = _attr(w, "_jwrite")
        fmt = _jcall("DataFrameWriter.source() of the JVM writer", lambda: jwrite.source())
    return str(fmt or "").lower()


def writer_mode(w: Any) -> str:
    """A DataFrameWriter's save mode, as Spark names it (`errorifexists` by default)."""
    if is_connect(w):
        return str(_attr(_attr(w, "_write"), "mode") or "errorifexists")
    jwrite = _attr(w, "_jwrite")
    return str(_jcall("DataFrameWriter.curmode() of the JVM writer", lambda: jwrite.curmode().toString()))


def writer_options(w: Any) -> dict[str, str]:
    """The options given to a DataFrameWriter so far, names as given."""
    if is_connect(w):
        return {str(k): str(v) for k, v in _attr(_attr(w, "_write"), "options").items() if v is not None}
    jwrite = _attr(w, "_jwrite")

    def read() -> dict[str, str]:
        it = jwrite.extraOptions().originalMap().iterator()
        out = {}
        while it.hasNext():
            e = it.next()
            out[str(e._1())] = str(e._2())
        return out

    return _jcall("DataFrameWriter.extraOptions() of the JVM writer", read)


def connect_dataframe(plan: Any, session: Any) -> Any:
    """A Spark Connect DataFrame of a client-side logical plan."""
    from pyspark.sql.connect.dataframe import DataFrame

    return DataFrame(plan, session)


def connect_plan_id(df: Any) -> int:
    """The plan id of a Spark Connect DataFrame: what references made from it (`df["id"]`) carry."""
    return _attr(_attr(df, "_plan"), "_plan_id")


def writer_dataframe(w: Any) -> Any:
    """The DataFrame a DataFrameWriter (or DataFrameWriterV2) writes."""
    if is_connect(w):
        return connect_dataframe(_attr(w, "_df"), _attr(w, "_spark"))
    return _attr(w, "_df")


def stream_writer_format(w: Any) -> str:
    """A Spark Connect DataStreamWriter's format (classic ones keep it in the JVM: tahoe records
    it as `format()` is called; "" here)."""
    if is_connect(w):
        return str(_attr(_attr(w, "_write_proto"), "format") or "").lower()
    return ""


def stream_writer_dataframe(w: Any) -> Any:
    """The streaming DataFrame a DataStreamWriter writes."""
    if is_connect(w):
        return connect_dataframe(_attr(_attr(w, "_write_stream"), "_child"), _attr(w, "_session"))
    return _attr(w, "_df")


def _jfield(jobj: Any, name: str) -> Any:
    """A private field of a JVM object, made accessible (Java reflection through py4j)."""
    f = jobj.getClass().getDeclaredField(name)
    f.setAccessible(True)
    return f


def stream_writer_output_mode(w: Any) -> str:
    """A classic DataStreamWriter's output mode as set so far ("append" by default): the JVM writer
    keeps it in a private field (`outputMode`)."""
    jwrite = _attr(w, "_jwrite")
    mode = _jcall("DataStreamWriter.outputMode field of the JVM writer",
                  lambda: _jfield(jwrite, "outputMode").get(jwrite))
    return str(mode.toString() if mode is not None else "append").lower()


def clear_stream_partitioning(w: Any) -> None:
    """Forget a classic DataStreamWriter's `partitionBy` (its private `partitioningColumns` back to
    None; `partitionBy()` with no columns leaves an empty list, which `foreachBatch` refuses)."""
    jwrite = _attr(w, "_jwrite")
    jvm = _attr(session_of(w), "_jvm")
    _jcall("DataStreamWriter.partitioningColumns field of the JVM writer",
           lambda: _jfield(jwrite, "partitioningColumns").set(jwrite, jvm.scala.Option.empty()))


def reader_format(r: Any) -> str:
    """A Spark Connect reader's format ("" for classic readers: tahoe records it as `format()` is
    called)."""
    if is_connect(r):
        return str(_attr(r, "_format") or "").lower()
    return ""


def reader_schema_given(r: Any) -> bool:
    """Whether `schema(...)` was given to a DataFrameReader."""
    if is_connect(r):
        return bool(_attr(r, "_schema"))
    jreader = _attr(r, "_jreader")
    return bool(_jcall("DataFrameReader.userSpecifiedSchema() of the JVM reader",
                       lambda: jreader.userSpecifiedSchema().isDefined()))


def v2_table_name(w: Any) -> str | None:
    """The table name of a DataFrameWriterV2 (`df.writeTo(name)`): Spark Connect keeps it; for
    classic ones tahoe records it when the writer is made (`__init__` is patched)."""
    if is_connect(w):
        return _attr(w, "_table_name")
    return w.__dict__.get("_tahoe_table")


def column_sql(df: Any, column: Any) -> str:
    """The Spark SQL text of a classic Column resolved against `df` (Spark's analyzer: qualified
    names, implicit casts explicit)."""
    selected = df.select(column.alias("__tahoe_value"))
    jdf = _attr(selected, "_jdf")
    return str(_jcall("QueryExecution.analyzed of a DataFrame",
                      lambda: jdf.queryExecution().analyzed().projectList().head().child().sql()))


def filter_sql(df: Any) -> str:
    """The SQL text of the condition of a classic `df.filter(...)` (its analyzed Filter node)."""
    jdf = _attr(df, "_jdf")
    return str(_jcall("QueryExecution.analyzed of a filtered DataFrame",
                      lambda: jdf.queryExecution().analyzed().condition().sql()))


def column_name(c: Any) -> str:
    """A classic Column's text (a bare column in `partitionedBy(col("p"))`)."""
    jc = _attr(c, "_jc")
    return str(_jcall("Column.toString of the JVM column", lambda: jc.toString()))


def dataframe_alias(df: Any) -> str | None:
    """The alias a DataFrame was given (`df.alias("s")`), when every column carries it."""
    if is_connect(df):
        plan = _attr(df, "_plan")
        return getattr(plan, "_alias", None) if type(plan).__name__ == "SubqueryAlias" else None
    jdf = _attr(df, "_jdf")

    def read() -> str | None:
        out = jdf.queryExecution().analyzed().output()
        names = set()
        for i in range(out.size()):
            q = out.apply(i).qualifier()
            names.add(q.last() if q.nonEmpty() else None)
        return names.pop() if len(names) == 1 else None

    return _jcall("the qualifiers of a DataFrame's analyzed output", read)


def plan_size_in_bytes(df: Any) -> int | None:
    """Spark's estimate of a classic DataFrame's size (its optimized plan's stats); None on Spark
    Connect, which does not say."""
    if is_connect(df):
        return None
    jdf = _attr(df, "_jdf")
    return int(str(_jcall("the optimized plan's stats of a DataFrame",
                          lambda: jdf.queryExecution().optimizedPlan().stats().sizeInBytes())))


def release_checkpoint(df: Any) -> None:
    """Release a `localCheckpoint` now, in the calling thread. Classic: unpersist its blocks (else
    freed only by a JVM GC). Spark Connect: remove the server's cached relation with a command on
    the client's ordinary execute path, then disarm the plan's finalizer. Left to it, PySpark's
    `CachedRemoteRelation.__del__` removes the relation whenever the last reference goes, through
    a raw unary call on the streaming `ExecutePlan` with no deadline (SPARK-58846): it never
    completes when the server streams back two responses, as it sometimes does (an
    `execution_progress`) while other threads run operations on the session — it hung a MERGE in
    a worker thread for good. Best effort, as PySpark's: a failed removal is logged (the server
    drops the relation with the session), never raised over the result of the work the
    checkpoint served."""
    if is_connect(df):
        _release_connect_checkpoint(df)
        return
    jdf = _attr(df, "_jdf")
    _jcall("the RDD of a checkpointed DataFrame", lambda: jdf.queryExecution().analyzed().rdd().unpersist(False))


def _release_connect_checkpoint(df: Any) -> None:
    from pyspark.sql.connect.plan import CachedRemoteRelation, RemoveRemoteCachedRelation

    plan = _attr(df, "_plan")
    if not isinstance(plan, CachedRemoteRelation) or _attr(plan, "_relation_id") is None:
        return   # not a checkpoint (nothing cached on the server), or released already
    client = _attr(_attr(df, "_session"), "client")
    try:
        if not client.is_closed:
            client.execute_command(RemoveRemoteCachedRelation(plan).command(client))
    except Exception as e:  # noqa: BLE001 - best effort, as PySpark's own release
        import logging

        logging.getLogger(__name__).warning("tahoe: releasing a Spark Connect checkpoint failed (%s: %s); the "
                                            "server drops it with the session", type(e).__name__, e)
    finally:
        plan._relation_id = None   # PySpark's finalizer: nothing left to release


def jvm_has_class(spark: Any, name: str) -> bool | None:
    """Whether a classic session's JVM can load class `name` (None on Spark Connect: no JVM here)."""
    if is_connect(spark):
        return None
    from py4j.protocol import Py4JJavaError

    jvm = _attr(spark, "_jvm")
    try:
        jvm.java.lang.Thread.currentThread().getContextClassLoader().loadClass(name)
        return True
    except Py4JJavaError:   # ClassNotFoundException
        return False


_PYTHON_SOURCE = "org.apache.spark.sql.execution.datasources.v2.python.PythonDataSourceV2"
_SCOPED: dict[int, bool] = {}


def python_scans_scoped(spark: Any) -> bool:
    """Whether the partitions a Python data source reader plans after `pushFilters` stay with the
    scan that pushed them. Spark 4.3 keeps them on the provider (`PythonDataSourceV2.setReadInfo`),
    shared by every scan of one DataFrame: in a self-join, a self-union or a view read twice, the
    last scan's pushed filters choose the files of all of them — the others silently lose rows
    (tests/spark/test_spark_read_fuzz.py). Apache Spark later moved them onto the scan
    (`PythonScanBuilder.readInfo`). Classic: asked of the JVM once (the provider has no
    `setReadInfo` any more); Spark Connect: no JVM to ask, so False (no filter-dependent plans)."""
    if is_connect(spark):
        return False
    key = id(spark.sparkContext)
    if key not in _SCOPED:
        jvm = _attr(spark, "_jvm")
        try:
            cls = jvm.java.lang.Thread.currentThread().getContextClassLoader().loadClass(_PYTHON_SOURCE)
            names = {m.getName() for m in cls.getDeclaredMethods()}
            _SCOPED[key] = "setReadInfo" not in names
        except Exception:  # noqa: BLE001 - no such class: no Python data sources to worry about
            _SCOPED[key] = False
    return _SCOPED[key]


def with_active_session(spark: Any, fn: Any) -> Any:
    """Run `fn()` with `spark` the JVM's active session (classic; Spark Connect: just `fn()`)."""
    if is_connect(spark):
        return fn()
    jsession = _attr(spark, "_jsparkSession")
    sessions = getattr(_attr(spark, "_jvm"), "org.apache.spark.sql.SparkSession")
    previous = _jcall("SparkSession.getActiveSession", lambda: sessions.getActiveSession())
    sessions.setActiveSession(jsession)
    try:
        return fn()
    finally:
        if previous.isDefined():
            sessions.setActiveSession(previous.get())
        else:
            sessions.clearActiveSession()


def spark_conf_with_prefix(sc: Any, prefix: str) -> dict[str, str]:
    """The SparkContext's conf entries whose keys start with `prefix` (keys whole), read on the JVM
    side (`SparkConf.getAllWithPrefix`: two Py4J calls and three per entry found —
    `sc.getConf().getAll()` copies the whole conf, six calls per entry, ~600 on a default session)."""
    jconf = _attr(_attr(sc, "_conf"), "_jconf")
    if jconf is None:   # (a context whose conf is not the JVM's: PySpark keeps it in Python)
        return {k: v for k, v in sc.getConf().getAll() if k.startswith(prefix)}
    found = _jcall("SparkConf.getAllWithPrefix", lambda: jconf.getAllWithPrefix(prefix))
    return {prefix + str(t._1()): str(t._2()) for t in found}


def runtime_conf_with_prefix(spark: Any, prefix: str) -> dict[str, str]:
    """A classic session's runtime conf entries (`spark.conf.getAll`) whose keys start with
    `prefix`, in ~6 Py4J calls: the keys and the values of one Scala map each joined on the JVM
    side (one map: both in its one iteration order), split here on NUL. A key or value holding
    NUL (the counts then disagree) is read entry by entry, as `spark.conf.getAll` reads them all
    (three calls per entry, ~300 on a default session)."""
    jconf = _jcall("SparkSession.conf", lambda: _attr(spark, "_jsparkSession").conf())
    m = _jcall("RuntimeConfig.getAll", lambda: jconf.getAll())
    size = int(m.size())
    if not size:
        return {}
    keys = str(m.keys().mkString("\u0000")).split("\u0000")
    values = str(m.values().mkString("\u0000")).split("\u0000")
    if len(keys) != size or len(values) != size:
        return {str(k): str(v) for k, v in dict(jconf.getAllAsJava()).items() if str(k).startswith(prefix)}
    return {k: v for k, v in zip(keys, values) if k.startswith(prefix)}


_thread = threading.local()
_quiet_lock = threading.Lock()
_quiet = [0, None]   # (how many `internal_columns` blocks are open, the debugging flag they found)


@contextlib.contextmanager
def internal_columns() -> Iterator[None]:
    """A block building tahoe's own DataFrames and Columns (the DML executor's hundreds of them)
    without PySpark's call-site capture (`spark.python.sql.dataFrameDebugging.enabled`, on by
    default): with it, every Column method is wrapped to send the JVM its Python call site — a
    conf read, a class lookup, a set and a clear, ~6 Py4J round trips per Column made, for a
    call site inside tahoe that no user error message needs. PySpark caches the flag in
    `pyspark.errors.utils._enable_debugging_cache`; it reads False while a block is open (blocks
    nest and overlap across threads: the flag found by the first is restored by the last). A
    PySpark without the cache runs the block as it is (only slower)."""
    try:
        import pyspark.errors.utils as utils
    except ImportError:
        yield
        return
    if not hasattr(utils, "_enable_debugging_cache"):
        yield
        return
    with _quiet_lock:
        if _quiet[0] == 0:
            _quiet[1] = utils._enable_debugging_cache
        _quiet[0] += 1
        utils._enable_debugging_cache = False
    try:
        yield
    finally:
        with _quiet_lock:
            _quiet[0] -= 1
            if _quiet[0] == 0:
                utils._enable_debugging_cache = _quiet[1]
                _quiet[1] = None


def ensure_thread_session(obj: Any) -> None:
    """Classic PySpark: make the session of `obj` (a session, reader or writer) the JVM's active
    session of the calling thread when that thread has none. Spark looks Python data sources
    (`format("delta")`) up in the thread's active session, which PySpark sets only on the thread
    that built the session: in a worker thread (a `ThreadPool` ingesting several tables) a delta
    read or write failed with DATA_SOURCE_NOT_FOUND. A session already active is left as it is;
    one JVM call per thread and session (PySpark pins a Python thread to one JVM thread)."""
    if is_connect(obj):
        return
    spark = session_of(obj)
    if getattr(_thread, "session", None) == id(spark):
        return
    sessions = getattr(_attr(spark, "_jvm"), "org.apache.spark.sql.SparkSession")
    active = _jcall("SparkSession.getActiveSession", lambda: sessions.getActiveSession())
    if not active.isDefined():
        sessions.setActiveSession(_attr(spark, "_jsparkSession"))
    _thread.session = id(spark)


def with_hidden_output(spark: Any, df: Any, hidden: str) -> Any:
    """`df` without its column `hidden`, which stays selectable by name as hidden metadata output
    (Catalyst's `Project.hiddenOutputTag`, as a file source's `_metadata`): classic sessions only."""
    from pyspark.sql import DataFrame

    jvm = _attr(spark, "_jvm")
    jdf = _attr(df, "_jdf")
    jsession = _attr(spark, "_jsparkSession")

    def build() -> Any:
        plan = jdf.queryExecution().analyzed()
        out = plan.output()
        shown, kept = jvm.java.util.ArrayList(), jvm.java.util.ArrayList()
        for i in range(out.size()):
            a = out.apply(i)
            (kept if a.name() == hidden else shown).add(a)
        as_seq = jvm.scala.jdk.CollectionConverters.ListHasAsScala
        logical = jvm.org.apache.spark.sql.catalyst.plans.logical
        top = logical.Project(as_seq(shown).asScala().toList(), plan)
        tag = getattr(getattr(logical, "Project$"), "MODULE$").hiddenOutputTag()
        top.setTagValue(tag, as_seq(kept).asScala().toList())
        return jvm.org.apache.spark.sql.classic.Dataset.ofRows(jsession, top)

    return DataFrame(_jcall("Catalyst's Project.hiddenOutputTag", build), spark)


# --- a streaming source run in the driver (classic sessions): `tahoe.spark.streaming.NativeStreamSource` --------

def jvm_stream_source_dataframe(spark: Any, source: Any, schema: Any) -> Any:
    """A streaming DataFrame read from `source`, a Python object implementing Spark's v1 streaming
    `Source` through py4j's callback server (as `foreachBatch` functions are called): Catalyst's
    `StreamingExecutionRelation(source, <schema's attributes>)` — what Spark's own file sources
    become when a query starts. `schema`: a pyspark StructType."""
    from pyspark.java_gateway import ensure_callback_server_started
    from pyspark.sql import DataFrame

    jsession = _attr(spark, "_jsparkSession")
    gateway = _attr(_attr(spark, "sparkContext"), "_gateway")
    jvm = _attr(spark, "_jvm")

    def build() -> Any:
        ensure_callback_server_started(gateway)
        jschema = jsession.parseDataType(schema.json())
        attrs = jvm.org.apache.spark.sql.catalyst.types.DataTypeUtils.toAttributes(jschema)
        relation_cls = jvm.org.apache.spark.sql.execution.streaming.runtime.StreamingExecutionRelation
        name = getattr(relation_cls, "$lessinit$greater$default$4")()
        relation = relation_cls(source, attrs, jvm.scala.Option.empty(), name, jsession)
        return getattr(getattr(jvm.org.apache.spark.sql.classic, "Dataset$"), "MODULE$").ofRows(jsession, relation)
    return DataFrame(_jcall("Spark's StreamingExecutionRelation (Spark 4.1+)", build), spark)


def jvm_offset(spark: Any, text: str) -> Any:
    """Spark's `SerializedOffset` of an offset's JSON text (what the checkpoint's offset log keeps)."""
    jvm = _attr(spark, "_jvm")
    return _jcall("Spark's SerializedOffset", lambda: getattr(getattr(
        jvm.org.apache.spark.sql.execution.streaming.runtime, "SerializedOffset$"), "MODULE$").apply(text))


def jvm_read_limit(spark: Any, limit: Any) -> Any:
    """A pyspark ReadLimit (`pyspark.sql.streaming.datasource`) as Spark's ReadLimit."""
    from pyspark.sql.streaming.datasource import ReadMaxBytes, ReadMaxFiles, ReadMaxRows

    limits = _attr(spark, "_jvm").org.apache.spark.sql.connector.read.streaming.ReadLimit
    if isinstance(limit, ReadMaxFiles):
        return _jcall("ReadLimit.maxFiles", lambda: limits.maxFiles(int(limit.max_files)))
    if isinstance(limit, ReadMaxBytes):
        return _jcall("ReadLimit.maxBytes", lambda: limits.maxBytes(int(limit.max_bytes)))
    if isinstance(limit, ReadMaxRows):
        return _jcall("ReadLimit.maxRows", lambda: limits.maxRows(int(limit.max_rows)))
    return _jcall("ReadLimit.allAvailable", lambda: limits.allAvailable())


def python_read_limit(jlimit: Any) -> Any:
    """Spark's ReadLimit as a pyspark ReadLimit, as PySpark hands one to a Python data source's
    `latestOffset` (a limit tahoe does not bound by — rows, a composite — as ReadAllAvailable)."""
    from pyspark.sql.streaming.datasource import ReadAllAvailable, ReadMaxBytes, ReadMaxFiles

    kind = _jcall("a ReadLimit's class", lambda: jlimit.getClass().getSimpleName())
    if kind == "ReadMaxFiles":
        return ReadMaxFiles(int(jlimit.maxFiles()))
    if kind == "ReadMaxBytes":
        return ReadMaxBytes(int(jlimit.maxBytes()))
    return ReadAllAvailable()


def jvm_streaming_batch(df: Any) -> Any:
    """The JVM Dataset of a micro-batch a v1 `Source.getBatch` returns: `df`'s plan with its file
    scans marked streaming (`LogicalRelation(isStreaming = true)`, as Spark's own file source marks
    its scan: the query plans and fuses the scan with what follows), or — a plan without a file
    scan — its rows as a streaming relation."""
    jdf = _attr(df, "_jdf")
    spark = df.sparkSession
    jsession = _attr(spark, "_jsparkSession")
    jvm = _attr(spark, "_jvm")

    def marked(plan: Any) -> tuple[Any, bool]:
        if plan.getClass().getSimpleName() == "LogicalRelation":
            return plan.copy(plan.relation(), plan.output(), plan.catalogTable(), True, plan.stream()), True
        children = plan.children()
        kids = [marked(children.apply(i)) for i in range(children.size())]
        if not any(found for _, found in kids):
            return plan, False
        return plan.withNewChildren(jvm.PythonUtils.toSeq([k for k, _ in kids])), True

    def build() -> Any:
        plan, found = marked(jdf.queryExecution().analyzed())
        if found:
            return getattr(getattr(jvm.org.apache.spark.sql.classic, "Dataset$"), "MODULE$").ofRows(jsession, plan)
        return jsession.internalCreateDataFrame(jdf.queryExecution().toRdd(), jdf.schema(), True)
    return _jcall("a streaming micro-batch plan (LogicalRelation.copy, Dataset.ofRows)", build)


def parquet_scan(reader: Any, paths: list[str]) -> Any:
    """`reader.parquet(*paths)`, the paths handed to the JVM in one string (PySpark sends a list
    element by element: a Py4J round trip per path, ~0.07 s per 1,000 files)."""
    if is_connect(reader) or len(paths) < 16 or any("\n" in p for p in paths):
        return reader.parquet(*paths)
    from pyspark.sql import DataFrame

    spark = _attr(reader, "_spark")
    jreader = _attr(reader, "_jreader")
    jvm = _attr(spark, "_jvm")

    def build() -> Any:
        array = jvm.java.util.regex.Pattern.compile("\n").split("\n".join(paths))
        seqs = getattr(getattr(jvm.scala.collection.immutable, "ArraySeq$"), "MODULE$")
        return jreader.parquet(seqs.unsafeWrapArray(array))
    return DataFrame(_jcall("DataFrameReader.parquet(Seq)", build), spark)
