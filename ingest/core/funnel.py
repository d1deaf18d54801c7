"""The error funnel: every database error of a load becomes one sentence naming where it happened.

DuckDB's messages carry the SQL around the failing expression (``LINE 1: … ^^^^``), the whole value that
did not convert (a 300-digit number), and its exception class; a user needs the file, object or API
call, the column and a short value. :func:`engine_text` keeps the engine's reason in one short line;
:func:`load_error` prefixes the source and where the rows came from; :func:`domain_error` turns a
violation of the declared value domains (``warehouse/domains.py``) into its sentence.
"""

from __future__ import annotations

import re

from gpufinops.warehouse import domains

LONGEST = 300
_NUMBER = re.compile(r"-?\d{16,}(?:\.\d+)?(?:[eE][+-]?\d+)?")
_QUOTED = re.compile(r'"([^"]{60,})"')
_PREFIX = re.compile(r"^(?:[A-Za-z]+(?:Exception|Error): )?(?:[A-Za-z ]+ Error: )?")


def _short_number(match: re.Match) -> str:
    try:
        return f"{float(match.group()):.6g}"
    except (OverflowError, ValueError):
        return match.group()[:12] + "…"


def engine_text(exc: BaseException) -> str:
    """The engine's reason in one line: no SQL excerpt or caret, long numbers and values shortened."""
    text = str(exc).strip() or type(exc).__name__
    text = re.split(r"\s*\bLINE \d+:", text, maxsplit=1)[0]
    text = " ".join(text.split())
    text = _PREFIX.sub("", text, count=1)
    text = _NUMBER.sub(_short_number, text)
    text = _QUOTED.sub(lambda m: f'"{m.group(1)[:40]}…"', text)
    return text if len(text) <= LONGEST else text[: LONGEST - 1] + "…"


def load_error(source: str, where: str, exc: BaseException) -> str:
    """One sentence for a database error while loading rows from ``where`` (a file, an API call, a table)."""
    return f"{source}: {where}: {engine_text(exc).rstrip('.')}"


def domain_error(source: str, where: str, table: str, exc: BaseException) -> str | None:
    """The sentence for a row outside its column's declared domain (the runner's guard), or None."""
    found = domains.parse_violation(str(exc))
    if found is None:
        return None
    row, what = found
    at = f"{table} row ({row})" if row else table
    return f"{source}: {where}: {at}: {what}"
