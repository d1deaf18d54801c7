"""The report as one MIME message: what SMTP sends and what ``--out FILE.eml`` writes, byte for byte.

Structure (what mail clients render best): multipart/mixed [ multipart/alternative [ text/plain,
multipart/related [ text/html, image/png (Content-ID) … ] ], text/csv attachment ].
"""

from __future__ import annotations

import hashlib
from datetime import UTC, datetime
from email import policy
from email.message import EmailMessage
from email.utils import format_datetime

from gpufinops.jobs.report.headers import header
from gpufinops.jobs.report.render import Report

UNDISCLOSED = "undisclosed-recipients:;"  # a preview written to a file goes to no one


def message_id(report: Report, recipient: str) -> str:
    """One stable id per (week, recipient, scope): a resend by hand is recognisably the same mail."""
    digest = hashlib.sha256(f"{report.week}|{recipient.lower()}|{report.scope.teams}".encode()).hexdigest()[:20]
    return f"<weekly-{report.week}-{digest}@gpufinops>"


def build(report: Report, sender: str, recipient: str | None, *, now: datetime | None = None) -> EmailMessage:
    msg = EmailMessage(policy=policy.SMTP)
    for name, value in (
        ("Subject", report.subject),
        ("From", sender),
        ("To", recipient or UNDISCLOSED),
        ("Date", format_datetime(now or datetime.now(UTC))),
        ("Message-ID", message_id(report, recipient or "preview")),
        ("X-Gpufinops-Week", str(report.week)),
        ("X-Gpufinops-Scope", "all" if report.scope.teams is None else ",".join(report.scope.teams)),
    ):
        msg[name] = header(value)  # every header through the one sanitiser (jobs.report.headers)
    msg.set_content(report.text)
    msg.add_alternative(report.html, subtype="html")
    _text_part, html_part = msg.iter_parts()  # multipart/alternative: the text, then the HTML
    for image in report.images:
        html_part.add_related(
            image.png, maintype="image", subtype="png", cid=f"<{image.cid}>", filename=f"{image.cid.split('@')[0]}.png"
        )
    msg.add_attachment(
        report.csv_bytes, maintype="text", subtype="csv", filename=report.csv_name, params={"charset": "utf-8"}
    )  # base64: the CSV's bytes (and CRLFs) arrive unchanged
    return msg
