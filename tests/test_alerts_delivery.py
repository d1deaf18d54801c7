"""Alert delivery through a real SMTP server (aiosmtpd) and a real HTTP receiver on loopback: each
(rule, scope, period, threshold) is announced once to the right people across re-runs, restarts and
a process killed mid-delivery; a resolution is announced once; Slack gets an incoming-webhook body;
the generic webhook is signed (verified with jobs.webhook.verify_signature)."""

from __future__ import annotations

import json
import subprocess
import threading
from datetime import date
from pathlib import Path
from typing import Any

import pytest

from gpufinops.jobs import config as config_mod
from gpufinops.jobs import webhook
from gpufinops.jobs.alerts import run as alerts_run
from tests import cli_process
from tests.alert_fleet import FINANCE, RESEARCH, VISION, add_spend, at, write_config
from tests.conftest import query
from tests.smtp_loopback import Recorder, Server
from tests.test_webhook import Receiver
from tests.toml_config import budget

OCT = date(2026, 10, 1)
BUDGETS = "\n".join(
    [
        budget("vision-gpu", 10000, ["vision"], thresholds=[0.5, 0.75, 0.9, 1.0]),
        budget("research", 20000, ["research"]),
        budget("fleet", 1000000),
    ]
)


def cli(config: Path, *args: str) -> subprocess.CompletedProcess:
    return cli_process.run("--config", str(config), *args, timeout=300)


def subjects(recorder: Recorder, address: str) -> list[str]:
    return [str(m["Subject"]).strip() for m in recorder.to(address)]


def alert_ids_mailed(recorder: Recorder, address: str) -> list[str]:
    return [a for m in recorder.to(address) for a in m["X-Gpufinops-Alerts"].split(",")]


@pytest.fixture
def fleet(tmp_path):
    """Vision at 77 % of its budget after 14 days of October; research at 70 % of its own."""
    config = write_config(tmp_path, budgets=BUDGETS)
    db_path = config_mod.load(config).warehouse_path
    add_spend(db_path, "vision", OCT, 14, 550.0, source="aws-vision")  # $7,700 of $10,000
    add_spend(db_path, "research", OCT, 14, 1000.0, source="aws-research")  # $14,000 of $20,000
    return tmp_path, db_path


def test_a_budget_crossed_at_75_percent_mails_lead_and_finance_once_then_once_more_at_90(fleet):
    tmp_path, db_path = fleet
    recorder = Recorder()
    with Server(recorder) as port:
        cfg = config_mod.load(write_config(tmp_path, smtp_port=port, budgets=BUDGETS))
        first = alerts_run.run(cfg, now=at(date(2026, 10, 15)))
        assert first.ok and len(first.delivered.sent) == 4, first.delivered
        # vision crossed 50 % and 75 % at once: one mail each to its lead and to finance, naming 75 %
        assert len(recorder.to(VISION)) == 1 and "75 %" in subjects(recorder, VISION)[0]
        # research crossed 50 %: its lead and finance; the fleet budget (0.2 %) is quiet
        assert len(recorder.to(RESEARCH)) == 1 and "research" in subjects(recorder, RESEARCH)[0]
        assert len(recorder.to(FINANCE)) == 2

        again = alerts_run.run(cfg, now=at(date(2026, 10, 15), 7))  # the job re-runs
        restarted = cli(cfg.path, "alerts", "run", "--now", "2026-10-15T08:00")  # a new process
        assert not again.delivered.sent and restarted.returncode == 0, restarted.stdout + restarted.stderr
        assert "sent 0" in restarted.stdout
        assert len(recorder.received) == 4

        add_spend(db_path, "vision", date(2026, 10, 15), 3, 500.0, source="aws-vision-late")  # $9,200: 92 %
        crossed = alerts_run.run(cfg, now=at(date(2026, 10, 18)))
        assert len(crossed.delivered.sent) == 2
    assert [len(recorder.to(a)) for a in (VISION, FINANCE, RESEARCH)] == [2, 3, 1]
    assert "90 %" in subjects(recorder, VISION)[1]
    # the ledger: every (alert, target) once, sent
    rows = query(
        db_path,
        "SELECT alert_id, target, count(*), min(status) FROM alert_deliveries WHERE event = 'opened' GROUP BY ALL",
    )
    assert all(n == 1 and status == "sent" for _, _, n, status in rows)
    open_budget = query(db_path, "SELECT scope, threshold FROM alerts WHERE status = 'open' ORDER BY 1, 2")
    assert open_budget == [("research", "0.5"), ("vision-gpu", "0.5"), ("vision-gpu", "0.75"), ("vision-gpu", "0.9")]


def test_a_lead_never_receives_another_teams_alert(fleet):
    tmp_path, db_path = fleet
    budgets = BUDGETS + '\n[[budgets]]\nname = "both"\namount = 1000\nscope = { teams = ["vision", "research"] }\n'
    recorder = Recorder()
    with Server(recorder) as port:
        cfg = config_mod.load(write_config(tmp_path, smtp_port=port, budgets=budgets))
        assert alerts_run.run(cfg, now=at(date(2026, 10, 15))).ok
    teams = {a: set(t) for a, t in query(db_path, "SELECT alert_id, teams FROM alerts")}
    for lead, team in ((VISION, "vision"), (RESEARCH, "research")):
        mailed = alert_ids_mailed(recorder, lead)
        assert mailed and all(teams[a] == {team} for a in mailed), (lead, [teams[a] for a in mailed])
    # a budget over both teams holds both teams' spend: finance only
    both = {a for a, t in teams.items() if t == {"vision", "research"}}
    assert both and both <= set(alert_ids_mailed(recorder, FINANCE))


def test_a_kill_during_delivery_neither_loses_nor_duplicates(fleet):
    tmp_path, db_path = fleet
    # the server takes the first stalled mail, then the client is killed; the other stalled one waits
    recorder = Recorder(stall={FINANCE, VISION})
    with Server(recorder) as port:
        config = write_config(tmp_path, smtp_port=port, budgets=BUDGETS)
        proc = cli_process.start("--config", str(config), "alerts", "run", "--now", "2026-10-15T06:00")
        cli_process.kill_when(recorder.stalled, proc)
        killed_at = recorder.received[-1].rcpt_tos[0]
        recorder.release.set()
        rerun = cli(config, "alerts", "run", "--now", "2026-10-15T07:00")
        rerun_again = cli(config, "alerts", "run", "--now", "2026-10-15T08:00")
    # the killed one is unknown (within [report] sending_timeout_minutes: not resent yet): exit 1 while unsent
    assert rerun.returncode == 1 and rerun_again.returncode == 1, rerun.stdout + rerun.stderr
    counts = {a: len(recorder.to(a)) for a in (FINANCE, VISION, RESEARCH)}
    # finance has two notifications (vision's and research's budgets), each lead one
    assert counts == {FINANCE: 2, VISION: 1, RESEARCH: 1}, counts
    assert len({m["Message-ID"] for m in recorder.to(FINANCE)}) == 2
    status = query(db_path, "SELECT target, status FROM alert_deliveries GROUP BY ALL ORDER BY ALL")
    assert (killed_at, "sending") in status  # may have arrived: never sent twice
    assert "unknown" in rerun.stdout and "sent 0" in rerun_again.stdout
    assert not [s for t, s in status if s not in ("sent", "sending")]


def test_a_resolved_alert_says_so_once(fleet):
    tmp_path, db_path = fleet
    recorder = Recorder()
    with Server(recorder) as port:
        cfg = config_mod.load(write_config(tmp_path, smtp_port=port, budgets=BUDGETS))
        assert alerts_run.run(cfg, now=at(date(2026, 10, 15))).ok
        # a credit restates vision's October: $7,700 − $3,000 = $4,700, back under 50 %
        add_spend(db_path, "vision", date(2026, 10, 14), 1, -3000.0, source="aws-vision-credit")
        resolved = alerts_run.run(cfg, now=at(date(2026, 10, 15), 9))
        assert resolved.ok and len(resolved.delivered.sent) == 2
        assert alerts_run.run(cfg, now=at(date(2026, 10, 15), 10)).delivered.sent == []
        # crossing again in the same period is the same alert: open again, not announced again
        add_spend(db_path, "vision", date(2026, 10, 14), 1, 3000.0, source="aws-vision-rebill")
        reopened = alerts_run.run(cfg, now=at(date(2026, 10, 15), 11))
    assert reopened.delivered.sent == [] and len(reopened.changes["opened"]) == 2
    vision = subjects(recorder, VISION)
    assert len(vision) == 2 and vision[1].startswith("[gpufinops] Resolved: Budget vision-gpu")
    text = recorder.to(VISION)[1].get_body(("plain",)).get_content()
    assert "no longer holds" in text and "$4,700.00 of $10,000.00" in text
    assert len(recorder.to(FINANCE)) == 3


def test_a_refused_mail_is_retried_by_the_next_run(fleet):
    tmp_path, db_path = fleet
    recorder = Recorder(refuse={FINANCE: ["554 5.7.1 rejected by policy"] * 2})  # both of finance's mails
    with Server(recorder) as port:
        config = write_config(tmp_path, smtp_port=port, budgets=BUDGETS, attempts=1)
        first = cli(config, "alerts", "run", "--now", "2026-10-15T06:00")
        assert first.returncode == 1 and "failed" in first.stdout
        assert len(recorder.to(FINANCE)) == 0 and len(recorder.to(VISION)) == 1
        assert query(
            db_path, f"SELECT DISTINCT status, error LIKE '%554%' FROM alert_deliveries WHERE target = '{FINANCE}'"
        ) == [("failed", True)]
        second = cli(config, "alerts", "run", "--now", "2026-10-15T07:00")
    assert second.returncode == 0, second.stdout
    assert len(recorder.to(FINANCE)) == 2 and len(recorder.to(VISION)) == 1 and len(recorder.refused) == 2
    assert query(db_path, f"SELECT DISTINCT status, attempts FROM alert_deliveries WHERE target = '{FINANCE}'") == [
        ("sent", 2)
    ]


CHANNELS = """
[[alerts.slack]]
url_env = "TEST_SLACK_WEBHOOK_URL"
teams = ["vision"]

[[alerts.webhooks]]
url = "{url}"
secret_env = "TEST_ALERT_SECRET"
"""
SECRET = "whsec-alerts-" + "7c1d" * 8


def test_slack_body_and_signed_webhook(fleet, monkeypatch):
    tmp_path, db_path = fleet
    slack, hook = Receiver(), Receiver()
    try:
        monkeypatch.setenv("TEST_SLACK_WEBHOOK_URL", slack.url.replace("/hooks/gpufinops", "/services/T0/B0/s3cr3t"))
        monkeypatch.setenv("TEST_ALERT_SECRET", SECRET)
        cfg = config_mod.load(
            write_config(tmp_path, budgets=BUDGETS, alerts="email = false\n" + CHANNELS.format(url=hook.url))
        )
        result = alerts_run.run(cfg, now=at(date(2026, 10, 15)))
        assert result.ok and len(result.delivered.sent) == 3, result.delivered  # slack: vision; webhook: both
        assert alerts_run.run(cfg, now=at(date(2026, 10, 15), 7)).delivered.sent == []
    finally:
        slack.close()
        hook.close()
    [post] = slack.requests
    assert post["path"] == "/services/T0/B0/s3cr3t" and post["headers"]["Content-Type"] == "application/json"
    body = json.loads(post["body"])
    assert set(body) == {"text", "blocks"} and "vision-gpu" in body["text"]
    kinds = [b["type"] for b in body["blocks"]]
    assert kinds[0] == "header" and kinds[-1] == "context" and set(kinds[1:-1]) == {"section"}
    assert body["blocks"][0]["text"]["type"] == "plain_text" and len(body["blocks"][0]["text"]["text"]) <= 150
    assert all(b["text"]["type"] == "mrkdwn" and len(b["text"]["text"]) <= 3000 for b in body["blocks"][1:-1])
    assert "s3cr3t" not in json.dumps(query(db_path, "SELECT * FROM alert_deliveries"), default=str)

    assert len(hook.requests) == 2
    for req in hook.requests:
        h = req["headers"]
        assert webhook.verify_signature(
            SECRET.encode(), h["X-Gpufinops-Timestamp"], req["body"], h["X-Gpufinops-Signature"]
        )
        assert not webhook.verify_signature(
            b"wrong", h["X-Gpufinops-Timestamp"], req["body"], h["X-Gpufinops-Signature"]
        )
        payload = json.loads(req["body"])
        assert payload["event"] == "alerts" and payload["status"] == "opened"
        assert payload["delivery_id"] == h["X-Gpufinops-Delivery"]
        assert {a["rule"] for a in payload["alerts"]} == {"budget"} and all(
            a["status"] == "open" for a in payload["alerts"]
        )
    scopes = sorted({a["scope"] for r in hook.requests for a in json.loads(r["body"])["alerts"]})
    assert scopes == ["research", "vision-gpu"]


class StallingReceiver(Receiver):
    """Holds its first request (after reading it) until released: the sender can be killed meanwhile."""

    def __init__(self) -> None:
        super().__init__()
        self.stalled, self.release = threading.Event(), threading.Event()
        handler: Any = self.server.RequestHandlerClass  # Receiver's own Handler class: its do_POST is replaced
        original = handler.do_POST
        receiver = self

        def do_post(request) -> None:
            if not receiver.stalled.is_set():
                receiver.stalled.set()
                body = request.rfile.read(int(request.headers["Content-Length"]))
                receiver.requests.append({"headers": dict(request.headers), "body": body, "path": request.path})
                receiver.release.wait(60)
                return
            original(request)

        handler.do_POST = do_post


def test_a_webhook_killed_mid_post_is_resent_with_the_same_delivery_id(fleet, monkeypatch):
    tmp_path, db_path = fleet
    hook = StallingReceiver()
    try:
        monkeypatch.setenv("TEST_ALERT_SECRET", SECRET)
        config = write_config(
            tmp_path,
            budgets=BUDGETS,
            alerts=(
                f'email = false\n[[alerts.webhooks]]\nurl = "{hook.url}"\nsecret_env = "TEST_ALERT_SECRET"\n'
                'teams = ["vision"]\ntimeout_s = 60'
            ),
        )
        proc = cli_process.start("--config", str(config), "alerts", "run", "--now", "2026-10-15T06:00")
        cli_process.kill_when(hook.stalled, proc)
        hook.release.set()
        assert query(db_path, "SELECT DISTINCT status FROM alert_deliveries") == [("sending",)]
        rerun = cli(config, "alerts", "run", "--now", "2026-10-15T07:00")
        again = cli(config, "alerts", "run", "--now", "2026-10-15T08:00")
    finally:
        hook.close()
    assert rerun.returncode == 0 and "sent 1" in rerun.stdout and "sent 0" in again.stdout, rerun.stdout
    ids = [r["headers"]["X-Gpufinops-Delivery"] for r in hook.requests]
    assert len(ids) == 2 and len(set(ids)) == 1  # resent, recognisably the same delivery
    assert query(db_path, "SELECT DISTINCT status FROM alert_deliveries") == [("sent",)]


def test_a_missing_channel_secret_is_a_config_error_before_anything_is_sent(fleet, monkeypatch):
    tmp_path, db_path = fleet
    monkeypatch.delenv("TEST_SLACK_WEBHOOK_URL", raising=False)
    recorder = Recorder()
    with Server(recorder) as port:
        config = write_config(
            tmp_path, smtp_port=port, budgets=BUDGETS, alerts='[[alerts.slack]]\nurl_env = "TEST_SLACK_WEBHOOK_URL"'
        )
        result = cli(config, "alerts", "run", "--now", "2026-10-15T06:00")
    assert result.returncode == 2 and "alerts.slack[0].url_env" in result.stderr, result.stderr
    assert recorder.received == []
    assert query(db_path, "SELECT DISTINCT status FROM alert_deliveries") == [("pending",)]  # kept for the next run
