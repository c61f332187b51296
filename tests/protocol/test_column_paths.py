"""Column names as Spark SQL writes them (tahoe.protocol.column_paths). The oracle is Spark's
documented identifier syntax: a part in backticks, a backtick inside it doubled, parts joined by dots."""

import pytest

from tahoe.protocol.column_paths import quote_identifier, quote_if_needed, split_column_path


@pytest.mark.parametrize("text, parts", [
    ("a", ["a"]), ("a.b.c", ["a", "b", "c"]), ("`a.b`.c", ["a.b", "c"]), ("`a``b`", ["a`b"]),
    ("` a `", [" a "]), ("a.", None), (".a", None), ("`a", None), ("a..b", None), ("", None),
])
def test_split(text, parts):
    assert split_column_path(text) == parts


@pytest.mark.parametrize("name", ["a", "a.b", "a`b", "", "x y", "``"])
def test_quote_round_trips(name):
    assert split_column_path(quote_identifier(name)) == ([name] if name else None)
    assert quote_identifier("a`b") == "`a``b`"


def test_quote_if_needed():
    assert quote_if_needed("plain") == "plain"
    assert quote_if_needed("a.b") == "`a.b`"
    assert quote_if_needed("a`b") == "`a``b`"
