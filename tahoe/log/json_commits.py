"""Vectorised replay of large JSON commits: `tahoe.log.replay`'s reconciliation (spec "Action Reconciliation")
with the file actions kept in Arrow.

  1. pyarrow's JSON reader parses the commit (`JsonCommit.parse`): strictly — the fields its file lines hold,
     any other an error — where it is laid out as writers lay out big commits, else every field it may hold.
  2. `partitionValues` come from the parse where it proves them exact, else, with `tags`, from the text:
     decoded with orjson once per distinct value, key order and nulls kept.
  3. Anything uncertain raises `Fallback`: the caller replays that commit with the dict path (`read_commit`).
  4. `PieceTail` reconciles the commits after a checkpoint in the dict path's row order."""

from __future__ import annotations

import functools
import threading
from concurrent.futures import ThreadPoolExecutor
from typing import Any, Callable, Iterable, NamedTuple

import numpy as np
from numpy.lib.stride_tricks import sliding_window_view
import orjson
import pyarrow as pa
import pyarrow.json as pa_json

from ..storage.base import LogStore
from . import compute as pc
from .arrow_build import (
    all_distinct, bool_numpy, column, empty, int_numpy, lean, memory_pool, null_array, numpy_array, scalar,
    string_digests, table_from_rows,
)

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
    # the newlines, found a few MB at a time: one comparison of the whole text would allocate (and
    # fault in) a mask as large as the commit, which costs more than the scan itself
    step = 1 << 22
    newlines = [np.flatnonzero(buf[lo:lo + step] == 10) + (lo + 1) for lo in range(0, len(buf), step)]
    starts = np.concatenate([np.zeros(1, np.int64)] + newlines)
    ends = np.append(starts[1:], len(data))
    keep = ends > starts
    # a JSON object line starts with "{": only the others (blank, indented, junk) are looked at
    odd = np.flatnonzero(keep & (buf[np.minimum(starts, max(len(data) - 1, 0))] != ord("{")))
    for i in odd:
        keep[i] = bool(data[starts[i]:ends[i]].strip())
    offsets = np.append(starts[keep], len(data)).astype(np.int64)
    return pa.Array.from_buffers(pa.large_binary(), len(offsets) - 1,
                                 [None, pa.py_buffer(offsets), pa.py_buffer(data)])


def _lines_at(data: bytes, rows: list[int], lines: Callable[[], pa.Array]) -> list[bytes]:
    """The non-blank lines numbered `rows` (ascending) — read sequentially when they are all near
    the top, as a commit's non-file actions usually are; else from `lines()` (`_nonblank_lines`)."""
    if not rows:
        return []
    if rows[-1] > 10_000:
        every = lines()
        return [every[i].as_py() for i in rows]
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
    return pc.take(arr, rows)


def _text(lines: pa.Array) -> pa.Array:
    """Binary lines as strings (UTF-8 checked)."""
    try:
        return pc.cast(lines, pa.large_string())
    except pa.ArrowInvalid:
        raise Fallback("not UTF-8") from None


def _read_json(data: bytes, columns: dict[str, list[str]], partition_hint: list[str] | None = None, *,
               span: tuple[int, int] | None = None, strict: bool = False) -> pa.Table:
    """Parse `data` (its bytes `span` when given) keeping only `{action: [column, ...]}`. Map
    columns come back as structs: `partitionValues` with a string field per column of
    `partition_hint` (the values the partition columns most likely hold; `_partition_values`
    checks them against the text), the others empty (their validity only). `strict`: a field of
    any line that `columns` does not name is an error (Fallback), not skipped."""
    from .file_actions import ADD_SCHEMA, REMOVE_SCHEMA

    fields = []
    for action, cols in columns.items():
        schema = ADD_SCHEMA if action == "add" else REMOVE_SCHEMA
        sub = []
        for c in cols:
            t = schema.field(c).type
            if c == "partitionValues" and partition_hint is not None:
                t = pa.struct([(k, pa.string()) for k in partition_hint])
            elif c in _MAP_FIELDS:
                t = pa.struct([])
            sub.append(pa.field(c, t))
        fields.append(pa.field(action, pa.struct(sub)))
    options = pa_json.ParseOptions(explicit_schema=pa.schema(fields),
                                   unexpected_field_behavior="error" if strict else "ignore")
    lo, hi = span if span is not None else (0, len(data))
    whole = pa.py_buffer(data)

    def parse(piece: pa.Buffer) -> pa.Table:
        try:
            return pa_json.read_json(piece, read_options=pa_json.ReadOptions(use_threads=False, block_size=4 << 20),
                                     parse_options=options, memory_pool=memory_pool())
        except (pa.ArrowInvalid, pa.ArrowNotImplementedError, pa.ArrowTypeError) as e:
            raise Fallback(str(e)) from None

    # pyarrow's reader parses a text on one core, threads or not (measured: the same wall time):
    # a large commit is cut at line ends into a piece per core, parsed at once (a newline never
    # occurs inside a JSON line), the pieces' rows in order
    cuts = _piece_bounds(data, lo, hi)
    pieces = [whole.slice(a, b - a) for a, b in zip(cuts[:-1], cuts[1:])]
    if len(pieces) == 1:
        return parse(pieces[0])
    with ThreadPoolExecutor(max_workers=len(pieces) - 1) as ex:
        rest = ex.map(parse, pieces[1:])
        first = parse(pieces[0])
        return pa.concat_tables([first, *rest])


_PIECE_MIN_BYTES = 4 << 20


def _piece_bounds(data: bytes, lo: int = 0, hi: int | None = None) -> list[int]:
    """Offsets cutting `data[lo:hi]` into about one piece per core, each ending at a line end
    (pieces of at least _PIECE_MIN_BYTES)."""
    import os

    hi = len(data) if hi is None else hi
    n = min(os.cpu_count() or 1, (hi - lo) // _PIECE_MIN_BYTES)
    cuts = [lo]
    for k in range(1, n):
        at = data.find(b"\n", lo + (hi - lo) * k // n, hi)
        if at < 0 or at + 1 >= hi:
            break
        if at + 1 > cuts[-1]:
            cuts.append(at + 1)
    cuts.append(hi)
    return cuts


def _column(t: pa.Table, name: str) -> pa.Array:
    c = t.column(name)
    return c.combine_chunks() if c.num_chunks != 1 else c.chunk(0)


def _flat(c: pa.Array | pa.ChunkedArray) -> pa.Array:
    """One array (a copy only when there are several chunks)."""
    if isinstance(c, pa.ChunkedArray):
        return c.combine_chunks() if c.num_chunks != 1 else c.chunk(0)
    return c


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
    null_text = scalar("null")
    found = pc.and_(pc.is_valid(got), pc.not_equal(pc.fill_null(got, null_text), null_text))
    if not pc.all(pc.equal(found, present)).as_py():
        raise Fallback(f"{name} does not hold string values")
    values = pc.if_else(present, got, scalar(None, got.type))
    uniq = pc.unique(pc.filter(values, present))
    maps = []
    for text in uniq.to_pylist():
        try:
            d = orjson.loads(text)
        except orjson.JSONDecodeError:
            raise Fallback(f"{name} is not JSON") from None
        if not all(isinstance(v, str) or v is None for v in d.values()):
            raise Fallback(f"{name} does not hold string values")
        maps.append(list(d.items()))
    return pc.take(column(maps, STRING_MAP), pc.index_in(values, uniq))


_PV_KEY = b'"partitionValues":'


def _partition_hint(data: bytes, hint: list[str] | None) -> list[str] | None:
    """The partition columns of the commit's own metaData when it has one (a table's first
    commit), else `hint` (those of the table before it)."""
    at = data.find(b'{"metaData":', 0, 1 << 20)   # a hint only: where writers put it, near the top
    if at < 0:
        return hint
    end = data.find(b"\n", at)
    try:
        md = orjson.loads(data[at:end if end >= 0 else len(data)]).get("metaData")
    except (orjson.JSONDecodeError, AttributeError):
        return hint
    cols = md.get("partitionColumns") if isinstance(md, dict) else None
    if isinstance(cols, list) and all(isinstance(c, str) for c in cols):
        return cols
    return hint


def _long_lines(data: bytes) -> bool:
    """True when the commit's first lines average over a kilobyte (file actions with wide stats)."""
    head = min(len(data), 1 << 16)
    return head > 1024 * (data.count(b"\n", 0, head) + 1)


def _at(buf: np.ndarray, starts: np.ndarray) -> pa.Array | None:
    """The text of `buf` from each of the ascending offsets `starts` as Arrow binary values (each
    runs to the next offset: a view of the buffer, no copy), or None when `starts` do not ascend."""
    if len(starts) > 1 and not (starts[1:] > starts[:-1]).all():
        return None
    offsets = np.append(starts, len(buf)).astype(np.int64)
    return pa.Array.from_buffers(pa.large_binary(), len(starts), [None, pa.py_buffer(offsets), pa.py_buffer(buf)])


def _matches_at(buf: np.ndarray, starts: np.ndarray, text: bytes) -> bool:
    """True when `text` is at every offset `starts` of `buf`. (Where two offsets are closer than
    `text` is long the answer may be False: callers then take a slower exact path.)"""
    if not len(starts):
        return True
    if len(text) > len(buf) or starts.min() < 0 or starts.max() + len(text) > len(buf):
        return False
    values = _at(buf, starts)
    if values is not None:   # Arrow's starts_with over a view of the text: a memcmp per offset
        return bool(pc.all(pc.starts_with(values, text)).as_py())
    windows = sliding_window_view(buf, len(text))    # row i: the len(text) bytes from i (a view)
    want = np.frombuffer(text, dtype=np.uint8)
    step = max(1, (1 << 24) // len(text))             # bounded gathers
    return all((windows[starts[lo:lo + step]] == want).all() for lo in range(0, len(starts), step))


def _map_starts(buf: np.ndarray, line_starts: np.ndarray, action: str, paths: pa.Array) -> np.ndarray | None:
    """Where the partitionValues object of each `action` line begins, when the lines are laid out
    as delta-spark, delta-rs and tahoe write them — `{"add":{"path":"<path>","partitionValues":`
    at the start of the line — or as Python's json.dumps does, with a space after each `:` and
    `,`. The path is not compared: the parse succeeded, so a string that ends exactly where the
    parsed path's bytes end and is followed by `","partitionValues":` is that path (an escape
    would make the text longer, putting an unescaped quote inside it)."""
    for colon, comma in ((b":", b","), (b": ", b", ")):
        prefix = b'{"' + action.encode() + b'"' + colon + b'{"path"' + colon + b'"'
        if not _matches_at(buf, line_starts, prefix):
            continue
        after = line_starts + len(prefix) + int_numpy(pc.binary_length(paths)).astype(np.int64)
        key = b'"' + comma + b'"partitionValues"' + colon
        if not _matches_at(buf, after, key):
            return None
        return after + len(key)
    return None


def _partition_values(buf: np.ndarray, starts: np.ndarray, parsed: pa.Array, hint: list[str]) -> pa.Array | None:
    """The partitionValues maps of file actions whose objects begin at `starts`, from the JSON
    reader's struct of the `hint` columns — or None when that struct is not exactly what the text
    holds.

    Exact means: each object is, byte for byte, the one the parsed values re-encode to
    (`{"k1":"v1","k2":null}`: every hinted key, in hint order, no other key, no whitespace) — what
    delta-spark, delta-rs and tahoe write. The check is one comparison of every row's expected
    text (`_texts_at`); anything else (another key order, extra or absent keys, escapes written
    differently) returns None and the caller reads the maps from the text (`_map_column`)."""
    from .file_actions import STRING_MAP

    n = len(starts)
    if parsed.null_count:
        return None
    codes, dicts = [], []
    for k in hint:
        enc = pc.dictionary_encode(pc.struct_field(parsed, k))
        d = enc.dictionary.to_pylist() + [None]
        codes.append(pc.fill_null(enc.indices, scalar(len(d) - 1, enc.indices.type)))
        dicts.append(d)
    if len(hint) == 1:   # the usual case: a map per distinct value
        entries = [[(hint[0], v)] for v in dicts[0]]
        which = codes[0]
    else:                # a map per distinct combination of values
        combo = np.zeros(n, dtype=np.int64)
        ixs = [int_numpy(c).astype(np.int64) for c in codes]
        for ix, d in zip(ixs, dicts):
            combo = combo * len(d) + ix
            _, combo = np.unique(combo, return_inverse=True)   # keep the codes small
        _, first, inv = np.unique(combo, return_index=True, return_inverse=True)
        entries = [[(k, dicts[j][ixs[j][row]]) for j, k in enumerate(hint)] for row in first]
        which = numpy_array(inv.astype(np.int64))
    # the writers' compact form, else json.dumps's (a space after each `:` and `,`)
    for colon, comma in ((b":", b","), (b": ", b", ")):
        if _texts_at(buf, starts, hint, dicts, codes, colon, comma):
            if len(hint) == 1 and (maps := _one_key_maps(hint[0], pc.struct_field(parsed, hint[0]))) is not None:
                return maps
            return pc.take(column(entries, STRING_MAP), which)
        if not hint:    # `{}`: the same either way
            break
    return None


def _parsed_maps(parsed: pa.Array, hint: list[str]) -> pa.Array | None:
    """The partitionValues maps of a strict parse's struct of the `hint` columns (see
    `JsonCommit.parse`) when they follow from it alone: no partition column, or one set on every
    line. A strict parse fails on an object with a key other than the hint's, with a key twice,
    or with a value that is not a string or null; so such an object is `{}`, or `{key: value}`
    with the parsed value — what json.loads reads. (With two columns or more their order in
    the text is not known: `_partition_values` compares the text.)"""
    from .file_actions import STRING_MAP

    n = len(parsed)
    if parsed.null_count or len(hint) > 1:
        return None
    if not hint:
        zeros = pa.Array.from_buffers(pa.int32(), n + 1, [None, pa.py_buffer(np.zeros(n + 1, np.int32))])
        return pa.MapArray.from_arrays(zeros, empty(pa.string()), empty(pa.string()), type=STRING_MAP)
    values = pc.struct_field(parsed, hint[0])
    if values.null_count:
        return None
    try:
        values.validate(full=True)    # UTF-8, as a JSON parse checks
    except pa.ArrowInvalid:
        return None
    return _one_key_maps(hint[0], values)


def _one_key_maps(key: str, values: pa.Array) -> pa.Array | None:
    """STRING_MAP rows `{key: values[i]}`, made from the parsed values in place (the keys: one
    buffer of the key repeated) rather than gathered from a map per distinct value; None when the
    keys would not fit a string column."""
    from .file_actions import STRING_MAP

    n, k = len(values), key.encode()
    if values.type != pa.string() or n * len(k) >= 1 << 31:
        return None
    key_offsets = np.arange(0, n * len(k) + 1, len(k), dtype=np.int32)
    keys = pa.Array.from_buffers(pa.string(), n, [None, pa.py_buffer(key_offsets), pa.py_buffer(k * n)])
    offsets = pa.Array.from_buffers(pa.int32(), n + 1, [None, pa.py_buffer(np.arange(n + 1, dtype=np.int32))])
    return pa.MapArray.from_arrays(offsets, keys, values, type=STRING_MAP)


def _texts_at(buf: np.ndarray, starts: np.ndarray, hint: list[str], dicts: list[list], codes: list[pa.Array],
              colon: bytes, comma: bytes) -> bool:
    """True when at each offset `starts[i]` of `buf` is row i's map object as the writers encode
    it: `{"k1"<colon>v1<comma>"k2"<colon>v2}`, the value of column j being `dicts[j][codes[j][i]]`
    (orjson's encoding: a JSON string or null). The rows' texts are built in Arrow, the text's
    slices of the same lengths taken from `buf`, and the two compared at once."""
    n = len(starts)
    if not n:
        return True
    if not hint:
        return _matches_at(buf, starts, b"{}")
    cols = []
    for j, (k, d, ix) in enumerate(zip(hint, dicts, codes)):
        head = (b"{" if j == 0 else b"") + orjson.dumps(k) + colon
        tail = b"}" if j == len(hint) - 1 else b""
        cols.append(pc.take(column([head + orjson.dumps(v) + tail for v in d], pa.large_binary()), ix))
    expected = cols[0] if len(cols) == 1 else \
        pc.binary_join_element_wise(*cols, scalar(comma, pa.large_binary()))
    ends = starts + int_numpy(pc.binary_length(expected)).astype(np.int64)
    # the slices as the even values of one array over `buf` (the odd ones: the text between
    # them): a view, so they must not overlap — each begins after the one before it ends
    if int(starts[0]) < 0 or int(ends[-1]) > len(buf) or (n > 1 and not (starts[1:] >= ends[:-1]).all()):
        return False
    offsets = np.empty(2 * n + 1, np.int64)
    offsets[0:2 * n:2] = starts
    offsets[1:2 * n:2] = ends
    offsets[2 * n] = len(buf)
    both = pa.Array.from_buffers(pa.large_binary(), 2 * n, [None, pa.py_buffer(offsets), pa.py_buffer(buf)])
    actual = pc.take(both, numpy_array(np.arange(0, 2 * n, 2, dtype=np.int64)))
    return bool(pc.all(pc.equal(actual, expected)).as_py())


_FILE_PREFIXES = (b'{"add":', b'{"remove":')
# Lines other than file actions a commit may hold before and after its run of file actions (its
# commitInfo, protocol, metaData, txns, domain metadata ...) for the strict parse to be tried.
_EDGE_MAX_LINES = 64
# Lines of the run sampled between its first and last for the fields the strict parse is given.
_SAMPLE_LINES = 16


class _Parse(NamedTuple):
    """What `JsonCommit.parse` makes of a commit's text."""
    table: pa.Table                    # a row per line parsed (from the line numbered `first` on)
    columns: dict[str, list[str]]      # the columns parsed, per action
    hint: list[str] | None             # the keys partitionValues was parsed with (as a struct)
    absent: dict[str, list[str]]       # columns no line holds a value of (all null), per action
    first: int                         # the number of non-blank lines before the table's first row
    edges: list[bytes] | None          # strict: the non-blank lines before and after the parsed run
    n_rows: int                        # the commit's non-blank lines


def _file_run(data: bytes) -> tuple[int, int, list[bytes], list[bytes]] | None:
    """The run of file-action lines of a commit laid out as writers lay out a big one: a few
    other actions before and after lines that each begin `{"add":` or `{"remove":`. Returns
    (start, stop, lines before, lines after): `data[start:stop]` runs from the start of the first
    file line to the end of the last (its newline excluded); the others are the non-blank lines
    outside it. None when no line begins so, or more than _EDGE_MAX_LINES others."""
    head: list[bytes] = []
    pos = 0
    while not data.startswith(_FILE_PREFIXES, pos):
        end = data.find(b"\n", pos)
        line = data[pos:] if end < 0 else data[pos:end]
        if line.strip():
            if len(head) == _EDGE_MAX_LINES:
                return None
            head.append(line)
        if end < 0:
            return None
        pos = end + 1
    tail: list[bytes] = []
    stop = len(data)
    while True:      # ends at the latest at the first file line, found above
        nl = data.rfind(b"\n", pos, stop)
        begin = nl + 1 if nl >= 0 else pos
        if data.startswith(_FILE_PREFIXES, begin):
            break
        line = data[begin:stop]
        if line.strip():
            if len(tail) == _EDGE_MAX_LINES:
                return None
            tail.append(line)
        stop = nl
    tail.reverse()
    return pos, stop, head, tail


def _strict_columns(data: bytes, start: int, stop: int,
                    hint: list[str] | None) -> tuple[dict[str, list[str]], list[str]] | None:
    """The columns to parse a run of file lines (`_file_run`) with in strict mode: the fields its
    first and last lines and _SAMPLE_LINES lines spread between hold (a writer writes the same
    fields on each line of a kind; one that writes a field on some lines only makes the strict
    parse fail, and the plain one is made instead); and the keys to parse partitionValues with
    (`hint`, else the first sampled line's). None when those lines hold a field the strict parse
    cannot take as the plain one does: a field the schema does not know, tags with values (read
    from the text), partition values under keys other than the first line's."""
    from .file_actions import ADD_SCHEMA, REMOVE_SCHEMA

    last = data.rfind(b"\n", start, stop)
    starts = [start, last + 1 if last >= 0 else start]
    for k in range(1, _SAMPLE_LINES + 1):    # the line after each of evenly spread offsets
        at = data.find(b"\n", start + (stop - start) * k // (_SAMPLE_LINES + 1), stop)
        if at >= 0:
            starts.append(at + 1)
    lines = []
    for a in sorted(set(starts)):
        end = data.find(b"\n", a, stop)
        lines.append(data[a:stop if end < 0 else end])
    seen: dict[str, set[str]] = {}
    pvs: list[dict] = []
    for line in lines:
        try:
            obj = orjson.loads(line)
        except orjson.JSONDecodeError:
            return None
        if not isinstance(obj, dict) or len(obj) != 1:
            return None
        (action, value), = obj.items()
        if action not in ("add", "remove") or not isinstance(value, dict):
            return None
        names = (ADD_SCHEMA if action == "add" else REMOVE_SCHEMA).names
        for k, v in value.items():
            if k not in names or (k == "tags" and v is not None):
                return None
            if k == "partitionValues" and v is not None:
                if not isinstance(v, dict):
                    return None
                pvs.append(v)
        seen.setdefault(action, set()).update(value)
    # the partition columns, else the first line's keys (physical names, under column mapping)
    if hint is None or not all(set(v) <= set(hint) for v in pvs):
        hint = list(pvs[0]) if pvs else []
        if not all(set(v) <= set(hint) for v in pvs):
            return None
    return {action: [c for c in (ADD_SCHEMA if action == "add" else REMOVE_SCHEMA).names
                     if c in keys or c == "path"] for action, keys in seen.items()}, hint


def _newlines(buf: np.ndarray, lo: int, hi: int) -> np.ndarray:
    """The offsets of the newlines of `buf[lo:hi]`, found a few MB at a time: one comparison of
    the whole text would allocate (and fault in) a mask as large as the commit."""
    step = 1 << 22
    found = [np.flatnonzero(buf[a:min(a + step, hi)] == 10) + a for a in range(lo, hi, step)]
    return np.concatenate(found) if found else np.zeros(0, np.int64)


def _one_object_per_line(buf: np.ndarray, lo: int, hi: int, rows: int) -> bool:
    """True when `buf[lo:hi]`, parsed as `rows` objects, holds one object a line, as a
    line-by-line parse (the dict path) reads it: it has `rows` lines, each beginning with `{` and
    ending with `}`. That is enough: JSON allows no newline inside a string (the parse refuses
    it) and no `{` right after a value closes, so a newline between `}` and `{` lies between two
    objects — no object spans lines — and each line, beginning with `{`, begins one."""
    nl = _newlines(buf, lo, hi)
    if len(nl) + 1 != rows:
        return False
    return bool((buf[np.append(lo, nl + 1)] == ord("{")).all() and (buf[np.append(nl, hi) - 1] == ord("}")).all())


class JsonCommit:
    """One large JSON commit, replayed vectorised. After construction: `others` (its non-file
    actions as dicts, in order), and per file action in order `is_add`, `keys` (in chunks: a list
    of arrays, with `key_digests` a list to match), `kind_row` (the action's index among the
    commit's adds, or among its removes).

    The text is parsed once, with every column of the file actions: the caller of a replay
    almost always lists the files next (their paths, partition values, sizes and stats), and
    pyarrow's reader tokenises the whole text whatever it keeps. Maps that the parse cannot
    give exactly (see `_partition_values`; `tags` whenever a line has them) are read from the
    text when first asked for."""

    @staticmethod
    def parse(data: bytes, partition_columns: list[str] | None = None) -> _Parse:
        """The parse of the commit's text a `JsonCommit` is built from (Fallback when pyarrow
        cannot parse it as expected): no Python objects are made, so it can run in another
        thread (`tahoe.log.replay` parses the next large commit while it replays one).

        1. Strict, where the commit is laid out as writers lay out big ones (`_file_run`): its run
           of file lines parsed with the fields its sampled lines hold (`_strict_columns`), any
           other field an error, and checked to hold one object a line. Parsed so, the fields no
           line holds cost nothing (they are all null), and every map holds only the keys
           parsed, each once, with string values.
        2. Otherwise (or when the strict parse fails) every column of the file actions, fields
           the schema does not name skipped."""
        hint = _partition_hint(data, partition_columns)
        run = _file_run(data)
        strict = _strict_columns(data, run[0], run[1], hint) if run is not None else None
        if strict is not None:
            (columns, hint), (start, stop, head, tail) = strict, run
            try:
                t = _read_json(data, columns, hint, span=(start, stop), strict=True)
            except Fallback:
                t = None
            if t is not None and _one_object_per_line(np.frombuffer(data, np.uint8), start, stop, t.num_rows):
                from .file_actions import ADD_SCHEMA, REMOVE_SCHEMA

                absent = {a: [c for c in (ADD_SCHEMA if a == "add" else REMOVE_SCHEMA).names
                              if c not in columns.get(a, ())] for a in ("add", "remove")}
                return _Parse(t, columns, hint, absent, len(head), head + tail, len(head) + t.num_rows + len(tail))
        return JsonCommit._plain_parse(data, hint)

    @staticmethod
    def _plain_parse(data: bytes, hint: list[str] | None) -> _Parse:
        from .file_actions import ADD_SCHEMA

        # parse only what the text can hold: most big commits have no DVs (a quoted key can only
        # be in the text unescaped — inside a string value its quotes are escaped). Looking for
        # it costs a pass over the text, parsing the field a little per line: on long lines
        # (wide stats) it is parsed. Removes are found by the parse (a path per line is all it
        # takes); their other columns are parsed when asked for (`table`).
        has_dv = _long_lines(data) or b'"deletionVector"' in data
        wanted = {"add": [c for c in ADD_SCHEMA.names if c != "deletionVector" or has_dv],
                  "remove": [c for c in _KEY_COLUMNS["remove"] if c != "deletionVector" or has_dv]}
        t = _read_json(data, wanted, hint)
        absent = {a: [] if has_dv else ["deletionVector"] for a in ("add", "remove")}
        return _Parse(t, wanted, hint, absent, 0, None, t.num_rows)

    def __init__(self, store: LogStore, path: str, data: bytes, key_root: str,
                 partition_columns: list[str] | None = None, parsed: Any = None):
        """`parsed`: `JsonCommit.parse(data, ...)` already made (or the Fallback it raised)."""
        from .file_actions import ADD_SCHEMA, REMOVE_SCHEMA, file_keys

        self._store = store
        self.path = path
        if isinstance(parsed, Fallback):
            raise parsed
        p = parsed if parsed is not None else JsonCommit.parse(data, partition_columns)
        t, wanted, hint = p.table, p.columns, p.hint
        self._n_rows = p.n_rows
        self._strict = p.edges is not None
        no_rows = numpy_array(np.zeros(t.num_rows, dtype=bool))
        add = t.column("add") if "add" in t.column_names else None   # chunked, as parsed: combining
        rem = t.column("remove") if "remove" in t.column_names else None   # the chunks would copy every column
        add_ok = _flat(pc.is_valid(add)) if add is not None else no_rows
        rem_ok = _flat(pc.is_valid(rem)) if rem is not None else no_rows
        if not rem_ok.true_count:     # the usual big commit: adds only
            rem = rem_ok = None
        file_rows = add_ok if rem_ok is None else pc.or_(add_ok, rem_ok)
        if rem_ok is not None and pc.any(pc.and_(add_ok, rem_ok)).as_py():
            raise Fallback("a line with both add and remove")
        other = int_numpy(pc.indices_nonzero(pc.invert(file_rows))).tolist()
        self.others: list[dict] = []
        lines = functools.cache(lambda: _nonblank_lines(data))   # the line offsets, found once if needed
        if p.edges is not None and other:
            raise Fallback("a line of the file actions' run without one")
        for line in p.edges if p.edges is not None else _lines_at(data, other, lines):
            try:
                obj = orjson.loads(line)
            except orjson.JSONDecodeError:
                raise Fallback("not JSON") from None
            if not isinstance(obj, dict):
                raise Fallback("not an object")
            if p.edges is not None and ("add" in obj or "remove" in obj):   # a file action laid out otherwise
                raise Fallback("a file action outside the run")
            self.others.append(obj)
        local = {"add": pc.indices_nonzero(add_ok),
                 "remove": pc.indices_nonzero(rem_ok) if rem_ok is not None else numpy_array(np.zeros(0, np.uint64))}
        # the rows among the commit's non-blank lines (the parse's rows when it parsed them all)
        self._rows = local if not p.first else \
            {a: numpy_array(int_numpy(r) + np.uint64(p.first)) for a, r in local.items()}
        self._cache: dict[str, dict[str, pa.Array | pa.ChunkedArray]] = {"add": {}, "remove": {}}
        self._lock = threading.Lock()
        maps: dict[str, dict[str, pa.Array]] = {"add": {}, "remove": {}}
        self._cache["add"] = {} if add is not None else {f.name: empty(f.type) for f in ADD_SCHEMA}   # a run of removes
        for action, arr in (("add", add), ("remove", rem)):
            if arr is None:
                continue
            sel = _take(arr, local[action])
            for c in wanted[action]:
                col = pc.struct_field(sel, c)
                if c in _MAP_FIELDS:
                    maps[action][c] = _flat(col)
                    continue
                # an all-null column (row ids, clustering provider, ...) costs nothing kept; the
                # path stays in the parse's chunks (keyed chunk by chunk) unless removes join it
                flat = c == "deletionVector" or (c == "path" and rem_ok is not None)
                self._cache[action][c] = lean(_flat(col) if flat else col)
            schema = ADD_SCHEMA if action == "add" else REMOVE_SCHEMA
            for c in p.absent[action]:     # no line holds one
                self._cache[action][c] = null_array(schema.field(c).type, len(local[action]))
            for c in _KEY_COLUMNS[action]:
                if c != "deletionVector" and c in self._cache[action] and self._cache[action][c].null_count:
                    raise Fallback(f"{action} without {c}")
            dv = self._cache[action]["deletionVector"]
            if dv.null_count != len(dv):
                has = pc.is_valid(dv)
                for f in ("storageType", "pathOrInlineDv"):
                    if pc.any(pc.and_(has, pc.is_null(pc.struct_field(dv, f)))).as_py():
                        raise Fallback(f"deletionVector without {f}")
        self._maps(data, maps, hint, lines)
        self.is_add = pc.filter(add_ok, file_rows) if rem_ok is not None else pc.filter(add_ok, add_ok)
        flags = bool_numpy(self.is_add)
        self.kind_row = np.where(flags, np.cumsum(flags) - 1, np.cumsum(~flags) - 1)
        adds = self._cache["add"]
        if rem_ok is None or not len(self._rows["remove"]):    # the usual big commit: adds only
            paths, dvs = adds["path"], adds["deletionVector"]
        else:   # file actions in line order: adds and removes interleaved
            rems = self._cache["remove"]
            order = numpy_array(np.where(flags, self.kind_row, len(adds["path"]) + self.kind_row).astype(np.int64))
            paths = pc.take(pa.concat_arrays([adds["path"], rems["path"]]), order)
            dvs = pc.take(pa.concat_arrays([adds["deletionVector"], rems["deletionVector"]]), order)
        if isinstance(paths, pa.ChunkedArray) and dvs.null_count == len(dvs):   # no DV: keyed chunk by chunk
            self.keys = [file_keys(c, None, key_root) for c in paths.chunks]
        else:
            self.keys = [file_keys(paths, dvs, key_root)]
        # made here, while the next commit is being parsed, rather than all at once at the end
        self.key_digests = [string_digests(k) for k in self.keys]

    def _maps(self, data: bytes, parsed: dict[str, dict[str, pa.Array]], hint: list[str] | None,
              nonblank_lines: Callable[[], pa.Array]) -> None:
        """Cache the map columns the parse gives exactly: tags nobody wrote, partitionValues a
        strict parse gives (`_parsed_maps`) or that match the text (`_partition_values`). The
        others are left for `table` to read."""
        from .file_actions import STRING_MAP

        pv_rows = {}
        for action, cols in parsed.items():
            tags = cols.get("tags")
            if tags is not None and tags.null_count == len(tags):
                self._cache[action]["tags"] = null_array(STRING_MAP, len(tags))
            pv = cols.get("partitionValues")
            if pv is not None and hint is not None and len(pv):
                pv_rows[action] = pv
        if self._strict:
            for action in list(pv_rows):
                got = _parsed_maps(pv_rows[action], hint)
                if got is not None:
                    self._cache[action]["partitionValues"] = got
                    del pv_rows[action]
        if not pv_rows:
            return
        lines = nonblank_lines()
        if len(lines) != self._n_rows:
            return
        line_starts = np.frombuffer(lines.buffers()[1], dtype=np.int64, count=len(lines) + 1)[:-1]
        buf = np.frombuffer(data, dtype=np.uint8)
        found = None
        for action, pv in pv_rows.items():
            rows = int_numpy(self._rows[action]).astype(np.int64)
            starts = _map_starts(buf, line_starts[rows], action, self._cache[action]["path"])
            if starts is None:
                # any layout: the first "partitionValues": of each line, when every line has one
                if found is None:
                    if data.count(_PV_KEY) != sum(len(x) - x.null_count for x in pv_rows.values()):
                        return
                    found = int_numpy(pc.fill_null(pc.find_substring(lines, _PV_KEY.decode()), scalar(-1, pa.int64())))
                at = found[rows]
                if len(at) and at.min() < 0:
                    continue
                starts = line_starts[rows] + at + len(_PV_KEY)
            got = _partition_values(buf, starts, pv, hint)
            if got is not None:
                self._cache[action]["partitionValues"] = got

    def table(self, action: str, columns: list[str]) -> pa.Table:
        """All the commit's `action` rows (in order) with `columns`, reading the maps that are not
        cached from the text."""
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
            return pa.table([cache[c] if isinstance(cache[c], pa.ChunkedArray) else pa.chunked_array([cache[c]])
                             for c in columns], schema=pa.schema([schema.field(c) for c in columns]))

    def _parse(self, data: bytes, action: str, columns: list[str]) -> dict[str, pa.Array]:
        from .file_actions import ADD_SCHEMA, REMOVE_SCHEMA

        rows = self._rows[action]
        schema = ADD_SCHEMA if action == "add" else REMOVE_SCHEMA
        if not len(rows):
            return {c: pa.nulls(0, schema.field(c).type) for c in columns}
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
        t = table_from_rows(acts, ADD_SCHEMA if action == "add" else REMOVE_SCHEMA)
        return {c: _column(t, c) for c in t.column_names}


class DictPiece:
    """The file actions of a small commit (parsed by the dict path), in the `JsonCommit` shape."""

    def __init__(self, actions: list[tuple[str, str, dict]]):
        """`actions`: (kind, key, action dict) in commit order."""
        self._by_kind = {"add": [a for k, _, a in actions if k == "add"],
                         "remove": [a for k, _, a in actions if k == "remove"]}
        self.is_add = column([k == "add" for k, _, _ in actions], pa.bool_())
        self.keys = [column([key for _, key, _ in actions], pa.string())]
        self.key_digests = [None]
        flags = np.array([k == "add" for k, _, _ in actions], dtype=bool)
        self.kind_row = np.where(flags, np.cumsum(flags) - 1, np.cumsum(~flags) - 1)

    def table(self, action: str, columns: list[str]) -> pa.Table:
        from .file_actions import ADD_SCHEMA, REMOVE_SCHEMA

        return table_from_rows(self._by_kind[action], ADD_SCHEMA if action == "add" else REMOVE_SCHEMA).select(columns)


class PieceTail:
    """The file actions of the commits after a checkpoint, reconciled in Arrow."""

    def __init__(self, pieces: list[Any]):
        self._pieces = pieces
        # the keys stay in their pieces' chunks: checking them chunk by chunk needs no copy of them all
        keys = pa.chunked_array([k for p in pieces for k in p.keys], pa.string())
        is_add = pa.chunked_array([p.is_add for p in pieces], pa.bool_()).combine_chunks()
        self._piece_no = np.repeat(np.arange(len(pieces)), [sum(len(k) for k in p.keys) for p in pieces])
        self._kind_row = np.concatenate([p.kind_row for p in pieces]) if pieces else np.zeros(0, np.int64)
        self._keys = keys
        self._touched: pa.Array | None = None    # the distinct keys, when a checkpoint asks (`touched`)
        if all_distinct(keys, [d for p in pieces for d in p.key_digests]):    # every key once: nothing to reconcile
            self._selected = {"add": pc.indices_nonzero(is_add), "remove": pc.indices_nonzero(pc.invert(is_add))}
        else:
            self._selected = self._reconcile(keys.combine_chunks(), is_add)

    def after_commit(self, actions: list[tuple[str, str, dict]]) -> "PieceTail":
        """A new tail: these pieces and one more commit's file actions (kind, key, action dict)."""
        return PieceTail(self._pieces + [DictPiece(actions)])

    @staticmethod
    def _reconcile(keys: pa.Array, is_add: pa.Array) -> dict[str, pa.Array]:
        """Per kind, the indices of the surviving actions (the newest reference of each key), in the
        order the dict path yields them: by where the key's current run of that kind began."""
        codes = int_numpy(pc.dictionary_encode(keys).indices).astype(np.int64)
        flags = bool_numpy(is_add)
        n = len(codes)
        n_keys = int(codes.max()) + 1 if n else 0
        idx = np.arange(n, dtype=np.int64)

        def last_of(mask: np.ndarray) -> np.ndarray:
            """Per key, the index of its last action among `mask` (-1: none)."""
            out = np.full(n_keys, -1, np.int64)
            c, i = codes[mask][::-1], idx[mask][::-1]
            uc, pos = np.unique(c, return_index=True)
            out[uc] = i[pos]
            return out

        winners = last_of(np.ones(n, dtype=bool))[codes] == idx
        out = {}
        for kind, flag in (("add", True), ("remove", False)):
            mine = flags == flag
            in_run = mine & (idx > last_of(~mine)[codes])   # after the key's last action of the other kind
            start = np.full(n_keys, n, np.int64)
            np.minimum.at(start, codes[in_run], idx[in_run])
            won = idx[winners & mine]
            out[kind] = numpy_array(won[np.argsort(start[codes[won]], kind="stable")])
        return out

    def touched(self) -> pa.Array | None:
        """Every key the tail references (a checkpoint row with one of them is superseded)."""
        if self._touched is None:
            self._touched = pc.unique(self._keys)
        return self._touched if len(self._touched) else None

    def table(self, action: str, columns: Iterable[str]) -> pa.Table | None:
        sel = self._selected[action]
        if not len(sel):
            return None
        cols = list(columns)
        idx = int_numpy(sel).astype(np.int64)
        piece_no = self._piece_no[idx]
        if len(piece_no) > 1 and (piece_no[1:] >= piece_no[:-1]).all():   # rows in piece order (the usual case)
            used = piece_no[np.concatenate(([True], piece_no[1:] != piece_no[:-1]))].tolist()
        else:
            used = np.unique(piece_no).tolist()
        parts = [self._pieces[i].table(action, cols) for i in used]
        offsets = np.zeros(len(self._pieces), np.int64)
        acc = 0
        for i, part in zip(used, parts):
            offsets[i] = acc
            acc += part.num_rows
        rows = offsets[piece_no] + self._kind_row[idx]
        whole = pa.concat_tables(parts) if len(parts) > 1 else parts[0]
        if len(rows) == whole.num_rows and rows[0] == 0 and (len(rows) == 1 or (np.diff(rows) == 1).all()):
            return whole    # every row, in order
        return pc.take(whole, numpy_array(rows.astype(np.int64)))
