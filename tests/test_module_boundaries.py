"""Module boundaries the project's rules fix, checked on the source:
  1. no private (`_name`) imports across modules;
  2. one reader of table properties (tahoe.protocol.properties) for every layer that reads a
     table's configuration;
  3. no import cycle — counting imports inside functions and under `if TYPE_CHECKING:` — and no
     import that runs up the layers (`LAYERS`);
  4. the layout: each concept in the module named for it, written once, Spark only in the Spark wing.

The oracle is the source text itself (Python's own parser), not tahoe code."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from tahoe.protocol.properties import TABLE_PROPERTIES, bool_property, enum_property, int_property, \
    interval_property_ms, isolation_level, text_property
from tahoe.errors import InvalidTableOperationError

TAHOE = Path(__file__).resolve().parent.parent / "tahoe"

# Packages whose modules must not import each other's private names.
NO_PRIVATE_IMPORTS = ["log", "txn", "storage", "read", "protocol", "write", "sharing", "spark", "expressions",
                      "maintenance", "uniform"]

# Modules that must read `delta.*` table properties only through tahoe.protocol.properties (which
# is the reader itself, so it is left out).
ONE_PROPERTY_READER = ["log", "read", "sharing", "spark", "txn", "maintenance", "protocol", "write", "uniform",
                       "table.py"]
PROPERTY_READERS = {"bool_property", "int_property", "interval_property_ms", "enum_property", "text_property",
                    "raw_property"}


def _files(parts: list[str]) -> list[Path]:
    out: list[Path] = []
    for p in parts:
        path = TAHOE / p
        out.extend(sorted(path.rglob("*.py")) if path.is_dir() else [path])
    return [f for f in out if f != TAHOE / "protocol" / "properties.py"]


def _private_imports(path: Path) -> list[str]:
    tree = ast.parse(path.read_text(), str(path))
    hits = []
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and (node.level > 0 or (node.module or "").startswith("tahoe")):
            for alias in node.names:
                if alias.name.startswith("_") and not alias.name.startswith("__"):
                    hits.append(f"{path.relative_to(TAHOE.parent)}:{node.lineno} imports {alias.name}")
    return hits


def test_no_private_names_imported_across_modules():
    hits = [h for f in _files(NO_PRIVATE_IMPORTS) for h in _private_imports(f)]
    assert hits == [], "private names imported across modules:\n" + "\n".join(hits)


def _key_constants() -> dict[str, str]:
    """Module-level names bound to a known property key anywhere in tahoe (`ICT_KEY = "delta..."`):
    a use of the name is a use of the key."""
    known = set(TABLE_PROPERTIES)
    out: dict[str, str] = {}
    for f in TAHOE.rglob("*.py"):
        for node in ast.parse(f.read_text(), str(f)).body:
            if isinstance(node, ast.Assign) and isinstance(node.value, ast.Constant) and node.value.value in known:
                out.update({t.id: node.value.value for t in node.targets if isinstance(t, ast.Name)})
    return out


def _hand_reads(path: Path, constants: dict[str, str]) -> list[str]:
    """Where a known property key (a literal, or a name bound to one) is read by hand: `conf.get(k)`,
    `conf.pop(k)`, `conf[k]`, `k in conf`, or handed to a helper of the module that reads its
    argument so (`_true(conf, k)` with `def _true(conf, key): return conf.get(key) == "true"`).
    Writing a configuration (`{k: v}`, `conf[k] = v`), naming keys in lists and messages, and the
    typed readers are not reads by hand."""
    known = set(TABLE_PROPERTIES)
    tree = ast.parse(path.read_text(), str(path))

    def key(node) -> str | None:
        if isinstance(node, ast.Constant) and isinstance(node.value, str) and node.value in known:
            return node.value
        if isinstance(node, ast.Name) and node.id in constants:
            return constants[node.id]
        return None

    def read_key(node) -> ast.AST | None:
        """The expression read as a key when `node` reads a mapping by key."""
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr in ("get", "pop"):
            return node.args[0] if node.args else None
        if isinstance(node, ast.Subscript) and isinstance(node.ctx, ast.Load):
            return node.slice
        if isinstance(node, ast.Compare) and any(isinstance(o, (ast.In, ast.NotIn)) for o in node.ops) \
                and not all(isinstance(c, (ast.List, ast.Tuple, ast.Set)) for c in node.comparators):
            return node.left
        return None

    # the module's own functions that read one of their parameters as a key: name -> positions
    readers_of_param: dict[str, set[int]] = {}
    for fn in ast.walk(tree):
        if isinstance(fn, (ast.FunctionDef, ast.AsyncFunctionDef)):
            params = [a.arg for a in fn.args.args]
            read = {k.id for k in map(read_key, ast.walk(fn)) if isinstance(k, ast.Name)}
            used = {i for i, p in enumerate(params) if p in read}
            if used:
                readers_of_param[fn.name] = used

    hits = []
    for node in ast.walk(tree):
        where = f"{path.relative_to(TAHOE.parent)}:{getattr(node, 'lineno', 0)}"
        k = read_key(node)
        if k is not None and key(k) is not None:
            hits.append(f"{where} {ast.unparse(node)[:100]}")
        elif isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id in readers_of_param \
                and node.func.id not in PROPERTY_READERS:
            if any(i < len(node.args) and key(node.args[i]) for i in readers_of_param[node.func.id]):
                hits.append(f"{where} {ast.unparse(node)[:100]}")
    return hits


def test_table_properties_are_read_through_the_one_reader():
    """No `conf.get("delta.x", "").lower() == "true"`, `"delta.x" in conf` or private `_true(conf,
    "delta.x")` helper outside tahoe.protocol.properties: typed readers apply delta-spark's
    defaults, match keys case-insensitively and refuse invalid stored values naming the property."""
    constants = _key_constants()
    hits = [h for f in _files(ONE_PROPERTY_READER) for h in _hand_reads(f, constants)]
    assert hits == [], "table properties read by hand:\n" + "\n".join(hits)


def test_the_property_guard_finds_hand_reads(tmp_path):
    """The guard itself: each shape of a hand read is found, writes and typed reads are not."""
    src = tmp_path / "m.py"
    src.write_text(
        'KEY = "delta.appendOnly"\n'
        'def _true(conf, key):\n    return str(conf.get(key, "")).lower() == "true"\n'
        'def f(conf):\n'
        '    a = conf.get("delta.enableChangeDataFeed")\n'      # 5: read
        '    b = conf[KEY]\n'                                   # 6: read through a constant
        '    c = "delta.checkpointInterval" in conf\n'          # 7: read
        '    d = _true(conf, "delta.enableDeletionVectors")\n'  # 8: a helper that reads its argument
        '    conf["delta.appendOnly"] = "true"\n'               # write
        '    e = {"delta.appendOnly": "true"}\n'                # write
        '    g = bool_property(conf, "delta.appendOnly")\n'     # typed reader
        '    h = [k for k in conf if k not in (KEY, "delta.checkpointInterval")]\n')
    global TAHOE
    saved, TAHOE = TAHOE, tmp_path
    try:
        hits = _hand_reads(src, {"KEY": "delta.appendOnly"})
    finally:
        TAHOE = saved
    assert sorted(int(h.split(":")[1].split()[0]) for h in hits) == [5, 6, 7, 8], hits


# --- import cycles ------------------------------------------------------------------------------

def _module_name(path: Path) -> str:
    parts = list(path.relative_to(TAHOE.parent).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _imports(tree: ast.AST) -> list[ast.Import | ast.ImportFrom]:
    """Every import statement — at module level, inside a function, or under `if TYPE_CHECKING:`
    (annotations only: never executed, but a dependency a reader follows all the same)."""
    return [n for n in ast.walk(tree) if isinstance(n, (ast.Import, ast.ImportFrom))]


def _runtime_imports(tree: ast.AST) -> list[ast.Import | ast.ImportFrom]:
    """The import statements that can run (tests/test_dependencies.py): `_imports` less those under
    `if TYPE_CHECKING:`."""
    skip: set[int] = set()
    for n in ast.walk(tree):
        if isinstance(n, ast.If) and "TYPE_CHECKING" in ast.unparse(n.test):
            skip.update(id(x) for b in n.body for x in ast.walk(b))
    return [n for n in _imports(tree) if id(n) not in skip]


def import_graph() -> dict[str, dict[str, int]]:
    """tahoe module -> {tahoe module it imports: line}. `from x import y` is an edge to module
    x.y when that is a module, else to x (a package's __init__ when x is a package)."""
    modules = {_module_name(f): f for f in TAHOE.rglob("*.py")}
    graph: dict[str, dict[str, int]] = {}
    for name, path in modules.items():
        package = name if path.name == "__init__.py" else name.rsplit(".", 1)[0]
        edges: dict[str, int] = {}
        for node in _imports(ast.parse(path.read_text(), str(path))):
            if isinstance(node, ast.Import):
                targets = [a.name for a in node.names]
            else:
                base = package
                for _ in range(max(node.level - 1, 0)):
                    base = base.rsplit(".", 1)[0]
                mod = (base + ("." + node.module if node.module else "")) if node.level else (node.module or "")
                targets = [f"{mod}.{a.name}" if f"{mod}.{a.name}" in modules else mod for a in node.names]
            for t in targets:
                while t not in modules and "." in t:
                    t = t.rsplit(".", 1)[0]
                if t in modules and t != name:
                    edges.setdefault(t, node.lineno)
        graph[name] = edges
    return graph


def import_cycles(graph: dict[str, dict[str, int]]) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan), each sorted."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on: set[str] = set()
    out: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on.add(v)
        for w in graph[v]:
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                out.append(sorted(comp))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return out


def test_no_import_cycles_among_tahoe_modules():
    """No two tahoe modules import each other, directly or through others — counting imports
    inside functions and for type checking only (a lazy import hides a cycle from Python, not
    from a reader)."""
    graph = import_graph()
    cycles = import_cycles(graph)
    detail = "\n".join(
        "cycle: " + ", ".join(c) + "\n" + "\n".join(f"  {a} -> {b} (line {graph[a][b]})"
                                                    for a in c for b in graph[a] if b in c)
        for c in cycles)
    assert cycles == [], detail


def test_the_cycle_finder_finds_a_lazy_cycle():
    """The finder itself, on a hand-made graph: a lazy import closing a loop is a cycle, and so is
    one for type checking only."""
    tree = ast.parse("from .b import x\ndef f():\n    from .a import y\nif TYPE_CHECKING:\n    from .c import z\n")
    assert [n.module for n in _imports(tree)] == ["b", "a", "c"]
    assert import_cycles({"a": {"b": 1}, "b": {"c": 1}, "c": {"a": 3}, "d": {"a": 1}}) == [["a", "b", "c"]]
    assert import_cycles({"a": {"b": 1}, "b": {}}) == []


# --- layers ----------------------------------------------------------------------------------

# Each top-level package (or module) of tahoe on its floor: an import between two of them runs to
# a strictly lower floor. The Spark-free core sits below the facade and the two wings; the
# sharing wing is below the Spark wing, which it never imports.
LAYERS = {
    "tahoe.errors": 0, "tahoe.version": 0, "tahoe.cli_help": 0, "tahoe.exceptions": 1,
    "tahoe.protocol": 1, "tahoe.storage": 1,
    "tahoe.log": 2, "tahoe.expressions": 2,
    "tahoe.read": 3, "tahoe.uniform": 3,
    "tahoe.txn": 4,
    "tahoe.write": 5,
    "tahoe.maintenance": 6,
    "tahoe.table": 7, "tahoe.sharing": 7,
    "tahoe.spark": 8, "tahoe.delta_rs": 8,
    "tahoe.demo": 9, "tahoe": 9,
    "tahoe.cli": 10,
    "tahoe.__main__": 11,
}


def _layer_of(module: str) -> str:
    parts = module.split(".")
    return ".".join(parts[:2]) if len(parts) > 1 else module


def upward_imports(graph: dict[str, dict[str, int]], layers: dict[str, int]) -> list[str]:
    """Every edge between two layers that does not run to a strictly lower one."""
    out = []
    for a, edges in sorted(graph.items()):
        la = _layer_of(a)
        for b, line in sorted(edges.items()):
            lb = _layer_of(b)
            if la != lb and layers[lb] >= layers[la]:
                out.append(f"{a} -> {b} (line {line}): floor {layers[la]} imports floor {layers[lb]}")
    return out


def test_every_module_has_a_floor():
    missing = sorted({_layer_of(m) for m in import_graph()} - set(LAYERS))
    assert missing == [], f"add these to LAYERS: {missing}"


def test_no_import_runs_up_the_layers():
    hits = upward_imports(import_graph(), LAYERS)
    assert hits == [], "imports that run up (or sideways):\n" + "\n".join(hits)


def test_the_layer_check_finds_an_upward_import():
    graph = {"tahoe.txn.transaction": {"tahoe.maintenance.manifest": 7, "tahoe.log.snapshot": 3},
             "tahoe.log.snapshot": {"tahoe.protocol.actions": 1}}
    hits = upward_imports(graph, LAYERS)
    assert len(hits) == 1 and hits[0].startswith("tahoe.txn.transaction -> tahoe.maintenance.manifest")


# --- the layout: a concept in the module named for it, written once ------------------------------

# module -> names it defines (spec section or concept -> module)
LAYOUT = {
    "log/checkpoint_schema.py": ["CheckpointLayout", "checkpoint_schema", "build_checkpoint"],
    "log/checkpoint_parts.py": ["spark_string_hash", "checkpoint_part_of"],
    "log/checkpoints.py": ["write_checkpoint"],
    "log/checkpoint_policy.py": ["checkpoint_due", "checkpoint_if_needed", "cleanup_logs"],
    "log/metadata_cleanup.py": ["cleanup_expired_logs", "cleanup_unreferenced_sidecars"],
    "protocol/last_checkpoint_checksum.py": ["checksum_of", "verify", "with_checksum"],
    "protocol/column_paths.py": ["quote_identifier", "split_column_path"],
    "protocol/timestamps.py": ["now_ms"],
    "storage/__init__.py": ["resolve_data_path", "encode_log_path", "absolute_uri"],
    "txn/attempt.py": ["Attempt"],
    "txn/identity_columns.py": ["advance_high_water_marks"],
    "txn/checkpoint_protection.py": ["protect_history"],
    "txn/append_only.py": ["refuse_data_removal"],
    "txn/deletion_vectors.py": ["check_adds"],
    "txn/domain_metadata.py": ["check_supported", "check_user_domain"],
    "txn/in_commit_timestamps.py": ["assign_timestamp", "commit_timestamp"],
    "txn/row_tracking.py": ["assign_row_ids", "fill_remove_row_ids"],
    "txn/commit_info.py": ["commit_info"],
    "txn/post_commit.py": ["POST_COMMIT_HOOKS", "run_post_commit_hooks"],
    "uniform/symlink_manifest.py": ["generate_symlink_manifest"],
    "write/writer.py": ["write_table", "prepare_rows"],
    "write/writer_properties.py": ["ParquetTuning", "write_settings", "current_write_settings"],
    "txn/commit_properties.py": ["commit_properties", "take_commit_properties"],
    "write/replace_where.py": ["parse_replace_where", "files_to_replace"],
    "spark/columns.py": ["to_spark_column"],
    "spark/sql/statements.py": ["Merge", "CreateTable", "TableName"],
    "spark/sql/parser.py": ["parse_statement", "TokenParser"],
    "delta_rs.py": ["DeltaTable", "TableMerger", "TableAlterer", "write_deltalake"],
    "read/add_actions.py": ["add_actions_table", "selection_vectors"],
    "read/dataset.py": ["to_pyarrow_dataset"],
    "maintenance/repair.py": ["repair"],
    "storage/arrow_fs.py": ["arrow_filesystem"],
}
GONE = ["log/checkpoint.py", "spark/sql/grammar.py", "write/arrow.py", "protocol/checksum.py", "expressions/spark.py",
        "maintenance/manifest.py"]


def _defined(path: Path) -> set[str]:
    out = set()
    for node in ast.parse(path.read_text(), str(path)).body:
        if isinstance(node, (ast.FunctionDef, ast.ClassDef)):
            out.add(node.name)
        elif isinstance(node, ast.Assign):
            out.update(t.id for t in node.targets if isinstance(t, ast.Name))
    return out


@pytest.mark.parametrize("module", sorted(LAYOUT))
def test_each_concept_lives_in_its_module(module):
    path = TAHOE / module
    assert path.exists(), module
    missing = sorted(set(LAYOUT[module]) - _defined(path))
    assert missing == [], f"{module} no longer defines {missing}"


def test_old_module_names_are_gone():
    assert [m for m in GONE if (TAHOE / m).exists()] == []


def test_one_spark_free_facade():
    """`tahoe.DeltaTable` is deltalake's Spark-free class; delta-spark's is only in `tahoe.spark`."""
    init = (TAHOE / "__init__.py").read_text()
    assert '"DeltaTable": ("tahoe.delta_rs", "DeltaTable")' in init
    assert "tahoe.spark" not in {m for m, _ in ast.literal_eval(
        init[init.index("_LAZY = ") + len("_LAZY = "):init.index("}", init.index("_LAZY = ")) + 1]).values()}


def test_helpers_written_once():
    """Identifier quoting and the writer clock are defined in one module each; no other module
    writes a backtick-doubling quote or `int(time.time() * 1000)` clock by hand."""
    defs: dict[str, list[str]] = {}
    by_hand: list[str] = []
    for f in sorted(TAHOE.rglob("*.py")):
        rel = str(f.relative_to(TAHOE))
        for node in ast.walk(ast.parse(f.read_text(), str(f))):
            if isinstance(node, ast.FunctionDef) and node.name.lstrip("_") in ("now_ms", "quote", "quote_identifier"):
                defs.setdefault(node.name.lstrip("_"), []).append(rel)
            if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "replace" \
                    and [ast.unparse(a) for a in node.args] in (["'`'", "'``'"], ['"`"', '"``"']):
                by_hand.append(f"{rel}:{node.lineno}")
    assert defs == {"now_ms": ["protocol/timestamps.py"], "quote_identifier": ["protocol/column_paths.py"]}
    assert {h.split(":")[0] for h in by_hand} == {"protocol/column_paths.py"}, by_hand


SPARK_FREE = ["errors.py", "protocol", "storage", "log", "expressions", "read", "uniform", "txn", "write",
              "maintenance", "table.py", "__init__.py"]


def test_the_core_is_spark_free():
    """No module of the core or the facade imports pyspark, lazily or not: Spark code lives in
    tahoe/spark (the sharing wing's `load_as_spark` takes the user's own session, as the official
    client's does)."""
    hits = []
    for f in sorted(TAHOE.rglob("*.py")):
        rel = f.relative_to(TAHOE)
        if rel.parts[0] not in SPARK_FREE:
            continue
        for node in _imports(ast.parse(f.read_text(), str(f))):
            names = [a.name for a in node.names] if isinstance(node, ast.Import) else [node.module or ""]
            if any(n == "pyspark" or n.startswith("pyspark.") for n in names):
                hits.append(f"{rel}:{node.lineno}")
    assert hits == []


def test_writer_rules_and_post_commit_hooks_in_their_order():
    """The transaction applies the spec's writer requirements in one visible order, each from the
    module named after its section; post-commit work runs through one list."""
    from tahoe.txn.post_commit import POST_COMMIT_HOOKS
    from tahoe.txn.transaction import WRITER_RULES

    assert [f"{r.__module__.rsplit('.', 1)[-1]}.{r.__name__}" for r in WRITER_RULES] == [
        "identity_columns.advance_high_water_marks", "checkpoint_protection.protect_history",
        "append_only.refuse_data_removal", "deletion_vectors.check_adds", "domain_metadata.check_supported",
        "in_commit_timestamps.assign_timestamp", "row_tracking.assign_row_ids"]
    assert [h.name for h in POST_COMMIT_HOOKS] == [
        "version checksum", "kept snapshot", "checkpoint", "symlink manifest", "UniForm Iceberg metadata"]


def repeated_blocks(files: list[Path], size: int = 6) -> list[list[str]]:
    """Every run of `size` identical lines (white space folded; blank lines, comments, lone
    punctuation and imports passed over) that stands in more than one place: its places."""
    places: dict[str, list[str]] = {}
    for f in files:
        kept = []
        for i, line in enumerate(f.read_text().split("\n"), 1):
            t = " ".join(line.split())
            if not t or t.startswith(("#", "import ", "from ")) or not t.strip("()[]{},:"):
                continue
            kept.append((i, t))
        for k in range(len(kept) - size + 1):
            key = "\n".join(t for _, t in kept[k:k + size])
            places.setdefault(key, []).append(f"{f.relative_to(TAHOE.parent)}:{kept[k][0]}")
    return [p for p in places.values() if len(p) > 1]


def test_no_block_of_six_identical_lines_twice():
    """A piece of logic is written once: no six identical lines stand twice in tahoe/."""
    hits = repeated_blocks(sorted(TAHOE.rglob("*.py")))
    assert hits == [], "blocks written twice:\n" + "\n".join(" ~ ".join(h) for h in hits)


def test_the_block_finder_finds_a_copy(tmp_path):
    body = "".join(f"    x{i} = f({i})\n" for i in range(6))
    (tmp_path / "a.py").write_text("def a():\n" + body)
    (tmp_path / "b.py").write_text("import os\n\ndef b():\n    # a copy\n" + body)
    global TAHOE
    saved, TAHOE = TAHOE, tmp_path / "pkg"
    try:
        hits = repeated_blocks([tmp_path / "a.py", tmp_path / "b.py"])
    finally:
        TAHOE = saved
    assert hits == [["a.py:2", "b.py:5"]]


# --- the readers: delta-spark's defaults (DeltaConfigs) and refusal of invalid values ---------

@pytest.mark.parametrize("key, expected", [
    ("delta.checkpointInterval", 10),
    ("delta.dataSkippingNumIndexedCols", 32),
    ("delta.dataSkippingStringPrefixLength", 32),
    ("delta.randomPrefixLength", 2),
    ("delta.columnMapping.maxColumnId", 0),
])
def test_int_defaults(key, expected):
    assert int_property({}, key) == expected


@pytest.mark.parametrize("key, expected_ms", [
    ("delta.logRetentionDuration", 30 * 86_400_000),
    ("delta.deletedFileRetentionDuration", 7 * 86_400_000),
    ("delta.checkpointRetentionDuration", 2 * 86_400_000),
    ("delta.setTransactionRetentionDuration", None),
])
def test_interval_defaults(key, expected_ms):
    assert interval_property_ms({}, key) == expected_ms


@pytest.mark.parametrize("key, expected", [
    ("delta.appendOnly", False), ("delta.enableChangeDataFeed", False),
    ("delta.enableDeletionVectors", False), ("delta.enableRowTracking", False),
    ("delta.enableInCommitTimestamps", False), ("delta.enableExpiredLogCleanup", True),
    ("delta.checkpoint.writeStatsAsJson", True), ("delta.checkpoint.writeStatsAsStruct", None),
])
def test_bool_defaults(key, expected):
    assert bool_property({}, key) is expected


def test_enum_defaults_and_canonical_spelling():
    assert isolation_level({}) == "WriteSerializable"
    assert isolation_level({"delta.isolationLevel": "serializable"}) == "Serializable"
    assert enum_property({}, "delta.columnMapping.mode") == "none"
    assert enum_property({}, "delta.checkpointPolicy") == "classic"
    assert enum_property({"delta.columnMapping.mode": "NAME"}, "delta.columnMapping.mode") == "name"


def test_values_are_read_like_delta_spark():
    conf = {"delta.appendOnly": "TRUE", "delta.checkpointInterval": " 5 ",
            "delta.logRetentionDuration": "interval 2 days", "delta.targetFileSize": "128mb"}
    assert bool_property(conf, "delta.appendOnly") is True
    assert int_property(conf, "delta.checkpointInterval") == 5
    assert interval_property_ms(conf, "delta.logRetentionDuration") == 2 * 86_400_000
    assert text_property(conf, "delta.targetFileSize") == "128mb"
    # a key spelled in another case by another writer is still found
    assert bool_property({"delta.appendonly": "true"}, "delta.appendOnly") is True


@pytest.mark.parametrize("key, value, reader", [
    ("delta.appendOnly", "yes", bool_property),
    ("delta.checkpointInterval", "0", int_property),
    ("delta.checkpointInterval", "ten", int_property),
    ("delta.dataSkippingNumIndexedCols", "-2", int_property),
    ("delta.logRetentionDuration", "interval 1 month", interval_property_ms),
    ("delta.isolationLevel", "SnapshotIsolation", enum_property),
])
def test_invalid_stored_values_are_refused_naming_the_property(key, value, reader):
    with pytest.raises(InvalidTableOperationError, match=key.replace(".", r"\.")):
        reader({key: value}, key)


def test_every_known_property_has_a_valid_default():
    for prop in TABLE_PROPERTIES.values():
        if prop.default is not None:
            assert prop.check(prop.default) is not None, prop.key
