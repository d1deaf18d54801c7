"""Missing data is never good news: an account with a bill alone, GPU metrics alone or serving counters alone.

The demo fleet's genuine exports (its CUR 2.0 and BigQuery billing files, its DCGM exporter output, its vLLM /
Triton counters) are loaded one input at a time, each into a warehouse of its own, through the real command
line; then every surface is driven as a user drives it (``gpufinops recommend``, ``report weekly`` and
``unit-costs`` through ``cli.main``, the HTTP API under uvicorn, the dashboard's pages through Streamlit's
AppTest) and none may state a zero or "nothing found" for what its inputs could not see: each says *unknown*,
why, and which source type would complete it. The walk covers every registered model kind (by its declared
``needs``) and every declared derived figure (``warehouse/inputs.py``), so a new kind or figure is covered
without a new test.
"""

from __future__ import annotations

import json
import re
from decimal import Decimal
from pathlib import Path

import httpx
import pytest

from gpufinops.dashboard import views
from gpufinops.interfaces import cli
from gpufinops.models import registry
from gpufinops.simulator import demo_fleet
from gpufinops.simulator.dcgm_export import write_dcgm_exports
from gpufinops.warehouse import coverage, db, inputs
from tests.test_api import FINANCE, TOKENS, Served, make_config

APP = Path(__file__).resolve().parents[1] / "dashboard" / "app.py"
BILLS = """
[sources.aws_cur]
type = "aws_cur"
path = "exports/aws/cur"
format = "cur2"

[sources.gcp_billing]
type = "gcp_billing_export"
path = "exports/gcp/billing/*.json"
"""
SERVING = """
[sources.serving]
type = "serving_exporter"
targets = ["metrics/serving/*.prom"]
"""
# What a surface must never say about a figure its inputs could not see.
GOOD_NEWS = (
    re.compile(r"\$0(\.00)? \(0 idle"),  # the report's "Paid for idle GPUs: $0 (0 idle GPU-hours)"
    re.compile(r"\b0\.0 kg CO"),
    re.compile(r"Every measured GPU-hour"),
    re.compile(r"No recommendations yet"),
    re.compile(r"no serving metrics", re.IGNORECASE),
    re.compile(r"\bNone\b|\bnan\b|\bnull\b"),
)
ONLY = ("bill", "metrics", "serving")


def _metrics_toml(resource_map: dict[str, str]) -> str:
    lines = ["[sources.gpu_metrics]", 'type = "dcgm_exporter"', 'targets = ["metrics/dcgm/*.prom"]', ""]
    lines += [
        "[sources.gpu_metrics.resource_map]",
        *[f"{json.dumps(h)} = {json.dumps(r)}" for h, r in resource_map.items()],
    ]
    return "\n".join(lines) + "\n"


@pytest.fixture(scope="module")
def homes(tmp_path_factory) -> dict[str, Path]:
    """One fleet's exports; three configs, each loading one input alone into its own warehouse."""
    root = tmp_path_factory.mktemp("coverage")
    fleet = demo_fleet.generate(root, days=7, seed=3)
    write_dcgm_exports(fleet.metrics_dir, root / "metrics" / "dcgm", frozenset(fleet.resource_map) - fleet.onprem_hosts)
    sections = {"bill": BILLS, "metrics": _metrics_toml(fleet.resource_map), "serving": SERVING}
    configs = {}
    for name, section in sections.items():
        config = root / f"{name}.toml"
        config.write_text(f'[warehouse]\npath = "data/{name}.duckdb"\n\n[teams]\ntag_keys = ["team"]\n{section}')
        assert cli.main(["--config", str(config), "ingest"]) == 0, name
        configs[name] = config
    return configs


def _run(capsys, config: Path, *args: str) -> str:
    capsys.readouterr()
    assert cli.main(["--config", str(config), *args]) == 0, args
    captured = capsys.readouterr()
    return captured.out + captured.err


def _no_good_news(surface: str, text: str) -> None:
    for pattern in GOOD_NEWS:
        assert not pattern.search(text), f"{surface} says {pattern.pattern!r} of what it could not see:\n{text}"


def _missing(config: Path) -> dict[str, coverage.Coverage]:
    with db.reader(_warehouse(config)) as con:
        return coverage.measure(con)


def _warehouse(config: Path) -> Path:
    return config.parent / "data" / f"{config.stem}.duckdb"


def test_every_input_names_the_registered_source_types_that_load_it() -> None:
    """The inputs' source types are the ingest registry's, table by table (a new source is declared there)."""
    from gpufinops.ingest.core.registry import default_registry

    reg = default_registry()
    loads: dict[str, set[str]] = {}
    for name in reg.names():
        loads.setdefault(reg.get(name).meta.target_table, set()).add(name)
    for item in inputs.INPUTS.values():
        assert set(item.source_types) == set().union(*(loads.get(t, set()) for t in item.tables)), item.name
    with db.reader(_tmp_schema()) as con:  # every derived table a figure declares exists in the schema
        tables = {r[0] for r in con.execute("SHOW TABLES").fetchall()}
    assert {t for f in inputs.FIGURES.values() for t in f.tables} <= tables
    assert all(set(spec.needs) <= set(inputs.INPUTS) for spec in registry.MODELS)


def _tmp_schema() -> Path:
    import tempfile

    path = Path(tempfile.mkdtemp()) / "schema.duckdb"
    with db.writer(path):
        pass
    return path


@pytest.mark.parametrize("only", ONLY)
def test_each_figure_knows_what_it_could_not_see(homes, only) -> None:
    """Every declared figure whose inputs were not loaded is unknown (never complete, never zero)."""
    loaded = {"bill": {"bill"}, "metrics": {"utilisation", "power"}, "serving": {"serving"}}[only]
    covers = _missing(homes[only])
    for name, figure in inputs.FIGURES.items():
        cover = covers[name]
        if set(figure.needs) - loaded:
            assert cover.state in ("unknown", "empty"), (name, cover)
            assert "unknown" in cover.sentence() and "source" in cover.sentence(), cover.sentence()


@pytest.mark.parametrize("only", ONLY)
def test_recommend_says_which_kinds_are_unknown(homes, only, capsys) -> None:
    """Every registered kind whose declared inputs are missing is named unknown, with the source to add."""
    printed = _run(capsys, homes[only], "recommend")
    _no_good_news("recommend", printed)
    flat = " ".join(printed.split())
    with db.reader(_warehouse(homes[only])) as con:
        hours = coverage.gpu_hours(con)
    for spec in registry.MODELS:
        if coverage.of(hours, spec.kind, needs=spec.needs).state != "complete":
            assert spec.label in flat and "unknown" in flat, (spec.kind, printed)
    assert "no recommendations where the models could see the data" in flat


def test_bill_alone_report_says_idle_and_emissions_are_unknown(homes, capsys) -> None:
    printed = _run(capsys, homes["bill"], "report", "weekly")
    _no_good_news("report", printed)
    idle = next(line for line in printed.splitlines() if line.startswith("Paid for idle GPUs"))
    assert "unknown for all" in idle and "GPU-hours" in idle and "dcgm_exporter" in idle
    assert "Energy and emissions: unknown" in printed
    assert "Unknown findings:" in printed and "Idle GPU" in printed
    _savings_say_unknown("report", printed)
    html = _tmp_out(homes["bill"], capsys)
    assert "Paid for idle GPUs" in html and "unknown" in html
    _no_good_news("report html", re.sub(r"<[^>]+>", " ", html))
    _savings_say_unknown("report html", _html_text(html))


def _html_text(html: str) -> str:
    """The report's HTML as its reader sees it: one line per table row or block, cells apart."""
    lines = re.sub(r"</(tr|div|p|h\d)>", "\n", html)
    return re.sub(r"[ \t]+", " ", re.sub(r"<[^>]+>", " ", lines)).replace("&#39;", "'")


def _savings_say_unknown(surface: str, text: str) -> None:
    """Open savings, overall and per team, read unknown (or "at least") and name the blind kinds' sources: a
    bill alone lets the idle and rightsizing kinds see nothing, so $0 would be good news nobody measured."""
    at = text.index("Open savings")
    headline = " ".join([line for line in text[at:].splitlines() if line.strip()][:3])  # label, value, note
    assert re.search(r"\bunknown\b|at least \$", headline), f"{surface}: {headline}"
    assert "could not look" in headline and "dcgm_exporter" in headline, f"{surface}: {headline}"
    assert not re.search(r"Open savings:?\s+\$0\b", text), f"{surface}: {headline}"
    table = text[text.index("Spend by team") :]
    rows = [line.split() for line in table.splitlines()[1:] if "$" in line][:5]
    assert rows and all(row[-1] != "$0" for row in rows), f"{surface} says a team saves $0:\n{table[:800]}"


def _tmp_out(config: Path, capsys) -> str:
    out = config.parent / "report.html"
    _run(capsys, config, "report", "weekly", "--out", str(out))
    return out.read_text()


@pytest.mark.parametrize("only", ("bill", "metrics"))
def test_unit_costs_without_counters_blame_the_missing_source(homes, only, capsys) -> None:
    printed = _run(capsys, homes[only], "unit-costs")
    assert "unknown" in printed and "serving_exporter" in printed, printed


def test_metrics_alone_say_the_bill_is_missing(homes) -> None:
    covers = _missing(homes["metrics"])
    idle = covers["idle_cost"]
    assert idle.state == "unknown" and idle.total > 0
    assert "no billed GPU usage" in idle.sentence() and "aws_cur" in idle.sentence()
    assert covers["utilisation"].state == "complete"


def test_the_api_returns_coverage_and_an_empty_unit_cost_reason(homes, tmp_path) -> None:
    from gpufinops.interfaces.api import create_app

    cfg = make_config(tmp_path, _warehouse(homes["bill"]))
    with Served(create_app(cfg, environ=TOKENS)) as served:
        body = httpx.get(f"{served.url}/v1/coverage", headers=FINANCE, timeout=30).json()
        units = httpx.get(f"{served.url}/v1/unit-costs", headers=FINANCE, timeout=30).json()
    assert body["figures"]["idle_cost"]["state"] == "unknown"
    assert body["figures"]["idle_cost"]["covered"] == 0 and body["figures"]["idle_cost"]["total"] > 0
    missing = {m["input"] for m in body["figures"]["idle_cost"]["missing"]}
    assert missing == {"utilisation"}
    assert {k for group in body["unknown_kinds"] for k in group["kinds"]} >= {"idle_gpu"}
    assert units["rows"] == [] and "serving_exporter" in units["empty_reason"]


def _page(monkeypatch, warehouse: Path, page: str, view: str | None = None):
    """``page`` in AppTest: its first view, or ``view`` (dashboard/views.py) as its link opens it."""
    from streamlit.testing.v1 import AppTest

    monkeypatch.setenv("GPUFINOPS_DB", str(warehouse))
    monkeypatch.setenv("GPUFINOPS_DASHBOARD", "{}")
    at = AppTest.from_file(str(APP), default_timeout=120)
    if view is None:
        at.run()
    else:
        at.query_params[views.KEY] = view
    at.switch_page(f"pages/{page}.py")
    at.run()
    assert not at.exception, [e.value for e in at.exception]
    return at


def _every_view(monkeypatch, warehouse: Path, page: str) -> list:
    """``page`` once per view (one run where it has none): what it says is read from all of them."""
    return [_page(monkeypatch, warehouse, page, view) for view in views.PAGES.get(page, (None,))]


def _page_text(at) -> str:
    parts = [f"{m.label}: {m.value}" for m in at.metric]
    for kind in ("info", "success", "warning", "caption", "markdown", "error"):
        parts += [str(e.value) for e in at.get(kind)]
    for frame in at.dataframe:
        parts.append(frame.value.to_string())
    return "\n".join(parts)


@pytest.mark.parametrize("page", ("overview", "fleet", "recommendations", "unit_costs", "team"))
def test_bill_alone_pages_say_unknown(monkeypatch, homes, page, capsys) -> None:
    _run(capsys, homes["bill"], "recommend")  # the models ran and withheld: "none yet" would be wrong
    shown = _every_view(monkeypatch, _warehouse(homes["bill"]), page)
    text = "\n".join(_page_text(at) for at in shown)
    _no_good_news(page, text)
    assert "unknown" in text
    if page == "fleet":
        kpis = {m.label: m.value for at in shown for m in at.metric}
        assert kpis["Idle GPU cost"] == "unknown" and kpis["Idle GPU-hours"] == "unknown"
        assert kpis["Emissions"] == "unknown"
        assert kpis["GPU-hours measured"].startswith("0 of ")

    if page in ("overview", "team"):  # the spend KPIs: what no metrics can say reads unknown, with why
        kpis = {m.label.split(" this month")[0].split(" in ")[0]: m.value for at in shown for m in at.metric}
        assert kpis["Shared GPUs: allocated"] == "unknown" and kpis["Shared GPUs: unallocated"] == "unknown"
        assert kpis["Savings identified per month"] != "$0.00"
        captions = " ".join(str(c.value) for at in shown for c in at.caption)
        assert "Shared-GPU allocation: unknown for all" in captions and "dcgm_exporter" in captions, captions
        assert "could not look" in captions and "Idle GPU" in captions, captions


def _overview(monkeypatch, homes):
    from streamlit.testing.v1 import AppTest

    monkeypatch.setenv("GPUFINOPS_DB", str(_warehouse(homes["bill"])))
    monkeypatch.setenv("GPUFINOPS_DASHBOARD", "{}")
    at = AppTest.from_file(str(APP), default_timeout=120)
    at.run()
    assert not at.exception, [e.value for e in at.exception]
    return at


@pytest.mark.parametrize("only", ONLY)
def test_carbon_rows_say_why_emissions_are_unknown(homes, only, capsys, tmp_path) -> None:
    """`carbon` (table and JSON) and `GET /v1/carbon`: a row none of whose GPU-hours had a power reading reads
    unknown with the source that would measure it, never 0, None or an empty cell; a measured row says nothing."""
    from gpufinops.interfaces.api import create_app

    table = _run(capsys, homes[only], "carbon")
    _no_good_news("carbon", table)
    rows = json.loads(_run(capsys, homes[only], "carbon", "--format", "json"))
    cfg = make_config(tmp_path, _warehouse(homes[only]))
    with Served(create_app(cfg, environ=TOKENS)) as served:
        api = httpx.get(f"{served.url}/v1/carbon", headers=FINANCE, timeout=30).json()
    assert [r["emissions_coverage"] for r in api] == [r["emissions_coverage"] for r in rows]
    for row in rows:
        if row["withheld_gpu_hours"]:
            note = row["emissions_coverage"]
            assert note and "dcgm_exporter" in note and f"{row['withheld_gpu_hours']:,.0f} GPU-hours" in note, row
            assert row["withheld_resources"] > 0 and row["withheld_days"] > 0, row
        else:
            assert row["emissions_coverage"] is None and row["kg_co2e"] is not None, row
        if row["gpu_hours"] == row["withheld_gpu_hours"]:
            assert row["kg_co2e"] is None and "unknown for all" in row["emissions_coverage"], row
    if any(r["gpu_hours"] == r["withheld_gpu_hours"] for r in rows):
        assert "unknown" in table and "dcgm_exporter" in table, table


WORD = re.compile(r"[A-Za-z][\w.:/@()-]{7,}")


@pytest.mark.parametrize("width", ("60", "100"))
@pytest.mark.parametrize(
    "command",
    (("costs", "--by", "resource"), ("carbon", "--by", "resource"), ("recommend",), ("unit-costs",)),
)
def test_no_cli_table_splits_a_word_across_lines(homes, command, width, capsys, monkeypatch) -> None:
    """Every word of every text value the command's JSON holds appears whole in its table at 60 and 100
    columns: a table wraps between words or reads as records, never cuts a name or sentence mid-word."""
    monkeypatch.setenv("COLUMNS", width)
    for only in ONLY:
        capsys.readouterr()
        if cli.main(["--config", str(homes[only]), *command]) != 0:  # costs without a bill: a usage error
            continue
        table = capsys.readouterr().out
        raw = _run(capsys, homes[only], *command, "--format", "json")
        start = raw.find("[") if raw.lstrip().startswith("[") or "{" not in raw else raw.find("{")
        data = json.loads(raw[start : raw.rfind("]" if raw[start] == "[" else "}") + 1])
        rows = data if isinstance(data, list) else data.get("rows", data.get("recommendations", []))
        words = {w for row in rows for v in row.values() if isinstance(v, str) for w in WORD.findall(v)}
        # a word the table does not hold whole though both its halves are there: cut by a column's edge
        cut = sorted(w for w in words if w not in table and w[: len(w) // 2] in table and w[len(w) // 2 :] in table)
        assert not cut, f"{command} at {width} columns split {cut[:5]}:\n{table}"


@pytest.mark.parametrize("only", ONLY)
def test_no_report_splits_a_word_across_a_column_or_line(homes, only, capsys) -> None:
    """The weekly report's text and HTML hold whole every word of what they print for every scope: each team
    (its row in the team table) and the sentences it prints of those saying which figures and kinds could not
    see (``kind_coverage.report``). A word missing whole whose first half is there was cut by a column's edge or a
    line's end (or cut short: a head of it ending where a word would go on)."""
    from gpufinops.models import kind_coverage

    capsys.readouterr()
    if cli.main(["--config", str(homes[only]), "report", "weekly"]) != 0:  # no bill: nothing to report on
        return
    text = capsys.readouterr().out
    html = _html_text(_tmp_out(homes[only], capsys))
    with db.reader(_warehouse(homes[only])) as con:
        said = kind_coverage.report(con)
        teams = con.execute('SELECT DISTINCT "x_Team" FROM cost_line_items WHERE "x_Team" IS NOT NULL').fetchall()
    sentences = [group["sentence"] for group in said["unknown_kinds"]]
    sentences += [f["sentence"] for f in said["figures"].values() if f["sentence"]]
    for surface, shown in (("text", text), ("html", html)):
        # the sentences this report prints: their label and the head of what they say after it
        printed = [s for s in sentences if all(" ".join(part.split()[:4]) in shown for part in s.split(": ", 1))]
        words = {w.rstrip(":.,;)") for v in [team for (team,) in teams] + printed for w in WORD.findall(v)}
        cut = sorted(w for w in words if w not in shown and _head_alone(w, shown))
        assert not cut, f"the report's {surface} ({only} alone) cut {cut[:5]}:\n{shown[:2000]}"


def _head_alone(word: str, shown: str) -> bool:
    """A head of ``word`` (three letters or more) stands in ``shown`` as a word of its own: cut there."""
    return any(re.search(rf"(?<![\w-]){re.escape(word[:k])}(?![\w])", shown) for k in range(3, len(word)))


def test_savings_found_beside_blind_kinds_read_at_least(homes) -> None:
    """The one rule every savings figure follows (the report's headline, team column and subject): with kinds
    that could not look, savings found read "at least", none found "unknown"; with none blind, the amount."""
    from gpufinops.jobs.report.render import savings
    from gpufinops.models import kind_coverage

    with db.reader(_warehouse(homes["bill"])) as con:
        blind = kind_coverage.unknown_kinds(con)
    assert blind and savings(Decimal("1234"), blind) == "at least $1,234"
    assert savings(Decimal("0"), blind) == "unknown"
    assert savings(Decimal("1234"), []) == "$1,234" and savings(Decimal("0"), []) == "$0"


def test_overview_savings_read_as_the_report_and_recommend_say(monkeypatch, homes, capsys) -> None:
    """One wording on every surface: a bill-only Overview's "Savings identified" KPI says what the weekly
    report's Open savings line says (the same "unknown" or "at least", the same "N kinds could not look: …
    need …" sentence) and gives, on hover, each kind group's reason exactly as `recommend` prints it."""
    report = _run(capsys, homes["bill"], "report", "weekly")
    recommend = " ".join(_run(capsys, homes["bill"], "recommend").split())
    said = re.search(
        r"^Open savings:\s+(unknown|at least \$[\d,.]+)\S*.*?(\d+ kinds? could not look: .*)$", report, re.M
    )
    assert said, report
    at = _overview(monkeypatch, homes)
    kpi = next(m for m in at.metric if m.label == "Savings identified per month")
    assert kpi.value.split(" $")[0] == said.group(1).split(" $")[0], (kpi.value, said.group(0))
    captions = [" ".join(str(c.value).replace("`", "").split()) for c in at.caption]
    assert said.group(2) in captions, (said.group(2), captions)
    reasons = [" ".join(r.replace("`", "").split()) for r in kpi.proto.help.split("\n\n")[1:]]
    assert reasons and all(reason in recommend for reason in reasons), (reasons, recommend)


@pytest.mark.parametrize(("only", "table"), [("metrics", "gpu_metrics_hourly"), ("serving", "serving_metrics_hourly")])
def test_no_bill_report_the_week_their_data_covers(homes, capsys, only, table) -> None:
    """No bill yet, a week of GPU metrics (or serving counters): `report weekly` reports the week holding most
    of them (not today's empty week), says where its data ends, and reads spend unknown with the source to add."""
    from gpufinops.jobs.report.weeks import parse_week

    printed = _run(capsys, homes[only], "report", "weekly")
    _no_good_news("report", printed)
    header = re.search(r"^GPU spend, week (\S+)", printed, re.M)
    assert header, printed
    week = parse_week(header.group(1))
    with db.reader(_warehouse(homes[only])) as con:
        hours = dict(con.execute(f"SELECT strftime(hour, '%G-W%V'), count(*) FROM {table} GROUP BY 1").fetchall())
    assert hours.get(str(week)) == max(hours.values()), (week, hours)
    assert "NOTE: data only reaches" in printed
    spend = next(line for line in printed.splitlines() if line.startswith("Spend this week"))
    assert "unknown" in spend and "aws_cur" in spend and "$" not in spend, spend
    idle = next(line for line in printed.splitlines() if line.startswith("Paid for idle GPUs"))
    if only == "metrics":
        assert re.search(r"unknown for all [\d,]+ GPU-hours", idle) and "no data in the window" not in idle, idle


@pytest.mark.parametrize("page", ("overview", "fleet", "team"))
def test_metrics_alone_pages_say_the_bill_is_missing(monkeypatch, homes, page) -> None:
    """GPU metrics loaded, no bill: the spend pages say what the metrics cover and which source loads a bill,
    not "no cost data yet: run ingest" (the user did) nor "no GPU usage" (a week of it is measured); the GPU
    fleet page still draws the utilisation the metrics measured, idle cost unknown beside it."""
    at = _page(monkeypatch, _warehouse(homes["metrics"]), page)
    said = " ".join(str(i.value) for i in at.info)
    assert re.search(r"No bill loaded yet: GPU metrics cover [\d,]+ GPU-hours on \d+ resources", said), said
    assert "`aws_cur`" in said and "No GPU usage" not in said, said
    if page == "fleet":  # utilisation needs no bill: the metrics' own heatmap, over the month they cover
        assert at.get("vega_lite_chart"), "no utilisation chart on a metrics-only fleet page"
        kpis = {m.label: m.value for m in at.metric}
        assert kpis["Idle GPU cost"] == "unknown" and kpis["GPU-hours measured"].split(" of ")[0] != "0", kpis
        assert any("no billed GPU usage" in w.value for w in at.warning)  # why idle is unknown, and the source


def test_metrics_alone_costs_say_the_bill_is_missing(homes, capsys) -> None:
    capsys.readouterr()
    assert cli.main(["--config", str(homes["metrics"]), "costs", "--by", "team"]) != 0
    said = " ".join(capsys.readouterr().err.split())
    assert "no bill loaded yet: GPU metrics cover" in said and "aws_cur" in said, said
    # a month asked for by name: not "no spend in this window" (nothing billed is not nothing spent)
    assert cli.main(["--config", str(homes["metrics"]), "costs", "--month", "2026-10"]) == 0
    said = " ".join(capsys.readouterr().out.split())
    assert "unknown: no bill loaded yet: GPU metrics cover" in said and "no spend" not in said, said
    args = ["costs", "--from", "2026-10-01", "--to", "2026-10-31", "--format", "json"]
    assert cli.main(["--config", str(homes["metrics"]), *args]) == 0
    body = json.loads(capsys.readouterr().out)
    assert body["total_usd"] is None and body["covers"].startswith("no bill loaded yet"), body
