"""A file's header and, for a file that does not read, the sentence that names it: the line a CSV
reader refused (an unterminated quote, a wrong field count, a byte that is not UTF-8) or the reader's
own first line. Used by every file-reading ingestor, and by ``ingest/core/validate.py`` on the failure path.
"""

from __future__ import annotations

import csv
import gzip
import io
import re

from gpufinops.ingest.core.registry import IngestError


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip()
    return text.splitlines()[0] if text else type(exc).__name__


def csv_error(text: str) -> tuple[str | None, str | None, str] | None:
    """(file, line, reason) of a DuckDB CSV reader error, else None."""
    match = re.search(r"CSV Error on Line: (\d+)", text)
    if not match:
        return None
    lines = text.splitlines()
    encoding = [ln.strip() for ln in lines[1:] if "not utf-8 encoded" in ln.lower()]  # wherever the line ends
    reason = next(
        (ln.strip() for i, ln in enumerate(lines[3:], 3) if ln.strip() and not ln.startswith(("Possible", "  "))),
        "the CSV is malformed",
    )
    reason = encoding[0] if encoding else reason
    if "Original Line" not in text:
        reason = next((ln.strip() for ln in lines[1:] if ln.strip()), reason)
    found = re.search(r"^\s+file = (.+)$", text, re.MULTILINE)
    return (found.group(1).strip() if found else None), match.group(1), reason.rstrip(".")


def csv_fault(path: str) -> tuple[int, str] | None:
    """(line, what) of the first line a strict CSV reader refuses: an unterminated quote (a file cut
    short), a line with another number of fields than the header, a byte that is not UTF-8. The
    slow path, for a file DuckDB's sniffer could not read."""
    opener = gzip.open if path.lower().endswith(".gz") else open
    try:
        with opener(path, "rt", newline="", encoding="utf-8") as f:
            reader = csv.reader(f, strict=True)
            width = None
            for fields in reader:
                if width is None:
                    width = len(fields)
                elif fields and len(fields) != width:
                    return reader.line_num, f"{len(fields)} fields where the header has {width}"
    except csv.Error as exc:
        what = (
            "a value with an unterminated quote (the file ends inside it: truncated?)"
            if "unexpected end of data" in str(exc)
            else str(exc)
        )
        return reader.line_num, what
    except UnicodeDecodeError:
        return 0, "a byte sequence that is not UTF-8 (the file must be UTF-8 encoded)"
    return None


def read_error(source: str, where: str, exc: BaseException, path: str | None = None) -> str:
    """One sentence for an error reading a file (CSV syntax, encoding, truncation, Parquet)."""
    text = str(exc)
    if path and "Error when sniffing file" in text:
        fault = csv_fault(path)
        if fault:
            return f"{source}: {where} line {fault[0]}: {fault[1]}" if fault[0] else f"{source}: {where}: {fault[1]}"
    parsed = csv_error(text)
    if parsed:
        _, line, reason = parsed
        if "unicode" in reason.lower() or "utf-8" in reason.lower():
            reason = "a byte sequence that is not UTF-8 (the file must be UTF-8 encoded)"
        return f"{source}: {where} line {line}: {reason}"
    malformed = re.search(r'Malformed JSON in file "([^"]+)", at byte (\d+) in line \d+: (.+?)\.?$', _first_line(exc))
    if malformed and (bad := json_fault(malformed.group(1))) is not None:
        return f"{source}: {where} line {bad[0]}: {bad[1]}"
    return f"{source}: {where} can not be read: {_first_line(exc)}"


def json_fault(path: str) -> tuple[int, str] | None:
    """(line, what) of the first line of a JSON-lines file that is not a JSON object (the slow path,
    after a failed read: DuckDB's own line number counts from the start of its read buffer)."""
    import json

    opener = gzip.open if path.lower().endswith(".gz") else open
    try:
        with opener(path, "rt", encoding="utf-8", newline="") as f:
            for number, line in enumerate(f, 1):
                if not line.strip():
                    continue
                try:
                    json.loads(line)
                except json.JSONDecodeError as exc:
                    return number, f"not valid JSON ({exc.msg} at column {exc.colno}: {line.strip()[:40]!r})"
    except UnicodeDecodeError as exc:
        return 0, f"a byte sequence that is not UTF-8 at byte {exc.start} (the file must be UTF-8 encoded)"
    except OSError:
        return None
    return None


def csv_header(path: str) -> list[str]:
    """A CSV file's header fields as written (quotes honoured), a BOM removed."""
    opener = gzip.open if path.lower().endswith(".gz") else open
    with opener(path, "rb") as f:
        first = f.readline()
    text = first.decode("utf-8", "replace").lstrip("\ufeff").rstrip("\r\n")
    if any(ord(ch) < 32 and ch != "\t" or ord(ch) == 127 for ch in text):
        raise ValueError("line 1 (the header) holds a control character (a CR or LF inside a column name?)")
    try:
        return next(csv.reader(io.StringIO(text)), [])
    except csv.Error as exc:
        raise ValueError(f"line 1 (the header): {exc}") from None


def parquet_header(path: str) -> list[str]:
    import pyarrow.parquet as pq

    return pq.read_schema(path).names


def check_unique_columns(source: str, where: str, columns: list[str]) -> None:
    """A header naming a column twice (the reader would silently keep the first copy) is refused."""
    seen: set[str] = set()
    for name in columns:
        if name in seen:
            raise IngestError(f"{source}: {where} has column {name!r} twice (which copy holds the value is ambiguous)")
        seen.add(name)
