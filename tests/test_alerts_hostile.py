"""Notifications never vanish and never block, against hostile names and servers on loopback: a CR/LF
in a configured name is refused at start-up (exit 2); one in a team tag from a bill is sanitised where
the header is built; one notification that cannot be sent never stops the others; an SMTP server
that never answers DATA (aiosmtpd, stalling) leaves the mail ``unknown``, exit 1, resent with the
same Message-ID after the timeout; a webhook is delivered only on a 2xx to its POST (302 to a login
page, 500, a receiver that never answers: failures, retried by the next run)."""

from __future__ import annotations

import threading
import time
from datetime import UTC, date, datetime, timedelta
from http.server import ThreadingHTTPServer

import duckdb
import pytest

from gpufinops.interfaces import cli as main_cli
from gpufinops.jobs import config as config_mod
from gpufinops.jobs.alerts import render
from gpufinops.jobs.report.headers import header
from gpufinops.warehouse import db
from tests.alert_fleet import FINANCE, RESEARCH, VISION, Resource, add_spend, metric_rows, spend_lines, write_config
from tests.conftest import query
from tests.http_loopback import QuietHandler
from tests.smtp_loopback import Recorder, Server
from tests.test_alerts_delivery import BUDGETS, OCT

NOW = "2026-10-15T06:00"
EVIL_TEAM = "vision\r\nBcc: thief@evil.example"


def run_cli(capsys, config, *args: str) -> tuple[int, str, str]:
    code = main_cli.main(["--config", str(config), *args])
    out, err = capsys.readouterr()
    return code, out, err


@pytest.fixture
def fleet(tmp_path):
    config = write_config(tmp_path, budgets=BUDGETS)
    db_path = config_mod.load(config).warehouse_path
    add_spend(db_path, "vision", OCT, 14, 550.0, source="aws-vision")  # 77 % of vision-gpu
    add_spend(db_path, "research", OCT, 14, 1000.0, source="aws-research")  # 70 % of research
    return tmp_path, db_path


@pytest.mark.parametrize(
    "extra, key",
    [
        ('[[budgets]]\nname = "gpu\\r\\nBcc: x@evil.example"\namount = 5', "budgets[3].name"),
        ('[[budgets]]\nname = "ok"\namount = 5\nscope = { teams = ["a\\nb"] }', "budgets[3].scope.teams[0]"),
    ],
)
def test_a_line_break_in_a_configured_name_is_refused_at_start_up(tmp_path, capsys, extra, key):
    config = write_config(tmp_path, budgets=BUDGETS + extra)
    code, _, err = run_cli(capsys, config, "alerts", "run", "--now", NOW)
    assert code == 2 and key in err and "control character" in err, err


def test_a_line_break_in_a_recipient_or_channel_name_is_refused(tmp_path, capsys):
    config = write_config(tmp_path, budgets=BUDGETS)
    text = config.read_text()
    config.write_text(text.replace('role = "finance"', 'role = "finance"\nname = "Fin\\r\\nBcc: x@evil.example"'))
    code, _, err = run_cli(capsys, config, "alerts", "list")
    assert code == 2 and "report.recipients[0].name" in err, err
    config.write_text(text + '\n[[alerts.slack]]\nurl_env = "X_SLACK"\nname = "ops\\u2028x"\n')
    code, _, err = run_cli(capsys, config, "alerts", "list")
    assert code == 2 and "alerts.slack[0].name" in err, err


def test_header_text_is_one_line():
    assert header("a\r\nBcc: x\x00\tb\u2028c") == "a Bcc: x b c"
    msg = render.email(
        "n1",
        "opened",
        [
            {
                "alert_id": "a\r\n1",
                "severity": "info",
                "rule": "idle_burn",
                "threshold": "x",
                "title": "t\r\nBcc: x",
                "summary": "s",
            }
        ],
        "gpufinops@example.com",
        "x@example.com",
    )
    assert msg["Bcc"] is None and "\r" not in str(msg["Subject"]) and "\n" not in msg["X-Gpufinops-Alerts"]


def test_a_team_tag_with_a_line_break_is_sanitised_and_blocks_nothing(fleet, capsys):
    tmp_path, db_path = fleet
    day = date(2026, 10, 13)
    with db.writer(db_path) as con:  # an idle GPU of a team whose tag on the bill holds CR/LF
        spend_lines(con, EVIL_TEAM, day, 2, 240.0, resource=Resource("i-evil"), source="aws-evil")
        first = datetime.combine(day, datetime.min.time(), UTC)
        metric_rows(con, "i-evil", EVIL_TEAM, first, 30, 85.0)
        metric_rows(con, "i-evil", EVIL_TEAM, first + timedelta(hours=30), 18, 0.0)
    recorder = Recorder()
    with Server(recorder) as port:
        config = write_config(tmp_path, smtp_port=port, budgets=BUDGETS)
        code, out, err = run_cli(capsys, config, "alerts", "run", "--now", NOW)
    assert code == 0 and "internal error" not in err, out + err
    subjects = [str(m["Subject"]) for m in recorder.to(FINANCE)]
    idle = [s for s in subjects if "Idle GPUs" in s]
    assert idle and all("\r" not in s and "\n" not in s for s in idle), subjects
    assert all(m["Bcc"] is None for r in recorder.received for m in [r.message])
    assert all("thief@evil.example" not in r.rcpt_tos for r in recorder.received)
    assert recorder.to(VISION) and recorder.to(RESEARCH)  # the others were sent too
    assert query(db_path, "SELECT DISTINCT status FROM alert_deliveries") == [("sent",)]


def test_one_notification_that_cannot_be_built_never_blocks_the_others(fleet, capsys, monkeypatch):
    tmp_path, db_path = fleet
    real = render.email

    def broken_for_vision(nid, event, rows, sender, recipient, **kwargs):
        # fault injection: a bug in one notification's rendering (no real input reaches one now)
        if recipient == VISION:
            raise ValueError("Header values may not contain linefeed or carriage return characters")
        return real(nid, event, rows, sender, recipient, **kwargs)

    recorder = Recorder()
    with Server(recorder) as port:
        config = write_config(tmp_path, smtp_port=port, budgets=BUDGETS)
        monkeypatch.setattr(render, "email", broken_for_vision)
        code, out, err = run_cli(capsys, config, "alerts", "run", "--now", NOW)
        assert code == 1 and "failed   email " + VISION in out and "internal error" not in err, out + err
        assert recorder.to(FINANCE) and recorder.to(RESEARCH) and not recorder.to(VISION)
        errors = query(db_path, "SELECT DISTINCT error FROM alert_deliveries WHERE target = ?", [VISION])
        assert "ValueError" in errors[0][0]
        monkeypatch.setattr(render, "email", real)
        code, out, err = run_cli(capsys, config, "alerts", "run", "--now", NOW)
    assert code == 0 and len(recorder.to(VISION)) == 1, out + err


def _age_sending(db_path, minutes: int) -> None:
    with duckdb.connect(str(db_path)) as con:
        con.execute(
            "UPDATE alert_deliveries SET updated_at = now() - to_minutes(?) WHERE status = 'sending'", [minutes]
        )


def test_a_server_that_never_answers_data_is_unknown_then_resent_with_the_same_message_id(fleet, capsys):
    tmp_path, db_path = fleet
    recorder = Recorder(stall={FINANCE})
    with Server(recorder) as port:
        config = write_config(tmp_path, smtp_port=port, budgets=BUDGETS, attempts=1)
        config.write_text(config.read_text().replace("smtp_timeout_seconds = 20", "smtp_timeout_seconds = 1"))
        code, out, _ = run_cli(capsys, config, "alerts", "run", "--now", NOW)
        assert code == 1 and "unknown  email " + FINANCE in out, out
        recorder.release.set()  # the server lets go of the DATA it held
        first_ids = sorted(m["Message-ID"] for m in recorder.to(FINANCE))
        assert first_ids and recorder.to(VISION) and recorder.to(RESEARCH)
        statuses = query(db_path, "SELECT DISTINCT status FROM alert_deliveries WHERE target = ?", [FINANCE])
        assert statuses == [("sending",)]
        code, out, _ = run_cli(capsys, config, "alerts", "run", "--now", NOW)  # within the timeout: not resent
        assert code == 1 and len(recorder.to(FINANCE)) == len(first_ids), out
        recorder.stall.clear()
        _age_sending(db_path, 20)  # past [report] sending_timeout_minutes (15)
        code, out, _ = run_cli(capsys, config, "alerts", "run", "--now", NOW)
    assert code == 0, out
    resent = sorted(m["Message-ID"] for m in recorder.to(FINANCE))
    assert resent == sorted(first_ids * 2)  # each one again, with its Message-ID: receivers dedupe on it
    assert query(db_path, "SELECT DISTINCT status FROM alert_deliveries") == [("sent",)]


class Hostile:
    """A loopback HTTP receiver answering POSTs by script: ``302`` (to a login page that answers a GET
    with 200), ``500``, or ``stall`` (reads the request, never answers until closed)."""

    def __init__(self, script: list[str]) -> None:
        self.script = list(script)
        self.posts: list[str] = []
        self.gets: list[str] = []
        self.release = threading.Event()
        me = self

        class Handler(QuietHandler):
            def do_POST(self) -> None:  # noqa: N802 - http.server's name
                self.rfile.read(int(self.headers["Content-Length"]))
                me.posts.append(self.path)
                step = me.script.pop(0) if me.script else "200"
                if step == "stall":
                    me.release.wait(30)
                    return
                self.send_response(int(step))
                if step == "302":
                    self.send_header("Location", "/login?next=/hook")
                self.send_header("Content-Length", "0")
                self.end_headers()

            def do_GET(self) -> None:  # noqa: N802
                me.gets.append(self.path)
                body = b"<html>log in</html>"
                self.send_response(200)
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}/hook"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def close(self) -> None:
        self.release.set()
        self.server.shutdown()
        self.server.server_close()


@pytest.mark.parametrize("answer", ["302", "500", "stall"])
def test_a_webhook_is_delivered_only_on_a_2xx_to_its_post(fleet, capsys, monkeypatch, answer):
    tmp_path, db_path = fleet
    monkeypatch.setenv("TEST_ALERT_SECRET", "whsec-hostile-0123456789")
    hook = Hostile([answer] * 3)
    try:
        config = write_config(
            tmp_path,
            budgets=BUDGETS,
            alerts=(
                f'email = false\n[[alerts.webhooks]]\nurl = "{hook.url}"\nsecret_env = "TEST_ALERT_SECRET"\n'
                'teams = ["vision"]\nmax_attempts = 1\ntimeout_s = 0.5'
            ),
        )
        started = time.monotonic()
        code, out, err = run_cli(capsys, config, "alerts", "run", "--now", NOW)
        assert code == 1 and "sent 0" in out and "failed 1" in out, out + err
        assert time.monotonic() - started < 60
        assert hook.gets == []  # the login page never got the notification as a GET
        row = query(db_path, "SELECT DISTINCT status, http_status, error FROM alert_deliveries")
        assert len(row) == 1 and row[0][0] == "failed", row
        if answer == "302":
            assert row[0][1] == 302 and "/login?next=/hook" in row[0][2], row
        elif answer == "500":
            assert row[0][1] == 500
        else:
            assert row[0][1] is None and "timed out" in row[0][2].lower(), row
        hook.script = ["200"]
        code, out, err = run_cli(capsys, config, "alerts", "run", "--now", NOW)  # the next run retries it
    finally:
        hook.close()
    assert code == 0 and "sent 1" in out, out + err
    assert query(db_path, "SELECT DISTINCT status FROM alert_deliveries") == [("sent",)]
