"""Kubernetes names and label values, unique where Kubernetes needs them unique."""

from __future__ import annotations

import hashlib
import re


def slug(text: str | None, default: str = "unnamed") -> str:
    """A DNS label / label value: lower-case alphanumerics and '-', at most 63 characters."""
    value = re.sub(r"[^a-z0-9]+", "-", (text or "").lower()).strip("-")[:63].strip("-")
    return value or default


class UniqueNames:
    """Hands out slugs that are unique within one scope (a cluster, a file): a second source text
    that slugs to a name already taken gets a short digest of its own text appended."""

    def __init__(self) -> None:
        self.by_text: dict[str, str] = {}
        self.taken: set[str] = set()

    def __call__(self, text: str, default: str = "unnamed") -> str:
        if text in self.by_text:
            return self.by_text[text]
        name = slug(text, default)
        if name in self.taken:
            name = slug(f"{name[:54]}-{hashlib.sha256(text.encode()).hexdigest()[:8]}", default)
        self.taken.add(name)
        self.by_text[text] = name
        return name
