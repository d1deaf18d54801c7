"""A small block-style YAML writer for manifests (PyYAML is not a runtime dependency).

Only what manifests need: mappings, sequences, strings, numbers, booleans and null. A string is
written plain only when it cannot be read back as anything else; otherwise it is double-quoted
with JSON escapes (a subset of YAML's double-quoted style), so every value round-trips exactly.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Iterable
from typing import Any

_PLAIN = re.compile(r"^[A-Za-z_][A-Za-z0-9_./-]*$")
_RESERVED = {"true", "false", "yes", "no", "on", "off", "null", "y", "n", "~"}


def scalar(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int):
        return str(value)
    if isinstance(value, float):
        if not math.isfinite(value):
            raise ValueError(f"cannot write {value} to YAML")
        return repr(value)
    text = str(value)
    if _PLAIN.match(text) and text.lower() not in _RESERVED:
        return text
    return json.dumps(text, ensure_ascii=False)


def _lines(value: Any, indent: int) -> list[str]:
    pad = " " * indent
    if isinstance(value, dict):
        if not value:
            return [pad + "{}"]
        out: list[str] = []
        for key, item in value.items():
            head = f"{pad}{scalar(str(key))}:"
            if isinstance(item, (dict, list)) and item:
                out.append(head)
                out.extend(_lines(item, indent + 2))
            else:
                out.append(f"{head} {_inline(item)}")
        return out
    if isinstance(value, list):
        if not value:
            return [pad + "[]"]
        out = []
        for item in value:
            if isinstance(item, (dict, list)) and item:
                nested = _lines(item, indent + 2)
                out.append(f"{pad}- {nested[0][indent + 2 :]}")
                out.extend(nested[1:])
            else:
                out.append(f"{pad}- {_inline(item)}")
        return out
    return [pad + scalar(value)]


def _inline(value: Any) -> str:
    if isinstance(value, dict):
        return "{}"
    if isinstance(value, list):
        return "[]"
    return scalar(value)


def dump(document: Any, comments: Iterable[str] = ()) -> str:
    """One YAML document, optionally preceded by ``#`` comment lines."""
    head = [f"# {c}".rstrip() for line in comments for c in str(line).splitlines()]
    return "\n".join(head + _lines(document, 0)) + "\n"


def dump_all(documents: Iterable[tuple[Any, Iterable[str]] | Any]) -> str:
    """A multi-document stream; each item is a document or a (document, comments) pair."""
    parts = []
    for item in documents:
        doc, comments = item if isinstance(item, tuple) else (item, ())
        parts.append("---\n" + dump(doc, comments))
    return "".join(parts)


def section(banner: list[str], documents: list[tuple[Any, list[str]]], nothing: str) -> str:
    """One part of a multi-document stream (a cluster's): ``banner`` as comments above its first document,
    or, with no documents, the banner and ``nothing`` as comments only."""
    if not documents:
        return "".join(f"# {line}\n" for line in banner + [nothing])
    first, comments = documents[0]
    return dump_all([(first, banner + comments)] + documents[1:])
