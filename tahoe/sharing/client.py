"""tahoe's Delta Sharing client: a drop-in for the official connector (`delta_sharing` 1.4), plus Arrow.
`import tahoe.sharing as delta_sharing` is the only line that changes.

  1. Same names, arguments, return types (`tahoe.sharing.model`, pandas DataFrames) and errors
     (`SharingHTTPError` is a `requests` HTTPError; LookupError, ValueError for a malformed table URL).
  2. `use_delta_format=None` lets the server choose the format; columns come with the table's logical types.
  3. `jsonPredicateHints` are sent and applied to the rows; `limit` is sent as `limitHint`.
  4. Extras: `load_as_arrow`, `load_as_batches`; `access_mode="url"|"dir"` (`dir`: temporary credentials for
     the table's directory, read with tahoe's own reader; `storage_options`); `async_query`.
  5. Downloads run in parallel (`workers`, default 8) with retries; expiring URLs are refreshed."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any, Callable, Iterator, Optional, Sequence

import pyarrow as pa

from ..errors import DeltaError
from .download import DownloadError, Fetcher
from .direct import changes_directly, check_access_mode, scan_directly
from .model import DeltaSharingProfile, Metadata, Protocol, Schema, Share, Table
from .reader import DEFAULT_WORKERS, RemoteFile, ScanReader, TableInfo, UrlBook, remote_files
from .rest import RestClient, TableResponse

__all__ = ["SharingClient", "load_as_pandas", "load_as_arrow", "load_as_batches", "load_as_spark",
           "load_table_changes_as_pandas", "load_table_changes_as_arrow", "load_table_changes_as_batches",
           "load_table_changes_as_spark", "get_table_version", "get_table_metadata", "get_table_protocol",
           "parse_url", "Request", "RemoteScan", "SharingArgumentError"]


class SharingArgumentError(DeltaError, ValueError):
    """A bad argument: a malformed table URL, a negative limit or version, ... (a ValueError, as
    the official connector raises)."""


def parse_url(url: str) -> tuple[str, str, str, str]:
    """(profile, share, schema, table) of a table URL `<profile>#<share>.<schema>.<table>`."""
    if not isinstance(url, str):
        raise SharingArgumentError(f"Invalid 'url': {url!r}")
    i = url.rfind("#")
    if i < 0:
        raise SharingArgumentError(f"Invalid 'url': {url} (expected <profile>#<share>.<schema>.<table>)")
    profile, parts = url[:i], url[i + 1:].split(".")
    if len(parts) != 3 or not profile or not all(parts):
        raise SharingArgumentError(f"Invalid 'url': {url} (expected <profile>#<share>.<schema>.<table>)")
    return profile, parts[0], parts[1], parts[2]


def _formats(use_delta_format: Optional[bool]) -> str:
    if use_delta_format is None:
        return "delta,parquet"
    return "delta" if use_delta_format else "parquet"


@dataclass
class Request:
    """A `/query` or `/changes` request, picklable (Spark ships it to executors), so that its
    answer can be asked for again — how expired file URLs are refreshed."""
    profile: DeltaSharingProfile
    table: Table
    kind: str                        # "query" | "changes"
    args: dict = field(default_factory=dict)   # the query body, or the changes query string
    formats: str = "delta,parquet"
    page_size: Optional[int] = None
    async_query: Optional[bool] = None

    def run(self, rest: Optional[RestClient] = None) -> TableResponse:
        own = rest is None
        rest = rest or RestClient(self.profile, async_query=self.async_query)
        try:
            if self.kind == "query":
                return rest.query(self.table, self.args, self.formats, self.page_size)
            return rest.changes(self.table, self.args, self.formats, self.page_size)
        finally:
            if own:
                rest.close()

    def refresher(self, refresh_token: Optional[str], fmt: str) -> Callable[[], TableResponse]:
        """Asks the same question again for fresh URLs: with the refresh token when the answer
        gave one (the same version's files), in the format the first answer came in."""
        again = Request(self.profile, self.table, self.kind, dict(self.args), fmt, self.page_size, self.async_query)
        if refresh_token and self.kind == "query":
            again.args.pop("includeRefreshToken", None)
            again.args["refreshToken"] = refresh_token

        def refresh() -> TableResponse:
            resp = again.run()
            if resp.format != fmt:
                raise DownloadError(f"refreshing the file URLs: the server answered in {resp.format} format, "
                                    f"not {fmt}")
            return resp
        return refresh


class RemoteScan:
    """One answer being read: its table info, files and URL book, and record batches of its
    rows. `stats()` counts requests, retries, URL refreshes and bytes."""

    def __init__(self, request: Request, rest: Optional[RestClient] = None, workers: int = DEFAULT_WORKERS,
                 on_file: Optional[Callable[[RemoteFile], None]] = None,
                 on_bytes: Optional[Callable[[int], None]] = None, response: Optional[TableResponse] = None):
        self.request = request
        self.response = response if response is not None else request.run(rest)
        self.info = TableInfo.of(self.response)
        self.files, self.later_metadata = remote_files(self.response)
        self.book = UrlBook(self.files, request.refresher(self.response.refresh_token, self.response.format))
        self.fetcher = Fetcher(on_bytes=on_bytes)
        self.reader = ScanReader(self.info, self.book, self.fetcher, workers, on_file)
        self._rest = rest

    @property
    def format(self) -> str:
        return self.response.format

    @property
    def version(self) -> int:
        return self.response.version

    @property
    def schema(self) -> pa.Schema:
        return self.reader.schema

    def stats(self) -> dict:
        return {"files": len(self.files), "bytes": self.fetcher.bytes, "download_retries": self.fetcher.retries,
                "resumed_downloads": self.fetcher.resumes, "url_refreshes": self.book.refreshes,
                "pages": self.response.pages, "async_query_id": self.response.query_id}


def _row_filter(info_schema: pa.Schema, table_schema, json_hints: Any, sql_hints: Optional[Sequence[str]]):
    if json_hints is None and not sql_hints:
        return None
    # the expression engine is imported only when there are hints (Spark's Python workers that
    # only download and decode files never need it)
    from .predicates import PredicateError, json_predicate, parse_sql_predicates, row_filter

    preds = []
    if json_hints is not None:
        preds.append(json_predicate(json_hints))
    if sql_hints:
        p = parse_sql_predicates(list(sql_hints), table_schema)
        if p is None:
            raise PredicateError(f"none of the predicateHints could be parsed: {list(sql_hints)}")
        preds.append(p)
    if not preds:
        return None
    return row_filter(preds)


def _check_limit(limit: Optional[int]) -> None:
    if limit is not None and (isinstance(limit, bool) or not isinstance(limit, int) or limit < 0):
        raise SharingArgumentError(f"'limit' must be a non-negative int, got {limit!r}")


def _snapshot_request(url: str, limit: Optional[int], version: Optional[int], timestamp: Optional[str],
                      jsonPredicateHints: Any, predicateHints: Optional[Sequence[str]],
                      use_delta_format: Optional[bool], page_size: Optional[int],
                      async_query: Optional[bool] = None) -> Request:
    profile, share, schema, table = parse_url(url)
    _check_limit(limit)
    if version is not None and timestamp is not None:
        raise SharingArgumentError("give version or timestamp, not both")
    if version is not None and (isinstance(version, bool) or not isinstance(version, int) or version < 0):
        raise SharingArgumentError(f"'version' must be a non-negative int, got {version!r}")
    body: dict[str, Any] = {}
    if predicateHints is not None:
        body["predicateHints"] = list(predicateHints)
    if jsonPredicateHints is not None:
        body["jsonPredicateHints"] = jsonPredicateHints if isinstance(jsonPredicateHints, str) \
            else json.dumps(jsonPredicateHints)
    if limit is not None:
        body["limitHint"] = limit
    if version is not None:
        body["version"] = version
    if timestamp is not None:
        body["timestamp"] = timestamp
    if version is None and timestamp is None:
        body["includeRefreshToken"] = True
    return Request(DeltaSharingProfile.of(profile), Table(table, share, schema), "query", body,
                   _formats(use_delta_format), page_size, async_query)


def _changes_request(url: str, starting_version, ending_version, starting_timestamp, ending_timestamp,
                     use_delta_format: Optional[bool], page_size: Optional[int]) -> Request:
    profile, share, schema, table = parse_url(url)
    if starting_version is None and starting_timestamp is None:
        raise SharingArgumentError("give starting_version or starting_timestamp")
    params = {"startingVersion": starting_version, "endingVersion": ending_version,
              "startingTimestamp": starting_timestamp, "endingTimestamp": ending_timestamp}
    return Request(DeltaSharingProfile.of(profile), Table(table, share, schema), "changes",
                   {k: v for k, v in params.items() if v is not None}, _formats(use_delta_format), page_size)


def scan_table(url: str, limit: Optional[int] = None, version: Optional[int] = None, timestamp: Optional[str] = None,
               jsonPredicateHints: Any = None, use_delta_format: Optional[bool] = None,
               predicateHints: Optional[Sequence[str]] = None, workers: int = DEFAULT_WORKERS,
               page_size: Optional[int] = None, on_file=None, on_bytes=None,
               async_query: Optional[bool] = None) -> tuple[RemoteScan, Iterator[pa.RecordBatch]]:
    """The scan of a shared table and an iterator of its record batches (what the `load_as_*`
    functions and the CLI use)."""
    req = _snapshot_request(url, limit, version, timestamp, jsonPredicateHints, predicateHints, use_delta_format,
                            page_size, async_query)
    scan = RemoteScan(req, workers=workers, on_file=on_file, on_bytes=on_bytes)
    flt = _row_filter(scan.schema, scan.info.schema, jsonPredicateHints, predicateHints)
    return scan, scan.reader.batches(scan.files, flt, limit)


def _scan(url: str, limit, version, timestamp, jsonPredicateHints, use_delta_format, predicateHints, workers,
          access_mode: str, async_query: Optional[bool],
          storage_options: Optional[dict]) -> tuple[pa.Schema, Iterator[pa.RecordBatch]]:
    """The schema and record batches of a shared table, read in `access_mode`."""
    check_access_mode(access_mode)
    if access_mode == "url":
        scan, batches = scan_table(url, limit, version, timestamp, jsonPredicateHints, use_delta_format,
                                   predicateHints, workers, async_query=async_query)
        return scan.schema, batches
    req = _snapshot_request(url, limit, version, timestamp, jsonPredicateHints, predicateHints, use_delta_format,
                            None)
    rest = RestClient(req.profile)
    try:
        return scan_directly(rest, req.table, version, timestamp, limit,
                             lambda schema: _row_filter(None, schema, jsonPredicateHints, predicateHints),
                             storage_options, workers)
    finally:
        rest.close()


def scan_changes(url: str, starting_version: Optional[int] = None, ending_version: Optional[int] = None,
                 starting_timestamp: Optional[str] = None, ending_timestamp: Optional[str] = None,
                 use_delta_format: Optional[bool] = None, workers: int = DEFAULT_WORKERS,
                 page_size: Optional[int] = None, on_file=None, on_bytes=None) -> tuple[RemoteScan, Iterator[pa.RecordBatch]]:
    req = _changes_request(url, starting_version, ending_version, starting_timestamp, ending_timestamp,
                           use_delta_format, page_size)
    scan = RemoteScan(req, workers=workers, on_file=on_file, on_bytes=on_bytes)
    return scan, scan.reader.changes(scan.files, timestamps_as_ms=scan.format == "parquet")


# --- the official connector's functions ---------------------------------------------------------------

def load_as_arrow(url: str, limit: Optional[int] = None, version: Optional[int] = None,
                  timestamp: Optional[str] = None, jsonPredicateHints: Any = None,
                  use_delta_format: Optional[bool] = None, predicateHints: Optional[Sequence[str]] = None,
                  workers: int = DEFAULT_WORKERS, *, access_mode: str = "url", async_query: Optional[bool] = None,
                  storage_options: Optional[dict] = None) -> pa.Table:
    """The rows of a shared table as a pyarrow Table (arguments as `load_as_pandas`)."""
    schema, batches = _scan(url, limit, version, timestamp, jsonPredicateHints, use_delta_format, predicateHints,
                            workers, access_mode, async_query, storage_options)
    return pa.Table.from_batches(list(batches), schema=schema)


def load_as_batches(url: str, limit: Optional[int] = None, version: Optional[int] = None,
                    timestamp: Optional[str] = None, jsonPredicateHints: Any = None,
                    use_delta_format: Optional[bool] = None, predicateHints: Optional[Sequence[str]] = None,
                    workers: int = DEFAULT_WORKERS, *, access_mode: str = "url", async_query: Optional[bool] = None,
                    storage_options: Optional[dict] = None) -> pa.RecordBatchReader:
    """The rows of a shared table as a stream of record batches: memory stays at a few files
    however large the table."""
    schema, batches = _scan(url, limit, version, timestamp, jsonPredicateHints, use_delta_format, predicateHints,
                            workers, access_mode, async_query, storage_options)
    return pa.RecordBatchReader.from_batches(schema, batches)


def load_as_pandas(url: str, limit: Optional[int] = None, version: Optional[int] = None,
                   timestamp: Optional[str] = None, jsonPredicateHints: Any = None,
                   use_delta_format: Optional[bool] = None, convert_in_batches: bool = False, *,
                   access_mode: str = "url", async_query: Optional[bool] = None,
                   storage_options: Optional[dict] = None):
    """The rows of a shared table as a pandas DataFrame.

    :param url: `<profile>#<share>.<schema>.<table>`
    :param limit: at most this many rows (sent as limitHint; later files are not downloaded)
    :param version: the table as of this version (history must be shared)
    :param timestamp: the table as of this timestamp (history must be shared)
    :param jsonPredicateHints: a JSON predicate (spec "JSON predicates for Filtering"): sent to
      the server, and applied to the rows
    :param use_delta_format: None: the server chooses; True: delta; False: parquet
    :param convert_in_batches: accepted for compatibility (rows always stream batch by batch)
    :param access_mode: tahoe's: "url" (pre-signed file URLs) or "dir" (temporary credentials for the
      table's directory, where its metadata lists that access mode; `storage_options` adds S3 settings)
    :param async_query: None: asynchronous queries once the server advertises them; True; False
    """
    del convert_in_batches
    t = load_as_arrow(url, limit, version, timestamp, jsonPredicateHints, use_delta_format,
                      access_mode=access_mode, async_query=async_query, storage_options=storage_options)
    # split_blocks: no consolidation copy (the frame is the same); self_destruct: Arrow memory freed
    # column by column as it converts
    return t.to_pandas(split_blocks=True, self_destruct=True)


def load_table_changes_as_arrow(url: str, starting_version: Optional[int] = None,
                                ending_version: Optional[int] = None, starting_timestamp: Optional[str] = None,
                                ending_timestamp: Optional[str] = None,
                                use_delta_format: Optional[bool] = None, workers: int = DEFAULT_WORKERS, *,
                                access_mode: str = "url", storage_options: Optional[dict] = None) -> pa.Table:
    """The change data feed of a shared table as a pyarrow Table: the table's columns plus
    `_change_type`, `_commit_version` and `_commit_timestamp`: int64 milliseconds in parquet format, a UTC
    timestamp (milliseconds kept) in delta format and with `access_mode="dir"`. `use_delta_format=None` lets
    the server choose (the official connector asks for parquet, which fails on deletion vectors)."""
    check_access_mode(access_mode)
    if access_mode == "dir":
        req = _changes_request(url, starting_version, ending_version, starting_timestamp, ending_timestamp,
                               use_delta_format, None)
        with RestClient(req.profile) as rest:
            return changes_directly(rest, req.table, starting_version, ending_version, starting_timestamp,
                                    ending_timestamp, storage_options)
    scan, batches = scan_changes(url, starting_version, ending_version, starting_timestamp, ending_timestamp,
                                 use_delta_format, workers)
    return pa.Table.from_batches(list(batches), schema=scan.reader.change_schema(scan.format == "parquet"))


def load_table_changes_as_batches(url: str, starting_version: Optional[int] = None,
                                  ending_version: Optional[int] = None, starting_timestamp: Optional[str] = None,
                                  ending_timestamp: Optional[str] = None,
                                  use_delta_format: Optional[bool] = None,
                                  workers: int = DEFAULT_WORKERS) -> pa.RecordBatchReader:
    scan, batches = scan_changes(url, starting_version, ending_version, starting_timestamp, ending_timestamp,
                                 use_delta_format, workers)
    return pa.RecordBatchReader.from_batches(scan.reader.change_schema(scan.format == "parquet"), batches)


def load_table_changes_as_pandas(url: str, starting_version: Optional[int] = None,
                                 ending_version: Optional[int] = None, starting_timestamp: Optional[str] = None,
                                 ending_timestamp: Optional[str] = None, use_delta_format: Optional[bool] = None,
                                 convert_in_batches: bool = False, *, access_mode: str = "url",
                                 storage_options: Optional[dict] = None):
    """The change data feed of a shared table as a pandas DataFrame. Give a starting version or
    timestamp; the end (inclusive) defaults to the latest version."""
    del convert_in_batches
    return load_table_changes_as_arrow(url, starting_version, ending_version, starting_timestamp, ending_timestamp,
                                       use_delta_format, access_mode=access_mode, storage_options=storage_options) \
        .to_pandas(split_blocks=True, self_destruct=True)


def _rest_for(url: str) -> tuple[RestClient, Table]:
    profile, share, schema, table = parse_url(url)
    return RestClient(DeltaSharingProfile.of(profile)), Table(table, share, schema)


def get_table_version(url: str, starting_timestamp: Optional[str] = None) -> int:
    """The table's current version (or the first version at or after `starting_timestamp`)."""
    rest, table = _rest_for(url)
    with rest:
        return rest.table_version(table, starting_timestamp)


def _metadata(url: str, use_delta_format: bool) -> TableResponse:
    rest, table = _rest_for(url)
    with rest:
        return rest.metadata(table, "delta,parquet" if use_delta_format else None)


def get_table_protocol(url: str, use_delta_format: bool = True) -> Protocol:
    """The table's protocol (the whole Delta protocol when the server answers in delta format)."""
    return Protocol.from_json(_metadata(url, use_delta_format).protocol)


def get_table_metadata(url: str, use_delta_format: bool = True) -> Metadata:
    """The table's metadata (schema, partition columns, configuration, size and file count)."""
    return Metadata.from_json(_metadata(url, use_delta_format).metadata)


def _active_spark():
    try:
        from pyspark.sql import SparkSession
    except ImportError:
        raise ImportError("Unable to import pyspark. `load_as_spark` requires PySpark.") from None
    spark = SparkSession.getActiveSession()
    if spark is None:
        raise RuntimeError("No active SparkSession was found. `load_as_spark` requires running in a PySpark "
                           "application.")
    return spark


def load_as_spark(url: str, version: Optional[int] = None, timestamp: Optional[str] = None):
    """The shared table as a Spark DataFrame through `spark.read.format("deltaSharing")` — tahoe's
    Python data source (no JVM jar), which Spark finds by itself where tahoe is installed
    (`pyspark_tahoe_sharing`): no register call; `tahoe.spark.register(spark)` only where tahoe
    is shipped with addPyFile instead."""
    df = _active_spark().read.format("deltaSharing")
    if version is not None:
        df = df.option("versionAsOf", version)
    if timestamp is not None:
        df = df.option("timestampAsOf", timestamp)
    return df.load(url)


def load_table_changes_as_spark(url: str, starting_version: Optional[int] = None,
                                ending_version: Optional[int] = None, starting_timestamp: Optional[str] = None,
                                ending_timestamp: Optional[str] = None):
    """The change data feed as a Spark DataFrame (`format("deltaSharing")` with
    `readChangeFeed`)."""
    df = _active_spark().read.format("deltaSharing").option("readChangeFeed", "true")
    for k, v in (("startingVersion", starting_version), ("endingVersion", ending_version),
                 ("startingTimestamp", starting_timestamp), ("endingTimestamp", ending_timestamp)):
        if v is not None:
            df = df.option(k, v)
    return df.load(url)


class SharingClient:
    """A client of one profile: the shares, schemas and tables it may read."""

    def __init__(self, profile: Any):
        self._profile = DeltaSharingProfile.of(profile)
        self._rest_client = RestClient(self._profile)

    def list_shares(self) -> Sequence[Share]:
        """The shares the profile may read."""
        return self._rest_client.list_shares()

    def list_schemas(self, share: Share) -> Sequence[Schema]:
        """The schemas of a share."""
        return self._rest_client.list_schemas(share)

    def list_tables(self, schema: Schema) -> Sequence[Table]:
        """The tables of a schema."""
        return self._rest_client.list_tables(schema)

    def list_all_tables(self) -> Sequence[Table]:
        """Every table of every share the profile may read."""
        return self._rest_client.list_all_tables()

    def close(self) -> None:
        self._rest_client.close()
