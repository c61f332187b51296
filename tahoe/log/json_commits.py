"""Vectorised replay of large JSON commits: the same reconciliation as `tahoe.log.replay` (spec
"Action Reconciliation"), with the file actions kept in Arrow instead of Python dicts.

A commit of many file actions (a big initial write, CONVERT TO DELTA, a log without checkpoints)
is parsed with pyarrow's JSON reader. Replay reads only what reconciliation needs — each add's and
remove's path, size and deletion vector — and the other columns are parsed later, on demand,
column by column (`JsonCommit.table`), so a server can answer from a table's file count and size
before it has parsed every file's stats.

pyarrow's JSON reader has no map type: `partitionValues` and `tags` are taken from each line's
text with a regular expression and decoded with orjson once per distinct value, which keeps their
key order and explicit nulls exactly as written. Anything the vectorised reader is not sure about
(a line that is not an object, a value of an unexpected type, a deletion vector without
storageType, a map with non-string values, ...) raises `Fallback`, and the caller replays that
commit with the dict path (`read_commit`), which also words any error.

`PieceTail` reconciles the commits after a checkpoint when at least one of them is a `JsonCommit`:
keys are (canonical path, deletion vector unique id), the newest reference decides add or remove,
and the row order is the one the dict path produces (a key keeps the position where its current
run of adds — or removes — began).
"""

from __future__ import annotations

import threading
from typing import Any, Iterable

import numpy as np
import orjson
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.json as pa_json

from ..storage.base import LogStore

__all__ = ["VECTOR_MIN_BYTES", "Fallback", "JsonCommit", "DictPiece", "PieceTail"]

# Commits at least this big are replayed vectorised (below it, orjson and dicts are faster).
VECTOR_MIN_BYTES = 1 << 20

_MAP_FIELDS = ("partitionValues", "tags")
_KEY_COLUMNS = {"add": ["path", "size", "deletionVector"], "remove": ["path", "deletionVector"]}


class Fallback(Exception):
    """The commit is not in a shape the vectorised reader handles exactly: use the dict path."""


def _nonblank_lines(data: bytes) -> pa.Array:
    """The commit's non-blank lines as binary (zero-copy slices of `data`; a line runs up to the
    next non-blank one), aligned with the rows pyarrow's JSON reader produces (it skips blank
    lines too)."""
    buf = np.frombuffer(data, np.uint8)
    starts = np.concatenate(([0], np.flatnonzero(buf == 10) + 1))
    ends = np.append(starts[1:], len(data))
    keep = ends > starts
    # a JSON object line starts with "{": only the others (blank, indented, junk) are looked at
    odd = np.flatnonzero(keep & (buf[np.minimum(starts, max(len(data) - 1, 0))] != ord("{")))
    for i in odd:
        keep[i] = bool(data[starts[i]:ends[i]].strip())
    offsets = np.append(starts[keep], len(data)).astype(np.int64)
    return pa.Array.from_buffers(pa.large_binary(), len(offsets) - 1,
                                 [None, pa.py_buffer(offsets), pa.py_buffer(data)])


def _lines_at(data: bytes, rows: list[int]) -> list[bytes]:
    """The non-blank lines numbered `rows` (ascending) — read sequentially when they are all near
    the top, as a commit's non-file actions usually are."""
    if not rows:
        return []
    if rows[-1] > 10_000:
        lines = _nonblank_lines(data)
        return [lines[i].as_py() for i in rows]
    wanted = set(rows)
    out = []
    pos = row = 0
    while row <= rows[-1]:
        end = data.find(b"\n", pos)
        line = data[pos:] if end < 0 else data[pos:end]
        if line.strip():
            if row in wanted:
                out.append(line)
            row += 1
        if end < 0:
            break
        pos = end + 1
    return out


def _take(arr: pa.Array, rows: pa.Array) -> pa.Array:
    """`arr.take(rows)` for ascending `rows`, zero-copy when they are contiguous."""
    if len(rows) and rows[-1].as_py() - rows[0].as_py() + 1 == len(rows):
        return arr.slice(rows[0].as_py(), len(rows))
    return arr.take(rows)


def _text(lines: pa.Array) -> pa.Array:
    """Binary lines as strings (UTF-8 checked)."""
    try:
        return lines.cast(pa.large_string())
    except pa.ArrowInvalid:
        raise Fallback("not UTF-8") from None


def _read_json(data: bytes, columns: dict[str, list[str]]) -> pa.Table:
    """Parse `data` keeping only `{action: [column, ...]}`; map columns come back as empty structs
    (their validity only)."""
    from .file_actions import ADD_SCHEMA, REMOVE_SCHEMA

    fields = []
    for action, cols in columns.items():
        schema = ADD_SCHEMA if action == "add" else REMOVE_SCHEMA
        sub = [pa.field(c, pa.struct([]) if c in _MAP_FIELDS else schema.field(c).type) for c in cols]
        fields.append(pa.field(action, pa.struct(sub)))
    try:
        return pa_json.read_json(
            pa.py_buffer(data),
            read_options=pa_json.ReadOptions(use_threads=True, block_size=4 << 20),
            parse_options=pa_json.ParseOptions(explicit_schema=pa.schema(fields), unexpected_field_behavior="ignore"))
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError, pa.ArrowTypeError) as e:
        raise Fallback(str(e)) from None


def _column(t: pa.Table, name: str) -> pa.Array:
    c = t.column(name)
    return c.combine_chunks() if c.num_chunks != 1 else c.chunk(0)


def _with_null_dv(arr: pa.Array) -> pa.Array:
    """A parsed add/remove struct column with an all-null deletionVector field added."""
    from .file_actions import DV_TYPE

    fields = [arr.type.field(i) for i in range(arr.type.num_fields)] + [pa.field("deletionVector", DV_TYPE)]
    children = [pc.struct_field(arr, i) for i in range(arr.type.num_fields)] + [pa.nulls(len(arr), DV_TYPE)]
    return pa.StructArray.from_arrays(children, fields=fields, mask=pc.is_null(arr))


def _map_column(data: bytes, lines: pa.Array, present: pa.Array, name: str) -> pa.Array:
    """The map `name` of each line (one action per line) as STRING_MAP, from the line text:
    `present` (from the JSON reader) says which lines hold an object there."""
    from .file_actions import STRING_MAP

    if not len(lines):
        return pa.nulls(0, STRING_MAP)
    got = pc.struct_field(pc.extract_regex(
        lines, rf'"{name}":\s*(?P<v>\{{(?:[^"{{}}\\]|"(?:[^"\\]|\\.)*")*\}}|null)'), "v")
    # the match must be the action's own key: the only occurrence in its line. Cheap when the
    # whole commit holds exactly one per matched line; else counted per line.
    if data.count(f'"{name}":'.encode()) != len(got) - got.null_count and \
            pc.max(pc.count_substring(lines, f'"{name}":')).as_py() > 1:
        raise Fallback(f"{name} key appears twice in a line")
    found = pc.and_(pc.is_valid(got), pc.not_equal(pc.fill_null(got, "null"), "null"))
    if not pc.all(pc.equal(found, present)).as_py():
        raise Fallback(f"{name} does not hold string values")
    values = pc.if_else(present, got, pa.scalar(None, got.type))
    uniq = pc.unique(values.filter(present))
    maps = []
    for text in uniq.to_pylist():
        try:
            d = orjson.loads(text)
        except orjson.JSONDecodeError:
            raise Fallback(f"{name} is not JSON") from None
        if not all(isinstance(v, str) or v is None for v in d.values()):
            raise Fallback(f"{name} does not hold string values")
        maps.append(list(d.items()))
    return pa.array(maps, STRING_MAP).take(pc.index_in(values, uniq))


class JsonCommit:
    """One large JSON commit, replayed vectorised. After construction: `others` (its non-file
    actions as dicts, in order), and per file action in order `is_add`, `keys`, `kind_row` (the
    action's index among the commit's adds, or among its removes)."""

    def __init__(self, store: LogStore, path: str, data: bytes, key_root: str):
        from .file_actions import REMOVE_SCHEMA, file_keys

        self._store = store
        self.path = path
        # parse only what the text can hold: most big commits have no removes and no DVs (a quoted
        # key can only be in the text unescaped — inside a string value its quotes are escaped)
        wanted = {a: [c for c in cols if c != "deletionVector" or b'"deletionVector"' in data]
                  for a, cols in _KEY_COLUMNS.items() if a == "add" or b'"remove"' in data}
        t = _read_json(data, wanted)
        self._n_rows = t.num_rows
        add = _column(t, "add")
        rem = _column(t, "remove") if "remove" in wanted else pa.nulls(t.num_rows, pa.struct(
            [pa.field(c, REMOVE_SCHEMA.field(c).type) for c in _KEY_COLUMNS["remove"]]))
        if "deletionVector" not in wanted["add"]:
            add = _with_null_dv(add)
            if "remove" in wanted:
                rem = _with_null_dv(rem)
        add_ok, rem_ok = pc.is_valid(add), pc.is_valid(rem)
        if pc.any(pc.and_(add_ok, rem_ok)).as_py():
            raise Fallback("a line with both add and remove")
        other = pc.indices_nonzero(pc.invert(pc.or_(add_ok, rem_ok))).to_pylist()
        self.others: list[dict] = []
        for line in _lines_at(data, other):
            try:
                obj = orjson.loads(line)
            except orjson.JSONDecodeError:
                raise Fallback("not JSON") from None
            if not isinstance(obj, dict):
                raise Fallback("not an object")
            self.others.append(obj)
        self._rows = {"add": pc.indices_nonzero(add_ok), "remove": pc.indices_nonzero(rem_ok)}
        self._cache: dict[str, dict[str, pa.Array]] = {"add": {}, "remove": {}}
        self._lock = threading.Lock()
        for action, arr in (("add", add), ("remove", rem)):
            sel = arr.filter(add_ok if action == "add" else rem_ok)
            for c in _KEY_COLUMNS[action]:
                col = pc.struct_field(sel, c)
                if c != "deletionVector" and col.null_count:
                    raise Fallback(f"{action} without {c}")
                self._cache[action][c] = col
            dv = self._cache[action]["deletionVector"]
            if dv.null_count != len(dv):
                has = pc.is_valid(dv)
                for f in ("storageType", "pathOrInlineDv"):
                    if pc.any(pc.and_(has, pc.is_null(pc.struct_field(dv, f)))).as_py():
                        raise Fallback(f"deletionVector without {f}")
        file_rows = pc.or_(add_ok, rem_ok)
        self.is_add = add_ok.filter(file_rows)
        if not pc.any(rem_ok).as_py():    # the usual big commit: adds only
            paths, dvs = self._cache["add"]["path"], self._cache["add"]["deletionVector"]
        else:
            paths = pc.if_else(add_ok, pc.struct_field(add, "path"), pc.struct_field(rem, "path")).filter(file_rows)
            dvs = pc.if_else(add_ok, pc.struct_field(add, "deletionVector"),
                             pc.struct_field(rem, "deletionVector")).filter(file_rows)
        self.keys = file_keys(paths, dvs, key_root)
        flags = self.is_add.to_numpy(zero_copy_only=False)
        self.kind_row = np.where(flags, np.cumsum(flags) - 1, np.cumsum(~flags) - 1)

    def table(self, action: str, columns: list[str]) -> pa.Table:
        """All the commit's `action` rows (in order) with `columns`, parsing what is not cached."""
        from .file_actions import ADD_SCHEMA, REMOVE_SCHEMA

        with self._lock:
            cache = self._cache[action]
            missing = [c for c in columns if c not in cache]
            if missing:
                data = self._store.read(self.path)
                try:
                    cache.update(self._parse(data, action, missing))
                except Fallback:
                    cache.update(self._parse_dicts(data, action))
            schema = ADD_SCHEMA if action == "add" else REMOVE_SCHEMA
            return pa.table([cache[c] for c in columns], schema=pa.schema([schema.field(c) for c in columns]))

    def _parse(self, data: bytes, action: str, columns: list[str]) -> dict[str, pa.Array]:
        rows = self._rows[action]
        t = _read_json(data, {action: columns})
        if t.num_rows != self._n_rows:
            raise Fallback("the commit changed")
        arr = _take(_column(t, action), rows)
        out = {}
        lines = None
        for c in columns:
            col = pc.struct_field(arr, c)
            if c in _MAP_FIELDS:
                if lines is None:
                    lines = _nonblank_lines(data)
                    if len(lines) != self._n_rows:
                        raise Fallback("line count differs")
                    lines = _text(_take(lines, rows))
                col = _map_column(data, lines, pc.is_valid(col), c)
            out[c] = col
        return out

    def _parse_dicts(self, data: bytes, action: str) -> dict[str, pa.Array]:
        """Every column of the commit's `action` rows, through the dict path."""
        from .file_actions import ADD_SCHEMA, REMOVE_SCHEMA, parse_commit

        acts = []
        for obj in parse_commit(data, self.path):
            a = obj.get("add")
            if a is None:
                if action == "remove" and obj.get("remove") is not None:
                    acts.append(obj["remove"])
            elif action == "add":
                acts.append(a)
        t = pa.Table.from_pylist(acts, schema=ADD_SCHEMA if action == "add" else REMOVE_SCHEMA)
        return {c: _column(t, c) for c in t.column_names}


class DictPiece:
    """The file actions of a small commit (parsed by the dict path), in the `JsonCommit` shape."""

    def __init__(self, actions: list[tuple[str, str, dict]]):
        """`actions`: (kind, key, action dict) in commit order."""
        self._by_kind = {"add": [a for k, _, a in actions if k == "add"],
                         "remove": [a for k, _, a in actions if k == "remove"]}
        self.is_add = pa.array([k == "add" for k, _, _ in actions], pa.bool_())
        self.keys = pa.array([key for _, key, _ in actions], pa.string())
        flags = np.array([k == "add" for k, _, _ in actions], dtype=bool)
        self.kind_row = np.where(flags, np.cumsum(flags) - 1, np.cumsum(~flags) - 1)

    def table(self, action: str, columns: list[str]) -> pa.Table:
        from .file_actions import ADD_SCHEMA, REMOVE_SCHEMA

        return pa.Table.from_pylist(self._by_kind[action],
                                    schema=ADD_SCHEMA if action == "add" else REMOVE_SCHEMA).select(columns)


def _last_index(t: pa.Table) -> pa.Table:
    """Per key `k`, the largest action index `i`."""
    return t.group_by("k").aggregate([("i", "max")]).rename_columns(["k", "last"])


class PieceTail:
    """The file actions of the commits after a checkpoint, reconciled in Arrow."""

    def __init__(self, pieces: list[Any]):
        self._pieces = pieces
        keys = pa.chunked_array([p.keys for p in pieces], pa.string()).combine_chunks()
        is_add = pa.chunked_array([p.is_add for p in pieces], pa.bool_()).combine_chunks()
        n = len(keys)
        self._piece_no = np.repeat(np.arange(len(pieces)), [len(p.keys) for p in pieces])
        self._kind_row = np.concatenate([p.kind_row for p in pieces]) if pieces else np.zeros(0, np.int64)
        self._touched = pc.unique(keys)
        if len(self._touched) == n:    # every key once: nothing to reconcile
            self._selected = {"add": pc.indices_nonzero(is_add), "remove": pc.indices_nonzero(pc.invert(is_add))}
        else:
            self._selected = self._reconcile(keys, is_add)

    @staticmethod
    def _reconcile(keys: pa.Array, is_add: pa.Array) -> dict[str, pa.Array]:
        """Per kind, the indices of the surviving actions (the newest reference of each key), in the
        order the dict path yields them: by where the key's current run of that kind began."""
        t = pa.table({"k": keys, "a": is_add, "i": pa.array(np.arange(len(keys)), pa.int64())})
        winners = pc.is_in(t.column("i"), value_set=_last_index(t).column("last"))
        out = {}
        for kind, flag in (("add", True), ("remove", False)):
            mine = t.filter(pc.equal(t.column("a"), flag))
            other = _last_index(t.filter(pc.equal(t.column("a"), not flag))).rename_columns(["k", "other"])
            runs = mine.join(other, "k", join_type="left outer")
            runs = runs.filter(pc.greater(runs.column("i"), pc.fill_null(runs.column("other"), -1)))
            start = runs.group_by("k").aggregate([("i", "min")]).rename_columns(["k", "start"])
            won = t.filter(pc.and_(winners, pc.equal(t.column("a"), flag))).join(start, "k")
            out[kind] = won.sort_by("start").column("i").combine_chunks()
        return out

    def touched(self) -> pa.Array | None:
        """Every key the tail references (a checkpoint row with one of them is superseded)."""
        return self._touched if len(self._touched) else None

    def table(self, action: str, columns: Iterable[str]) -> pa.Table | None:
        sel = self._selected[action]
        if not len(sel):
            return None
        cols = list(columns)
        idx = sel.to_numpy()
        piece_no = self._piece_no[idx]
        used = sorted(set(piece_no.tolist()))
        parts = [self._pieces[i].table(action, cols) for i in used]
        offsets = np.zeros(len(self._pieces), np.int64)
        acc = 0
        for i, part in zip(used, parts):
            offsets[i] = acc
            acc += part.num_rows
        rows = offsets[piece_no] + self._kind_row[idx]
        whole = pa.concat_tables(parts) if len(parts) > 1 else parts[0]
        if len(rows) == whole.num_rows and np.array_equal(rows, np.arange(len(rows))):
            return whole
        return whole.take(pa.array(rows))
