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
