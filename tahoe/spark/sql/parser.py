"""The parser of the Delta SQL statements tahoe runs itself (`tahoe.spark.sql.statements`).

  1. `parse_statement(sql)`: the statement object, or None for any other statement (Spark runs
     it, after `tahoe.spark.sql.relations` has pointed its Delta table references at tahoe's reads).
  2. A recursive-descent parser (`TokenParser`) over `tahoe.expressions.parse.tokenize`;
     expressions, conditions and queries are kept as their SQL text (their spans in the statement).
  3. A statement that starts like one of these but breaks its grammar raises ParseException pointing
     at the token (`syntax_error`), as Spark's parser does.
"""

from __future__ import annotations

from typing import Any

from ...errors import ParseException
from ...expressions.parse import Token, tokenize
from .statements import (
    TableName, Temporal, ColumnDef, Vacuum, DescribeDetail, DescribeHistory, DescribeTable, Generate, Convert,
    Restore, Optimize, Reorg, Clone, CreateTable, AlterTable, MergeClause, Merge, Update, Delete, Insert,
    DropTable, Truncate, ShowTblProperties, ShowColumns,
)

__all__ = ["parse_statement", "first_word", "syntax_error", "TokenParser"]


# --- errors -------------------------------------------------------------------------------------

def syntax_error(sql: str, pos: int, message: str | None = None) -> ParseException:
    """Spark's form of a parse error: the problem, its line and position, and the statement with
    the token marked."""
    line = sql.count("\n", 0, pos) + 1
    col = pos - (sql.rfind("\n", 0, pos) + 1)
    near = f"'{sql[pos:pos + 40].split()[0]}'" if sql[pos:].strip() else "end of input"
    head = message or f"Syntax error at or near {near}"
    lines = sql.split("\n")
    marked = "\n".join(lines[:line]) + "\n" + "-" * col + "^^^" + ("\n" + "\n".join(lines[line:]) if lines[line:] else "")
    return ParseException(f"[PARSE_SYNTAX_ERROR] {head}. SQLSTATE: 42601 (line {line}, pos {col})\n\n"
                          f"== SQL ==\n{marked}")


# --- the parser --------------------------------------------------------------------------------

_CLAUSE_WORDS = {
    "WHERE", "GROUP", "ORDER", "HAVING", "LIMIT", "JOIN", "INNER", "LEFT", "RIGHT", "FULL", "CROSS",
    "NATURAL", "ON", "USING", "UNION", "EXCEPT", "INTERSECT", "MINUS", "WINDOW", "CLUSTER", "DISTRIBUTE",
    "SORT", "LATERAL", "PIVOT", "UNPIVOT", "TABLESAMPLE", "QUALIFY", "OFFSET", "FOR", "ANTI", "SEMI",
    "SET", "WHEN", "VALUES", "SELECT", "AS", "VERSION", "TIMESTAMP", "WITH", "TBLPROPERTIES", "LOCATION",
    "PARTITIONED", "COMMENT", "OPTIONS", "ZORDER", "RETAIN", "DRY", "APPLY", "TO", "LIMIT", "BY", "REPLACE",
    "OVERWRITE", "INTO", "PARTITION", "SHALLOW", "DEEP", "CLONE", "SYSTEM_VERSION", "SYSTEM_TIME", "LITE", "FULL",
    "NO", "TABLE", "FROM",
}


class TokenParser:
    """A cursor over a statement's tokens with the grammar's rules (`statement()` parses the
    statements of the module docstring; the shared pieces — names, time travel, aliases — serve
    `tahoe.spark.sql.relations` too)."""

    def __init__(self, sql: str, toks: list[Token] | None = None, i: int = 0):
        self.sql = sql
        self.toks = tokenize(sql) if toks is None else toks
        while toks is None and self.toks and self.toks[-1].kind == "op" and self.toks[-1].value == ";":
            self.toks.pop()
        self.i = i
        self.target: TableName | None = None   # the first table the statement names
        self.delta_only = False                 # a statement only Delta's grammar has

    # -- looking -----------------------------------------------------------------------------
    def peek(self, k: int = 0) -> Token | None:
        j = self.i + k
        return self.toks[j] if j < len(self.toks) else None

    def at(self, *words: str, k: int = 0) -> bool:
        t = self.peek(k)
        return t is not None and t.is_word(*words)

    def at_op(self, op: str, k: int = 0) -> bool:
        t = self.peek(k)
        return t is not None and t.kind == "op" and t.value == op

    def pos(self) -> int:
        t = self.peek()
        return t.start if t is not None else len(self.sql)

    def error(self, message: str | None = None) -> ParseException:
        return syntax_error(self.sql, self.pos(), message)

    # -- taking ------------------------------------------------------------------------------
    def accept(self, *words: str) -> bool:
        if self.at(*words):
            self.i += 1
            return True
        return False

    def accept_seq(self, *words: str) -> bool:
        if all(self.at(w, k=n) for n, w in enumerate(words)):
            self.i += len(words)
            return True
        return False

    def expect(self, *words: str) -> Token:
        if not self.at(*words):
            raise self.error()
        self.i += 1
        return self.toks[self.i - 1]

    def accept_op(self, op: str) -> bool:
        if self.at_op(op):
            self.i += 1
            return True
        return False

    def expect_op(self, op: str) -> None:
        if not self.accept_op(op):
            raise self.error()

    def done(self) -> None:
        if self.peek() is not None:
            raise self.error()

    def identifier(self) -> str:
        t = self.peek()
        if t is None or t.kind not in ("word", "ident"):
            raise self.error()
        self.i += 1
        return t.value

    def qualified_name(self) -> tuple[str, ...]:
        parts = [self.identifier()]
        while self.at_op("."):
            self.i += 1
            parts.append(self.identifier())
        return tuple(parts)

    def string(self) -> str:
        t = self.peek()
        if t is None or t.kind != "string":
            raise self.error()
        self.i += 1
        return t.value

    def integer(self) -> int:
        neg = self.accept_op("-")
        t = self.peek()
        if t is None or t.kind != "number":
            raise self.error()
        text = t.value.rstrip("LlSsYy")
        try:
            value = int(text)
        except ValueError:
            raise self.error(f"an integer was expected, not '{t.value}'") from None
        self.i += 1
        return -value if neg else value

    def number(self) -> float:
        neg = self.accept_op("-")
        t = self.peek()
        if t is None or t.kind != "number":
            raise self.error()
        try:
            value = float(t.value.rstrip("LlSsYyDdFf").removesuffix("B").removesuffix("b"))
        except ValueError:
            raise self.error(f"a number was expected, not '{t.value}'") from None
        self.i += 1
        return -value if neg else value

    # -- spans -------------------------------------------------------------------------------
    def span_until(self, stop_words: tuple[str, ...] = (), stop_ops: tuple[str, ...] = (),
                   allow_empty: bool = False) -> str:
        """The text from here up to (not including) the first of `stop_words` / `stop_ops` at
        parenthesis depth 0, or the end; the parser moves past it."""
        start = self.i
        depth = 0
        while self.i < len(self.toks):
            t = self.toks[self.i]
            if t.kind == "op" and t.value in ("(", "[", "{"):
                depth += 1
            elif t.kind == "op" and t.value in (")", "]", "}"):
                if depth == 0:
                    break
                depth -= 1
            elif depth == 0 and ((t.kind == "word" and t.value.upper() in stop_words)
                                 or (t.kind == "op" and t.value in stop_ops)):
                break
            self.i += 1
        if self.i == start:
            if allow_empty:
                return ""
            raise self.error()
        return self.sql[self.toks[start].start:self.toks[self.i - 1].end]

    def parenthesized(self) -> str:
        """The text inside `( ... )` (the parser moves past the closing parenthesis)."""
        self.expect_op("(")
        text = self.span_until(allow_empty=True)
        self.expect_op(")")
        return text

    # -- shared pieces -----------------------------------------------------------------------
    def table_name(self, path_string: bool = False) -> TableName:
        """`db.t`, `delta.`/path``, `parquet.`/path`` or (where delta-spark takes one) a path
        string."""
        t = self.peek()
        if t is None:
            raise self.error()
        if path_string and t.kind == "string":
            self.i += 1
            name = TableName(path=t.value, text=self.sql[t.start:t.end])
            if self.target is None:
                self.target = name
            return name
        start = t.start
        parts = self.qualified_name()
        text = self.sql[start:self.toks[self.i - 1].end]
        last = self.toks[self.i - 1]
        if len(parts) == 2 and last.kind == "ident" and parts[0].lower() in ("delta", "parquet", "iceberg"):
            name = TableName(path=parts[1], text=text, format=parts[0].lower())
        else:
            name = TableName(parts=parts, text=text)
        if self.target is None:
            self.target = name
        return name

    def temporal(self) -> Temporal | None:
        """[FOR] (VERSION | SYSTEM_VERSION) AS OF n | [FOR] (TIMESTAMP | SYSTEM_TIME) AS OF x."""
        save = self.i
        self.accept("FOR")
        if self.accept("VERSION", "SYSTEM_VERSION"):
            self.expect("AS")
            self.expect("OF")
            t = self.peek()
            if t is not None and t.kind == "string":
                self.i += 1
                try:
                    return Temporal(version=int(t.value))
                except ValueError:
                    raise syntax_error(self.sql, t.start, f"version '{t.value}' is not an integer") from None
            return Temporal(version=self.integer())
        if self.accept("TIMESTAMP", "SYSTEM_TIME"):
            self.expect("AS")
            self.expect("OF")
            t = self.peek()
            nxt = self.peek(1)
            if t is not None and t.kind == "string" and (nxt is None or nxt.kind != "op" or nxt.value in (",", ")", ";")):
                self.i += 1
                return Temporal(timestamp=t.value)
            return Temporal(timestamp_expr=self.span_until(tuple(_CLAUSE_WORDS - {"TIMESTAMP"}), (",", ";")))
        self.i = save
        return None

    def alias_follows(self) -> bool:
        """Whether an alias comes next (`AS x`, or a name that is no clause keyword)."""
        t = self.peek()
        return t is not None and (t.is_word("AS") or t.kind == "ident" or
                                  (t.kind == "word" and t.value.upper() not in _CLAUSE_WORDS))

    def alias(self) -> str | None:
        if self.accept("AS"):
            return self.identifier()
        t = self.peek()
        if t is not None and (t.kind == "ident" or (t.kind == "word" and t.value.upper() not in _CLAUSE_WORDS)):
            self.i += 1
            return t.value
        return None

    def name_list(self) -> tuple[str, ...]:
        """`(a, b.c, ...)` → the names (dotted ones joined)."""
        self.expect_op("(")
        names = [".".join(self.qualified_name())]
        while self.accept_op(","):
            names.append(".".join(self.qualified_name()))
        self.expect_op(")")
        return tuple(names)

    def property_list(self, values: bool = True) -> tuple[tuple[str, str], ...]:
        """`(key [=] value, ...)` (TBLPROPERTIES / OPTIONS) or `(key, ...)` (UNSET)."""
        self.expect_op("(")
        items: list[tuple[str, str]] = []
        while True:
            t = self.peek()
            if t is None:
                raise self.error()
            if t.kind == "string":
                self.i += 1
                key = t.value
            else:
                key = ".".join(self.qualified_name())
            value = ""
            if values:
                self.accept_op("=")
                v = self.peek()
                if v is None:
                    raise self.error()
                if v.kind in ("string", "number"):
                    value = v.value
                    self.i += 1
                elif v.kind == "word" and v.value.upper() in ("TRUE", "FALSE"):
                    value = v.value.lower()
                    self.i += 1
                elif v.kind == "op" and v.value == "-":
                    value = str(self.number()).removesuffix(".0")
                else:
                    raise self.error()
            items.append((key, value))
            if not self.accept_op(","):
                break
        self.expect_op(")")
        return tuple(items)

    def type_sql(self) -> str:
        """A column's data type as written (`DECIMAL(10, 2)`, `ARRAY<STRUCT<a: INT>>`)."""
        start = self.i
        depth = 0
        while self.i < len(self.toks):
            t = self.toks[self.i]
            if t.kind == "op" and t.value in ("<", "("):
                depth += 1
            elif t.kind == "op" and t.value in (">", ")"):
                if depth == 0:
                    break
                depth -= 1
            elif t.kind == "op" and t.value == ">>":
                depth -= 2
            elif depth == 0 and (t.kind == "op" and t.value == "," or
                                 t.kind == "word" and t.value.upper() in ("NOT", "GENERATED", "DEFAULT", "COMMENT",
                                                                          "FIRST", "AFTER", "NULL")):
                break
            self.i += 1
        if self.i == start:
            raise self.error()
        return self.sql[self.toks[start].start:self.toks[self.i - 1].end]

    def column_def(self, nested: bool = False) -> ColumnDef:
        """A column definition; with `nested`, its name may be a path into a struct
        (`s.inner INT`: ADD COLUMNS)."""
        path = self.qualified_name() if nested else (self.identifier(),)
        name = path[-1]
        type_sql = self.type_sql()
        nullable, comment, generated, identity, default = True, None, None, None, None
        while True:
            if self.accept_seq("NOT", "NULL"):
                nullable = False
            elif self.accept("NULL"):
                pass
            elif self.accept("COMMENT"):
                comment = self.string()
            elif self.accept("DEFAULT"):
                default = self.span_until(("NOT", "COMMENT", "GENERATED", "NULL", "FIRST", "AFTER"), (",",))
            elif self.accept("GENERATED"):
                if self.accept("ALWAYS"):
                    allow = False
                else:
                    self.expect("BY")
                    self.expect("DEFAULT")
                    allow = True
                self.expect("AS")
                if self.accept("IDENTITY"):
                    start, step = 1, 1
                    if self.accept_op("("):
                        while not self.accept_op(")"):
                            if self.accept("START"):
                                self.expect("WITH")
                                start = self.integer()
                            elif self.accept("INCREMENT"):
                                self.expect("BY")
                                step = self.integer()
                            else:
                                raise self.error()
                    identity = (start, step, allow)
                else:
                    if allow:
                        raise self.error("GENERATED BY DEFAULT is for identity columns: GENERATED BY DEFAULT "
                                         "AS IDENTITY")
                    generated = self.parenthesized()
            else:
                break
        return ColumnDef(name, type_sql, nullable, comment, generated, identity, default, tuple(path[:-1]))

    def column_defs(self) -> tuple[ColumnDef, ...]:
        self.expect_op("(")
        cols = [self.column_def()]
        while self.accept_op(","):
            if self.at("CONSTRAINT", "PRIMARY", "FOREIGN", "UNIQUE", "CHECK"):
                raise self.error("table constraints in CREATE TABLE are not supported by Delta's "
                                 "catalog: add CHECK constraints with ALTER TABLE ... ADD CONSTRAINT")
            cols.append(self.column_def())
        self.expect_op(")")
        return tuple(cols)

    def rest(self) -> str:
        """The rest of the statement as text (a query)."""
        if self.peek() is None:
            raise self.error()
        text = self.sql[self.peek().start:self.toks[-1].end]
        self.i = len(self.toks)
        return text

    # -- statements --------------------------------------------------------------------------
    def statement(self) -> Any:
        t = self.peek()
        if t is None or t.kind != "word":
            return None
        w = t.value.upper()
        handler = getattr(self, "_" + w.lower(), None) if w in _STATEMENTS else None
        return handler() if handler is not None else None

    def _vacuum(self):
        self.delta_only = True
        self.expect("VACUUM")
        table = self.table_name(path_string=True)
        inventory_table = inventory_query = None
        if self.accept_seq("USING", "INVENTORY"):
            if self.at_op("("):
                inventory_query = self.parenthesized()
                if not inventory_query.strip():
                    raise self.error()
            else:
                inventory_table = self.table_name()
        lite = False
        if self.accept("LITE"):
            lite = True
        elif self.accept("FULL"):
            pass
        hours = None
        if self.accept("RETAIN"):
            hours = self.number()
            self.expect("HOURS")
        dry = self.accept_seq("DRY", "RUN")
        if not lite and self.accept("LITE"):
            lite = True
        self.done()
        return Vacuum(table, hours, dry, lite, inventory_table, inventory_query)

    def _describe(self):
        self.expect("DESC", "DESCRIBE")
        if self.at("DETAIL"):
            self.delta_only = True
            self.i += 1
            table = self.table_name(path_string=True)
            self.done()
            return DescribeDetail(table)
        if self.at("HISTORY"):
            self.delta_only = True
            self.i += 1
            table = self.table_name(path_string=True)
            limit = None
            if self.accept("LIMIT"):
                limit = self.integer()
            self.done()
            return DescribeHistory(table, limit)
        # DESCRIBE [TABLE] [EXTENDED | FORMATTED] name [column]: ours only for Delta tables
        if self.at("FUNCTION", "DATABASE", "SCHEMA", "NAMESPACE", "QUERY", "CATALOG", "SELECT", "WITH", "FROM"):
            return None
        self.accept("TABLE")
        extended = bool(self.accept("EXTENDED", "FORMATTED"))
        t = self.peek()
        if t is None or t.kind not in ("word", "ident"):
            return None
        table = self.table_name()
        column = None
        if self.peek() is not None:
            if self.peek().kind not in ("word", "ident"):
                return None
            column = ".".join(self.qualified_name())
        if self.peek() is not None:
            return None
        return DescribeTable(table, extended, column)

    _desc = _describe

    def _generate(self):
        self.delta_only = True
        self.expect("GENERATE")
        mode = self.identifier()
        self.expect("FOR")
        self.expect("TABLE")
        table = self.table_name()
        self.done()
        return Generate(mode, table)

    def _convert(self):
        self.delta_only = True
        self.expect("CONVERT")
        self.expect("TO")
        self.expect("DELTA")
        table = self.table_name()
        stats = True
        if self.accept_seq("NO", "STATISTICS"):
            stats = False
        schema = None
        if self.accept_seq("PARTITIONED", "BY"):
            schema = self.parenthesized()
        self.done()
        return Convert(table, stats, schema)

    def _restore(self):
        self.delta_only = True
        self.expect("RESTORE")
        self.accept("TABLE")
        table = self.table_name(path_string=True)
        self.accept("TO")
        temporal = self.temporal()
        if temporal is None:
            raise self.error()
        self.done()
        return Restore(table, temporal)

    def _optimize(self):
        self.delta_only = True
        self.expect("OPTIMIZE")
        table = self.table_name(path_string=True)
        where = None
        if self.accept("WHERE"):
            where = self.span_until(("ZORDER", "FULL"))
        full = self.accept("FULL")
        zorder: tuple[str, ...] = ()
        if self.accept("ZORDER"):
            self.expect("BY")
            if self.at_op("("):
                zorder = self.name_list()
            else:
                names = [".".join(self.qualified_name())]
                while self.accept_op(","):
                    names.append(".".join(self.qualified_name()))
                zorder = tuple(names)
        self.done()
        if full and (where or zorder):
            raise syntax_error(self.sql, self.toks[-1].start, "OPTIMIZE ... FULL takes no WHERE and no ZORDER BY")
        return Optimize(table, where, zorder, full)

    def _reorg(self):
        self.delta_only = True
        self.expect("REORG")
        self.expect("TABLE")
        table = self.table_name()
        where = None
        if self.accept("WHERE"):
            where = self.span_until(("APPLY",))
        self.expect("APPLY")
        self.expect_op("(")
        if self.at("UPGRADE"):
            raise self.error("REORG TABLE ... APPLY (UPGRADE UNIFORM(...)) is not supported by tahoe: enable "
                             "UniForm with ALTER TABLE ... SET TBLPROPERTIES instead")
        self.expect("PURGE")
        self.expect_op(")")
        self.done()
        return Reorg(table, where)

    def _create(self):
        self.expect("CREATE")
        mode = "error"
        if self.accept("OR"):
            self.expect("REPLACE")
            mode = "overwrite"
        if self.at("TEMPORARY", "TEMP", "VIEW", "GLOBAL", "DATABASE", "SCHEMA", "FUNCTION", "NAMESPACE", "CATALOG",
                   "INDEX", "MATERIALIZED", "STREAMING"):
            return None
        external = self.accept("EXTERNAL")
        if not self.accept("TABLE"):
            if external:
                raise self.error()
            return None
        if self.accept_seq("IF", "NOT", "EXISTS"):
            if mode == "overwrite":
                raise self.error("CREATE OR REPLACE TABLE ... IF NOT EXISTS is not allowed")
            mode = "ignore"
        stmt = self._table_definition(mode)
        if external and isinstance(stmt, CreateTable) and stmt.location is None:
            raise syntax_error(self.sql, 0, "CREATE EXTERNAL TABLE must be accompanied by LOCATION")
        return stmt

    def _replace(self):
        self.expect("REPLACE")
        if not self.accept("TABLE"):
            return None
        return self._table_definition("replace")

    def _table_definition(self, mode: str):
        table = self.table_name()
        if self.at("LIKE"):
            return None   # CREATE TABLE ... LIKE: Spark's
        if self.at("SHALLOW", "DEEP"):
            self.delta_only = True
            shallow = self.peek().value.upper() == "SHALLOW"
            self.i += 1
            self.expect("CLONE")
            source = self.table_name(path_string=False)
            temporal = self.temporal()
            props: tuple = ()
            location = None
            while self.peek() is not None:
                if self.accept("TBLPROPERTIES"):
                    props = self.property_list()
                elif self.accept("LOCATION"):
                    location = self.string()
                else:
                    raise self.error()
            return Clone(table, source, shallow, mode, temporal, props, location)
        columns = None
        if self.at_op("("):
            columns = self.column_defs()
        provider = None
        partition_by: tuple[str, ...] = ()
        partition_cols: tuple[ColumnDef, ...] = ()
        cluster_by = None
        location = comment = query = None
        props: tuple = ()
        options: tuple = ()
        while self.peek() is not None:
            if self.accept("USING"):
                provider = self.identifier().lower()
            elif self.accept("OPTIONS"):
                options = self.property_list()
            elif self.accept_seq("PARTITIONED", "BY"):
                if self._looks_like_column_defs():
                    partition_cols = self.column_defs()
                    partition_by = tuple(c.name for c in partition_cols)
                else:
                    partition_by = self.name_list()
            elif self.accept_seq("CLUSTER", "BY"):
                if self.accept("NONE"):
                    cluster_by = None
                elif self.accept("AUTO"):
                    raise self.error("CLUSTER BY AUTO is not supported by tahoe: name the clustering columns")
                else:
                    cluster_by = self.name_list()
            elif self.accept("LOCATION"):
                location = self.string()
            elif self.accept("COMMENT"):
                comment = self.string()
            elif self.accept("TBLPROPERTIES"):
                props = self.property_list()
            elif self.at("STORED", "ROW", "CLUSTERED", "SKEWED", "BUCKETS", "SORTED", "DEFAULT", "COLLATION"):
                return None   # Hive-format or other clauses: a statement for Spark to judge
            elif self.accept("AS"):
                query = self.rest()
            elif self.at("SELECT", "WITH", "FROM", "VALUES", "TABLE") or self.at_op("("):
                query = self.rest()
            else:
                raise self.error()
        return CreateTable(table, mode, provider, columns, partition_by, partition_cols, cluster_by, location,
                           comment, props, options, query)

    def _looks_like_column_defs(self) -> bool:
        """PARTITIONED BY (a, b) names columns; PARTITIONED BY (a INT, b STRING) defines them."""
        return self.at_op("(") and self.peek(1) is not None and self.peek(2) is not None and \
            not (self.peek(2).kind == "op" and self.peek(2).value in (",", ")", "."))

    def _alter(self):
        self.expect("ALTER")
        if not self.accept("TABLE"):
            return None
        table = self.table_name()
        if self.accept("ADD"):
            if self.accept("CONSTRAINT"):
                self.delta_only = True
                name = self.identifier()
                self.expect("CHECK")
                expr = self.parenthesized()
                self.done()
                return AlterTable(table, ("add_constraint", name, expr))
            if not self.accept("COLUMNS", "COLUMN"):
                return None   # ADD PARTITION ...: Spark's
            paren = self.at_op("(")
            if paren:
                self.i += 1
            cols, positions = [], []
            while True:
                cols.append(self.column_def(nested=True))
                positions.append(self._position())
                if not self.accept_op(","):
                    break
            if paren:
                self.expect_op(")")
            self.done()
            return AlterTable(table, ("add_columns", tuple(cols), tuple(positions)))
        if self.accept("DROP"):
            if self.accept("CONSTRAINT"):
                self.delta_only = True
                if_exists = self.accept_seq("IF", "EXISTS")
                name = self.identifier()
                self.done()
                return AlterTable(table, ("drop_constraint", name, if_exists))
            if self.accept("FEATURE"):
                self.delta_only = True
                t = self.peek()
                name = self.string() if t is not None and t.kind == "string" else self.identifier()
                truncate = self.accept_seq("TRUNCATE", "HISTORY")
                self.done()
                return AlterTable(table, ("drop_feature", name, truncate))
            if self.accept("COLUMNS", "COLUMN"):
                if_exists = self.accept_seq("IF", "EXISTS")
                if self.at_op("("):
                    names = self.name_list()
                else:
                    names_l = [".".join(self.qualified_name())]
                    while self.accept_op(","):
                        names_l.append(".".join(self.qualified_name()))
                    names = tuple(names_l)
                self.done()
                return AlterTable(table, ("drop_columns", names, if_exists))
            return None
        if self.accept("CLUSTER"):
            self.delta_only = True
            self.expect("BY")
            if self.accept("NONE"):
                self.done()
                return AlterTable(table, ("cluster_by", None))
            cols = self.name_list()
            self.done()
            return AlterTable(table, ("cluster_by", cols))
        if self.accept("RENAME"):
            if self.accept("COLUMN"):
                old = ".".join(self.qualified_name())
                self.expect("TO")
                new = self.identifier()
                self.done()
                return AlterTable(table, ("rename_column", old, new))
            return None   # RENAME TO: the catalog's
        if self.accept("REPLACE"):
            self.expect("COLUMNS")
            cols = self.column_defs()
            self.done()
            return AlterTable(table, ("replace_columns", cols))
        if self.at("ALTER", "CHANGE"):
            hive = self.peek().value.upper() == "CHANGE"
            self.i += 1
            self.accept("COLUMN")
            name = ".".join(self.qualified_name())
            changes: dict[str, Any] = {}
            if self.accept_seq("SYNC", "IDENTITY"):
                self.done()
                return AlterTable(table, ("sync_identity", name))
            t = self.peek()
            if hive and t is not None and (t.kind == "ident" or (t.kind == "word" and t.value.upper() not in (
                    "TYPE", "SET", "DROP", "COMMENT", "FIRST", "AFTER"))):
                # Hive's form: CHANGE [COLUMN] name new_name type [COMMENT 'c'] [FIRST | AFTER col]
                changes["new_name"] = self.identifier()
                changes["type"] = self.type_sql()
            while self.peek() is not None:
                if self.accept("TYPE"):
                    changes["type"] = self.type_sql()
                elif self.accept("SET"):
                    if self.accept_seq("NOT", "NULL"):
                        changes["nullable"] = False
                    elif self.accept("DEFAULT"):
                        changes["default"] = self.span_until(("COMMENT", "FIRST", "AFTER"))
                    else:
                        raise self.error()
                elif self.accept("DROP"):
                    if self.accept_seq("NOT", "NULL"):
                        changes["nullable"] = True
                    elif self.accept("DEFAULT"):
                        changes["default"] = None
                    else:
                        raise self.error()
                elif self.accept("COMMENT"):
                    changes["comment"] = self.string()
                elif self.at("FIRST", "AFTER"):
                    changes["position"] = self._position()
                else:
                    raise self.error()
            if not changes:
                raise self.error()
            return AlterTable(table, ("alter_column", name, changes))
        if self.accept("SET"):
            if self.accept("TBLPROPERTIES"):
                items = self.property_list()
                self.done()
                return AlterTable(table, ("set_properties", items))
            return None   # SET LOCATION / SERDE...: the catalog's
        if self.accept("UNSET"):
            if self.accept("TBLPROPERTIES"):
                if_exists = self.accept_seq("IF", "EXISTS")
                keys = tuple(k for k, _ in self.property_list(values=False))
                self.done()
                return AlterTable(table, ("unset_properties", keys, if_exists))
            return None
        return None

    def _position(self):
        if self.accept("FIRST"):
            return ("first",)
        if self.accept("AFTER"):
            return ("after", self.identifier())
        return None

    def _merge(self):
        self.expect("MERGE")
        evolution = False
        if self.accept("WITH"):
            self.expect("SCHEMA")
            self.expect("EVOLUTION")
            evolution = True
        self.expect("INTO")
        target = self.table_name()
        target_alias = self.alias()
        self.expect("USING")
        source_table = source_query = None
        source_temporal = None
        if self.at_op("("):
            source_query = self.parenthesized()
        else:
            source_table = self.table_name()
            source_temporal = self.temporal()
        source_alias = self.alias()
        self.expect("ON")
        condition = self.span_until(("WHEN",))
        clauses = []
        while self.accept("WHEN"):
            if self.accept("MATCHED"):
                kind = "matched"
            else:
                self.expect("NOT")
                self.expect("MATCHED")
                kind = "notMatched"
                if self.accept("BY"):
                    if self.accept("SOURCE"):
                        kind = "notMatchedBySource"
                    else:
                        self.expect("TARGET")
            cond = None
            if self.accept("AND"):
                cond = self.span_until(("THEN",))
            self.expect("THEN")
            if kind == "notMatched":
                self.expect("INSERT")
                if self.accept_op("*"):
                    clauses.append(MergeClause(kind, "insert", cond, None))
                    continue
                cols = self.name_list()
                self.expect("VALUES")
                self.expect_op("(")
                values = [self.span_until(stop_ops=(",",))]
                while self.accept_op(","):
                    values.append(self.span_until(stop_ops=(",",)))
                self.expect_op(")")
                if len(values) != len(cols):
                    raise self.error(f"INSERT names {len(cols)} columns but gives {len(values)} values")
                clauses.append(MergeClause(kind, "insert", cond, tuple(zip(cols, values))))
            elif self.accept("DELETE"):
                clauses.append(MergeClause(kind, "delete", cond, None))
            else:
                self.expect("UPDATE")
                self.expect("SET")
                if self.accept_op("*"):
                    if kind == "notMatchedBySource":
                        raise self.error("UPDATE SET * is not allowed in WHEN NOT MATCHED BY SOURCE")
                    clauses.append(MergeClause(kind, "update", cond, None))
                    continue
                clauses.append(MergeClause(kind, "update", cond, self._assignments(("WHEN",))))
        if not clauses:
            raise self.error("MERGE needs at least one WHEN clause")
        self.done()
        return Merge(target, target_alias, source_table, source_query, source_temporal, source_alias, condition,
                     tuple(clauses), evolution)

    def _assignments(self, stop: tuple[str, ...]) -> tuple[tuple[str, str], ...]:
        out = []
        while True:
            col = ".".join(self.qualified_name())
            self.expect_op("=")
            out.append((col, self.span_until(stop, (",",))))
            if not self.accept_op(","):
                break
        return tuple(out)

    def _update(self):
        self.expect("UPDATE")
        table = self.table_name()
        alias = None if self.at("SET") else self.alias()
        self.expect("SET")
        assignments = self._assignments(("WHERE",))
        where = None
        if self.accept("WHERE"):
            where = self.rest()
        self.done()
        return Update(table, alias, assignments, where)

    def _delete(self):
        self.expect("DELETE")
        self.expect("FROM")
        table = self.table_name()
        alias = None if self.at("WHERE") else self.alias()
        where = None
        if self.accept("WHERE"):
            where = self.rest()
        self.done()
        return Delete(table, alias, where)

    def _insert(self):
        self.expect("INSERT")
        evolution = False
        if self.accept("WITH"):
            self.expect("SCHEMA")
            self.expect("EVOLUTION")
            evolution = True
        if self.accept("OVERWRITE"):
            overwrite = True
        else:
            self.expect("INTO")
            overwrite = False
        self.accept("TABLE")
        if self.at("DIRECTORY", "LOCAL"):
            return None
        table = self.table_name()
        partition_spec = None
        if self.accept("PARTITION"):
            self.expect_op("(")
            spec = []
            while True:
                name = self.identifier()
                value = None
                if self.accept_op("="):
                    t = self.peek()
                    if t is None or t.kind not in ("string", "number", "word"):
                        raise self.error()
                    value = t.value
                    self.i += 1
                spec.append((name, value))
                if not self.accept_op(","):
                    break
            self.expect_op(")")
            partition_spec = tuple(spec)
        columns = None
        by_name = False
        replace_where = None
        if self.accept_seq("BY", "NAME"):
            by_name = True
        elif self.at_op("(") and not self.at("SELECT", "WITH", "VALUES", "FROM", k=1):
            columns = self.name_list()
        if self.accept("REPLACE"):
            if self.at("USING", "ON"):
                raise self.error("INSERT ... REPLACE USING / REPLACE ON is not supported by tahoe: use REPLACE "
                                 "WHERE")
            self.expect("WHERE")
            replace_where = self.span_until(("SELECT", "WITH", "VALUES", "FROM", "TABLE"))
        query = self.rest()
        return Insert(table, overwrite, query, columns, replace_where, by_name, partition_spec, evolution)

    def _drop(self):
        self.expect("DROP")
        if not self.accept("TABLE"):
            return None
        if_exists = self.accept_seq("IF", "EXISTS")
        table = self.table_name()
        self.accept("PURGE")
        self.done()
        return DropTable(table, if_exists)

    def _truncate(self):
        self.expect("TRUNCATE")
        self.expect("TABLE")
        table = self.table_name()
        if self.at("PARTITION"):
            raise self.error("TRUNCATE TABLE ... PARTITION is not supported on Delta tables: use DELETE FROM ... "
                             "WHERE")
        self.done()
        return Truncate(table)

    def _show(self):
        self.expect("SHOW")
        if self.accept("COLUMNS"):
            self.expect("FROM", "IN")
            table = self.table_name()
            if self.accept("FROM", "IN"):
                db = self.identifier()
                if table.is_path or len(table.parts) != 1:
                    raise self.error("SHOW COLUMNS ... IN database takes a table name without a database")
                table = TableName(parts=(db,) + table.parts, text=f"{db}.{table.text}")
            self.done()
            return ShowColumns(table)
        if not self.accept("TBLPROPERTIES"):
            return None
        table = self.table_name()
        key = None
        if self.at_op("("):
            self.i += 1
            t = self.peek()
            key = self.string() if t is not None and t.kind == "string" else ".".join(self.qualified_name())
            self.expect_op(")")
        self.done()
        return ShowTblProperties(table, key)


_STATEMENTS = {"VACUUM", "DESCRIBE", "DESC", "GENERATE", "CONVERT", "RESTORE", "OPTIMIZE", "REORG", "CREATE",
               "REPLACE", "ALTER", "MERGE", "UPDATE", "DELETE", "INSERT", "DROP", "TRUNCATE", "SHOW"}


def parse_statement(sql: str) -> Any:
    """The statement object of `sql` when it is one of the statements of the module docstring,
    else None. ParseException for text that does not tokenize, or that starts as one of them but
    breaks its grammar; the exception carries `target` (the first table the statement named, a
    TableName or None) and `delta_only` (the statement exists only in Delta's grammar), so that
    the caller can leave a statement on a table that is not Delta's to Spark."""
    p = TokenParser(sql)
    try:
        return p.statement()
    except ParseException as e:
        e.target = p.target            # type: ignore[attr-defined]
        e.delta_only = p.delta_only    # type: ignore[attr-defined]
        raise


def first_word(sql: str) -> str | None:
    """The statement's first word, upper-cased (None when it starts otherwise)."""
    p = TokenParser(sql)
    t = p.peek()
    return t.value.upper() if t is not None and t.kind == "word" else None
