"""The disk cache of compiled tables (`chatparse.data.table_cache`), which `chatparse parse-file` reads first."""

from __future__ import annotations

import json

import pytest

from chatparse import compile_template, templates
from chatparse.data.arrow import table_bytes
from chatparse.runtime.tables.loader import compiled_from_bytes
from chatparse.data.table_cache import cache_key, cached_table_bytes


def _never():
    raise AssertionError("compiled again although the cache holds the template")


def test_second_use_comes_from_the_cache(tmp_path, monkeypatch):
    monkeypatch.setenv("CHATPARSE_TABLE_CACHE", str(tmp_path))
    made = []

    def make():
        made.append(1)
        return table_bytes("qwen3")

    first = cached_table_bytes("qwen3", make)
    assert made == [1] and list(tmp_path.glob("*.cpt"))
    assert cached_table_bytes("qwen3", _never) == first
    # the same template as a dict, and as a tokenizer_config.json, is the same entry
    assert cached_table_bytes(templates.serving("qwen3"), _never) == first
    config = tmp_path / "tokenizer_config.json"
    config.write_text(json.dumps({"response_template": templates.serving("qwen3")}))
    assert cached_table_bytes(config, _never) == first
    assert compiled_from_bytes(first).spec == compile_template(templates.serving("qwen3")).spec


def test_other_templates_and_damaged_entries_are_made_again(tmp_path, monkeypatch):
    monkeypatch.setenv("CHATPARSE_TABLE_CACHE", str(tmp_path))
    good = cached_table_bytes("qwen3", lambda: table_bytes("qwen3"))
    assert cache_key("hermes") != cache_key("qwen3")
    other = {**templates.get("qwen3"), "defaults": {"role": "model"}}
    assert cache_key(other) != cache_key("qwen3")
    with pytest.raises(AssertionError, match="compiled again"):
        cached_table_bytes(other, _never)
    entry = tmp_path / f"{cache_key('qwen3')}.cpt"
    entry.write_bytes(good[: len(good) // 2])  # a truncated write
    assert cached_table_bytes("qwen3", lambda: good) == good
    assert entry.read_bytes() == good  # and stored whole again


def test_off_and_uncacheable(tmp_path, monkeypatch):
    monkeypatch.setenv("CHATPARSE_TABLE_CACHE", "")
    calls = []
    cached_table_bytes("qwen3", lambda: calls.append(1) or b"x")
    cached_table_bytes("qwen3", lambda: calls.append(1) or b"x")
    assert calls == [1, 1]
    monkeypatch.setenv("CHATPARSE_TABLE_CACHE", str(tmp_path / "c"))
    assert cache_key(b"bytes") is None and cache_key(str(tmp_path / "none.json")) is None
    assert cache_key("no such template") is None
    # a cache that cannot be written still gives the bytes
    blocker = tmp_path / "file"
    blocker.write_text("")
    monkeypatch.setenv("CHATPARSE_TABLE_CACHE", str(blocker / "sub"))
    assert cached_table_bytes("qwen3", lambda: b"made") == b"made"


def test_templates_differing_only_in_key_order_have_their_own_entries():
    """A transform's key order is the order of the output's keys: a template that differs from another only in
    it must not get the other's tables from the cache."""
    from chatparse.data.table_cache import cache_key

    a = {"defaults": {"role": "assistant"}, "start_anchor": "<s>",
         "fields": {"calls": {"open": "<t>", "close": "</t>", "content": "json",
                              "transform": {"y": 1, "x": "{content}"}}}}
    b = {**a, "fields": {"calls": {**a["fields"]["calls"], "transform": {"x": "{content}", "y": 1}}}}
    assert cache_key(a) != cache_key(b) and cache_key(a) == cache_key(json.loads(json.dumps(a)))
