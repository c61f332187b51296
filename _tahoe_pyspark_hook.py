"""tahoe's calls on PySpark's readers and writers, present even where the user never imports tahoe.

Some of what delta-spark users write reaches no data source: Spark drops
`df.writeStream.partitionBy(...)` for a Python data source silently, refuses
`df.write.partitionBy(...)` and the save modes error/ignore; `tahoe.spark.calls` makes them work by
wrapping PySpark's reader and writer calls in the user's process — which only happens if that
process imports `tahoe.spark`. Spark finds the `delta` source by itself (`pyspark_tahoe_delta`), but
it imports that module in a Python worker, not in the user's process.

So tahoe installs a `.pth` file (`tahoe-pyspark-hook.pth`, see setup.py) whose one line imports
this module at interpreter start-up and calls `install()` (unless `TAHOE_PYSPARK_HOOK=0`). It is
kept cheap for every Python process of the environment: standard library only, nothing else
imported. `install()` adds an import hook that, when one of PySpark's reader/writer modules is
imported, puts a shim on the methods `tahoe.spark.calls` wraps; the first call of one of them
takes the shims away, imports `tahoe.spark` (which wraps the methods as an explicit import would)
and makes the call. Processes that never use a reader or writer — Spark's Python workers, any
other program — never import tahoe.
"""

import _thread
import os
import sys

__all__ = ["install", "restore", "TARGETS"]

# module -> {class: methods}: what tahoe.spark.calls wraps
TARGETS = {
    "pyspark.sql.readwriter": {"DataFrameReader": ("format", "option", "options", "load"),
                               "DataFrameWriter": ("format", "partitionBy", "save")},
    "pyspark.sql.streaming.readwriter": {"DataStreamReader": ("format", "load"),
                                         "DataStreamWriter": ("format", "partitionBy", "start")},
    "pyspark.sql.connect.readwriter": {"DataFrameReader": ("format", "option", "options", "load"),
                                       "DataFrameWriter": ("format", "partitionBy", "save")},
    "pyspark.sql.connect.streaming.readwriter": {"DataStreamReader": ("format", "load"),
                                                 "DataStreamWriter": ("format", "partitionBy", "start")},
}

_shimmed = []   # (class, method name, original)
_lock = _thread.RLock()
_active = False


def restore():
    """Take every shim away (PySpark's own methods back). `tahoe.spark.calls.install` calls it
    before wrapping; idempotent."""
    global _active
    with _lock:
        _active = True
        while _shimmed:
            cls, name, original = _shimmed.pop()
            if getattr(cls.__dict__.get(name), "_tahoe_shim", False):
                setattr(cls, name, original)


def _activate():
    restore()
    try:
        import tahoe.spark  # noqa: F401  (wraps the calls: tahoe.spark.calls.install)
    except Exception:  # noqa: BLE001 - tahoe broken or half-uninstalled: PySpark as it is
        pass


def _shim(cls, name):
    original = cls.__dict__.get(name)
    if original is None or getattr(original, "_tahoe_calls", False) or getattr(original, "_tahoe_shim", False):
        return

    def shim(self, *args, **kwargs):
        _activate()
        return getattr(self, name)(*args, **kwargs)

    shim._tahoe_shim = True
    shim.__doc__ = getattr(original, "__doc__", None)
    shim.__name__ = name
    _shimmed.append((cls, name, original))
    setattr(cls, name, shim)


def _after_import(module):
    with _lock:
        if _active:
            return
        for cls_name, methods in TARGETS.get(module.__name__, {}).items():
            cls = getattr(module, cls_name, None)
            if isinstance(cls, type):
                for m in methods:
                    _shim(cls, m)


class _Loader:
    """Delegates to the module's own loader, then shims the module's classes."""

    def __init__(self, loader):
        self._loader = loader

    def create_module(self, spec):
        return self._loader.create_module(spec)

    def exec_module(self, module):
        self._loader.exec_module(module)
        _after_import(module)

    def __getattr__(self, name):   # get_code, get_source, is_package, ...: the real loader's
        return getattr(self._loader, name)


class _Finder:
    """A meta path finder that answers only for PySpark's reader/writer modules, with the spec
    the other finders give, its loader wrapped."""

    def find_spec(self, name, path=None, target=None):
        if name not in TARGETS or _active:
            return None
        for finder in sys.meta_path:
            if finder is self or not hasattr(finder, "find_spec"):
                continue
            spec = finder.find_spec(name, path, target)
            if spec is not None:
                if spec.loader is not None and hasattr(spec.loader, "exec_module"):
                    spec.loader = _Loader(spec.loader)
                return spec
        return None


def install():
    """Called by the `.pth` line at start-up: add the import hook (and shim the modules already
    imported, should there be any). `TAHOE_PYSPARK_HOOK=0` turns it off."""
    if os.environ.get("TAHOE_PYSPARK_HOOK", "1").strip().lower() in ("0", "false", "no", "off"):
        return
    if any(isinstance(f, _Finder) for f in sys.meta_path):
        return
    sys.meta_path.insert(0, _Finder())
    for name in TARGETS:
        module = sys.modules.get(name)
        if module is not None:
            _after_import(module)
