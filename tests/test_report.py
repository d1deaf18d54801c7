"""The weekly report: rendered on the demo fleet, mailed through a real SMTP server on loopback.

Mails are parsed as a mail client would: who got what, that a lead's mail holds only its teams in
every number, chart and CSV row, that the charts are inline images, and that each (week, recipient)
is mailed once across re-runs, a restart, and a process killed in the middle of a delivery.
"""

from __future__ import annotations

import csv
import email
import email.policy
import io
import os
import re
import shutil
import subprocess
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import timedelta
from decimal import Decimal
from pathlib import Path
from typing import Any

import pytest

from gpufinops.jobs import config as config_mod
from gpufinops.jobs.report import deliver
from gpufinops.jobs.report.cli import default_week, write_report
from gpufinops.jobs.report.render import usd
from gpufinops.jobs.report.weeks import parse_week
from gpufinops.warehouse.scope import Scope
from tests import cli_process
from tests.conftest import query
from tests.demo_cache import demo_copy
from tests.smtp_loopback import Recorder, Server
from tests.toml_config import assert_refused

FINANCE, VISION, RESEARCH = "finance@example.com", "vision-lead@example.com", "research-lead@example.com"
USER, PASSWORD = "reporter", "s3cret-pass-word"


@pytest.fixture(scope="module")
def demo_run(tmp_path_factory):
    home = tmp_path_factory.mktemp("demo_run")
    return home, demo_copy(tmp_path_factory, home, days=14, seed=3)


def make_config(
    report_demo, tmp_path: Path, port: int, *, attempts: int = 3, auth: bool = False, starttls: bool = False
) -> Path:
    """A copy of the demo warehouse and a config that mails three readers through the test server."""
    home, _ = report_demo
    db_path = tmp_path / "wh" / "gpufinops.duckdb"
    db_path.parent.mkdir(parents=True, exist_ok=True)
    shutil.copy(home / "data" / "gpufinops.duckdb", db_path)
    auth_lines = ['smtp_user_env = "TEST_SMTP_USER"', 'smtp_password_env = "TEST_SMTP_PASSWORD"'] if auth else []
    if auth and not starttls:  # the loopback relay speaks plain SMTP: AUTH over it must be allowed explicitly
        auth_lines.append("smtp_allow_plaintext_auth = true")
    path = tmp_path / "gpufinops.toml"
    path.write_text(
        "\n".join(
            [
                "[warehouse]",
                f'path = "{db_path}"',
                "",
                "[report]",
                'timezone = "UTC"',
                'sender = "gpufinops@example.com"',
                'smtp_host = "127.0.0.1"',
                f"smtp_port = {port}",
                f"smtp_starttls = {str(starttls).lower()}",
                *auth_lines,
                f"send_attempts = {attempts}",
                "retry_backoff_seconds = 0.05",
                "smtp_timeout_seconds = 20",
                "",
                "[[report.recipients]]",
                f'email = "{FINANCE}"',
                'role = "finance"',
                "",
                "[[report.recipients]]",
                f'email = "{VISION}"',
                'role = "lead"',
                'teams = ["vision"]',
                "",
                "[[report.recipients]]",
                f'email = "{RESEARCH}"',
                'role = "lead"',
                'teams = ["research"]',
                "",
            ]
        )
    )
    return path


@contextmanager
def mailing(
    report_demo, tmp_path: Path, recorder: Recorder, server: dict[str, Any] | None = None, **options: Any
) -> Iterator[tuple[Path, Any, Any]]:
    """The loopback SMTP server recording into ``recorder`` (``server``: its users, TLS context) for the
    ``with`` block, and the config mailing through it (``options``: make_config's): (its path, the loaded
    config, the week a send picks by default)."""
    with Server(recorder, **(server or {})) as port:
        config = make_config(report_demo, tmp_path, port, **options)
        cfg = config_mod.load(config)
        yield config, cfg, default_week(cfg)


def parts(message) -> dict:
    """What a mail client shows: text, HTML, inline images by Content-ID, attachments by name."""
    found: dict[str, Any] = {"text": None, "html": None, "images": {}, "attachments": {}, "related": False}
    for part in message.walk():
        ctype = part.get_content_type()
        if ctype == "multipart/related":
            found["related"] = True
        elif ctype == "text/plain" and not part.get_filename():
            found["text"] = part.get_content()
        elif ctype == "text/html":
            found["html"] = part.get_content()
        elif ctype == "image/png":
            found["images"][part["Content-ID"].strip("<>")] = part.get_content()
        elif part.get_filename():
            found["attachments"][part.get_filename()] = part.get_content()
    return found


def week_spend(db_path: Path, week, team: str | None = None) -> Decimal:
    from zoneinfo import ZoneInfo

    tz = ZoneInfo("UTC")
    sql = 'SELECT sum("EffectiveCost") FROM cost_line_items WHERE "ChargePeriodStart" >= ? AND "ChargePeriodStart" < ?'
    params = [week.start(tz), week.end(tz)]
    if not team:
        return Decimal(query(db_path, sql, params)[0][0] or 0)  # the allocation's moves add up to nothing here
    # a team's spend: its tagged lines, plus the GPU cost the allocation gives it on other teams' (shared)
    # nodes, minus what it moves off its own nodes to the pods of other teams
    sql += ' AND "x_Team" = ?'
    alloc = "SELECT sum(cost_usd) FROM gpu_allocation_hourly WHERE {} = ? AND hour >= ? AND hour < ?"
    tagged = query(db_path, sql, [*params, team])[0][0] or 0
    given = query(db_path, alloc.format("team"), [team, *params])[0][0] or 0
    moved = query(db_path, alloc.format("owner_team"), [team, *params])[0][0] or 0
    return Decimal(tagged) + Decimal(given) - Decimal(moved)


def teams_in(db_path: Path) -> set[str]:
    return {r[0] for r in query(db_path, 'SELECT DISTINCT "x_Team" FROM cost_line_items WHERE "x_Team" IS NOT NULL')}


def csv_rows(data) -> list[dict]:
    text = data.decode() if isinstance(data, bytes) else data
    return list(csv.DictReader(io.StringIO(text)))


def cli(config: Path, *args: str, timeout: float = 120) -> subprocess.CompletedProcess:
    env = {**os.environ, "TEST_SMTP_USER": USER, "TEST_SMTP_PASSWORD": PASSWORD}
    return cli_process.run("--config", str(config), *args, env=env, timeout=timeout)


@pytest.mark.filterwarnings("ignore:Requiring AUTH while not requiring TLS")  # a loopback relay, on purpose
def test_each_reader_gets_one_mail_with_only_their_teams(report_demo, tmp_path, monkeypatch):
    monkeypatch.setenv("TEST_SMTP_USER", USER)
    monkeypatch.setenv("TEST_SMTP_PASSWORD", PASSWORD)
    recorder = Recorder()
    with mailing(report_demo, tmp_path, recorder, {"users": {USER: PASSWORD}}, auth=True) as (_, cfg, week):
        outcome = deliver.send_weekly(cfg, week)
    assert sorted(outcome.sent) == sorted([FINANCE, VISION, RESEARCH]) and not outcome.failed
    assert recorder.logins == [USER] * 3  # login from the environment
    assert sorted(r.rcpt_tos[0] for r in recorder.received) == sorted([FINANCE, VISION, RESEARCH])
    db_path = cfg.warehouse_path
    all_teams = teams_in(db_path)
    assert {"vision", "research"} < all_teams
    for address, own in ((VISION, {"vision"}), (RESEARCH, {"research"}), (FINANCE, all_teams)):
        [message] = recorder.to(address)
        assert message["To"] == address and str(week) in message["Subject"]
        got = parts(message)
        # inline charts: multipart/related PNGs, each referenced from the HTML by its Content-ID
        assert got["related"] and len(got["images"]) >= 2
        for cid, png in got["images"].items():
            assert png[:8] == b"\x89PNG\r\n\x1a\n" and f"cid:{cid}" in got["html"]
        rows = csv_rows(got["attachments"][f"open-recommendations-{week}.csv"])
        assert {r["team"] for r in rows} <= (own if own != all_teams else own | {""})  # finance: team-less too
        spend = week_spend(db_path, week) if own == all_teams else sum(week_spend(db_path, week, t) for t in own)
        assert f"Spend this week:     {usd(spend)}" in got["text"]
        others = all_teams - own
        for team in others:  # no other team's name, and no other team's weekly spend, anywhere
            for body in (got["text"], got["html"]):
                assert team not in body
                assert usd(week_spend(db_path, week, team)) not in body
    finance_rows = csv_rows(parts(recorder.to(FINANCE)[0])["attachments"][f"open-recommendations-{week}.csv"])
    assert {r["team"] for r in finance_rows} >= {"vision", "research"}
    ledger = query(
        db_path, "SELECT recipient, status, attempts, error FROM report_deliveries WHERE week = ?", [str(week)]
    )
    assert sorted(ledger) == sorted((a, "sent", 1, None) for a in (FINANCE, VISION, RESEARCH))
    assert not any(PASSWORD in str(row) for row in query(db_path, "SELECT * FROM report_deliveries"))


def test_out_eml_is_exactly_what_is_mailed_and_html_previews_it(report_demo, tmp_path):
    recorder = Recorder()
    with mailing(report_demo, tmp_path, recorder) as (config, cfg, week):
        deliver.send_weekly(cfg, week)
        eml = tmp_path / "out" / "weekly.eml"
        result = cli(config, "report", "weekly", "--week", str(week), "--out", str(eml))
        assert result.returncode == 0, result.stderr
    mailed = parts(recorder.to(FINANCE)[0])
    written = parts(email.message_from_bytes(eml.read_bytes(), policy=email.policy.default))
    stamp = re.compile(r"Generated \d{4}-\d\d-\d\d \d\d:\d\d UTC")  # the one line that differs between runs
    assert stamp.search(mailed["html"])
    assert stamp.sub("", written["html"]) == stamp.sub("", mailed["html"]) and written["text"] == mailed["text"]
    assert written["images"] == mailed["images"] and written["attachments"] == mailed["attachments"]
    html_path = tmp_path / "out" / "weekly.html"
    write_report(cfg, week, Scope("finance"), html_path)
    html = html_path.read_text()
    assert "cid:" not in html and html.count("data:image/png;base64,") == len(mailed["images"])
    assert (tmp_path / "out" / f"open-recommendations-{week}.csv").read_bytes() == next(
        iter(mailed["attachments"].values())
    ).encode()


def test_sent_once_across_a_rerun_and_a_restarted_process(report_demo, tmp_path):
    recorder = Recorder()
    with mailing(report_demo, tmp_path, recorder) as (config, cfg, week):
        first = deliver.send_weekly(cfg, week)
        again = deliver.send_weekly(cfg, week)  # the job re-runs
        restarted = cli(config, "report", "weekly", "--week", str(week), "--send")  # a new process
    assert len(first.sent) == 3 and not again.sent and sorted(again.already_sent) == sorted(first.sent)
    assert restarted.returncode == 0 and restarted.stdout.count("already sent") == 3, restarted.stdout
    assert len(recorder.received) == 3


def test_a_process_killed_mid_delivery_never_mails_anyone_twice(report_demo, tmp_path):
    recorder = Recorder(stall={VISION})  # the server takes VISION's message, then the client dies
    with mailing(report_demo, tmp_path, recorder) as (config, _, default):
        week = str(default)
        proc = cli_process.start("--config", str(config), "report", "weekly", "--week", week, "--send")
        cli_process.kill_when(recorder.stalled, proc)
        recorder.release.set()
        rerun = cli(config, "report", "weekly", "--week", week, "--send")
        rerun_again = cli(config, "report", "weekly", "--week", week, "--send")
    counts = {a: len(recorder.to(a)) for a in (FINANCE, VISION, RESEARCH)}
    assert counts == {FINANCE: 1, VISION: 1, RESEARCH: 1}
    assert "unknown" in rerun.stdout and f"{RESEARCH}" in rerun.stdout
    db_path = config_mod.load(config).warehouse_path
    status = dict(query(db_path, "SELECT recipient, status FROM report_deliveries WHERE week = ?", [week]))
    assert status == {FINANCE: "sent", VISION: "sending", RESEARCH: "sent"}
    assert rerun_again.stdout.count("already sent") == 2


def test_a_refused_send_is_retried_and_recorded(report_demo, tmp_path):
    # VISION is refused twice then accepted (3 attempts allowed); RESEARCH is refused on every attempt
    recorder = Recorder(
        refuse={VISION: ["451 4.3.0 try again later"] * 2, RESEARCH: ["554 5.7.1 rejected by policy"] * 3}
    )
    with mailing(report_demo, tmp_path, recorder, attempts=3) as (config, cfg, default):
        week = str(default)
        result = cli(config, "report", "weekly", "--week", week, "--send")
        db_path = cfg.warehouse_path
        rows = {
            r[0]: r[1:]
            for r in query(
                db_path, "SELECT recipient, status, attempts, error FROM report_deliveries WHERE week = ?", [week]
            )
        }
        assert result.returncode == 1 and "failed" in result.stdout
        assert rows[VISION][:2] == ("sent", 3) and rows[FINANCE][:2] == ("sent", 1)
        assert rows[RESEARCH][:2] == ("failed", 3) and "554" in rows[RESEARCH][2]
        assert recorder.refused.count(VISION) == 2 and recorder.refused.count(RESEARCH) == 3
        # the next run retries the failed recipient only, and now the server takes it
        retry = cli(config, "report", "weekly", "--week", week, "--send")
    assert retry.returncode == 0, retry.stdout + retry.stderr
    after = {
        r[0]: r[1:3]
        for r in query(db_path, "SELECT recipient, status, attempts FROM report_deliveries WHERE week = ?", [week])
    }
    assert after == {FINANCE: ("sent", 1), VISION: ("sent", 3), RESEARCH: ("sent", 4)}
    assert {a: len(recorder.to(a)) for a in (FINANCE, VISION, RESEARCH)} == {FINANCE: 1, VISION: 1, RESEARCH: 1}


def test_demo_writes_the_weekly_report_and_says_where(demo_run):
    home, printed = demo_run
    [path] = list((home / "reports").glob("weekly-*.html"))
    assert str(path) in printed
    html = path.read_text()
    assert html.count("data:image/png;base64,") == 3 and "Top open recommendations" in html
    week = parse_week(path.stem.removeprefix("weekly-"))
    last_charge = query(home / "data" / "gpufinops.duckdb", 'SELECT max("ChargePeriodEnd") FROM cost_line_items')[0][0]
    assert week.end(last_charge.tzinfo) <= last_charge < week.end(last_charge.tzinfo) + timedelta(days=7)


@pytest.mark.parametrize(
    "section, key",
    [
        ("[report]\nsmtp_prot = 25", "report.smtp_prot"),
        ('[report]\ntimezone = "Mars/Olympus"', "report.timezone"),
        ('[report]\nsmtp_port = "25"', "report.smtp_port"),
        ('[[report.recipients]]\nemail = "lead@example.com"\nrole = "lead"', "report.recipients[0].teams"),
        ('[[report.recipients]]\nemail = "not-an-address"\nrole = "finance"', "report.recipients[0].email"),
        ('[[report.recipients]]\nemail = "a@example.com"\nrole = "scheduler"', "report.recipients[0].role"),
    ],
)
def test_bad_report_config_names_the_key(tmp_path, section, key):
    assert_refused(tmp_path, section + "\n", key)


def test_bad_week_is_a_usage_error(report_demo, tmp_path):
    config = make_config(report_demo, tmp_path, 25)
    result = cli(config, "report", "weekly", "--week", "2026-W60")
    assert result.returncode == 2 and "2026-W60" in result.stderr


@pytest.fixture
def tls_certificate(tmp_path):
    """A self-signed certificate for 127.0.0.1, trusted by the client through SSL_CERT_FILE."""
    cert, key = tmp_path / "cert.pem", tmp_path / "key.pem"
    subprocess.run(
        [
            "openssl",
            "req",
            "-x509",
            "-newkey",
            "rsa:2048",
            "-nodes",
            "-days",
            "1",
            "-subj",
            "/CN=127.0.0.1",
            "-addext",
            "subjectAltName=IP:127.0.0.1",
            "-keyout",
            str(key),
            "-out",
            str(cert),
        ],
        check=True,
        capture_output=True,
    )
    return cert, key


def test_starttls_and_login_from_the_environment(report_demo, tmp_path, tls_certificate, monkeypatch):
    import ssl

    cert, key = tls_certificate
    context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    context.load_cert_chain(cert, key)
    monkeypatch.setenv("SSL_CERT_FILE", str(cert))
    monkeypatch.setenv("TEST_SMTP_USER", USER)
    monkeypatch.setenv("TEST_SMTP_PASSWORD", PASSWORD)
    recorder = Recorder()
    server = {"users": {USER: PASSWORD}, "tls_context": context}
    with mailing(report_demo, tmp_path, recorder, server, auth=True, starttls=True) as (_, cfg, week):
        outcome = deliver.send_weekly(cfg, week)
    assert len(outcome.sent) == 3 and recorder.logins == [USER] * 3 and len(recorder.received) == 3
