"""Delta tables inside queries Spark runs (`SELECT ... FROM t`, joins, subqueries, CTEs, the source of an
INSERT, a CTAS or a MERGE): `rewrite(spark, sql)` replaces each Delta table reference with tahoe's read of
it (`tahoe.spark.read_delta`), passed the way PySpark passes DataFrames into SQL (`spark.sql("{name}", name=df)`).

  1. References: catalog tables of provider `delta`, `delta.`/path``, time travel (`VERSION AS OF`,
     `TIMESTAMP AS OF`, `FOR SYSTEM_VERSION / SYSTEM_TIME AS OF`, `t@v3`, `t@yyyyMMddHHmmssSSS`).
  2. `table_changes(...)` and `table_changes_by_path(...)`: the change data feed, as delta-spark's functions.
  3. A reference keeps the table's name as its alias; anything not a Delta table is left to Spark.
  4. A view reading Delta tables is read as its query, rewritten the same way; `CREATE VIEW ... AS query` is
     not rewritten (the catalog keeps the tables by name)."""

from __future__ import annotations

import itertools
import re
from typing import Any

from ...errors import AnalysisException
from ...expressions.parse import Token, tokenize
from ...protocol.column_paths import quote_identifier
from .catalog import lookup, raw_sql
from .parser import TokenParser, syntax_error
from .state import passthrough
from .statements import Temporal
from ...expressions import and_, conjuncts, parse
from ...expressions.tree import unqualify
from ...log import DeltaLog
from ..delta_table import snapshot_frame
from ..session import session_timestamp_ms

__all__ = ["rewrite", "read_table", "changes_frame", "run_query"]

_counter = itertools.count()

# words after which a FROM list ends (at the same parenthesis depth)
_END_OF_FROM = {"WHERE", "GROUP", "ORDER", "HAVING", "LIMIT", "UNION", "EXCEPT", "INTERSECT", "MINUS", "WINDOW",
                "CLUSTER", "DISTRIBUTE", "SORT", "QUALIFY", "OFFSET", "ON", "USING", "SELECT", "VALUES", "INSERT",
                "WHEN", "SET", "LATERAL", "PIVOT", "UNPIVOT"}
# words that end a WHERE condition (at its parenthesis depth)
_END_OF_WHERE = {"GROUP", "ORDER", "HAVING", "LIMIT", "UNION", "EXCEPT", "INTERSECT", "MINUS", "WINDOW",
                 "CLUSTER", "DISTRIBUTE", "SORT", "QUALIFY", "OFFSET", "INSERT", "SELECT", "FROM"}
_AT_VERSION = re.compile(r"^(.*)@[vV](\d+)$")
_AT_TIMESTAMP = re.compile(r"^(.*)@(\d{17})$")


def _at_timestamp(text: str) -> str:
    """delta-spark's `@yyyyMMddHHmmssSSS` as a timestamp string."""
    return f"{text[0:4]}-{text[4:6]}-{text[6:8]} {text[8:10]}:{text[10:12]}:{text[12:14]}.{text[14:17]}"


def read_table(spark: Any, path: str, temporal: Temporal | None = None, where: str | None = None,
               qualifier: str | None = None):
    """tahoe's DataFrame of the Delta table at `path`, as of `temporal`. `where`: the WHERE
    condition of a query reading this table alone (`qualifier`: the name its columns may be
    qualified by): its conjuncts on the table's columns skip files (partition values and stats);
    Spark still applies the whole condition to the rows."""
    version = timestamp = None
    if temporal is not None:
        version = temporal.version
        if temporal.timestamp is not None:
            timestamp = session_timestamp_ms(spark, temporal.timestamp)
        elif temporal.timestamp_expr is not None:
            timestamp = _evaluate_timestamp(spark, temporal.timestamp_expr)
    snap = DeltaLog.for_table(path).snapshot(version=version, timestamp=timestamp)
    skip = _skipping_condition(where, qualifier, snap.schema) if where else None
    return snapshot_frame(spark, snap, None, [skip] if skip is not None else None)


def _skipping_condition(where: str, qualifier: str | None, schema: Any) -> Any:
    """The conjuncts of `where` that read only columns of the table (`schema`): bare, or
    qualified by `qualifier` — AND-ed, as an expression tree for file skipping; None when there
    are none, or the text does not parse. A conjunct naming anything else (another table's
    column, an outer query's, a name that is both the qualifier and a column) is left out:
    leaving a conjunct out only keeps files."""
    try:
        node = parse(where)
    except Exception:  # noqa: BLE001 - Spark reports a bad condition; skipping just does not happen
        return None
    names = {f.name.lower() for f in schema.fields}
    q = qualifier.lower() if qualifier else None
    # `q.x` where q is also a column: Spark reads the qualifier first, skipping might read the
    # field x of the column q — such conjuncts are left out
    ambiguous = q is not None and q in names
    kept = []
    for c in conjuncts(node):
        bare = unqualify(c, qualifier) if q is not None and not ambiguous else c
        cols = bare.columns()
        if not cols or (ambiguous and any(len(col.parts) > 1 and col.parts[0].lower() == q for col in cols)):
            continue
        if all(col.parts[0].lower() in names for col in cols):
            kept.append(bare)
    return and_(*kept) if kept else None


def _sole_table_where(sql: str, toks: list[Token], i: int, j: int) -> tuple[str | None, str | None]:
    """(the WHERE condition's text, the alias) when the table reference spanning tokens i..j-1
    is the only item of its FROM (`FROM t [[AS] a] WHERE ...`: no join, no other table), else
    (None, None). The condition runs to the next clause of the same query (GROUP BY, ORDER BY,
    a set operation, ...), the parenthesis closing the query, or the end."""
    if i == 0 or not toks[i - 1].is_word("FROM"):
        return None, None
    p = TokenParser(sql, toks, j)
    alias = p.alias()
    if p.i >= len(toks) or not toks[p.i].is_word("WHERE"):
        return None, None
    start = p.i + 1
    depth = 0
    k = start
    while k < len(toks):
        t = toks[k]
        if t.kind == "op" and t.value == "(":
            depth += 1
        elif t.kind == "op" and t.value == ")":
            if depth == 0:
                break
            depth -= 1
        elif depth == 0 and ((t.kind == "op" and t.value == ";") or
                             (t.kind == "word" and t.value.upper() in _END_OF_WHERE)):
            break
        k += 1
    if k == start:
        return None, None
    return sql[toks[start].start:toks[k - 1].end], alias


def _evaluate_timestamp(spark: Any, expr: str) -> int:
    row = raw_sql(spark, f"SELECT unix_millis(CAST(({expr}) AS TIMESTAMP)) AS ms").collect()[0]
    if row["ms"] is None:
        raise AnalysisException(f"the time travel timestamp expression {expr!r} is NULL")
    return int(row["ms"])


def _frame_name(hint: str) -> str:
    return f"__tahoe_{next(_counter)}_{re.sub(r'[^A-Za-z0-9_]', '_', hint)[:40]}"


def run_query(spark: Any, sql: str):
    """A query's DataFrame, its Delta tables read by tahoe (`rewrite`), run by Spark itself."""
    text, frames = rewrite(spark, sql, escape=True)
    with passthrough():
        return spark.sql(text, **frames) if frames else spark.sql(sql)


def changes_frame(spark: Any, path: str, start: Any, end: Any = None):
    """`table_changes`: the change rows of versions (ints) or timestamps (strings) start..end."""
    r = spark.read.format("delta").option("readChangeFeed", "true")
    for key, value in (("starting", start), ("ending", end)):
        if value is None:
            continue
        if isinstance(value, int):
            r = r.option(f"{key}Version", str(value))
        else:
            r = r.option(f"{key}Timestamp", str(value))
    return r.load(path)


class _Resolver:
    """Catalog lookups of one statement, remembered; `database`: where one-part names resolve
    (a persistent view's query), else the current database."""

    def __init__(self, spark: Any, database: str | None = None, depth: int = 0):
        self.spark = spark
        self.database = database
        self.depth = depth
        self.cache: dict[tuple[str, ...], Any] = {}

    def entry(self, parts: tuple[str, ...]) -> Any:
        if self.database is not None and len(parts) == 1:
            parts = (self.database,) + tuple(parts)
        key = tuple(p.lower() for p in parts)
        if key not in self.cache:
            self.cache[key] = lookup(self.spark, parts)
        return self.cache[key]

    def delta_path(self, parts: tuple[str, ...]) -> str | None:
        entry = self.entry(parts)
        return entry.location if entry is not None and entry.is_delta else None


def _cte_names(toks: list[Token]) -> set[str]:
    """Names a WITH clause defines (they hide tables of the same name)."""
    names: set[str] = set()
    for i, t in enumerate(toks):
        if t.is_word("WITH") or (t.kind == "op" and t.value == "," and names):
            j = i + 1
            if j < len(toks) and toks[j].is_word("RECURSIVE"):
                j += 1
            if j < len(toks) and toks[j].kind in ("word", "ident"):
                k = j + 1
                if k < len(toks) and toks[k].kind == "op" and toks[k].value == "(":   # name (cols) AS (
                    depth = 0
                    while k < len(toks):
                        if toks[k].kind == "op" and toks[k].value == "(":
                            depth += 1
                        elif toks[k].kind == "op" and toks[k].value == ")":
                            depth -= 1
                            if depth == 0:
                                break
                        k += 1
                    k += 1
                if k < len(toks) and toks[k].is_word("AS"):
                    names.add(toks[j].value.lower())
    return names


def rewrite(spark: Any, sql: str, escape: bool = True, _resolver: "_Resolver | None" = None) -> tuple[str, dict]:
    """(`sql` with its Delta table references replaced by `{name}` placeholders, {name:
    DataFrame}) — see the module docstring; (`sql`, {}) when it has none. `escape`: double the
    statement's own braces (PySpark formats the text once DataFrames are passed; not when the
    caller passes DataFrames of its own, whose placeholders the text already holds)."""
    lowered = sql.lower()
    if "from" not in lowered and "join" not in lowered and "table_changes" not in lowered:   # (_by_path too)
        return sql, {}
    toks = tokenize(sql)
    if _creates_view(toks):
        return sql, {}
    ctes = _cte_names(toks)
    resolver = _resolver if _resolver is not None else _Resolver(spark)
    edits: list[tuple[int, int, str]] = []
    frames: dict[str, Any] = {}
    from_depths: list[bool] = [False]   # per parenthesis depth: inside a FROM list
    expect_table = False
    i = 0
    while i < len(toks):
        t = toks[i]
        if expect_table:
            expect_table = False
            if t.kind in ("word", "ident") and not t.is_word("LATERAL", "SELECT", "VALUES"):
                j, edit = _reference(spark, sql, toks, i, ctes, resolver, frames)
                if edit is not None:
                    edits.append(edit)
                i = j
                continue
        if t.kind == "op" and t.value == "(":
            from_depths.append(False)
        elif t.kind == "op" and t.value == ")":
            if len(from_depths) > 1:
                from_depths.pop()
        elif t.is_word("FROM"):
            from_depths[-1] = True
            expect_table = True
        elif t.is_word("JOIN"):
            expect_table = True
        elif t.kind == "op" and t.value == "," and from_depths[-1]:
            expect_table = True
        elif t.kind == "word" and t.value.upper() in _END_OF_FROM:
            from_depths[-1] = False
        i += 1
    if not edits:
        return sql, {}

    def kept(text: str) -> str:
        return text.replace("{", "{{").replace("}", "}}") if escape else text

    out, last = [], 0
    for start, end, text in sorted(edits):
        out.append(kept(sql[last:start]))
        out.append(text)
        last = end
    out.append(kept(sql[last:]))
    return "".join(out), frames


def _reference(spark: Any, sql: str, toks: list[Token], i: int, ctes: set[str],
               resolver: _Resolver, frames: dict) -> tuple[int, tuple[int, int, str] | None]:
    """The table reference starting at token i: (the index after it, the edit or None)."""
    p = TokenParser(sql, toks, i)
    start = toks[i].start
    parts = p.qualified_name()
    last_tok = toks[p.i - 1]
    if p.at_op("("):   # a table-valued function
        if len(parts) == 1 and parts[0].lower() in ("table_changes", "table_changes_by_path"):
            return _table_changes(spark, sql, p, start, resolver, frames, by_path=parts[0].lower() != "table_changes")
        return p.i, None
    at_text = None
    # t@v3 / t@20240101000000000 (tokens) or delta.`/p@v3` (inside the quoted path)
    if p.at_op("@"):
        nxt = p.peek(1)
        if nxt is not None and nxt.kind in ("word", "number"):
            at_text = nxt.value
            p.i += 2
    name_end = toks[p.i - 1].end
    temporal = p.temporal()
    path = None
    if len(parts) == 2 and last_tok.kind == "ident" and parts[0].lower() == "delta":
        path = parts[1]
        if at_text is None:
            m = _AT_VERSION.match(path) or _AT_TIMESTAMP.match(path)
            if m:
                path, at_text = m.group(1), path[len(m.group(1)) + 1:]
    elif len(parts) == 1 and parts[0].lower() in ctes:
        return p.i, None
    else:
        path = resolver.delta_path(parts)
        if path is None:
            return _view_reference(spark, sql, p, parts, start, name_end, temporal, at_text, resolver, frames)
    if at_text is not None:
        if temporal is not None:
            raise syntax_error(sql, start, "a table reference cannot have both @ time travel and AS OF")
        if at_text[:1] in "vV" and at_text[1:].isdigit():
            temporal = Temporal(version=int(at_text[1:]))
        elif at_text.isdigit() and len(at_text) == 17:
            temporal = Temporal(timestamp=_at_timestamp(at_text))
        else:
            raise syntax_error(sql, start, f"'@{at_text}' is not a time travel spec (@v<version> or "
                                           f"@yyyyMMddHHmmssSSS)")
    end = toks[p.i - 1].end if temporal is not None else name_end
    name = _frame_name(parts[-1])
    where, alias = _sole_table_where(sql, toks, i, p.i)
    frames[name] = read_table(spark, path, temporal, where, alias or parts[-1])
    text = "{" + name + "}"
    if p.alias_follows():
        text += " "
    else:
        text += " AS " + quote_identifier(parts[-1])
    return p.i, (start, end, text)


def _creates_view(toks: list[Token]) -> bool:
    """CREATE [OR REPLACE] [GLOBAL] [TEMP | TEMPORARY] VIEW ... / ALTER VIEW ... AS"""
    words = [t.value.upper() for t in toks[:6] if t.kind == "word"]
    if words[:2] == ["ALTER", "VIEW"]:
        return True
    if not words or words[0] != "CREATE":
        return False
    rest = [w for w in words[1:] if w not in ("OR", "REPLACE", "GLOBAL", "TEMP", "TEMPORARY")]
    return bool(rest) and rest[0] == "VIEW"


_MAX_VIEW_DEPTH = 32


def _view_reference(spark: Any, sql: str, p: TokenParser, parts: tuple[str, ...], start: int, name_end: int,
                    temporal: Any, at_text: Any, resolver: _Resolver,
                    frames: dict) -> tuple[int, tuple[int, int, str] | None]:
    """A reference to a view defined in SQL whose query reads Delta tables: the query, rewritten,
    in its place (`(query) AS view`); other references are Spark's."""
    entry = resolver.entry(parts)
    if entry is None or entry.view_text is None or temporal is not None or at_text is not None:
        return p.i, None
    if resolver.depth >= _MAX_VIEW_DEPTH:
        raise AnalysisException(f"the view {'.'.join(parts)} nests views more than {_MAX_VIEW_DEPTH} deep")
    inner_resolver = _Resolver(spark, None if entry.temporary else entry.view_database, resolver.depth + 1)
    inner, inner_frames = rewrite(spark, entry.view_text, escape=True, _resolver=inner_resolver)
    if not inner_frames:
        return p.i, None
    frames.update(inner_frames)
    text = "(" + inner + ")"
    text += " " if p.alias_follows() else " AS " + quote_identifier(parts[-1])
    return p.i, (start, name_end, text)


def _table_changes(spark: Any, sql: str, p: TokenParser, start: int, resolver: _Resolver,
                   frames: dict, by_path: bool = False) -> tuple[int, tuple[int, int, str] | None]:
    p.expect_op("(")
    args: list[Any] = []
    while True:
        t = p.peek()
        if t is None:
            raise p.error()
        if t.kind == "string":
            args.append(t.value)
            p.i += 1
        else:
            args.append(p.integer())
        if not p.accept_op(","):
            break
    p.expect_op(")")
    function = "table_changes_by_path" if by_path else "table_changes"
    if not 2 <= len(args) <= 3 or not isinstance(args[0], str):
        raise syntax_error(sql, start, f"{function} takes a table {'path' if by_path else 'name or path'} and a start "
                                       f"(and an end) version or timestamp")
    target = args[0]
    if by_path or target.startswith("/") or "://" in target or target.startswith("file:"):
        path = target
    else:
        q = TokenParser(target)
        try:
            parts = q.qualified_name()
            q.done()
        except AnalysisException:
            raise AnalysisException(f"table_changes: {target!r} is not a table name") from None
        path = resolver.delta_path(parts)
        if path is None:
            raise AnalysisException(f"table_changes: {target} is not a Delta table")
    name = _frame_name("table_changes")
    frames[name] = changes_frame(spark, path, args[1], args[2] if len(args) > 2 else None)
    text = "{" + name + "}"
    if not p.alias_follows():
        text += " AS " + quote_identifier("table_changes")
    return p.i, (start, p.toks[p.i - 1].end, text)
