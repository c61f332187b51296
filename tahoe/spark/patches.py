"""Everything tahoe changes in PySpark's own classes: one list (`PATCHES`, classic and Connect), installed in
one place.

  1. `install()` wraps the listed methods of imported classes and wraps the rest as their module's import
     ends (a `sys.meta_path` hook); importing `tahoe.spark` runs it.
  2. One wrapper per (class, method), ever: installing again adds nothing.
  3. A wrapper calls what it replaced exactly once, held from installation: every layer of another
     library's wrappers, before or after tahoe's, runs once, in order, with no loop.
  4. The wrapped behaviour is imported at the first call; installing imports only the standard library.
  5. `disable()` makes every wrapper call straight through; `enable()` undoes it.
  6. At `LOOKUPS`, a classic thread with no active session gets the caller's.
The start-up hook `tahoe-pyspark-hook.pth` runs `install()` at the first `import pyspark`;
`TAHOE_PYSPARK_HOOK=0` turns it off."""

from __future__ import annotations

import functools
import importlib
import sys
import threading
import warnings
from typing import Any, Callable, NamedTuple

__all__ = ["PATCHES", "MODULES", "LOOKUPS", "Patch", "install", "installed", "missing", "disable", "enable", "enabled"]


class Patch(NamedTuple):
    cls: str            # PySpark class name (classic and Spark Connect alike)
    method: str
    behaviour: str      # "module:function", called as function(original, self, *args, **kwargs)
    surfaced: bool      # tahoe's errors raised through it are rewritten (tahoe.spark.surfacing)


# where each class lives: (classic module, Spark Connect module); None where one side has no such class
MODULES = {
    "SparkSession": ("pyspark.sql.session", "pyspark.sql.connect.session"),
    "DataFrameReader": ("pyspark.sql.readwriter", "pyspark.sql.connect.readwriter"),
    "DataFrameWriter": ("pyspark.sql.readwriter", "pyspark.sql.connect.readwriter"),
    "DataFrameWriterV2": ("pyspark.sql.readwriter", "pyspark.sql.connect.readwriter"),
    "DataStreamReader": ("pyspark.sql.streaming.readwriter", "pyspark.sql.connect.streaming.readwriter"),
    "DataStreamWriter": ("pyspark.sql.streaming.readwriter", "pyspark.sql.connect.streaming.readwriter"),
    "SparkConnectClient": (None, "pyspark.sql.connect.client.core"),
}

_C = "tahoe.spark.calls:"        # format("delta") reads and writes (save modes, partitionBy, native scans)
_H = "tahoe.spark.sql.hooks:"    # Delta SQL and tables by name
_R = "tahoe.spark.row_tracking:"  # `_metadata.row_id` / `row_commit_version` (refused by name over Connect)

PATCHES: tuple[Patch, ...] = (
    Patch("SparkSession", "sql", _H + "session_sql", True),
    Patch("SparkSession", "table", _H + "session_table", False),
    Patch("DataFrameReader", "format", _C + "remember_format", False),
    Patch("DataFrameReader", "option", _C + "remember_read_option", False),
    Patch("DataFrameReader", "options", _C + "remember_read_options", False),
    Patch("DataFrameReader", "load", _C + "batch_load", True),
    Patch("DataFrameReader", "table", _H + "reader_table", False),
    Patch("DataFrameWriter", "format", _C + "remember_format", False),
    Patch("DataFrameWriter", "option", _C + "remember_write_option", False),
    Patch("DataFrameWriter", "options", _C + "remember_write_options", False),
    Patch("DataFrameWriter", "partitionBy", _C + "remember_partition_by", False),
    Patch("DataFrameWriter", "save", _C + "save", True),
    Patch("DataFrameWriter", "saveAsTable", _H + "save_as_table", True),
    Patch("DataFrameWriter", "insertInto", _H + "insert_into", True),
    Patch("DataFrameWriterV2", "__init__", _H + "v2_init", False),
    Patch("DataFrameWriterV2", "using", _H + "v2_using", False),
    Patch("DataFrameWriterV2", "partitionedBy", _H + "v2_partitioned_by", False),
    Patch("DataFrameWriterV2", "clusterBy", _H + "v2_cluster_by", False),
    Patch("DataFrameWriterV2", "tableProperty", _H + "v2_table_property", False),
    Patch("DataFrameWriterV2", "option", _H + "v2_option", False),
    Patch("DataFrameWriterV2", "options", _H + "v2_options", False),
    Patch("DataFrameWriterV2", "create", _H + "v2_create", True),
    Patch("DataFrameWriterV2", "replace", _H + "v2_replace", True),
    Patch("DataFrameWriterV2", "createOrReplace", _H + "v2_create_or_replace", True),
    Patch("DataFrameWriterV2", "append", _H + "v2_append", True),
    Patch("DataFrameWriterV2", "overwrite", _H + "v2_overwrite", True),
    Patch("DataFrameWriterV2", "overwritePartitions", _H + "v2_overwrite_partitions", True),
    Patch("DataStreamReader", "format", _C + "remember_format", False),
    Patch("DataStreamReader", "option", _C + "remember_read_option", False),
    Patch("DataStreamReader", "options", _C + "remember_read_options", False),
    Patch("DataStreamReader", "load", _C + "stream_load", False),
    Patch("DataStreamReader", "table", _H + "stream_reader_table", False),
    Patch("DataStreamWriter", "format", _C + "remember_format", False),
    Patch("DataStreamWriter", "option", _C + "remember_write_option", False),
    Patch("DataStreamWriter", "options", _C + "remember_write_options", False),
    Patch("DataStreamWriter", "partitionBy", _C + "remember_partition_by", False),
    Patch("DataStreamWriter", "start", _C + "stream_start", False),
    Patch("DataStreamWriter", "toTable", _H + "stream_to_table", False),
    Patch("SparkConnectClient", "_handle_rpc_error", _R + "connect_error", False),
)

_lock = threading.RLock()
_installed: dict[tuple[type, str], Callable] = {}   # (class, method) -> tahoe's wrapper
_missing: list[str] = []
_on = True
_behaviours: dict[str, Callable] = {}


def enabled() -> bool:
    return _on


def disable() -> None:
    """Every tahoe wrapper calls straight through to what it replaced (PySpark's behaviour): `format("delta")`
    writes then need `.mode("append"/"overwrite")` and the `partitionBy` option."""
    global _on
    _on = False


def enable() -> None:
    global _on
    _on = True


def installed() -> dict[tuple[type, str], Callable]:
    """(class, method) -> tahoe's wrapper, for every method wrapped so far."""
    return dict(_installed)


def missing() -> list[str]:
    """`module.Class.method` of listed methods an imported PySpark module lacked."""
    return list(_missing)


def _behaviour(name: str) -> Callable:
    fn = _behaviours.get(name)
    if fn is None:
        module, attr = name.split(":")
        fn = _behaviours[name] = getattr(importlib.import_module(module), attr)
    return fn


# the calls at which Spark looks a data source up: the calling thread gets an active session first
# (`tahoe.spark.internals.ensure_thread_session`: worker threads have none)
LOOKUPS = frozenset({"sql", "table", "load", "save", "saveAsTable", "insertInto", "start", "toTable", "create",
                     "replace", "createOrReplace", "append", "overwrite", "overwritePartitions"})


def _wrapper(original: Callable, behaviour: str, surfaced: bool, lookup: bool = False) -> Callable:
    if lookup:
        inner = _wrapper(original, behaviour, surfaced)

        def method(self, *args, **kwargs):
            if _on:
                _behaviour("tahoe.spark.internals:ensure_thread_session")(self)
            return inner(self, *args, **kwargs)
    elif surfaced:
        def method(self, *args, **kwargs):
            if not _on:
                return original(self, *args, **kwargs)
            try:
                return _behaviour(behaviour)(original, self, *args, **kwargs)
            except Exception as e:  # noqa: BLE001 - rewritten only when it carries a tahoe error
                new = _behaviour("tahoe.spark.surfacing:surfaced")(e)
                if new is None:
                    raise
                raise new from None
    else:
        def method(self, *args, **kwargs):
            if not _on:
                return original(self, *args, **kwargs)
            return _behaviour(behaviour)(original, self, *args, **kwargs)
    functools.update_wrapper(method, original)
    method.__tahoe_patch__ = behaviour   # type: ignore[attr-defined]
    return method


def _patch_module(module: Any) -> None:
    """Wrap the listed methods of the listed classes `module` defines (once each)."""
    family = None
    for classic, connect in MODULES.values():
        if module.__name__ == classic:
            family = 0
        elif module.__name__ == connect:
            family = 1
    if family is None:
        return
    with _lock:
        for p in PATCHES:
            if MODULES[p.cls][family] != module.__name__:
                continue
            cls = getattr(module, p.cls, None)
            original = cls.__dict__.get(p.method) if isinstance(cls, type) else None
            if original is None:
                where = f"{module.__name__}.{p.cls}.{p.method}"
                if where not in _missing:
                    _missing.append(where)
                    warnings.warn(f"tahoe: this PySpark has no {where}; tahoe's behaviour for it is off",
                                  RuntimeWarning, stacklevel=2)
                continue
            if (cls, p.method) in _installed:
                continue
            wrapper = _wrapper(original, p.behaviour, p.surfaced, p.method in LOOKUPS)
            _installed[(cls, p.method)] = wrapper
            setattr(cls, p.method, wrapper)


_TARGET_MODULES = frozenset(m for pair in MODULES.values() for m in pair if m is not None)


class _Loader:
    """The module's own loader; the module's classes are patched when its code has run."""

    def __init__(self, loader: Any):
        self._loader = loader

    def create_module(self, spec: Any) -> Any:
        return self._loader.create_module(spec)

    def exec_module(self, module: Any) -> None:
        self._loader.exec_module(module)
        _patch_module(module)

    def __getattr__(self, name: str) -> Any:   # get_code, get_source, is_package, ...: the real loader's
        return getattr(self._loader, name)


class _Finder:
    """Answers only for the modules of `MODULES`: the spec the other finders give, its loader wrapped."""

    def find_spec(self, name: str, path: Any = None, target: Any = None) -> Any:
        if name not in _TARGET_MODULES:
            return None
        for finder in sys.meta_path:
            if isinstance(finder, _Finder) or not hasattr(finder, "find_spec"):
                continue
            spec = finder.find_spec(name, path, target)
            if spec is not None:
                if spec.loader is not None and hasattr(spec.loader, "exec_module"):
                    spec.loader = _Loader(spec.loader)
                return spec
        return None


def install() -> None:
    """Wrap every listed method of the imported PySpark modules, and the others as they are
    imported (idempotent)."""
    with _lock:
        if not any(isinstance(f, _Finder) for f in sys.meta_path):
            sys.meta_path.insert(0, _Finder())
        for name in sorted(_TARGET_MODULES):
            module = sys.modules.get(name)
            if module is None or getattr(getattr(module, "__spec__", None), "_initializing", False):
                continue   # not imported yet, or its import is under way: the finder patches it
            _patch_module(module)
