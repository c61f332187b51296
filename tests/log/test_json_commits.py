"""The vectorised replay of large JSON commits gives exactly what the dict path gives: same active
files and tombstones (values and row order), same non-file state — on every version of every
conformance table and on hand-written logs with the shapes that are easy to get wrong."""

from __future__ import annotations

import json
from pathlib import Path

import pyarrow as pa
import pytest

from tahoe import DeltaLog, Table
from tahoe.errors import CorruptLogError, DeltaError
from tahoe.log import json_commits
from tahoe.log.checkpoints import write_checkpoint
from tahoe.log.json_commits import JsonCommit, PieceTail
from tests.conftest import GOLDEN, MANIFEST, manifest_params
from tests.fixtures.conformance_oracle import expected_error

SCHEMA = json.dumps({"type": "struct", "fields": [
    {"name": "id", "type": "long", "nullable": True, "metadata": {}},
    {"name": "p", "type": "string", "nullable": True, "metadata": {}}]})


def _state(path: str, version: int | None, vectorise: bool, monkeypatch) -> dict:
    monkeypatch.setattr(json_commits, "VECTOR_MIN_BYTES", 0 if vectorise else 1 << 62)
    snap = DeltaLog.for_table(path).snapshot(version)
    tail = snap._state.files._tail
    return {
        "files": snap.files_table(), "tombstones": snap.tombstones_table(),
        "protocol": snap.protocol, "metadata": snap._state.metadata, "txns": snap.set_transactions,
        "domains": snap.domain_metadata, "commit_info": snap._state.last_commit_info,
        "vectorised": [type(p).__name__ for p in getattr(tail, "_pieces", [])],
    }


def assert_same(path: str, version: int | None, monkeypatch, all_json: bool = False) -> None:
    ref = _state(path, version, False, monkeypatch)
    got = _state(path, version, True, monkeypatch)
    for k in ("files", "tombstones"):
        assert got[k].schema == ref[k].schema, k
        assert got[k].to_pylist() == ref[k].to_pylist(), (path, version, k)
    for k in ("protocol", "metadata", "txns", "domains", "commit_info"):
        assert got[k] == ref[k], (path, version, k)
    if all_json:
        assert got["vectorised"] and set(got["vectorised"]) == {"JsonCommit"}, got["vectorised"]


@pytest.mark.parametrize("entry", manifest_params())
def test_every_version_of_the_conformance_tables(entry, monkeypatch):
    path = str(GOLDEN / entry["table"])
    if entry["expect"] == "error":   # a table that must not read fails the same way on both paths
        errors = []
        cls, pattern = expected_error(entry)
        for limit in (1 << 62, 0):
            monkeypatch.setattr(json_commits, "VECTOR_MIN_BYTES", limit)
            with pytest.raises(cls, match=pattern) as ei:
                Table(path).to_arrow()
            errors.append((type(ei.value), str(ei.value)))
        assert errors[0] == errors[1]
        return
    for v in range(entry["latest_version"] + 1):
        try:
            _state(path, v, False, monkeypatch)
        except DeltaError as e:   # versions the log cannot reconstruct fail the same way vectorised
            with pytest.raises(type(e)):
                _state(path, v, True, monkeypatch)
            continue
        assert_same(path, v, monkeypatch)


@pytest.mark.conformance
def test_conformance_commits_mostly_take_the_vectorised_path(monkeypatch):
    """Guard against a silent fallback: most conformance commits parse vectorised. Every table that
    is not an error table must load: a failure here is a failure, never a skip."""
    kinds: list[str] = []
    for entry in MANIFEST:
        if entry["expect"] == "error":
            continue
        kinds += _state(str(GOLDEN / entry["table"]), None, True, monkeypatch)["vectorised"]
    assert kinds, "no JSON commit was replayed at all"
    assert kinds.count("JsonCommit") > 0.8 * len(kinds), kinds.count("DictPiece")


def _write(root: Path, commits: list[list[dict]], raw: dict[int, str] | None = None) -> str:
    log = root / "_delta_log"
    log.mkdir(parents=True, exist_ok=True)
    for v, actions in enumerate(commits):
        text = (raw or {}).get(v) or "".join(json.dumps(a, separators=(",", ":")) + "\n" for a in actions)
        (log / f"{v:020d}.json").write_text(text)
    return str(root)


def _head(partitioned: bool = True) -> list[dict]:
    return [{"commitInfo": {"timestamp": 1, "operation": "WRITE"}},
            {"protocol": {"minReaderVersion": 3, "minWriterVersion": 7, "readerFeatures": ["deletionVectors"],
                          "writerFeatures": ["deletionVectors"]}},
            {"metaData": {"id": "t", "format": {"provider": "parquet", "options": {}}, "schemaString": SCHEMA,
                          "partitionColumns": ["p"] if partitioned else [], "configuration": {}, "createdTime": 1}}]


def _add(path: str, p: str | None = "a", **kw) -> dict:
    a = {"path": path, "partitionValues": {"p": p}, "size": 10, "modificationTime": 1, "dataChange": True,
         "stats": json.dumps({"numRecords": 3, "minValues": {"p": "2024-01-01"}})}
    a.update(kw)
    return {"add": a}


def _remove(path: str, **kw) -> dict:
    r = {"path": path, "deletionTimestamp": 5, "dataChange": True, "partitionValues": {"p": "a"}, "size": 10}
    r.update(kw)
    return {"remove": r}


def _dv(uid: str, offset: int | None = 1) -> dict:
    d = {"storageType": "u", "pathOrInlineDv": uid, "sizeInBytes": 40, "cardinality": 2}
    if offset is not None:
        d["offset"] = offset
    return d


SPECIAL = ['x"y', "}{", "a\\b", "é ü 日本", "2024-01-01", "", "a,b:c", "null", "a\nb", "{\"k\":1}"]


def test_partition_values_tags_nulls_and_special_characters(tmp_path, monkeypatch):
    adds = [_add(f"p={i}/f{i}.parquet", SPECIAL[i % len(SPECIAL)]) for i in range(30)]
    adds.append(_add("n/null.parquet", None))                                  # a null partition value
    adds.append({"add": {**_add("n/missing.parquet")["add"], "partitionValues": {}}})  # key absent
    adds.append({"add": {**_add("n/two.parquet")["add"], "partitionValues": {"q": "1", "p": "2"}}})  # order kept
    adds.append(_add("t/tags.parquet", tags={"INSERTION_TIME": "1700000000000000", "x": None}))
    adds.append(_add("t/empty-tags.parquet", tags={}))
    # delta-rs writes explicit nulls for optional fields
    adds.append(_add("r/rs.parquet", tags=None, deletionVector=None, baseRowId=None,
                     defaultRowCommitVersion=None, clusteringProvider=None, stats=None))
    adds.append({"add": {"path": "r/spaced.parquet", "partitionValues": {"p" : "a b"}, "size": 1,
                         "modificationTime": 1, "dataChange": True}})
    root = _write(tmp_path / "t", [_head() + adds])
    assert_same(root, None, monkeypatch, all_json=True)


def test_partition_values_of_one_width_in_another_key_order(tmp_path, monkeypatch):
    """Two partition columns whose objects all have one length (the check compares them word by
    word): a line with the keys in another order, or with a key more after them, is not what the
    parse's struct re-encodes to — the maps come from the text, in the text's order."""
    schema = json.loads(SCHEMA)
    schema["fields"].append({"name": "q", "type": "string", "nullable": True, "metadata": {}})
    head = _head()
    head[2]["metaData"].update(schemaString=json.dumps(schema), partitionColumns=["p", "q"])

    def add(i, pv):
        return {"add": {**_add(f"f{i:03d}.parquet")["add"], "partitionValues": pv}}

    adds = [add(i, {"p": f"{i % 7}", "q": f"{i % 3}"}) for i in range(200)]
    adds[17] = add(17, {"q": "2", "p": "3"})                                 # same length, keys swapped
    adds[151] = add(151, {"p": "1", "q": "1", "r": "1"})                     # a key more, after the two
    for variant in (adds, [a for i, a in enumerate(adds) if i not in (17, 151)]):
        root = _write(tmp_path / f"t{len(variant)}", [head + variant])
        assert_same(root, None, monkeypatch, all_json=True)
        monkeypatch.setattr(json_commits, "VECTOR_MIN_BYTES", 0)
        files = DeltaLog.for_table(root).snapshot().files_table(["path", "partitionValues"]).to_pylist()
        by_path = {f["path"]: f["partitionValues"] for f in files}
        assert by_path["f000.parquet"] == [("p", "0"), ("q", "0")]
        if variant is adds:
            assert by_path["f017.parquet"] == [("q", "2"), ("p", "3")]
            assert by_path["f151.parquet"] == [("p", "1"), ("q", "1"), ("r", "1")]


def test_removes_dvs_and_the_dict_path_row_order(tmp_path, monkeypatch):
    c0 = _head() + [_add(f"f{i}.parquet") for i in range(10)]
    c1 = [_remove("f1.parquet"), _add("f1.parquet", deletionVector=_dv("dv1")),      # DV update
          _add("f2.parquet", size=99),                                              # re-add: keeps position
          _remove("f3.parquet"), _add("f3.parquet", size=7),                        # remove then add: to the end
          _add("f4.parquet", deletionVector=_dv("dv4", None)),                      # same path, another key
          _remove("f5.parquet"), _add("new.parquet")]
    c2 = [_remove("f1.parquet", deletionVector=_dv("dv1")), _add("f1.parquet", deletionVector=_dv("dv1b")),
          _add("f5.parquet"), _remove("new.parquet"), _add(f"file://{tmp_path}/t/f6.parquet", size=66),
          _remove(f"{tmp_path}/t/f7.parquet")]
    c3 = [_add("new.parquet"), _remove("f5.parquet"), _add("f5.parquet"), _remove("gone.parquet"),
          _add("dup.parquet", size=1), _add("dup.parquet", size=2)]               # the later wins
    root = _write(tmp_path / "t", [c0, c1, c2, c3])
    for v in range(4):
        assert_same(root, v, monkeypatch, all_json=True)
    monkeypatch.setattr(json_commits, "VECTOR_MIN_BYTES", 0)
    files = DeltaLog.for_table(root).snapshot().files_table(["path", "size"]).to_pylist()
    assert {"path": "dup.parquet", "size": 2} in files and len({f["path"] for f in files}) == len(files) - 1


def test_wide_stats_lines_removes_and_dvs(tmp_path, monkeypatch):
    """Lines of over a kilobyte (stats of many columns): deletion vectors are found by the parse
    rather than by a pass over the text; removes, re-adds and DV updates reconcile as on the
    dict path, and tombstones' other columns are parsed when asked for."""
    wide = json.dumps({"numRecords": 3, "minValues": {f"c{i:03d}": f"value-{i}" * 3 for i in range(60)},
                       "maxValues": {f"c{i:03d}": f"value-{i}z" * 3 for i in range(60)}})
    assert len(wide) > 2000

    def add(path, **kw):
        return _add(path, stats=wide, **kw)

    c0 = _head() + [add(f"f{i}.parquet") for i in range(40)]
    c1 = [_remove("f1.parquet", stats=wide), add("f1.parquet", deletionVector=_dv("dv1")),
          add("f2.parquet", size=99), _remove("f3.parquet"), add("f3.parquet", size=7), add("new.parquet")]
    c2 = [_remove("f1.parquet", deletionVector=_dv("dv1")), add("f1.parquet", deletionVector=_dv("dv1b")),
          _remove("new.parquet", tags={"k": "v"})] + [add(f"g{i}.parquet") for i in range(30)]
    c3 = [add(f"h{i}.parquet") for i in range(30)]          # wide lines, no DV and no remove at all
    root = _write(tmp_path / "t", [c0, c1, c2, c3])
    for v in range(4):
        assert_same(root, v, monkeypatch, all_json=True)


def test_json_dumps_layout_with_spaces(tmp_path, monkeypatch):
    """A log written with Python's json.dumps defaults (`{"add": {"path": "..."`, a space after
    each `:` and `,`): the same state as the dict path, its partitionValues taken from the parse."""
    actions = _head() + [_add(f"p={i % 4}/f{i}.parquet", str(i % 4)) for i in range(200)] + \
        [_add("p=n/null.parquet", None)]
    root = tmp_path / "t"
    (root / "_delta_log").mkdir(parents=True)
    (root / "_delta_log" / f"{0:020d}.json").write_text("".join(json.dumps(a) + "\n" for a in actions))
    assert '{"add": {"path": "' in (root / "_delta_log" / f"{0:020d}.json").read_text()
    assert_same(str(root), None, monkeypatch, all_json=True)
    monkeypatch.setattr(json_commits, "VECTOR_MIN_BYTES", 0)
    piece = DeltaLog.for_table(str(root)).snapshot()._state.files._tail._pieces[0]
    assert "partitionValues" in piece._cache["add"]          # from the parse, not read again from the text


def test_mixed_small_and_large_commits_after_a_checkpoint(tmp_path, monkeypatch):
    c0 = _head() + [_add(f"f{i}.parquet") for i in range(50)]
    c1 = [_remove("f3.parquet"), _add("g.parquet")]
    big = [_add(f"h{i}.parquet", p=None if i % 7 == 0 else str(i % 3)) for i in range(3000)]
    c2 = big + [_remove("f4.parquet"), _remove("g.parquet"), _add("f3.parquet")]
    c3 = [_remove("h5.parquet"), _add("f4.parquet")]
    root = _write(tmp_path / "t", [c0, c1])
    write_checkpoint(DeltaLog.for_table(root), 1)
    _write(tmp_path / "t", [c0, c1, c2, c3])
    monkeypatch.setattr(json_commits, "VECTOR_MIN_BYTES", 100_000)   # only c2 is large
    snap = DeltaLog.for_table(root).snapshot()
    assert [type(p).__name__ for p in snap._state.files._tail._pieces] == ["JsonCommit", "DictPiece"]
    for v in (2, 3):
        ref = _state(root, v, False, monkeypatch)
        monkeypatch.setattr(json_commits, "VECTOR_MIN_BYTES", 100_000)
        got = DeltaLog.for_table(root).snapshot(v)
        assert got.files_table().to_pylist() == ref["files"].to_pylist()
        assert got.tombstones_table().to_pylist() == ref["tombstones"].to_pylist()


def test_one_parse_and_maps_read_from_the_text_on_demand(tmp_path, monkeypatch):
    """The commit is parsed once with every scalar column; partitionValues written as the writers
    write them come from that parse; tags with values are read from the text when first asked for."""
    root = _write(tmp_path / "t", [_head() + [_add(f"f{i}.parquet", tags={"k": str(i)}) for i in range(20)]])
    monkeypatch.setattr(json_commits, "VECTOR_MIN_BYTES", 0)
    snap = DeltaLog.for_table(root).snapshot()
    piece = snap._state.files._tail._pieces[0]
    assert isinstance(piece, JsonCommit)
    assert {"path", "size", "stats", "deletionVector", "partitionValues"} <= set(piece._cache["add"])
    assert "tags" not in piece._cache["add"]
    assert snap.files_table(["size"]).column("size").to_pylist() == [10] * 20
    assert snap.files_table(["partitionValues"]).column("partitionValues").to_pylist() == [[("p", "a")]] * 20
    assert snap.files_table(["tags"]).column("tags").to_pylist()[3] == [("k", "3")]
    assert "tags" in piece._cache["add"]


@pytest.mark.parametrize("odd", [
    '{"add":{"path":"x.parquet","partitionValues":{"p":1},"size":1,"modificationTime":1,"dataChange":true}}',
    '{"add":{"path":"x.parquet","partitionValues":{"p":{"n":"1"}},"size":1,"modificationTime":1,"dataChange":true}}',
    '{"add":{"path":"x.parquet","partitionValues":{},"size":1,"modificationTime":1,"dataChange":true,'
    '"tags":{"tags":{}}}}',
    '{"add":{"path":"x.parquet","partitionValues":{},"size":1,"modificationTime":1,"dataChange":true,'
    '"deletionVector":{}}}',
    '{"add":{"path":"x.parquet","partitionValues":{},"size":1,"modificationTime":1,"dataChange":true},'
    '"remove":{"path":"y.parquet"}}',
    '{"add":{"path":"x.parquet","partitionValues":{},"size":1,"modificationTime":1.5,"dataChange":true}}',
    '{"add":null}',
    '   ',
    '{"add":{"path":"x.parquet","partitionValues" : {"p":"b"},"size":1,"modificationTime":1,"dataChange":true}}',
    '{"add":{"path":"x.parquet","partitionValues":{"p":"b"},"size":1,"modificationTime":1,"dataChange":true,'
    '"tags":{"partitionValues":"q"}}}',
])
def test_shapes_the_vectorised_reader_refuses_give_the_dict_path_result(tmp_path, monkeypatch, odd):
    text = "".join(json.dumps(a) + "\n" for a in _head(False) + [_add("a.parquet", None)]) + odd + "\n"
    root = _write(tmp_path / "t", [[]], raw={0: text})
    try:
        _state(root, None, False, monkeypatch)["files"].to_pylist()
    except Exception as e:
        with pytest.raises(type(e)):
            _state(root, None, True, monkeypatch)["files"].to_pylist()
        return
    assert_same(root, None, monkeypatch)


def test_strict_parse_samples_fields_some_lines_hold(tmp_path, monkeypatch):
    """Deletion vectors and row ids on every third line, tags with values on a few (a DML commit):
    the sampled lines find the first two, parsed strictly; tags with values send the commit to
    the plain parse before any strict one is tried."""
    lines = [_spark_add(i, **({"deletionVector": _dv(f"d{i}"), "baseRowId": i} if i % 3 == 1 else {}))
             for i in range(300)]
    _strict_case(tmp_path, monkeypatch, lines)
    tagged = [_spark_add(i, **({"tags": {"k": str(i)}} if i % 10 == 5 else {})) for i in range(300)]
    tried = []
    real = json_commits._read_json
    monkeypatch.setattr(json_commits, "_read_json", lambda *a, **kw: tried.append(kw.get("strict")) or real(*a, **kw))
    _strict_case(tmp_path, monkeypatch, tagged, strict=False)
    assert True not in tried


@pytest.mark.parametrize("bad", ['{"add":{"path":"x.parquet"}}', '{"add":{"size":1}}', "[1]", "{not json"])
def test_corrupt_large_commits_raise_the_dict_path_error(tmp_path, monkeypatch, bad):
    text = "".join(json.dumps(a) + "\n" for a in _head(False)) + bad + "\n"
    root = _write(tmp_path / "t", [[]], raw={0: text})
    monkeypatch.setattr(json_commits, "VECTOR_MIN_BYTES", 1 << 62)
    with pytest.raises(CorruptLogError) as ref:
        DeltaLog.for_table(root).snapshot()
    monkeypatch.setattr(json_commits, "VECTOR_MIN_BYTES", 0)
    with pytest.raises(CorruptLogError) as got:
        DeltaLog.for_table(root).snapshot()
    assert str(got.value) == str(ref.value)


def test_piece_tail_reconcile_matches_dict_semantics_on_random_histories():
    import random

    rng = random.Random(7)
    for _ in range(200):
        acts = [(rng.random() < 0.6, f"k{rng.randrange(6)}") for _ in range(rng.randrange(1, 25))]
        adds: dict[str, int] = {}
        removes: dict[str, int] = {}
        for i, (is_add, k) in enumerate(acts):
            if is_add:
                adds[k] = i
                removes.pop(k, None)
            else:
                adds.pop(k, None)
                removes[k] = i
        got = PieceTail._reconcile(pa.array([k for _, k in acts]), pa.array([a for a, _ in acts]))
        assert got["add"].to_pylist() == list(adds.values())
        assert got["remove"].to_pylist() == list(removes.values())


# --- the strict parse of a commit's run of file lines (`JsonCommit.parse`) --------------------------

def _oracle_files(text: str) -> list[dict]:
    """The active files of a one-commit table by a plain json.loads of each line: the adds by
    path, a later reference replacing an earlier one (none here is removed), every ADD_SCHEMA
    column (maps as lists of pairs in the text's order, absent fields null)."""
    from tahoe.log.file_actions import ADD_SCHEMA, DV_TYPE

    def value(a: dict, c: str):
        v = a.get(c)
        if v is not None and c in ("partitionValues", "tags"):
            return list(v.items())
        if v is not None and c == "deletionVector":
            return {f.name: v.get(f.name) for f in DV_TYPE}
        return v

    files: dict[str, dict] = {}
    for line in text.splitlines():
        if line.strip():
            a = json.loads(line).get("add")
            if a is not None:
                files.pop(a["path"], None)
                files[a["path"]] = {c: value(a, c) for c in ADD_SCHEMA.names}
    return list(files.values())


def _strict_case(tmp_path, monkeypatch, lines: list[str], *, head: list[dict] | None = None,
                 tail: list[dict] | None = None, strict: bool = True) -> str:
    """A one-commit table of `lines` (the run of file lines, as written) between `head` (the
    protocol and metaData of a table partitioned by `p`) and `tail`: the vectorised replay gives
    what the dict path and a json.loads oracle give, by the strict parse when `strict`."""
    head = _head() if head is None else head
    text = "".join(json.dumps(a, separators=(",", ":")) + "\n" for a in head) + "".join(x + "\n" for x in lines) + \
        "".join(json.dumps(a, separators=(",", ":")) + "\n" for a in tail or [])
    root = _write(tmp_path / f"t{len(list(tmp_path.iterdir()))}", [[]], raw={0: text})
    assert_same(root, None, monkeypatch, all_json=True)
    monkeypatch.setattr(json_commits, "VECTOR_MIN_BYTES", 0)
    snap = DeltaLog.for_table(root).snapshot()
    piece = snap._state.files._tail._pieces[0]
    assert piece._strict is strict
    assert snap.files_table().to_pylist() == _oracle_files(text)
    return root


def _spark_add(i: int, p: str | None = None, **kw) -> str:
    """An add as delta-spark writes it: compact, the fields it sets in its order, no nulls."""
    a = {"path": f"p={p or i % 3}/part-{i:05d}-c000.snappy.parquet", "partitionValues": {"p": p or str(i % 3)},
         "size": 1000 + i, "modificationTime": 1700000000000 + i, "dataChange": True,
         "stats": json.dumps({"numRecords": i, "minValues": {"id": i}, "maxValues": {"id": i},
                              "nullCount": {"id": 0}}, separators=(",", ":"))}
    a.update(kw)
    return json.dumps({"add": a}, separators=(",", ":"))


def test_strict_parse_of_the_writers_layouts(tmp_path, monkeypatch):
    """delta-spark's layout (commitInfo first, compact adds, no optional field) and delta-rs's
    (explicit nulls for every optional field, commitInfo last): parsed strictly, the same files
    as a line-by-line json.loads and as the dict path."""
    _strict_case(tmp_path, monkeypatch, [_spark_add(i) for i in range(200)])
    rs = [json.dumps({"add": {"path": f"p={i % 2}/part-{i:05d}.parquet", "partitionValues": {"p": str(i % 2)},
                              "size": i, "modificationTime": i, "dataChange": True, "stats": None, "tags": None,
                              "deletionVector": None, "baseRowId": None, "defaultRowCommitVersion": None,
                              "clusteringProvider": None}}, separators=(",", ":")) for i in range(200)]
    head = _head()
    _strict_case(tmp_path, monkeypatch, rs, head=head[1:], tail=head[:1])
    # row tracking and clustering: values set on every line are parsed
    rows = [_spark_add(i, baseRowId=100 * i, defaultRowCommitVersion=0, clusteringProvider="liquid")
            for i in range(50)]
    _strict_case(tmp_path, monkeypatch, rows)
    # json.dumps's own layout (a space after each ':' and ','), a blank line before the run
    spaced = [json.dumps(json.loads(_spark_add(i))) for i in range(50)]
    _strict_case(tmp_path, monkeypatch, spaced, head=_head() + [{"txn": {"appId": "a", "version": 3}}])


def test_strict_parse_escapes_unicode_and_partition_values(tmp_path, monkeypatch):
    """Escaped and unicode strings in paths, stats and partition values (as json.dumps escapes
    them and as UTF-8), on every line: the maps come from the parse, equal to json.loads's."""
    lines = []
    for i, v in enumerate(SPECIAL * 5):
        a = json.loads(_spark_add(i, p=v))["add"]
        a["path"] = f"p={v}/{'é日本' if i % 2 else 'x'}-{i}.parquet"
        lines.append(json.dumps({"add": a}, ensure_ascii=bool(i % 3), separators=(",", ":")))
    root = _strict_case(tmp_path, monkeypatch, lines)
    assert "partitionValues" in DeltaLog.for_table(root).snapshot()._state.files._tail._pieces[0]._cache["add"]


def test_strict_parse_null_absent_and_several_partition_values(tmp_path, monkeypatch):
    """A null or absent partition value, two partition columns in either order, no partition
    column: parsed strictly, the maps read from the text where the parse cannot tell."""
    lines = [_spark_add(i) for i in range(40)]
    lines[7] = _spark_add(7, partitionValues={"p": None})
    lines[9] = _spark_add(9, partitionValues={})
    _strict_case(tmp_path, monkeypatch, lines)
    schema = json.loads(SCHEMA)
    schema["fields"].append({"name": "q", "type": "string", "nullable": True, "metadata": {}})
    head = _head()
    head[2]["metaData"].update(schemaString=json.dumps(schema), partitionColumns=["p", "q"])
    two = [_spark_add(i, partitionValues={"p": str(i % 2), "q": str(i % 5)}) for i in range(40)]
    two[3] = _spark_add(3, partitionValues={"q": "x", "p": "y"})
    _strict_case(tmp_path, monkeypatch, two, head=head)
    _strict_case(tmp_path, monkeypatch, [_spark_add(i, partitionValues={}) for i in range(40)],
                 head=_head(partitioned=False))


def test_strict_parse_removes_and_dvs_in_the_run(tmp_path, monkeypatch):
    """A run that begins with removes and ends with adds carrying deletion vectors (a DELETE
    by DVs as delta-spark writes it): both parsed strictly, keyed as the dict path keys them."""
    adds = [_spark_add(i) for i in range(30)]
    dv_adds = [_spark_add(i, deletionVector=_dv(f"dv{i}")) for i in range(5)]
    removes = [json.dumps(_remove(json.loads(_spark_add(i))["add"]["path"], extendedFileMetadata=True,
                                  partitionValues={"p": str(i % 3)}, size=1000 + i), separators=(",", ":"))
               for i in range(5)]
    c0 = _head() + [json.loads(x) for x in adds]
    root = _write(tmp_path / "t", [c0, [{"commitInfo": {"operation": "DELETE"}}] +
                                   [json.loads(x) for x in removes + dv_adds]])
    for v in (0, 1):
        assert_same(root, v, monkeypatch, all_json=True)
    monkeypatch.setattr(json_commits, "VECTOR_MIN_BYTES", 0)
    assert [p._strict for p in DeltaLog.for_table(root).snapshot()._state.files._tail._pieces] == [True, True]


def test_strict_parse_partition_values_under_physical_names(tmp_path, monkeypatch):
    """Column mapping: the log's partitionValues are keyed by the columns' physical names, not the
    partition columns' (logical) names — parsed strictly under the first line's keys."""
    lines = [_spark_add(i, partitionValues={"col-5f1c0e3a-p": str(i % 4)}) for i in range(50)]
    _strict_case(tmp_path, monkeypatch, lines)


def test_strict_parse_a_run_of_removes_and_a_run_of_one_line(tmp_path, monkeypatch):
    """A commit whose run is removes only (a DELETE of whole files) and one whose run is a single
    add between its commitInfo and a txn: parsed strictly, the dict path's files and tombstones."""
    c0 = _head() + [json.loads(_spark_add(i)) for i in range(30)]
    c1 = [{"commitInfo": {"operation": "DELETE"}}] + \
        [_remove(json.loads(_spark_add(i))["add"]["path"], extendedFileMetadata=True, size=1000 + i,
                 partitionValues={"p": str(i % 3)}) for i in range(0, 30, 2)]
    c2 = [{"commitInfo": {"operation": "WRITE"}}, json.loads(_spark_add(77)), {"txn": {"appId": "a", "version": 1}}]
    root = _write(tmp_path / "t", [c0, c1, c2])
    for v in range(3):
        assert_same(root, v, monkeypatch, all_json=True)
    monkeypatch.setattr(json_commits, "VECTOR_MIN_BYTES", 0)
    assert [p._strict for p in DeltaLog.for_table(root).snapshot()._state.files._tail._pieces] == [True] * 3


@pytest.mark.parametrize("odd", ["tags", "baseRowId", "dv", "unknown", "remove", "stats-null", "commitInfo"])
def test_strict_parse_falls_back_on_a_field_its_sample_missed(tmp_path, monkeypatch, odd):
    """A field on a line in the middle of the run that the lines sampled for the strict parse's
    fields do not hold (none sampled but the first and last here): the strict parse refuses it
    and the plain one gives the dict path's result."""
    monkeypatch.setattr(json_commits, "_SAMPLE_LINES", 0)
    lines = [_spark_add(i) for i in range(60)]
    a = json.loads(lines[30])["add"]
    if odd == "tags":
        a["tags"] = {"INSERTION_TIME": "1"}
    elif odd == "baseRowId":
        a["baseRowId"] = 7
    elif odd == "dv":
        a["deletionVector"] = _dv("mid")
    elif odd == "unknown":
        a["someNewField"] = {"x": 1}
    elif odd == "stats-null":
        a["stats"] = None
    if odd == "remove":
        lines[30] = json.dumps(_remove(a["path"]), separators=(",", ":"))
    elif odd == "commitInfo":
        lines[30] = json.dumps({"commitInfo": {"operation": "WRITE"}}, separators=(",", ":"))
    else:
        lines[30] = json.dumps({"add": a}, separators=(",", ":"))
    _strict_case(tmp_path, monkeypatch, lines, strict=odd in ("stats-null",))


@pytest.mark.parametrize("bad", [
    lambda x, y: x + y,                          # two objects on one line
    lambda x, y: x + " " + y,
    lambda x, y: x[:-1] + "\n}\n" + y,           # an object over two lines
    lambda x, y: x.replace(',"size"', ',\n"size"') + "\n" + y,
    lambda x, y: x.replace('"path":', '"path":\n') + "\n" + y,
])
def test_strict_parse_keeps_one_object_a_line(tmp_path, monkeypatch, bad):
    """Objects that do not sit one a line in the run (JSON to pyarrow, not to a line-by-line
    parse): the vectorised replay raises what the dict path raises."""
    lines = [_spark_add(i) for i in range(20)]
    text = "".join(json.dumps(a) + "\n" for a in _head()) + "\n".join(lines[:10]) + "\n" + \
        bad(lines[10], lines[11]) + "\n" + "\n".join(lines[12:]) + "\n"
    root = _write(tmp_path / "t", [[]], raw={0: text})
    monkeypatch.setattr(json_commits, "VECTOR_MIN_BYTES", 1 << 62)
    with pytest.raises(CorruptLogError) as ref:
        DeltaLog.for_table(root).snapshot().files_table()
    monkeypatch.setattr(json_commits, "VECTOR_MIN_BYTES", 0)
    with pytest.raises(CorruptLogError) as got:   # when the files are listed, at the latest
        DeltaLog.for_table(root).snapshot().files_table()
    assert str(got.value) == str(ref.value)


@pytest.mark.parametrize("where", ["before", "after"])
@pytest.mark.parametrize("line", [" " + _spark_add(99), '{ "add"' + _spark_add(99)[6:], '{"add":null}',
                                  '{"commitInfo":{},"add":' + _spark_add(99)[7:]])
def test_strict_parse_file_actions_outside_the_run(tmp_path, monkeypatch, where, line):
    """A file action the run's line prefix does not find (indented, spaced, null, after another
    key), before or after the run: the dict path's result."""
    lines = [_spark_add(i) for i in range(20)]
    text = "".join(json.dumps(a) + "\n" for a in _head()) + (line + "\n" if where == "before" else "") + \
        "\n".join(lines) + "\n" + (line + "\n" if where == "after" else "")
    root = _write(tmp_path / "t", [[]], raw={0: text})
    assert_same(root, None, monkeypatch, all_json=False)


def test_strict_parse_blank_and_crlf_lines(tmp_path, monkeypatch):
    """Blank lines inside the run and CRLF line ends: not one object a line by the newlines'
    check, so the plain parse — the dict path's result either way."""
    lines = [_spark_add(i) for i in range(20)]
    _strict_case(tmp_path, monkeypatch, lines[:10] + [""] + lines[10:], strict=False)
    _strict_case(tmp_path, monkeypatch, [x + "\r" for x in lines], strict=False)


def _random_commit(rng, n: int, partitioned: bool) -> list[str]:
    """A run of `n` file lines as some writer might shape it: fields present, absent or null on
    every line or on some, partition values with escapes and unicode, a compact or a spaced
    layout, a few removes, ensure_ascii on or off."""
    optional = ["stats", "tags", "deletionVector", "baseRowId", "defaultRowCommitVersion", "clusteringProvider"]
    every = {f: rng.choice(["absent", "null", "value", "some"]) for f in optional}
    spaced, ascii_ = rng.random() < 0.3, rng.random() < 0.5
    values = ["a", "é", "x\"y", "a\\b", "日本", "", "null", "}{", "a b"]
    out = []
    for i in range(n):
        if rng.random() < 0.1:
            a = {"remove": {"path": f"f{rng.randrange(n)}.parquet", "deletionTimestamp": i, "dataChange": True}}
        else:
            add = {"path": f"p/{rng.choice(values)}-{i}.parquet", "partitionValues": {"p": rng.choice(values)}
                   if partitioned else {}, "size": i, "modificationTime": i, "dataChange": bool(i % 2)}
            for f, how in every.items():
                if how == "absent" or (how == "some" and rng.random() < 0.7):
                    continue
                if how == "null":
                    add[f] = None
                elif f == "stats":
                    add[f] = json.dumps({"numRecords": i, "minValues": {"p": rng.choice(values)}})
                elif f == "tags":
                    add[f] = {"k": rng.choice(values)}
                elif f == "deletionVector":
                    add[f] = _dv(f"d{i}", rng.choice([None, i]))
                elif f == "clusteringProvider":
                    add[f] = "liquid"
                else:
                    add[f] = i
            a = {"add": add}
        out.append(json.dumps(a, ensure_ascii=ascii_, separators=(", ", ": ") if spaced else (",", ":")))
    return out


@pytest.mark.parametrize("seed", range(30))
def test_random_commits_match_the_dict_path_and_json_loads(tmp_path, monkeypatch, seed):
    """Random runs of file lines (see `_random_commit`) between a commit's other actions: the
    vectorised replay (strict or plain, whichever the shape allows) gives the dict path's files
    and tombstones, and the files a line-by-line json.loads gives."""
    import random

    rng = random.Random(seed)
    partitioned = rng.random() < 0.8
    lines = _random_commit(rng, rng.randrange(1, 120), partitioned)
    head = _head(partitioned)
    tail = [{"txn": {"appId": "x", "version": seed}}] if rng.random() < 0.5 else []
    text = "".join(json.dumps(a) + "\n" for a in head) + "".join(x + "\n" for x in lines) + \
        "".join(json.dumps(a) + "\n" for a in tail)
    root = _write(tmp_path / "t", [[]], raw={0: text})
    assert_same(root, None, monkeypatch, all_json=True)
    monkeypatch.setattr(json_commits, "VECTOR_MIN_BYTES", 0)
    files = DeltaLog.for_table(root).snapshot().files_table().to_pylist()
    oracle = {}
    for line in text.splitlines():
        obj = json.loads(line)
        if "add" in obj:
            oracle.pop(obj["add"]["path"], None)
            oracle[obj["add"]["path"]] = obj["add"]
        elif "remove" in obj:
            oracle.pop(obj["remove"]["path"], None)
    assert [f["path"] for f in files] == list(oracle)
    for f in files:
        a = oracle[f["path"]]
        assert f["partitionValues"] == list(a["partitionValues"].items())
        assert f["tags"] == (list(a["tags"].items()) if a.get("tags") is not None else None)
        assert (f["stats"], f["baseRowId"], f["size"]) == (a.get("stats"), a.get("baseRowId"), a["size"])
        assert (f["deletionVector"] is None) == (a.get("deletionVector") is None)
