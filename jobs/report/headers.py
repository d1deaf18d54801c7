"""Header-safe text: the one function every mail header is built through, and the config check that
refuses header-unsafe names at start-up.

A CR or LF in a header value would let text become a header of its own (``Bcc:``), so the e-mail
library refuses it and the whole run failed on it. Names that reach headers come from two places:
the config (budget names, recipients, channel names, teams: refused at load, exit 2, naming the
key) and the warehouse (team tags of a bill, titles built from them: sanitised where the header is
built, so a bad value never blocks a delivery).
"""

from __future__ import annotations

import re
from typing import Any

from gpufinops.jobs.config_checks import ConfigError

_UNSAFE = re.compile(r"[\x00-\x1f\x7f-\x9f\u2028\u2029]")  # C0, DEL, C1 (NEL), line/paragraph separators
HEADER_MAX = 900  # RFC 5322 allows 998 per line; folded longer values stay readable below this


def _unsafe(text: str) -> str | None:
    """The first header-unsafe character of ``text`` (a control, line or paragraph separator)."""
    found = _UNSAFE.search(text)
    return found.group() if found else None


def header(value: object) -> str:
    """``value`` as one line a header may carry: every control character (CR, LF, TAB, NUL…) and
    line separator becomes a space, runs of blanks one space, clipped to ``HEADER_MAX``."""
    text = " ".join(_UNSAFE.sub(" ", str(value)).split())
    return text if len(text) <= HEADER_MAX else text[: HEADER_MAX - 1] + "…"


def refuse_unsafe(node: Any, key: str) -> None:
    """A ConfigError naming the first key of ``node`` (a config table, list or string) whose name or
    string value holds a header-unsafe character."""
    if isinstance(node, str):
        bad = _unsafe(node)
        if bad is not None:
            raise ConfigError(
                f"{key}: {node!r} holds the control character {bad!r} (U+{ord(bad):04X}); names and addresses "
                "become mail headers and may not contain line breaks or control characters"
            )
    elif isinstance(node, dict):
        for name, value in node.items():
            refuse_unsafe(str(name), f"{key} (a key)")
            refuse_unsafe(value, f"{key}.{name}")
    elif isinstance(node, list):
        for i, item in enumerate(node):
            refuse_unsafe(item, f"{key}[{i}]")
