"""tahoe's start-up hook: `tahoe-pyspark-hook.pth` (see setup.py) imports this module in every Python
process of the environment and calls `install()`, unless `TAHOE_PYSPARK_HOOK=0`.

Why: Spark finds tahoe's `delta` source by itself (`pyspark_tahoe_delta`), but some of what
delta-spark users write reaches no data source — the save modes error/ignore, `partitionBy` —
and needs tahoe's wrappers of PySpark's reader and writer calls in the user's process
(`tahoe.spark.patches`), which a process that never imports tahoe would not have.

What it does, kept cheap for processes that never use PySpark (standard library only): a finder
on `sys.meta_path` that, at the first import of `pyspark`, takes itself away and runs
`tahoe.spark.patches.install()` — the same wrappers an `import tahoe.spark` installs, put on
each PySpark class as its module's import ends. Nothing is ever taken off or swapped later.
"""

import os
import sys

__all__ = ["install"]


class _Bootstrap:
    def find_spec(self, name, path=None, target=None):
        if name == "pyspark" or name.startswith("pyspark."):
            _hand_over(self)
        return None


def _hand_over(finder):
    if finder is not None:
        try:
            sys.meta_path.remove(finder)
        except ValueError:   # another thread handed over already
            return
    try:
        from tahoe.spark import patches
        patches.install()
    except Exception as e:  # noqa: BLE001 - a broken tahoe must not break `import pyspark`: said, not hidden
        import warnings

        warnings.warn(f"tahoe's PySpark start-up hook could not install tahoe.spark.patches: {e!r} "
                      f"(TAHOE_PYSPARK_HOOK=0 turns the hook off)", RuntimeWarning, stacklevel=2)


def install():
    """Called by the `.pth` line at start-up. `TAHOE_PYSPARK_HOOK=0` turns it off."""
    if os.environ.get("TAHOE_PYSPARK_HOOK", "1").strip().lower() in ("0", "false", "no", "off"):
        return
    if any(isinstance(f, _Bootstrap) for f in sys.meta_path):
        return
    if "pyspark" in sys.modules:   # PySpark came first (an unusual start-up): install now
        _hand_over(None)
        return
    sys.meta_path.insert(0, _Bootstrap())
