"""The `_last_checkpoint` JSON checksum: the spec's vector, URL encoding, numbers kept as written,
duplicate keys, and the checksums of the conformance tables' real `_last_checkpoint` files."""

from __future__ import annotations

import glob
import json
import os

import pytest

from tahoe.errors import CorruptLogError
from tahoe.protocol.last_checkpoint_checksum import canonicalize, canonicalize_text, checksum_of, verify, with_checksum



SPEC_JSON = ('{"k0":"\'v 0\'", "checksum": "adsaskfljadfkjadfkj", "k1":{"k2": 2, "k3": ["v3", [1, 2], '
             '{"k4": "v4", "k5": ["v5", "v6", "v7"]}]}}')
SPEC_CANONICAL = ('"k0"="%27v%200%27","k1"+"k2"=2,"k1"+"k3"+0="v3","k1"+"k3"+1+0=1,"k1"+"k3"+1+1=2,'
                  '"k1"+"k3"+2+"k4"="v4","k1"+"k3"+2+"k5"+0="v5","k1"+"k3"+2+"k5"+1="v6",'
                  '"k1"+"k3"+2+"k5"+2="v7"')
SPEC_MD5 = "6a92d155a59bf2eecbd4b4ec7fd1f875"


def test_spec_vector():
    assert canonicalize_text(SPEC_JSON) == SPEC_CANONICAL
    assert checksum_of(SPEC_JSON) == SPEC_MD5
    assert canonicalize(json.loads(SPEC_JSON)) == SPEC_CANONICAL
    assert checksum_of(json.loads(SPEC_JSON)) == SPEC_MD5
    assert verify(SPEC_JSON) is False   # its checksum field is junk
    assert verify(SPEC_JSON.replace("adsaskfljadfkjadfkj", SPEC_MD5)) is True


def test_spec_rule_examples():
    assert canonicalize_text('{"k1": "v1", "checksum": "<anything>", "k3": 23}') == '"k1"="v1","k3"=23'
    assert canonicalize_text('{"a": 10, "b": {"y": null, "x": "https://delta.io"} }') == \
        '"a"=10,"b"+"x"="https%3A%2F%2Fdelta.io","b"+"y"=null'
    assert canonicalize_text('{"a": [null, "hi ho", 2.71, true, false]}') == \
        '"a"+0=null,"a"+1="hi%20ho","a"+2=2.71,"a"+3=true,"a"+4=false'
    # a nested "checksum" key is data, only the top-level one is ignored
    assert canonicalize_text('{"a": {"checksum": 1}}') == '"a"+"checksum"=1'


def test_url_encoding_rules():
    # unreserved characters stay, everything else is %XX in uppercase over UTF-8
    assert canonicalize_text('{"k": "Az09-._~"}') == '"k"="Az09-._~"'
    assert canonicalize_text('{"k": "a/b>c+d=e,f\\"g%h"}') == '"k"="a%2Fb%3Ec%2Bd%3De%2Cf%22g%25h"'
    assert canonicalize_text('{"k": "é€"}') == '"k"="%C3%A9%E2%82%AC"'
    assert canonicalize_text('{"a b": 1}') == '"a%20b"=1'


def test_numbers_keep_their_text():
    assert canonicalize_text('{"a": 1.0, "b": 1e10, "c": -0, "d": 1.50E+3, "e": 12345678901234567890}') \
        == '"a"=1.0,"b"=1e10,"c"=-0,"d"=1.50E+3,"e"=12345678901234567890'
    # for dicts, numbers are written as json.dumps writes them
    obj = {"a": 1.0, "b": 3, "c": True}
    assert canonicalize(obj) == '"a"=1.0,"b"=3,"c"=true'
    assert checksum_of(obj) == checksum_of(json.dumps(obj))


def test_byte_order_sort_on_paths():
    # "k"+10 sorts before "k"+2 byte-wise; "B" before "a"
    text = json.dumps({"k": list(range(11)), "a": 1, "B": 2})
    canon = canonicalize_text(text)
    assert canon.startswith('"B"=2,"a"=1,"k"+0=0,"k"+1=1,"k"+10=10,"k"+2=2')


def test_empty_containers_contribute_nothing():
    assert canonicalize_text('{"a": {}, "b": [], "c": {"metadata": {}}, "d": 1}') == '"d"=1'


def test_duplicate_keys_and_bad_json_rejected():
    with pytest.raises(CorruptLogError, match="duplicate key 'a'"):
        canonicalize_text('{"a": 1, "a": 2}')
    with pytest.raises(CorruptLogError, match="duplicate"):
        verify('{"x": {"b": 1, "b": 1}, "checksum": "00"}')
    with pytest.raises(CorruptLogError):
        verify('{"version": 3, ')
    with pytest.raises(CorruptLogError):
        verify("[1, 2]")
    with pytest.raises(CorruptLogError):
        canonicalize_text('{"a": NaN}')


def test_verify_without_checksum_and_with_checksum():
    assert verify('{"version": 10, "size": 13}') is True
    obj = {"version": 10, "size": 13, "sizeInBytes": 16479, "checkpointSchema": {"type": "struct",
           "fields": [{"name": "txn", "metadata": {}, "nullable": True}]}}
    signed = with_checksum(obj)
    assert "checksum" not in obj and len(signed["checksum"]) == 32
    assert verify(json.dumps(signed)) is True
    signed["size"] = 14
    assert verify(json.dumps(signed)) is False
    # re-signing replaces a stale checksum
    assert verify(json.dumps(with_checksum(signed))) is True
    assert verify('{"version": 1, "checksum": 5}') is False


def test_conformance_last_checkpoint_files(golden):
    files = sorted(glob.glob(os.path.join(golden, "*", "delta", "_delta_log", "_last_checkpoint")))
    assert files, f"no _last_checkpoint under {golden}"
    with_field = 0
    for f in files:
        with open(f, encoding="utf-8") as fh:
            text = fh.read()
        if not text.strip():
            continue   # corrupted-last-checkpoint-kernel: an empty file
        if '"checksum"' in text:
            with_field += 1
            assert verify(text) is True, f
            # the writer side agrees: re-signing the parsed object gives the same checksum
            assert with_checksum(json.loads(text))["checksum"] == json.loads(text)["checksum"], f
        else:
            assert verify(text) is True
    assert with_field >= 5
