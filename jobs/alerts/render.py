"""Render a notification (one event, one or more alerts of a group) for each channel: an e-mail
(text and HTML), a Slack incoming-webhook body (``{"text", "blocks"}``: Block Kit header, section and
context blocks, within Slack's limits), and the signed webhook's JSON. Pure functions of the alert
rows; delivery is jobs/alerts/deliver.py.
"""

from __future__ import annotations

import html
import json
from datetime import UTC, datetime
from decimal import Decimal
from email import policy
from email.message import EmailMessage
from email.utils import format_datetime
from typing import Any

from gpufinops.jobs.report.headers import header

SEVERITY_MARK = {"critical": ":red_circle:", "warning": ":large_orange_circle:", "info": ":large_blue_circle:"}
SLACK_HEADER_MAX, SLACK_SECTION_MAX, SLACK_BLOCKS_MAX = 150, 3000, 50


def alert_object(row: dict[str, Any]) -> dict[str, Any]:
    """An alert as JSON (API, webhook): plain types, money as numbers, times ISO-8601 UTC."""

    def ts(value):
        return value.astimezone(UTC).isoformat().replace("+00:00", "Z") if value is not None else None

    def num(value):
        return float(value) if isinstance(value, Decimal) else value

    details = row.get("details")
    return {
        "id": row["alert_id"],
        "rule": row["rule"],
        "scope": row["scope"],
        "period": row["period"],
        "threshold": row["threshold"],
        "severity": row["severity"],
        "status": row["status"],
        "teams": list(row.get("teams") or []),
        "title": row["title"],
        "summary": row["summary"],
        "value_usd": num(row.get("value_usd")),
        "limit_usd": num(row.get("limit_usd")),
        "details": json.loads(details) if isinstance(details, str) else (details or {}),
        "resolution": row.get("resolution"),
        "opened_at": ts(row.get("opened_at")),
        "evaluated_at": ts(row.get("evaluated_at")),
        "closed_at": ts(row.get("closed_at")),
    }


def _rank(row: dict) -> tuple:
    """Most severe first; of a budget, the actual spend before the forecast, the highest threshold first."""
    order = {"critical": 0, "warning": 1, "info": 2}
    try:
        threshold = -float(row["threshold"])
    except ValueError:
        threshold = 0.0
    return order.get(row["severity"], 3), row["rule"] != "budget", threshold, row["title"]


def ordered(rows: list[dict]) -> list[dict]:
    return sorted(rows, key=_rank)


def _worst(rows: list[dict]) -> dict:
    return ordered(rows)[0]


def subject(event: str, rows: list[dict]) -> str:
    lead = _worst(rows)
    more = f" (+{len(rows) - 1} more)" if len(rows) > 1 else ""
    return f"[gpufinops] {'Resolved: ' if event == 'resolved' else ''}{lead['title']}{more}"


def _line(event: str, row: dict) -> str:
    if event == "resolved":
        return f"Resolved: {row['title']}. {row.get('resolution') or ''}".strip()
    return f"{row['severity'].upper()}: {row['title']}. {row['summary']}"


def text_body(event: str, rows: list[dict], dashboard_url: str | None = None) -> str:
    lines = [_line(event, r) for r in ordered(rows)]
    if dashboard_url:
        lines.append(f"\nOpen alerts: {dashboard_url}")
    lines.append("\n`gpufinops alerts list` shows every open alert.")
    return "\n\n".join(lines) + "\n"


def html_body(event: str, rows: list[dict], dashboard_url: str | None = None) -> str:
    items = []
    for row in ordered(rows):
        text = row.get("resolution") if event == "resolved" else row["summary"]
        items.append(
            f"<li><b>{html.escape(row['severity'].upper() if event == 'opened' else 'RESOLVED')}</b> "
            f"{html.escape(row['title'])}<br>{html.escape(text or '')}</li>"
        )
    link = f'<p><a href="{html.escape(dashboard_url)}">Open the dashboard</a></p>' if dashboard_url else ""
    return (
        f"<html><body><h2>{html.escape(subject(event, rows).removeprefix('[gpufinops] '))}</h2>"
        f"<ul>{''.join(items)}</ul>{link}</body></html>"
    )


def email(
    nid: str,
    event: str,
    rows: list[dict],
    sender: str,
    recipient: str,
    *,
    dashboard_url: str | None = None,
    now: datetime | None = None,
) -> EmailMessage:
    """The mail of one notification; its Message-ID is the notification's (a resend is recognisable)."""
    msg = EmailMessage(policy=policy.SMTP)
    for name, value in (
        ("Subject", subject(event, rows)),
        ("From", sender),
        ("To", recipient),
        ("Date", format_datetime(now or datetime.now(UTC))),
        ("Message-ID", f"<{nid}@gpufinops>"),
        ("X-Gpufinops-Alerts", ",".join(r["alert_id"] for r in rows)),
        ("X-Gpufinops-Event", event),
    ):
        msg[name] = header(value)  # a title built from a bill's team tag may hold a CR/LF
    msg.set_content(text_body(event, rows, dashboard_url))
    msg.add_alternative(html_body(event, rows, dashboard_url), subtype="html")
    return msg


def _clip(text: str, limit: int) -> str:
    return text if len(text) <= limit else text[: limit - 1] + "…"


def _mrkdwn(text: str) -> str:
    """Slack's three control characters escaped (https://api.slack.com/reference/surfaces/formatting)."""
    return text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")


def slack(event: str, rows: list[dict], dashboard_url: str | None = None) -> dict[str, Any]:
    """A Slack incoming-webhook body: ``text`` (the notification fallback) and Block Kit ``blocks``."""
    title = subject(event, rows).removeprefix("[gpufinops] ")
    blocks: list[dict[str, Any]] = [
        {"type": "header", "text": {"type": "plain_text", "text": _clip(title, SLACK_HEADER_MAX)}}
    ]
    for row in ordered(rows)[: SLACK_BLOCKS_MAX - 2]:
        mark = ":white_check_mark:" if event == "resolved" else SEVERITY_MARK.get(row["severity"], "")
        body = row.get("resolution") if event == "resolved" else row["summary"]
        text = f"{mark} *{_mrkdwn(row['title'])}*\n{_mrkdwn(body or '')}"
        blocks.append({"type": "section", "text": {"type": "mrkdwn", "text": _clip(text, SLACK_SECTION_MAX)}})
    context = [{"type": "mrkdwn", "text": f"gpufinops · {len(rows)} alert(s) · `gpufinops alerts list`"}]
    if dashboard_url:
        context.append({"type": "mrkdwn", "text": f"<{dashboard_url}|Open the dashboard>"})
    blocks.append({"type": "context", "elements": context})
    return {"text": _clip(title, 3000), "blocks": blocks}


def webhook(nid: str, event: str, rows: list[dict], sent_at: datetime) -> dict[str, Any]:
    """The signed webhook's body: ``delivery_id`` is the notification's id (the same on a resend)."""
    return {
        "event": "alerts",
        "status": event,
        "delivery_id": nid,
        "sent_at": sent_at.astimezone(UTC).isoformat().replace("+00:00", "Z"),
        "alerts": [alert_object(r) for r in rows],
    }
