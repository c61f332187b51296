"""Log replay (spec "Action Reconciliation"): a log segment turned into table state.

  1. The checkpoint's `add` rows stay in Arrow (`ActiveFiles.table(columns)`); the commits after it are
     replayed in Python into touched keys that mask them; large commits in Arrow (`tahoe.log.json_commits`).
  2. The latest protocol / metaData / rowIdHighWaterMark win; the latest txn version per appId;
     domainMetadata per domain (`removed` drops it).
  3. Files are keyed by (canonical path, deletionVector.uniqueId); the newest reference decides add or remove.
  4. `file:///a`, `file:/a` and `/a` are one key; relative paths are keyed under the table root; action
     paths are kept as written."""

from __future__ import annotations

import threading
from collections import OrderedDict
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any, Callable, Iterable, Iterator

import numpy as np
import pyarrow as pa

from ..errors import CorruptLogError
from ..protocol.actions import (
    CommitInfo, DomainMetadata, Metadata, Protocol, RowIdHighWaterMark, SetTransaction, Sidecar,
)
from ..protocol.filenames import LogFileKind
from ..storage.base import LogStore
from . import compute as pc, json_commits
from .arrow_build import bool_numpy, column, empty, lean, memory_pool, null_array, scalar, table_from_rows
from .file_actions import (
    ADD_SCHEMA, DV_TYPE, REMOVE_SCHEMA, STRING_MAP, canonical_key, dv_unique_id, file_keys, is_absolute_path, parse_commit,
    read_commit, root_uri,
)
from .segment import Checkpoint, LogFile, LogSegment

__all__ = [
    "ADD_SCHEMA", "REMOVE_SCHEMA", "DV_TYPE", "STRING_MAP", "ActiveFiles", "ReplayState",
    "replay", "replay_commit", "replay_checkpoint_table", "commit_file_actions", "file_keys", "canonical_key", "read_commit", "parse_commit",
    "root_uri", "SHARED_SOURCE_MAX_BYTES",
]

def _conform(struct_arr: pa.Array | pa.ChunkedArray, schema: pa.Schema, columns: Iterable[str]) -> dict[str, Any]:
    """Select `columns` from a checkpoint's add/remove struct column, cast to our schema; fields the
    checkpoint lacks come back as nulls. A chunked column stays chunked (nothing is copied)."""
    columns = list(columns)
    if isinstance(struct_arr, pa.ChunkedArray):
        if struct_arr.num_chunks == 1:
            struct_arr = struct_arr.chunk(0)
        else:
            parts = [_conform(c, schema, columns) for c in struct_arr.chunks]
            return {c: pa.chunked_array([p[c] for p in parts], schema.field(c).type) for c in columns}
    present = {struct_arr.type.field(i).name for i in range(struct_arr.type.num_fields)}
    out = {}
    for c in columns:
        t = schema.field(c).type
        if c in present:
            arr = pc.struct_field(struct_arr, c)
            if arr.type != t:
                arr = _cast_loose(arr, t)
            out[c] = lean(arr)    # an all-null column (DVs, row ids, ... on most tables) costs nothing
        else:
            out[c] = null_array(t, len(struct_arr))
    return out


def _cast_loose(arr: pa.Array, t: pa.DataType) -> pa.Array:
    if pa.types.is_struct(t) and pa.types.is_struct(arr.type):
        have = {arr.type.field(i).name for i in range(arr.type.num_fields)}
        children = []
        for i in range(t.num_fields):
            f = t.field(i)
            children.append(_cast_loose(pc.struct_field(arr, f.name), f.type) if f.name in have else pa.nulls(len(arr), f.type))
        return pa.StructArray.from_arrays(children, fields=list(t), mask=pc.invert(pc.is_valid(arr)))
    return pc.cast(arr, t)


# A big checkpoint (at least _BIG_ROWS rows) is decoded this many rows at a time, in this thread:
# the same speed as one read, and a column's builders never grow past a batch (one read of 1M
# adds peaked ~50% above its result); threads decoded no faster, with more memory held in their
# allocator caches. Its pages are read as they are decoded (_STREAM_BYTES at a time) rather than
# the file's column chunks all first: a 10M-file checkpoint's chunks are ~400 MB.
_BIG_ROWS = 1 << 16
_BATCH_ROWS = 1 << 15
_STREAM_BYTES = 1 << 20


def _parquet_file(f: Any) -> Any:
    """A pyarrow ParquetFile over the open file `f`; for a big checkpoint, one whose reader
    allocates from `memory_pool()` and, unless `f` is a remote file read by ranges (where one
    request per page would cost more than the memory saved), streams its pages."""
    import pyarrow.parquet as pq   # here: a log of JSON commits alone never needs it

    pf = pq.ParquetFile(f)
    if pf.metadata.num_rows < _BIG_ROWS:
        return pf
    streamed = not isinstance(f, pa.PythonFile)
    kw = {"pre_buffer": not streamed, "buffer_size": _STREAM_BYTES if streamed else 0}
    try:
        # ParquetFile takes no memory pool; its reader does (pyarrow's own class): where that
        # changes, the file is read as pyarrow's defaults have it
        from pyarrow._parquet import ParquetReader

        reader = ParquetReader(memory_pool=memory_pool())
        reader.open(f, use_memory_map=False, metadata=pf.metadata, **kw)
        pf.reader = reader
    except (ImportError, TypeError, AttributeError, ValueError):
        pass
    return pf


def _checked_columns(file_schema: pa.Schema, columns: list[str] | None) -> list[str] | None:
    """`columns` less those the file lacks (`action.field` selects a field of an action's struct)."""
    if columns is None:
        return None
    names = set(file_schema.names)
    ok = []
    for c in columns:
        top, _, sub = c.partition(".")
        if top not in names:
            continue
        if not sub:
            ok.append(c)
            continue
        t = file_schema.field(top).type
        if pa.types.is_struct(t) and t.get_field_index(sub) >= 0:
            ok.append(c)
    return ok


def _parquet_batches(store: LogStore, path: str, columns: list[str] | None = None, *, only_set: bool = False,
                     each: Callable[[pa.Table], pa.Table] | None = None) -> Iterator[pa.Table]:
    """The checkpoint file's `columns` (see `_read_parquet`; none of them in the file: nothing),
    a batch at a time for a big checkpoint (one table for a small one), each batch passed
    through `each` as it is decoded."""
    try:
        with store.open_input_file(path) as f:
            pf = _parquet_file(f)
            file_schema = pf.schema_arrow   # a property that rebuilds the schema on every access
            ok = _checked_columns(file_schema, columns)
            if ok is not None and not ok:
                return
            if pf.metadata.num_rows < _BIG_ROWS:
                t = pf.read(columns=ok, use_threads=False)
                t = _rows_set(t) if only_set else t
                yield each(t) if each is not None else t
                return
            if only_set and ok is not None and all("." not in c for c in ok):
                t = _set_rows(pf, file_schema, ok)
                yield each(t) if each is not None else t
                return
            for b in pf.iter_batches(batch_size=_BATCH_ROWS, columns=ok, use_threads=False):
                b = pa.Table.from_batches([b])
                b = _rows_set(b) if only_set else b
                yield each(b) if each is not None else b
    except FileNotFoundError:
        raise CorruptLogError(f"checkpoint file {path} is missing") from None
    except (pa.ArrowInvalid, pa.ArrowIOError, OSError) as e:
        raise CorruptLogError(f"cannot read checkpoint file {path}: {e}") from None


def _read_parquet(store: LogStore, path: str, columns: list[str] | None = None, *,
                  only_set: bool = False, each: Callable[[pa.Table], pa.Table] | None = None) -> pa.Table:
    """The checkpoint file's `columns` (`action.field` selects a field of an action's struct; fields
    the file lacks are left out). `only_set`: only the rows where one of the columns is not null
    (the few non-file actions among a checkpoint's rows, without materializing the others).
    `each`: what to keep of the rows read (a table of the columns), applied to each batch of a big
    checkpoint as it is decoded — the file's rows are never all held as read."""
    batches = list(_parquet_batches(store, path, columns, only_set=only_set, each=each))
    if not batches:
        return pa.table({})
    return batches[0] if len(batches) == 1 else pa.concat_tables(batches)


def _set_rows(pf: Any, file_schema: pa.Schema, columns: list[str]) -> pa.Table:
    """The rows of a big checkpoint where one of the top-level `columns` is set (its few
    non-file actions among a million adds): first located by reading one field of each struct
    (the field brings the struct's own validity with it: a few bytes a row), then the columns
    read whole only up to the batch that holds the last of them."""
    probe = []
    for c in columns:
        t = file_schema.field(c).type
        probe.append(f"{c}.{t.field(0).name}" if pa.types.is_struct(t) and t.num_fields else c)
    last, at = -1, 0
    for b in pf.iter_batches(batch_size=_BATCH_ROWS, columns=probe, use_threads=False):
        mask = None
        for col in b.columns:
            v = pc.is_valid(col)
            mask = v if mask is None else pc.or_(mask, v)
        if mask is not None and mask.true_count:
            last = at + int(np.flatnonzero(bool_numpy(mask))[-1])
        at += b.num_rows
    if last < 0:
        return pa.schema([file_schema.field(c) for c in columns]).empty_table()
    batches, at = [], 0
    # small batches: where a writer puts protocol and metaData first, one is all there is to decode
    for b in pf.iter_batches(batch_size=4096, columns=columns, use_threads=False):
        batches.append(_rows_set(pa.Table.from_batches([b])))
        at += b.num_rows
        if at > last:
            break
    return pa.concat_tables(batches)


def _rows_set(t: pa.Table) -> pa.Table:
    """The rows of `t` with a value in at least one column."""
    if not t.num_columns or not t.num_rows:
        return t
    mask = pc.is_valid(t.column(0))
    for c in t.columns[1:]:
        mask = pc.or_(mask, pc.is_valid(c))
    return pc.filter(t, mask)


@dataclass
class ReplayState:
    protocol: Protocol | None = None
    metadata: Metadata | None = None
    row_id_high_water_mark: RowIdHighWaterMark | None = None
    txns: dict[str, SetTransaction] = field(default_factory=dict)
    domains: dict[str, DomainMetadata] = field(default_factory=dict)
    last_commit_info: CommitInfo | None = None
    files: "ActiveFiles | None" = None


class ActiveFiles:
    """The active logical files of a snapshot, materialized lazily as Arrow tables."""

    def __init__(self, store: LogStore, root_uri: str, sources: list[str], base_adds: list[dict],
                 base_removes: list[dict], tail: "DictTail | json_commits.PieceTail",
                 source_cache: "dict[tuple[str, tuple[str, ...]], list[pa.Table]] | None" = None):
        """`source_cache`: projections of the checkpoint sources already read, shared with the
        snapshots derived from this one (`after_commit`), which have the same sources; None:
        nothing read is kept beyond this object's own results (a large checkpoint)."""
        self._store = store
        self._root_uri = root_uri
        self._sources = sources            # checkpoint parquet files (parts / sidecars)
        self._base_adds = base_adds        # adds inline in a JSON v2 checkpoint (already reconciled)
        self._base_removes = base_removes
        self._tail = tail                  # the reconciled file actions of the commits after it
        self._source_cache = source_cache
        self._masks: dict[str, list[pa.Array]] = {}
        self._cache: dict[tuple[str, tuple[str, ...]], pa.Table] = {}

    def after_commit(self, actions: list[tuple[str, str, dict]]) -> "ActiveFiles":
        """The active files one commit later: this one's checkpoint sources, with the commit's
        file actions (kind, key, action dict — `commit_file_actions`) reconciled into the tail
        exactly as `replay` would have reconciled them."""
        return ActiveFiles(self._store, self._root_uri, self._sources, self._base_adds, self._base_removes,
                           self._tail.after_commit(actions), self._source_cache)

    def _source_tables(self, action: str, columns: list[str]) -> list[pa.Table]:
        """The checkpoint sources' `action` rows projected on `columns`, from the shared cache
        when a read of these (or more) columns is in it."""
        cache = self._source_cache
        if cache is None:
            return self._read_projected(action, columns)
        for (a, have), tables in list(cache.items()):
            if a == action and set(columns) <= set(have):
                return [t.select(columns) for t in tables]
        tables = self._read_projected(action, columns)
        cache[(action, tuple(columns))] = tables
        return tables

    def _read_projected(self, action: str, columns: list[str]) -> list[pa.Table]:
        schema = ADD_SCHEMA if action == "add" else REMOVE_SCHEMA

        # `path` is always read: every add/remove row has one, so it fixes the row count even
        # when the checkpoint lacks all the requested fields (e.g. stats not written as JSON).
        wanted = list(dict.fromkeys(["path", *columns]))

        def conform(t: pa.Table) -> pa.Table:
            return pa.table(_conform(t.column(action), schema, columns)) if action in t.column_names else t

        def one(p: str) -> pa.Table:
            # each batch of a big checkpoint is conformed as it is read: its all-null columns
            # (DVs, row ids, ... on most tables) are let go batch by batch
            t = _read_parquet(self._store, p, [f"{action}.{c}" for c in wanted], each=conform)
            if not t.num_columns:  # e.g. a v2 checkpoint whose files are all in sidecars
                return pa.table({c: empty(schema.field(c).type) for c in columns})
            return t

        if len(self._sources) <= 1:
            return [one(p) for p in self._sources]
        with ThreadPoolExecutor(max_workers=min(8, len(self._sources))) as ex:
            return list(ex.map(one, self._sources))

    def _mask_of(self, t: pa.Table) -> pa.Array:
        """Which rows of a checkpoint source's projection (with path and deletionVector) are
        live rows of its action not superseded by the tail (chunk by chunk: nothing copied)."""
        if not t.num_rows:
            return empty(pa.bool_())
        touched = self._tail.touched()
        paths, dvs = t.column("path"), t.column("deletionVector")
        masks = []
        at = 0
        for p in paths.chunks:
            m = pc.is_valid(p)
            if touched is not None and len(p):
                keys = file_keys(p, dvs.slice(at, len(p)), self._root_uri)
                m = pc.and_(m, pc.invert(pc.fill_null(pc.is_in(keys, value_set=touched), scalar(False))))
            masks.append(m)
            at += len(p)
        return masks[0] if len(masks) == 1 else pa.concat_arrays(masks)

    def _columns(self, columns: Iterable[str] | None, action: str) -> tuple[pa.Schema, tuple[str, ...]]:
        schema = ADD_SCHEMA if action == "add" else REMOVE_SCHEMA
        cols = tuple(columns) if columns is not None else tuple(schema.names)
        for c in cols:
            if c not in schema.names:
                raise ValueError(f"unknown {action} column '{c}'; known: {', '.join(schema.names)}")
        return schema, cols

    def _after_sources(self, action: str, cols: tuple[str, ...]) -> list[pa.Table]:
        """The rows after the checkpoint's parquet sources: a JSON checkpoint's inline actions not
        superseded by the tail, then the tail's."""
        schema = ADD_SCHEMA if action == "add" else REMOVE_SCHEMA
        parts = []
        base = self._base_adds if action == "add" else self._base_removes
        if base:
            bt = table_from_rows(base, schema)
            keys = file_keys(bt.column("path"), bt.column("deletionVector"), self._root_uri)
            touched = self._tail.touched()
            if touched is not None:
                bt = pc.filter(bt, pc.invert(pc.is_in(keys, value_set=touched)))
            parts.append(bt.select(list(cols)))
        tail = self._tail.table(action, cols)
        if tail is not None:
            parts.append(tail)
        return parts

    def table(self, columns: Iterable[str] | None = None, action: str = "add") -> pa.Table:
        """Active adds (action="add") or tombstones (action="remove") with the given columns of
        ADD_SCHEMA / REMOVE_SCHEMA (all when None). Row order: checkpoint rows, then the tail's."""
        schema, cols = self._columns(columns, action)
        ck = (action, cols)
        if ck in self._cache:
            return self._cache[ck]
        for (a, have), t in list(self._cache.items()):
            if a == action and set(cols) <= set(have):   # a wider read already made: its columns
                return t.select(list(cols))
        sub = pa.schema([schema.field(c) for c in cols])
        parts: list[pa.Table] = []
        if self._sources:
            # one read of each source: the wanted columns, plus what the mask needs the first time
            need_mask = action not in self._masks
            read = list(dict.fromkeys(list(cols) + (["path", "deletionVector"] if need_mask else [])))
            tables = self._source_tables(action, read)
            if need_mask:
                self._masks[action] = [self._mask_of(t) for t in tables]
            for t, m in zip(tables, self._masks[action]):
                if t.num_rows:
                    if t.num_columns:
                        t = _keep(t, m).select(list(cols))
                    parts.append(t)
        parts += self._after_sources(action, cols)
        parts = [pc.cast_table(p, sub) if p.schema != sub else p for p in parts if p.num_columns]
        result = pa.concat_tables(parts) if parts else pa.Table.from_arrays([empty(f.type) for f in sub], schema=sub)
        self._cache[ck] = result
        return result

    def batches(self, columns: Iterable[str] | None = None, action: str = "add") -> Iterator[pa.Table]:
        """The rows of `table(columns, action)`, in the same order, a batch at a time (tables of
        those columns; empty ones are skipped). A big checkpoint is read, conformed and masked
        against the tail one batch of _BATCH_ROWS rows at a time, and no batch is kept: what is
        held at once is one batch and the tail, however many files the checkpoint lists."""
        schema, cols = self._columns(columns, action)
        for (a, have), t in list(self._cache.items()):
            if a == action and set(cols) <= set(have):   # already read whole
                if t.num_rows:
                    yield t.select(list(cols))
                return
        sub = pa.schema([schema.field(c) for c in cols])
        wanted = list(dict.fromkeys(["path", "deletionVector", *cols]))

        def conform(t: pa.Table) -> pa.Table:
            return pa.table(_conform(t.column(action), schema, wanted)) if action in t.column_names else t

        for p in self._sources:
            for t in _parquet_batches(self._store, p, [f"{action}.{c}" for c in wanted], each=conform):
                if t.num_rows and t.num_columns:
                    t = _keep(t, self._mask_of(t)).select(list(cols))
                    if t.num_rows:
                        yield pc.cast_table(t, sub) if t.schema != sub else t
        for t in self._after_sources(action, cols):
            if t.num_rows:
                yield pc.cast_table(t, sub) if t.schema != sub else t

    def num_files(self) -> int:
        return self.table(["path"]).num_rows


# A checkpoint's kept rows in at most this many runs are kept as slices (no copy); more, and
# the rows are copied into one table.
_MAX_RUNS = 256


def _keep(t: pa.Table, mask: pa.Array) -> pa.Table:
    """`t.filter(mask)`, zero-copy when the kept rows are a few runs: a checkpoint holds its
    non-file rows, its adds and its removes each together, and the commits after it supersede a
    few of its files (a copy of a million files' columns to drop ten of them cost 2 s and more
    memory than the result)."""
    n = mask.true_count
    if n == len(mask):
        return t
    if n == 0:
        return t.slice(0, 0)
    kept = bool_numpy(mask)
    edges = np.flatnonzero(kept[1:] != kept[:-1]) + 1
    bounds = np.concatenate(([0], edges, [len(kept)]))
    runs = [(int(a), int(b)) for a, b in zip(bounds[:-1], bounds[1:]) if kept[a]]
    if len(runs) == 1:
        return t.slice(runs[0][0], runs[0][1] - runs[0][0])
    if len(runs) <= _MAX_RUNS:
        return pa.concat_tables([t.slice(a, b - a) for a, b in runs])
    return pc.filter(t, mask, memory_pool=memory_pool())


def _apply_non_file(state: ReplayState, obj: dict) -> None:
    if (p := obj.get("protocol")) is not None:
        state.protocol = Protocol.from_dict(p)
    elif (m := obj.get("metaData")) is not None:
        state.metadata = Metadata.from_dict(m)
    elif (t := obj.get("txn")) is not None:
        txn = SetTransaction.from_dict(t)
        state.txns[txn.app_id] = txn
    elif (d := obj.get("domainMetadata")) is not None:
        dm = DomainMetadata.from_dict(d)
        if dm.removed:
            state.domains.pop(dm.domain, None)
        else:
            state.domains[dm.domain] = dm
    elif (r := obj.get("rowIdHighWaterMark")) is not None:
        state.row_id_high_water_mark = RowIdHighWaterMark.from_dict(r)


def _check_file_action(kind: str, d: Any, source: str) -> dict:
    if not isinstance(d, dict) or not isinstance(d.get("path"), str):
        raise CorruptLogError(f"{source}: {kind} action without a valid 'path': {d!r}"[:300])
    if kind == "add" and not isinstance(d.get("size"), int):
        raise CorruptLogError(f"{source}: add action for {d['path']} without a valid 'size'")
    return d


_NON_FILE_COLUMNS = ["protocol", "metaData", "txn", "domainMetadata", "sidecar", "checkpointMetadata"]


def _apply_checkpoint_rows(t: pa.Table, state: ReplayState) -> list[Sidecar]:
    """Apply the non-file actions of a parquet checkpoint's rows (its columns among
    `_NON_FILE_COLUMNS`) to `state`; return the sidecars it lists."""
    sidecars: list[Sidecar] = []
    for col in t.column_names:
        if col not in _NON_FILE_COLUMNS:
            continue
        arr = t.column(col)
        valid = pc.is_valid(arr)
        if not pc.any(valid).as_py():
            continue
        for v in pc.filter(arr, valid).to_pylist():
            if col == "sidecar":
                sidecars.append(Sidecar.from_dict(v))
            else:
                if col in ("metaData",) and v.get("configuration") is not None and isinstance(v["configuration"], list):
                    v["configuration"] = dict(v["configuration"])
                _apply_non_file(state, {col: _maps_to_dicts(v)})
    return sidecars


def replay_checkpoint_table(store: LogStore, table_root: str, path: str, table: pa.Table) -> ReplayState:
    """The state `replay` reconstructs from a one-file parquet checkpoint at `path` and no commit
    after it, from `table` — exactly the rows that file holds (the writer that just wrote it):
    the same rules applied to the same rows, without reading the file back. What is read of the
    file rows stays in memory for the snapshots derived from this state (`after_commit`). A
    checkpoint with sidecars is not for this (ValueError)."""
    state = ReplayState()
    if _apply_checkpoint_rows(table, state):
        raise ValueError("replay_checkpoint_table: the checkpoint lists sidecars")
    cache: dict[tuple[str, tuple[str, ...]], list[pa.Table]] = {}
    for action, schema in (("add", ADD_SCHEMA), ("remove", REMOVE_SCHEMA)):
        if action in table.column_names:
            cache[(action, tuple(schema.names))] = [pa.table(_conform(table.column(action), schema, schema.names))]
    state.files = ActiveFiles(store, root_uri(table_root), [path], [], [], DictTail(), cache)
    return state


def _read_checkpoint_non_file(store: LogStore, cp: Checkpoint, state: ReplayState) -> tuple[list[str], list[dict], list[dict]]:
    """Apply the checkpoint's protocol/metaData/txn/domainMetadata to `state`; return the parquet
    files that hold its add/remove rows, and the adds/removes inline in a JSON checkpoint."""
    sources: list[str] = []
    inline_adds: list[dict] = []
    inline_removes: list[dict] = []
    sidecars: list[Sidecar] = []
    for f in cp.files:
        if f.name.ext == "json":
            for obj in read_commit(store, f.path):
                if (a := obj.get("add")) is not None:
                    inline_adds.append(_check_file_action("add", a, f.path))
                elif (r := obj.get("remove")) is not None:
                    inline_removes.append(_check_file_action("remove", r, f.path))
                elif (s := obj.get("sidecar")) is not None:
                    sidecars.append(Sidecar.from_dict(s))
                else:
                    _apply_non_file(state, obj)
            continue
        sidecars += _apply_checkpoint_rows(_read_parquet(store, f.path, _NON_FILE_COLUMNS, only_set=True), state)
        sources.append(f.path)
    for sc in sidecars:
        p = sc.path
        if not is_absolute_path(p):
            p = store.join(cp.files[0].path.rsplit("/", 1)[0], "_sidecars", p)
        sources.append(p)
    if sidecars:
        _check_sidecars_exist(store, cp, sources[len(sources) - len(sidecars):])
    return sources, inline_adds, inline_removes


def _check_sidecars_exist(store: LogStore, cp: Checkpoint, paths: list[str]) -> None:
    """Every sidecar a v2 checkpoint references must exist (one listing per directory):
    CorruptLogError naming the first missing one and the checkpoint otherwise."""
    by_dir: dict[str, list[str]] = {}
    for p in paths:
        d, _, name = p.rpartition("/")
        by_dir.setdefault(d, []).append(name)
    for d, names in by_dir.items():
        try:
            present = {st.name for st in store.list_from(store.join(d, min(names)))}
        except FileNotFoundError:
            present = set()
        missing = [n for n in names if n not in present]
        if missing:
            raise CorruptLogError(
                f"sidecar file {d}/{missing[0]} referenced by checkpoint {cp.files[0].path} is missing "
                f"({len(missing)} of its {len(paths)} sidecars are): the table cannot be read at version "
                f"{cp.version} or later")


def _maps_to_dicts(v: Any) -> Any:
    """pyarrow returns map values as lists of (key, value) tuples; the action models want dicts."""
    if isinstance(v, dict):
        return {k: _maps_to_dicts(x) for k, x in v.items()}
    if isinstance(v, list) and v and all(isinstance(x, tuple) and len(x) == 2 for x in v):
        return {k: x for k, x in v}
    if isinstance(v, list):
        return [_maps_to_dicts(x) for x in v]
    return v


# Checkpoint files never change once written, so their non-file state (protocol, metaData, txns,
# domains, sidecar list, inline adds) is parsed once per file and reused: a writer committing in
# a loop reloads its snapshot every commit, and this is most of that cost. Keyed by every part's
# (path, size, mtime); bounded.
_CP_CACHE: "OrderedDict[tuple, tuple]" = OrderedDict()
_CP_CACHE_LOCK = threading.Lock()
_CP_CACHE_SIZE = 32


def _checkpoint_state(store: LogStore, cp: Checkpoint, state: ReplayState) -> tuple[list[str], list[dict], list[dict]]:
    key = (id(type(store)),) + tuple((f.path, f.status.size, f.status.modification_time) for f in cp.files)
    with _CP_CACHE_LOCK:
        hit = _CP_CACHE.get(key)
        if hit is not None:
            _CP_CACHE.move_to_end(key)
    if hit is None:
        fresh = ReplayState()
        result = _read_checkpoint_non_file(store, cp, fresh)
        hit = (fresh, result)
        with _CP_CACHE_LOCK:
            _CP_CACHE[key] = hit
            while len(_CP_CACHE) > _CP_CACHE_SIZE:
                _CP_CACHE.popitem(last=False)
    cached, (sources, adds, removes) = hit
    state.protocol = cached.protocol
    state.metadata = cached.metadata
    state.row_id_high_water_mark = cached.row_id_high_water_mark
    state.txns = dict(cached.txns)
    state.domains = dict(cached.domains)
    return list(sources), list(adds), list(removes)


class DictTail:
    """The file actions of the commits after a checkpoint reconciled in Python dicts (the usual
    case: a few small commits): the newest action per key, in first-reference order."""

    def __init__(self, adds: dict[str, dict] | None = None, removes: dict[str, dict] | None = None):
        self._adds = {} if adds is None else adds
        self._removes = {} if removes is None else removes

    def apply(self, actions: Iterable[tuple[str, str, dict]]) -> None:
        """Reconcile a commit's file actions (kind, key, action dict) into the tail, in place."""
        adds, removes = self._adds, self._removes
        for kind, k, a in actions:
            if kind == "add":
                adds[k] = a
                removes.pop(k, None)
            else:
                adds.pop(k, None)
                removes[k] = a

    def after_commit(self, actions: list[tuple[str, str, dict]]) -> "DictTail":
        """A new tail: this one with one more commit's file actions reconciled."""
        tail = DictTail(dict(self._adds), dict(self._removes))
        tail.apply(actions)
        return tail

    def touched(self) -> pa.Array | None:
        """Every key the tail references (a checkpoint row with one of them is superseded)."""
        keys = self._adds.keys() | self._removes.keys()
        return column(sorted(keys), pa.string()) if keys else None

    def table(self, action: str, columns: Iterable[str]) -> pa.Table | None:
        rows = list((self._adds if action == "add" else self._removes).values())
        if not rows:
            return None
        return table_from_rows(rows, ADD_SCHEMA if action == "add" else REMOVE_SCHEMA).select(list(columns))


def _apply_commit_action(state: ReplayState, obj: dict, path: str, last: bool) -> None:
    """A commit's action other than add/remove: commitInfo (kept for the last commit) or state."""
    if (ci := obj.get("commitInfo")) is not None:
        if last and isinstance(ci, dict):
            state.last_commit_info = CommitInfo.from_dict(ci)
        return
    try:
        _apply_non_file(state, obj)
    except CorruptLogError as e:
        raise CorruptLogError(f"{path}: {e}") from None


def commit_file_actions(state: ReplayState, objs: Iterable[dict], path: str, last: bool,
                        key_root: str) -> list[tuple[str, str, dict]]:
    """Replay one commit's actions (`objs`, parsed from the file at `path`) onto `state`: its
    non-file actions are applied (its commitInfo kept when it is the `last` commit); its file
    actions are checked and returned as (kind, key, action dict), in commit order."""
    out: list[tuple[str, str, dict]] = []
    for obj in objs:
        if (a := obj.get("add")) is not None:
            kind = "add"
        elif (a := obj.get("remove")) is not None:
            kind = "remove"
        else:
            _apply_commit_action(state, obj, path, last)
            continue
        _check_file_action(kind, a, path)
        out.append((kind, canonical_key(a["path"], dv_unique_id(a.get("deletionVector")), key_root), a))
    return out


class _ParseAhead:
    """The large commits of a replay, read and parsed in order, each next one in a background
    thread while the caller finishes the current one (pyarrow reads and parses without the GIL,
    so the two overlap). Only commits of at most AHEAD_MAX_BYTES are read ahead: two at once in
    memory is the price."""

    AHEAD_MAX_BYTES = 64 << 20

    def __init__(self, store: LogStore, commits: list):
        self._store = store
        self._commits = commits
        self._at = 0
        self._pool: ThreadPoolExecutor | None = None
        self._next: tuple[Any, Any] | None = None     # (commit, future of (data, parsed))

    def _job(self, path: str, hint: list[str] | None) -> tuple[bytes, Any]:
        data = self._store.read(path)
        try:
            return data, json_commits.JsonCommit.parse(data, hint)
        except json_commits.Fallback as e:
            return data, e

    def take(self, c: Any, hint: list[str] | None) -> tuple[bytes, Any]:
        """`c`'s bytes and parse (`JsonCommit.parse`, or the Fallback it raised), `hint` the
        partition columns known now; the next large commit starts being read and parsed."""
        if self._next is not None and self._next[0] is c:
            data, parsed = self._next[1].result()
        else:
            data, parsed = self._job(c.path, hint)
        self._next = None
        self._at = self._commits.index(c, self._at) + 1
        if self._at < len(self._commits):
            nxt = self._commits[self._at]
            if nxt.status.size <= self.AHEAD_MAX_BYTES:
                if self._pool is None:
                    self._pool = ThreadPoolExecutor(max_workers=1)
                # the partition columns of the state before `c`: when `c` changes them (rare),
                # the next commit's maps are read from its text instead (same result)
                self._next = (nxt, self._pool.submit(self._job, nxt.path, hint))
        return data, parsed

    def close(self) -> None:
        if self._pool is not None:
            self._pool.shutdown(wait=False, cancel_futures=True)


# Checkpoints up to this size (all parts) keep what is read of them in memory for the snapshots
# derived from theirs by later commits (`ActiveFiles.after_commit`), so that a writer committing
# in a loop reads its checkpoint's file rows once per checkpoint, not once per commit.
SHARED_SOURCE_MAX_BYTES = 8 << 20


def replay(store: LogStore, table_root: str, segment: LogSegment) -> ReplayState:
    """Reconstruct the state of `segment.version`. Commits of at least
    `json_commits.VECTOR_MIN_BYTES` are replayed vectorised (see `tahoe.log.json_commits`). A log
    compaction file that cannot be read (malformed JSON: a writer that died mid-file on a store
    without atomic puts) is dropped and the segment replayed again from the commits it stands
    for (`LogSegment.without_compaction`): compactions are an optimisation, never the only copy."""
    while True:
        try:
            return _replay(store, table_root, segment)
        except _BadCompaction as e:
            import logging

            logging.getLogger(__name__).warning("ignoring the log compaction file %s, which cannot be read (%s); "
                                                "replaying the commits it stands for", e.file.path, e.cause)
            segment = segment.without_compaction(e.file)


class _BadCompaction(Exception):
    def __init__(self, file: LogFile, cause: BaseException):
        super().__init__(str(cause))
        self.file = file
        self.cause = cause


def _replay(store: LogStore, table_root: str, segment: LogSegment) -> ReplayState:
    state = ReplayState()
    key_root = root_uri(table_root)
    sources: list[str] = []
    base_adds: list[dict] = []
    base_removes: list[dict] = []
    share = True
    if segment.checkpoint is not None:
        sources, base_adds, base_removes = _checkpoint_state(store, segment.checkpoint, state)
        share = len(sources) == len(segment.checkpoint.files) and \
            sum(f.status.size for f in segment.checkpoint.files) <= SHARED_SOURCE_MAX_BYTES
    # the commits after the checkpoint, with log compaction files in place of the ranges they
    # cover (`LogSegment.deltas`); commitInfo is kept from the version's own commit only
    deltas = segment.deltas
    large = [c.status.size >= json_commits.VECTOR_MIN_BYTES for c in deltas]
    vectorise = any(large)
    dict_tail = DictTail()
    pieces: list = []
    # (compaction files are read here: all of one must parse before it is used)
    ahead = _ParseAhead(store, [c for c, big in zip(deltas, large) if big and c.name.kind != LogFileKind.COMPACTION])
    try:
        for c, big in zip(deltas, large):
            last = c is deltas[-1] and c.name.kind == LogFileKind.COMMIT
            data = objs = None
            if c.name.kind == LogFileKind.COMPACTION:
                try:   # all of it must parse (a writer that died mid-file leaves a truncated line)
                    data = store.read(c.path)
                    objs = parse_commit(data, c.path)
                except (CorruptLogError, ValueError, FileNotFoundError) as e:
                    raise _BadCompaction(c, e) from None
            if big:
                hint = list(state.metadata.partition_columns) if state.metadata is not None else None
                parsed = None
                if data is None:
                    data, parsed = ahead.take(c, hint)
                try:
                    piece = json_commits.JsonCommit(store, c.path, data, key_root, hint, parsed=parsed)
                except json_commits.Fallback:
                    pass
                else:
                    for obj in piece.others:
                        _apply_commit_action(state, obj, c.path, last)
                    pieces.append(piece)
                    continue
            if objs is None:
                objs = parse_commit(data, c.path) if data is not None else read_commit(store, c.path)
            actions = commit_file_actions(state, objs, c.path, last, key_root)
            if vectorise:
                pieces.append(json_commits.DictPiece(actions))
            else:
                dict_tail.apply(actions)
    finally:
        ahead.close()
    tail = json_commits.PieceTail(pieces) if vectorise else dict_tail
    state.files = ActiveFiles(store, key_root, sources, base_adds, base_removes, tail, {} if share else None)
    return state


def replay_commit(prev: ReplayState, table_root: str, path: str, data: bytes) -> ReplayState | None:
    """The state one commit after `prev`: `prev` with the commit at `path` (its bytes `data`)
    replayed on top — the same state `replay` reconstructs from the longer segment (the
    reconciliation rules are the same code). None when the commit is one `replay` would
    vectorise (at least `json_commits.VECTOR_MIN_BYTES`): replay that segment instead."""
    if len(data) >= json_commits.VECTOR_MIN_BYTES or prev.files is None:
        return None
    state = ReplayState(prev.protocol, prev.metadata, prev.row_id_high_water_mark, dict(prev.txns),
                        dict(prev.domains), None)
    actions = commit_file_actions(state, parse_commit(data, path), path, True, root_uri(table_root))
    state.files = prev.files.after_commit(actions)
    return state
