"""A bucket as people paste it: ``acme-cur``, ``s3://acme-cur/cur2/``, ``arn:aws:s3:::acme-cur/cur2``,
``https://acme-cur.s3.us-east-1.amazonaws.com/cur2``, ``gs://acme-billing/exports/`` — one bucket name and one key
prefix, with a sentence saying what was understood (``gpufinops init``, the config's options and ``doctor`` all
read it here). A name that is not a bucket name after that is refused in one sentence naming the rule it breaks.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

# S3's (and Cloud Storage's) bucket naming rules: 3-63 lowercase letters, digits, dots and hyphens, beginning
# and ending with a letter or digit (Cloud Storage allows underscores too).
_NAME = {
    "s3": re.compile(r"^[a-z0-9][a-z0-9.-]{1,61}[a-z0-9]$"),
    "gs": re.compile(r"^[a-z0-9][a-z0-9._-]{1,220}[a-z0-9]$"),
}
_VIRTUAL_HOST = re.compile(r"^https?://(?P<bucket>[^/]+?)\.s3(?:[.-][a-z0-9-]+)?\.amazonaws\.com(?:/(?P<key>.*))?$")
_PATH_STYLE = re.compile(r"^https?://s3(?:[.-][a-z0-9-]+)?\.amazonaws\.com/(?P<bucket>[^/]+)(?:/(?P<key>.*))?$")
_GCS_HTTP = re.compile(r"^https?://storage\.(?:cloud\.)?googleapis\.com/(?P<bucket>[^/]+)(?:/(?P<key>.*))?$")


@dataclass(frozen=True)
class BucketUrl:
    scheme: str  # "s3" or "gs"
    bucket: str
    prefix: str  # no leading or trailing slash
    pasted: str  # what was given

    @property
    def url(self) -> str:
        return f"{self.scheme}://{self.bucket}/{self.prefix + '/' if self.prefix else ''}"

    def understood(self) -> str | None:
        """ "understood 's3://acme-cur/' as bucket acme-cur (no prefix)", or None where it was a plain name."""
        if self.pasted == self.bucket:
            return None
        where = f"prefix {self.prefix}" if self.prefix else "no prefix"
        return f"understood {self.pasted!r} as bucket {self.bucket}, {where}"


def parse(text: str, scheme: str = "s3", prefix: str = "") -> BucketUrl:
    """The bucket and prefix of ``text`` (``prefix``, the separately configured one, goes after any prefix in
    ``text``); ValueError in one sentence where no bucket name is left or it breaks the naming rules."""
    pasted = text
    text = text.strip()
    other = "gs" if scheme == "s3" else "s3"
    if text.lower().startswith(f"{other}://"):
        raise ValueError(f"{pasted!r} is {scheme_name(other)} URL; this setting takes {scheme_name(scheme)} bucket")
    bucket, key = _split(text, scheme)
    bucket = bucket.strip().strip("/")
    rule = _NAME[scheme]
    if not rule.match(bucket):
        raise ValueError(
            f"{pasted!r} is not {scheme_name(scheme)} bucket: after removing any {scheme}:// or ARN, the name "
            f"{bucket!r} must be 3-63 lowercase letters, digits, dots or hyphens, starting and ending with a letter "
            "or digit"
        )
    parts = [p for p in (key.strip("/"), prefix.strip().strip("/")) if p]
    return BucketUrl(scheme, bucket, "/".join(parts), pasted)


def normalise(options: object, scheme: str) -> None:
    """Rewrite a frozen options object's ``bucket`` and ``prefix`` to what a pasted URL or ARN names, and set its
    ``understood`` (the sentence ``doctor`` prints, or None). A bad name is left for :func:`problem` to refuse."""
    object.__setattr__(options, "understood", None)
    bucket = getattr(options, "bucket", None)
    if bucket is None:
        return
    try:
        url = parse(bucket, scheme, getattr(options, "prefix", "") or "")
    except ValueError:
        return
    object.__setattr__(options, "understood", url.understood())
    object.__setattr__(options, "bucket", url.bucket)
    object.__setattr__(options, "prefix", url.prefix)


def problem(bucket: str | None, scheme: str) -> str | None:
    """Why ``bucket`` is no bucket name (one sentence), or None."""
    if bucket is None:
        return None
    try:
        parse(bucket, scheme)
    except ValueError as exc:
        return str(exc)
    return None


def scheme_name(scheme: str) -> str:
    """With its article: "an S3", "a Cloud Storage"."""
    return {"s3": "an S3", "gs": "a Cloud Storage"}[scheme]


def _split(text: str, scheme: str) -> tuple[str, str]:
    """(bucket, key prefix) of a URL, an ARN or a bare name (with or without a path after it)."""
    for pattern in (_VIRTUAL_HOST, _PATH_STYLE) if scheme == "s3" else (_GCS_HTTP,):
        m = pattern.match(text)
        if m:
            return m["bucket"], m["key"] or ""
    lowered = text.lower()
    for lead in (f"{scheme}://", "s3a://", "s3n://", "arn:aws:s3:::", "arn:aws-cn:s3:::", "arn:aws-us-gov:s3:::"):
        if lowered.startswith(lead) and (lead.startswith(scheme) or scheme == "s3"):
            text = text[len(lead) :]
            break
    bucket, _, key = text.lstrip("/").partition("/")
    return bucket, key
