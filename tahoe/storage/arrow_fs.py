"""A read-only pyarrow file system over a tahoe store (`pyarrow.dataset` reads through it):
`arrow_filesystem(store)` — the store's own native file system where it has one (local files),
otherwise a `pyarrow.fs.PyFileSystem` whose paths are the store's full paths."""

from __future__ import annotations

from typing import Any

import pyarrow as pa
import pyarrow.fs as pa_fs

from .base import LogStore

__all__ = ["arrow_filesystem", "StoreFileSystemHandler"]


def arrow_filesystem(store: LogStore) -> tuple[pa_fs.FileSystem, Any]:
    """(file system, path function): the pyarrow file system that reads `store`'s files, and the
    function turning a store path into that file system's path."""
    native = getattr(store, "filesystem", None)
    to_fs = getattr(store, "to_fs_path", None)
    if native is not None and to_fs is not None:
        return native, to_fs
    return pa_fs.PyFileSystem(StoreFileSystemHandler(store)), (lambda p: p)


class StoreFileSystemHandler(pa_fs.FileSystemHandler):
    """pyarrow's FileSystemHandler over a tahoe store: reading only (writes raise)."""

    def __init__(self, store: LogStore):
        self.store = store

    def __eq__(self, other: object) -> bool:
        return isinstance(other, StoreFileSystemHandler) and other.store is self.store

    def __ne__(self, other: object) -> bool:
        return not self == other

    def get_type_name(self) -> str:
        return "tahoe"

    def normalize_path(self, path: str) -> str:
        return path

    def get_file_info(self, paths: list[str]) -> list[pa_fs.FileInfo]:
        out = []
        for p in paths:
            st = self.store.status(p)
            out.append(pa_fs.FileInfo(p, pa_fs.FileType.NotFound) if st is None else
                       pa_fs.FileInfo(p, pa_fs.FileType.File, size=st.size, mtime_ns=st.modification_time * 1_000_000))
        return out

    def get_file_info_selector(self, selector: pa_fs.FileSelector) -> list[pa_fs.FileInfo]:
        return [pa_fs.FileInfo(st.path, pa_fs.FileType.File, size=st.size) for st in self.store.walk(selector.base_dir)]

    def open_input_file(self, path: str) -> pa.NativeFile:
        return self.store.open_input_file(path)

    def open_input_stream(self, path: str) -> pa.NativeFile:
        return self.store.open_input_file(path)

    def _read_only(self, *_: Any, **__: Any) -> None:
        raise OSError("a tahoe table's pyarrow file system is read-only")

    create_dir = delete_dir = delete_dir_contents = delete_root_dir_contents = delete_file = _read_only
    move = copy_file = open_output_stream = open_append_stream = _read_only
