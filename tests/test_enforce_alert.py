"""The ``budget_enforcement`` alert: once, ``enforce_warn_hours`` before an enforced budget's money runs out
at the current burn, mailed (loopback SMTP) to the team's lead naming the team, the budget, the date and
what the quota becomes; not again while the cap holds, and never for a budget whose money lasts."""

from __future__ import annotations

from datetime import date, timedelta

from gpufinops.jobs import config as config_mod
from gpufinops.jobs.alerts import run as alerts_run
from tests.alert_fleet import RESEARCH, VISION, add_spend, at, write_config
from tests.smtp_loopback import Recorder, Server
from tests.toml_config import budget

OCT = date(2026, 10, 1)
BUDGETS = budget("research-gpu", 20000, ["research"], thresholds=[2.0], enforce="hold") + budget(
    "vision-gpu", 100000, ["vision"], thresholds=[2.0], enforce="cap"
)


def _config(tmp_path, port: int):
    path = write_config(tmp_path, smtp_port=port, budgets=BUDGETS, alerts="enforce_warn_hours = 24")
    path.write_text(
        path.read_text().replace('rules = ["budget", "anomaly", "idle_burn"]', 'rules = ["budget_enforcement"]')
    )
    return config_mod.load(path)


def test_the_warning_arrives_once_a_day_before_the_hold_and_names_what_it_becomes(tmp_path):
    recorder = Recorder()
    with Server(recorder) as port:
        cfg = _config(tmp_path, port)
        add_spend(cfg.warehouse_path, "research", OCT, 14, 1000.0, source="r0")  # $14,000 of $20,000 by Oct 15
        add_spend(cfg.warehouse_path, "vision", OCT, 14, 1000.0, source="v0")  # $14,000 of $100,000: lasts
        opened_on = []
        for n in range(14, 24):  # the daily loads of Oct 15..24, the alerts run after each
            day = OCT + timedelta(days=n)
            if n > 14:
                add_spend(cfg.warehouse_path, "research", day - timedelta(days=1), 1, 1000.0, source=f"r{n}")
                add_spend(cfg.warehouse_path, "vision", day - timedelta(days=1), 1, 1000.0, source=f"v{n}")
            result = alerts_run.run(cfg, now=at(day))
            assert result.ok
            if recorder.to(RESEARCH) and not opened_on:
                opened_on.append(day)
    # $1,000 a day = $41.67/h: the $20,000 runs out on Oct 21 00:00; 24 h before is the Oct 20 run (18 h ahead)
    assert opened_on == [date(2026, 10, 20)]
    (mail,) = recorder.to(RESEARCH)
    text = mail.get_payload(0).get_payload(decode=True).decode() if mail.is_multipart() else mail.get_payload()
    for expected in ("research-gpu", "research", "2026-10-21 00:00 UTC", "quota becomes", "stopPolicy Hold"):
        assert expected in str(mail["Subject"]) + text, expected
    assert recorder.to(VISION) == []  # $100,000 lasts the month at its burn
