"""The ``gpufinops`` command line's arguments (docs/commands.md): every command, its flags and its help.

interfaces/cli.py parses with :func:`build_parser` and runs the command interfaces/cli_commands.py maps it to.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, NoReturn

from gpufinops.interfaces import dates

if TYPE_CHECKING:
    from gpufinops.ingest.core.registry import Registry

_date = dates.parse  # a date on the command line: interfaces/dates.py


def _version() -> str:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return f"gpufinops {version('gpufinops')}"
    except PackageNotFoundError:  # run from a checkout that was never installed
        return "gpufinops (not installed)"


class ModelKinds:
    """The `--kind` choices: the model registry's kinds (models/registry.py), imported only when a kind is
    checked or the help is shown (the models' libraries take seconds to import; most commands need none)."""

    @staticmethod
    def kinds() -> tuple[str, ...]:
        from gpufinops.models.registry import KINDS

        return KINDS

    def __contains__(self, kind: object) -> bool:
        return kind in self.kinds()

    def __iter__(self):
        return iter(self.kinds())


LONGEST_NAME = 256  # a team (an AWS tag value holds 256 characters; a Kubernetes label value 63)
NAMES = ("team",)  # arguments naming a team: a value longer than LONGEST_NAME is no team


class Parser(argparse.ArgumentParser):
    """argparse with the one error funnel: its usage error (an invalid choice echoing a 100 kB value, a
    CR or NUL) is escaped with the value cut to its start and length (``scrub.brief``), and a value holding a control
    character, or a team name longer than any team's, is a usage error (exit 2) before a command runs."""

    def error(self, message: str) -> NoReturn:
        from gpufinops.ingest.core import scrub

        self.print_usage(sys.stderr)
        # escaped, a long value cut to its start and length; the remedy (the choices to choose from) kept whole
        self.exit(2, f"{self.prog}: error: {scrub.brief(message, None)}\n")

    def parse_known_args(self, args: Any = None, namespace: Any = None) -> Any:
        parsed, extras = super().parse_known_args(args, namespace)
        for dest, value in vars(parsed).items():
            for text in value if isinstance(value, list) else [value]:
                if isinstance(text, str):
                    self._refuse_hostile(dest, text)
        return parsed, extras

    def _refuse_hostile(self, dest: str, text: str) -> None:
        flag = "--" + dest.replace("_", "-")
        if any(ord(c) < 32 or ord(c) == 127 for c in text):
            self.error(f"argument {flag}: a value holding a control character: {text!r}")
        if dest in NAMES and len(text) > LONGEST_NAME:
            self.error(f"argument {flag}: a name of {len(text):,} characters (at most {LONGEST_NAME}): {text!r}")


def build_parser(argv: Sequence[str] | None = None, registry: Registry | None = None) -> argparse.ArgumentParser:
    """The parser for ``argv``, the command line about to be parsed (None: any). ``init``'s flags for
    the questions the source specs declare come from the ingest registry (``registry``, default the
    built-in one, whose build imports every source module: most of a second), so they are added only
    when ``argv`` names ``init`` (or is None): no other command's start-up builds it."""
    from gpufinops.interfaces import carbon_cmd, costs_cmd, init_choices, init_cmd, mcp_server, unit_costs_cmd

    p = Parser(prog="gpufinops", description="FinOps for GPU fleets.")
    p.add_argument("--version", action="version", version=_version(), help="print the version and exit")
    p.add_argument("--config", metavar="PATH", help="config file (else $GPUFINOPS_CONFIG, else ./gpufinops.toml)")
    p.add_argument("--db", metavar="PATH", help="warehouse path (overrides the config)")
    p.add_argument("-v", "--verbose", action="count", default=0, help="log more (-v: info, -vv: debug)")
    sub = p.add_subparsers(dest="command", required=True, metavar="COMMAND")

    demo = sub.add_parser("demo", help="build a demo home with a simulated fleet and run everything on it")
    demo.add_argument(
        "--home",
        default="demo",
        metavar="DIR",
        help="the demo home: its config, exports, warehouse and report (default: ./demo)",
    )
    demo.add_argument(
        "--days", type=int, default=60, metavar="N", help="days of fleet history to simulate (default: 60)"
    )
    demo.add_argument(
        "--seed", type=int, default=7, metavar="S", help="random seed: same seed, same numbers (default: 7)"
    )

    init_cmd.add_parser(sub, asked=init_choices.questions(registry) if argv is None or "init" in argv else [])
    mcp_server.add_parser(sub)
    costs_cmd.add_parser(sub)
    carbon_cmd.add_parser(sub)
    unit_costs_cmd.add_parser(sub)
    doctor = sub.add_parser(
        "doctor",
        help="check the config, installed extras, credentials, each source and the "
        "warehouse; one line per check with its fix",
    )
    doctor.add_argument(
        "--timeout",
        type=float,
        default=10.0,
        metavar="SECONDS",
        help="give up on a source that has not answered in this long (default: 10)",
    )

    ingest = sub.add_parser("ingest", help="run sources (`ingest list` lists them)")
    ingest.add_argument(
        "sources",
        nargs="*",
        metavar="SOURCE",
        help="configured source names (default: every enabled source), or `list`",
    )
    ingest.add_argument(
        "--since",
        type=_date,
        metavar="DATE",
        help="reload from this date or date-time (UTC unless an offset is given) without moving the cursor",
    )
    ingest.add_argument("--until", type=_date, metavar="DATE", help="reload up to this date or date-time (exclusive)")
    ingest.add_argument(
        "--full-refresh", action="store_true", help="ignore the saved cursor and reload everything the source holds"
    )

    rec = sub.add_parser("recommend", help="run the models, store and print recommendations")
    rec.add_argument("--kind", metavar="K", choices=ModelKinds(), help="run only this model (%(choices)s)")
    rec.add_argument("--team", metavar="T", help="print only this team's recommendations")
    rec.add_argument(
        "--format",
        choices=("table", "json", "csv"),
        default="table",
        help="table (default, fits the terminal), json (the recommendation objects) or csv (flat columns)",
    )
    rec.add_argument(
        "--show-withheld",
        action="store_true",
        help="also list every resource a model withheld a finding on: why, the missing fact and "
        "the source that would provide it",
    )

    evaluate = sub.add_parser("evaluate", help="measure the models on planted demo fleets and real data")
    evaluate.add_argument(
        "--quick",
        action="store_true",
        help="one seed of each generator (the demo's default seed, the second generator's first seed)",
    )
    evaluate.add_argument("--format", choices=("table", "json"), default="table", help="table (default) or json")
    evaluate.add_argument(
        "--explain",
        metavar="KIND",
        choices=ModelKinds(),
        help="also print KIND's false positives and negatives on the second generator, with their evidence",
    )

    sub.add_parser(
        "migrate", help="upgrade the warehouse to this version's schema (every other command does it at its start too)"
    )
    sql = sub.add_parser("sql", help="one read-only query on the warehouse")
    sql.add_argument("query", help="a SELECT statement (DuckDB SQL; no file access)")
    sql.add_argument(
        "--format",
        choices=("table", "csv", "json"),
        default="table",
        help="table (default, fits the terminal), csv or json",
    )

    dash = sub.add_parser("dashboard", help="the Streamlit dashboard")
    dash.add_argument("--port", type=int, default=8501, metavar="P", help="port to listen on (default: 8501)")
    dash.add_argument(
        "--host",
        metavar="H",
        help='address to listen on (default: 127.0.0.1; every interface when [dashboard] auth = "oidc")',
    )

    api = sub.add_parser("api", help="the HTTP API (recommendations, decisions, daily costs)")
    api.add_argument("--host", default="127.0.0.1", metavar="H", help="address to listen on (default: 127.0.0.1)")
    api.add_argument("--port", type=int, default=8000, metavar="P", help="port to listen on (default: 8000)")
    api.add_argument(
        "--insecure-demo",
        action="store_true",
        help="without [[api.tokens]]: serve every caller with finance scope (demo only)",
    )

    export = sub.add_parser("export", help="recommendations in a scheduler's own format, or the costs as FOCUS 1.2")
    export.add_argument(
        "kind",
        metavar="FORMAT",
        choices=("json", "kueue", "karpenter", "skypilot", "storage", "focus", "budgets"),
        help="json, kueue, karpenter, skypilot (recommendations), storage (lifecycle rules, volume "
        "changes), focus (the cost lines) or budgets (the enforced budgets' quotas, --format kueue|karpenter|"
        "resourcequota|skypilot)",
    )
    export.add_argument("--team", metavar="T", help="only this team's recommendations (not for focus)")
    export.add_argument(
        "--cluster",
        help="kueue / karpenter / skypilot: only this target cluster (its name or its "
        "gpufinops.io/cluster label value)",
    )
    export.add_argument("--out", metavar="FILE", help="write to this file (default: stdout; required for focus)")
    export.add_argument("--from", dest="from_date", type=_date, help="focus: charges starting on or after this date")
    export.add_argument("--to", dest="to_date", type=_date, help="focus: charges starting up to this date (inclusive)")
    export.add_argument("--provider", help="focus: one provider (its ProviderName, or aws | gcp | onprem)")
    export.add_argument(
        "--format",
        dest="file_format",
        choices=("parquet", "csv", "kueue", "karpenter", "resourcequota", "skypilot"),
        help="focus: parquet | csv (default: from --out's extension, else parquet); budgets: kueue | karpenter | "
        "resourcequota | skypilot",
    )
    export.add_argument(
        "--focus-version",
        choices=("1.2", "1.3"),
        help="focus: the FOCUS version (default 1.2; 1.3 splits shared GPU lines into allocated rows)",
    )

    enforce = sub.add_parser("enforce", help="budget quotas on the clusters: --diff, --apply, or `simulate` a month")
    enforce.add_argument("action", nargs="?", choices=("simulate",), help="simulate: replay a month under the budget")
    how = enforce.add_mutually_exclusive_group()
    how.add_argument("--diff", action="store_true", help="print what applying would change (the default)")
    how.add_argument("--apply", action="store_true", help="server-side apply the objects (field manager gpufinops)")
    enforce.add_argument(
        "--format",
        dest="enforce_format",
        choices=("kueue", "karpenter", "resourcequota"),
        default=None,
        help="which objects (default: kueue)",
    )
    enforce.add_argument("--cluster", help="the cluster the kubeconfig reaches (its name or label value)")
    enforce.add_argument("--current", metavar="FILE", help="--diff: the objects on the cluster, from this YAML file")
    enforce.add_argument("--budget", metavar="NAME", help="simulate: the enforced budget to replay")
    enforce.add_argument("--month", metavar="YYYY-MM", help="simulate: the month to replay")
    enforce.add_argument(
        "--policy", choices=("cap", "hold", "drain"), help="simulate: replay under this policy (default: the budget's)"
    )
    enforce.add_argument(
        "--workload-hours",
        type=int,
        default=24,
        metavar="N",
        help="simulate: a run of a GPU is a sequence of workloads of N hours (default 24)",
    )
    enforce.add_argument(
        "--output", dest="output_format", choices=("table", "json"), default="table", help="simulate: the output"
    )

    sub.add_parser("serve", help="the scheduler daemon: every configured job on its schedule")
    report = sub.add_parser("report", help="the weekly report (`report weekly`)")
    report.add_argument("kind", choices=("weekly",), help="the report to render (weekly)")
    report.add_argument("--week", help="ISO week YYYY-Www (default: the last complete week with data)")
    report.add_argument("--team", help="preview one team lead's report (default: finance, every team)")
    report.add_argument(
        "--out",
        help="FILE.eml: the MIME message as mailed; FILE.html: the HTML with its "
        "images inlined, the CSV written beside it",
    )
    report.add_argument("--send", action="store_true", help="mail every recipient in [report] (once per week)")

    alerts = sub.add_parser("alerts", help="budgets, anomalies, idle GPUs, stale data: `alerts run` / `alerts list`")
    alerts.add_argument("action", choices=("run", "list"), help="run: evaluate every rule and notify; list: the alerts")
    alerts.add_argument("--now", type=_date, help="run: evaluate as of this time (UTC unless an offset is given)")
    alerts.add_argument(
        "--no-send", action="store_true", help="run: record the alerts, leave their notifications queued"
    )
    alerts.add_argument("--team", help="list: only alerts of this team")
    alerts.add_argument(
        "--status",
        choices=("open", "resolved", "expired", "superseded", "all"),
        default="open",
        help="list: alerts in this state (default: open)",
    )
    alerts.add_argument(
        "--rule", help="list: only this rule (budget, budget_forecast, anomaly, idle_burn, stale_data, stalled_job)"
    )
    alerts.add_argument(
        "--format", choices=("table", "json", "csv"), default="table", help="list: table (default), json or csv"
    )
    return p
