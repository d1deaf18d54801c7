"""The one scrubber: every text a user can see — stdout, stderr, logs at every verbosity, error
sentences, the ledgers' error columns — passes through ``scrub`` before it is shown or stored.

It removes
- the values of the secrets the config names (``*_env`` variables: API tokens, the SMTP password,
  webhook secrets…) once ``remember`` has been told them, and of the well-known credential
  variables of the environment (AWS secret keys and session tokens, …);
- the userinfo of any URL (``http://admin:pa55@host`` → ``http://***:***@host``, a bare token as
  user ``https://tok@host`` → ``https://***@host``);
- bearer / basic tokens of an ``Authorization`` header, AWS access key ids, and values of
  ``…secret…=`` / ``…password…=`` / ``…token…=`` pairs.

The CLI wraps ``sys.stdout`` / ``sys.stderr`` in ``ScrubbingStream`` and the log handler in
``ScrubbingFormatter`` (``interfaces.errors``), so a new command is covered without code of its own.
Lives in ``ingest.core`` so that ingest (which never imports jobs) and jobs share it.
"""

from __future__ import annotations

import io
import logging
import os
import re
from collections.abc import Iterable
from typing import IO

MASK = "***"
MIN_SECRET_LEN = 4  # shorter values would mask ordinary words

URL_CREDENTIALS = re.compile(r"(?<=://)[^/\s:@'\"<>]+:[^/\s@'\"<>]*@")
URL_USER = re.compile(r"(?<=://)(?!\*\*\*@)[^/\s:@'\"<>]+@")
BEARER = re.compile(r"(?i)\b(bearer|basic)(\s+)[A-Za-z0-9._~+/=-]{8,}")
AWS_ACCESS_KEY_ID = re.compile(r"\b(?:AKIA|ASIA|AROA|AIDA)[A-Z0-9]{16}\b")
# a query string's or a command line's ``…secret…=value`` (not ``secret_env=NAME``: a variable's name)
SECRET_PAIR = re.compile(
    r"(?i)\b([\w-]*(?:secret|password|passwd|token|api_key|apikey)[\w-]*)(?<!_env)(=)(?!\*\*\*)()[^\s\"',;&]{4,}"
)
# credential variables of the SDKs' default chains: masked even when no config key names them
WELL_KNOWN_ENV = (
    "AWS_SECRET_ACCESS_KEY",
    "AWS_SESSION_TOKEN",
    "AWS_SECURITY_TOKEN",
    "GOOGLE_OAUTH_ACCESS_TOKEN",
    "GPUFINOPS_API_TOKEN",
)
_SECRETS: list[str] = []


def remember(values: Iterable[str]) -> None:
    """Add secret values every later text is scrubbed of (the config's ``*_env`` values)."""
    merged = set(_SECRETS) | {v for v in values if v and len(v) >= MIN_SECRET_LEN}
    _SECRETS[:] = sorted(merged, key=len, reverse=True)  # the longest first: no half-masked value


def forget() -> None:
    """Drop the remembered values (a new config is loaded, or a test starts)."""
    _SECRETS.clear()


def _environment_secrets() -> list[str]:
    return [v for n in WELL_KNOWN_ENV if len(v := os.environ.get(n, "")) >= MIN_SECRET_LEN]


def scrub(text: str, secrets: Iterable[str] = ()) -> str:
    """``text`` without any secret value, URL userinfo, bearer token or AWS key (see the module doc)."""
    if not text:
        return text
    values = sorted(
        {v for v in (*secrets, *_SECRETS, *_environment_secrets()) if v and len(v) >= MIN_SECRET_LEN},
        key=len,
        reverse=True,
    )
    for value in values:
        text = text.replace(value, MASK)
    text = URL_CREDENTIALS.sub(f"{MASK}:{MASK}@", text)
    text = URL_USER.sub(f"{MASK}@", text)
    text = BEARER.sub(lambda m: f"{m.group(1)}{m.group(2)}{MASK}", text)
    text = AWS_ACCESS_KEY_ID.sub(MASK, text)
    return SECRET_PAIR.sub(lambda m: f"{m.group(1)}{m.group(2)}{m.group(3)}{MASK}", text)


LONGEST_SENTENCE = 200  # characters of an error sentence a user sees (docs/sources/loads.md, "Errors")
LONG_QUOTED = 60  # a quoted value longer than this is cut in the sentence
LONG_TOKEN = 90  # a path, URL or other word longer than this keeps its start and end
_CONTROL = re.compile(r"[\x00-\x1f\x7f]")
_ESCAPES = {"\r": "\\r", "\n": "\\n", "\t": "\\t", "\x00": "\\x00", "\x1b": "\\x1b"}
# a quoted value: its opening quote after a space, =, (, [, comma or colon; its closing one before one or the end
_QUOTED_VALUE = re.compile(
    rf"(?:(?<=[\s=(\[,:])|^)(?:'[^']{{{LONG_QUOTED},}}'|\"[^\"]{{{LONG_QUOTED},}}\")(?=[\s,;:.)\]]|$)"
)
_LONG_WORD = re.compile(rf"\S{{{LONG_TOKEN},}}")
LONG_PATH = 40  # over the limit, a path or URL longer than this keeps its host and its last two parts
_LONG_PATH = re.compile(rf"(?<![^\s=(\[,])(?!['\"])\S*/\S*/\S*(?<=\S{{{LONG_PATH}}})")
_URL_HOST = re.compile(r"^[a-z][\w+.-]*://[^/\s]*")
_TRAILING_ASIDE = re.compile(r" \([^()]*\)$")  # the reason's closing aside: "(more than 1 day; …)"


def _escaped(text: str) -> str:
    return _CONTROL.sub(lambda m: _ESCAPES.get(m.group(), f"\\x{ord(m.group()):02x}"), text)


def _cut_quoted(match: re.Match) -> str:
    value = match.group()
    return f"{value[: LONG_QUOTED - 20]}…{value[-1]} ({len(value) - 2:,} characters)"


def _cut_word(match: re.Match) -> str:
    word = match.group()
    return f"{word[:30]}…{word[-(LONG_TOKEN - 40) :]}"


def _cut_path(match: re.Match) -> str:
    path = match.group()
    host = _URL_HOST.match(path)
    kept = "/".join(path.split("/")[-2:])
    shortened = f"{host.group() if host else ''}/…/{kept}" if host else f"…/{kept}"
    return shortened if len(shortened) < len(path) else path


def brief(text: str, limit: int | None = LONGEST_SENTENCE) -> str:
    """An error sentence as users see it: scrubbed; control characters (CR, LF, NUL, ESC, …) written as
    escapes (``\\r``, ``\\x00``) so nothing raw reaches a terminal, a log or a header; a long quoted value
    (a 100 kB argument) cut to its start and length; a long path or URL to its start and end (where its
    file name is); then, past ``limit`` characters, its middle (the source and place come first, the value
    and the reason last: both are kept). ``limit`` None (the ledgers' error columns, which keep every
    word for ``ingest list`` and the Data-health page) escapes and cuts long values only."""
    text = _escaped(scrub(text))
    text = _QUOTED_VALUE.sub(_cut_quoted, text)
    if limit is None:  # the ledger's error column: whole words, escaped, long values cut
        return text
    if len(text) > limit:  # the file's directories go first: its name, the row, column and value stay
        text = _LONG_PATH.sub(_cut_path, text)
    text = _LONG_WORD.sub(_cut_word, text)
    if len(text) > limit:  # then the reason's closing aside (the ledger keeps it)
        text = _TRAILING_ASIDE.sub(" (…)", text)
    if len(text) <= limit:
        return text
    head = (limit - 1) * 11 // 20  # the source, call or file and object come first; the value and reason last
    return f"{text[:head]}…{text[len(text) - (limit - 1 - head) :]}"


# where the product's own remedy starts in a sentence (ingest.core.extras.install_hint, credentials.hint):
# the command line keeps it whole, after the sentence's where and why cut to the limit
REMEDY_MARKERS = (": install the '", " (no credentials found: ", " (known: ")  # the choices: what to type instead


def brief_keeping_remedy(text: str, limit: int = LONGEST_SENTENCE) -> str:
    """``brief(text, limit)`` for the command line: the source, the place, the value and the reason cut to
    ``limit`` as everywhere (long paths and values first), then the product's remedy (an install command,
    the credential chain the SDK searched) whole: a cut in its middle would leave a command that does not run."""
    at = min((i for i in (text.find(m) for m in REMEDY_MARKERS) if i > 0), default=-1)
    if at < 0:
        return brief(text, limit)
    return brief(text[:at], limit) + _escaped(scrub(text[at:]))


class ScrubbingFormatter(logging.Formatter):
    """Formats records (tracebacks included) and scrubs the result."""

    def format(self, record: logging.LogRecord) -> str:
        return scrub(super().format(record))


class ScrubbingStream(io.TextIOBase):
    """A text stream that scrubs what is written to ``inner``. Whole lines are scrubbed at once (a
    secret split over two ``write`` calls is still found); ``flush`` writes out a partial line (a
    prompt, a progress bar's carriage return)."""

    def __init__(self, inner: IO[str]) -> None:
        super().__init__()
        self.inner = inner
        self._pending = ""

    def write(self, text: str) -> int:
        self._pending += text
        cut = max(self._pending.rfind("\n"), self._pending.rfind("\r"))
        if cut >= 0:
            done, self._pending = self._pending[: cut + 1], self._pending[cut + 1 :]
            self.inner.write(scrub(done))
        return len(text)

    def flush(self) -> None:
        if self._pending:
            done, self._pending = self._pending, ""
            self.inner.write(scrub(done))
        self.inner.flush()

    def isatty(self) -> bool:
        return self.inner.isatty()

    def fileno(self) -> int:
        return self.inner.fileno()

    def writable(self) -> bool:
        return True

    @property
    def encoding(self) -> str:  # type: ignore[override]
        return getattr(self.inner, "encoding", "utf-8")

    @property
    def errors(self) -> str | None:  # type: ignore[override]
        return getattr(self.inner, "errors", None)

    @property
    def buffer(self):  # a caller writing bytes gets the raw stream (binary output is not text)
        return self.inner.buffer
