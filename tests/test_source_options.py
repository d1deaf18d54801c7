"""Source options: declared once per ingestor (a typed frozen ``Options``), validated from the declaration.

Config validation (exit 2, one sentence naming the source and the key) and the ingestor's typed view
both come from the dataclass; the runner computes each run's load window from the spec.
"""

from __future__ import annotations

import dataclasses
import subprocess
import sys
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from gpufinops.ingest.core.registry import Cursor, Freshness, IngestorMeta, default_registry
from gpufinops.ingest.core.runner import load_window
from gpufinops.ingest.core.spec import OptionError, SourceOptions, describe, option
from gpufinops.jobs import config
from gpufinops.jobs.config import ConfigError

REGISTRY = default_registry()


def load(tmp_path: Path, source: str) -> config.Config:
    path = tmp_path / "gpufinops.toml"
    path.write_text(f"[sources.x]\n{source}\n")
    return config.load(path, environ={})


@pytest.mark.parametrize(
    "source, message",
    [
        # wrong types: the message says what the declaration wants
        ('type = "prometheus"\nurl = 5', "sources.x.url: must be a string, not 5"),
        (
            'type = "prometheus"\nurl = "http://p"\nlookback_hours = "3"',
            "sources.x.lookback_hours: must be a number, not '3'",
        ),
        ('type = "dcgm_exporter"\ntargets = "a"\nretries = 2.5', "sources.x.retries: must be a whole number, not 2.5"),
        (
            'type = "dcgm_exporter"\ntargets = "a"\nretries = true',
            "sources.x.retries: must be a whole number, not True",
        ),
        ('type = "gcp_billing_export"\npath = "a"\npush_down = "yes"', "sources.x.push_down: must be true or false"),
        (
            'type = "aws_cur"\npath = "a"\nformat = "csv"',
            'sources.x.format: must be "auto", "cur2", "legacy" or "focus", not \'csv\'',
        ),
        (
            'type = "nvidia_smi_csv"\npath = "a"\nresource_map = {h = 1}',
            "sources.x.resource_map: must be a table of strings, not {'h': 1}",
        ),
        (
            'type = "aws_spot_prices"\nregions = ["us-east-1", 2]',
            "sources.x.regions: must be a string or a list of strings",
        ),
        ('type = "focus_files"\npath = []', "sources.x.path: must be a string or a list of strings, not []"),
        (
            'type = "focus_files"\npath = "a"\non_invalid = "ignore"',
            'sources.x.on_invalid: must be "fail" or "skip_rows"',
        ),
        # cross-field rules: the Options' validate()
        ('type = "aws_cur"', "sources.x.path: set exactly one of bucket (S3) or path"),
        ('type = "aws_cur"\nbucket = "b"\npath = "p"', "sources.x.path: set exactly one of bucket (S3) or path"),
        ('type = "aws_cur"\nengine = "athena"\ndatabase = "d"', 'sources.x.table: engine = "athena" needs table'),
        ('type = "gcp_billing_export"', "sources.x.path: set either project, dataset and table (BigQuery) or path"),
        (
            'type = "gcp_billing_export"\nproject = "p"\ndataset = "d"\ntable = "t"\npath = "f"',
            "sources.x.path: set either project, dataset and table",
        ),
        (
            'type = "gcp_billing_export"\nproject = "BAD ID"\ndataset = "d"\ntable = "t"',
            "sources.x.project: 'BAD ID' is not a valid BigQuery project id",
        ),
        (
            'type = "gcp_billing_export"\npath = "f"\nlookback_days = -1',
            "sources.x.lookback_days: must be a non-negative number (got -1)",
        ),
        (
            'type = "gcp_catalog"\noutputs = ["price_catalog", "prices"]',
            "sources.x.outputs: must list some of price_catalog",
        ),
        # keys
        ('type = "cloudwatch_gpu"', "sources.x.region: missing required key for source type cloudwatch_gpu"),
        (
            'type = "onprem"\npue = 1.2\nnode_groups = [{name = "a"}]',
            "sources.x.energy_usd_per_kwh: missing required key for source type onprem",
        ),
        (
            'type = "aws_spot_advisor"\nurls = ["u"]',
            "sources.x.urls: unknown key for source type aws_spot_advisor "
            "(did you mean `url`? allowed: connect_timeout_s, enabled, max_body_mb, max_listing_s, max_pages, path, "
            "regions, schedule, timeout_s, type, url)",
        ),
    ],
)
def test_a_bad_source_option_is_one_sentence_naming_the_source_and_key(tmp_path, source, message):
    with pytest.raises(ConfigError) as raised:
        load(tmp_path, source)
    assert str(raised.value).startswith(message), str(raised.value)
    assert "\n" not in str(raised.value)


def test_the_cli_refuses_a_bad_option_at_start_up_with_exit_2(tmp_path):
    path = tmp_path / "gpufinops.toml"
    path.write_text('[sources.prom]\ntype = "prometheus"\nurl = "http://p:9090"\nbackfill_days = "a week"\n')
    proc = subprocess.run(
        [sys.executable, "-m", "gpufinops.interfaces.cli", "--config", str(path), "ingest"],
        capture_output=True,
        text=True,
    )
    assert proc.returncode == 2, proc.stderr
    assert "sources.prom.backfill_days: must be a number, not 'a week'" in proc.stderr


def test_a_good_table_parses_into_the_typed_options_with_defaults():
    meta = REGISTRY.get("prometheus").meta
    opts = meta.parse_options(
        {"type": "prometheus", "url": "http://u:pw@p:9090", "lookback_hours": 6, "resource_map": {"h1": "i-1"}},
        "sources.p",
        frozenset({"type"}),
    )
    assert opts.url == "http://u:pw@p:9090" and opts.lookback_hours == 6 and opts.backfill_days == 7.0
    assert opts.resource_map == {"h1": "i-1"} and opts.namespace_teams == {} and opts.on_invalid == "fail"
    assert "pw" not in repr(opts)  # a secret option stays out of reprs (and so out of logs)
    with pytest.raises(dataclasses.FrozenInstanceError):
        opts.url = "http://other"


def test_an_empty_list_means_the_default_where_it_always_did():
    spot = REGISTRY.get("aws_spot_prices").meta.parse_options({"regions": "us-east-1", "instance_types": []}, "s")
    assert spot.instance_types == [] and spot.region_names() == ["us-east-1"]  # [] → every GPU type, as before


def test_mutable_defaults_are_not_shared_between_sources():
    meta = REGISTRY.get("dcgm_exporter").meta
    a = meta.parse_options({"targets": "a"}, "sources.a")
    b = meta.parse_options({"targets": "b"}, "sources.b")
    assert a.resource_map == b.resource_map == {} and a.resource_map is not b.resource_map


def test_keys_are_derived_from_the_declaration():
    cloudwatch = REGISTRY.get("cloudwatch_gpu").meta.options
    assert cloudwatch.required_keys() == ("region",)
    assert {
        "namespace",
        "instance_ids",
        "endpoint_url",
        "max_attempts",
        "lookback_hours",
        "backfill_days",
        "resource_map",
        *("connect_timeout_s", "timeout_s", "max_body_mb", "max_pages", "max_listing_s"),  # its network bounds
    } == set(cloudwatch.optional_keys())
    onprem = REGISTRY.get("onprem").meta.options
    assert set(onprem.required_keys()) == {"node_groups", "pue", "energy_usd_per_kwh"}


@pytest.mark.parametrize("source_type", REGISTRY.names())
def test_every_option_of_every_source_says_what_it_is(source_type):
    meta = REGISTRY.get(source_type).meta
    assert meta.description and meta.options.fields(), source_type
    for f in meta.options.fields():
        assert f.metadata.get("doc"), f"{source_type}.{f.name} has no description"


def test_describe_names_the_types_in_words():
    assert describe(str | list[str]) == "a string or a list of strings"
    assert describe(dict[str, str]) == "a table of strings"
    assert describe(float | None) == "a number"


@dataclasses.dataclass(frozen=True, kw_only=True)
class _Hourly(SourceOptions):
    lookback_hours: float = option(3.0, "hours re-read")

    def window_lookback(self, declared: timedelta) -> timedelta:
        return timedelta(hours=self.lookback_hours)


def _meta(**changes) -> IngestorMeta:
    base = IngestorMeta(
        name="t",
        target_table="gpu_metrics_hourly",
        key=("hour",),
        slice_expr="hour",
        source_column="source",
        cursor=Cursor(remembers="hour", resume_item="cursor"),
        lookback=timedelta(hours=1),
        default_schedule="0 * * * *",
        options=_Hourly,
        description="a test source",
        time_range=True,
        provider=None,
        extra=None,
        transport=None,
        freshness=Freshness(kind="metrics", lag_hours=1.0),
        doctor=None,
        init=None,
    )
    return dataclasses.replace(base, **changes)


NOW = datetime(2026, 7, 1, 12, tzinfo=UTC)
STATE = {"cursor": NOW.isoformat()}


def test_the_window_starts_at_the_cursor_minus_the_options_lookback():
    window = load_window(_meta(), _Hourly(lookback_hours=5), STATE, None, None, False)
    assert window.since == NOW - timedelta(hours=5) and window.until is None and not window.ranged
    assert load_window(_meta(), _Hourly(), {}, None, None, False).since is None  # first run: the backfill
    assert load_window(_meta(), _Hourly(), STATE, None, None, True).since is None  # --full-refresh


def test_since_until_choose_the_window_only_where_the_source_honours_them():
    since, until = NOW - timedelta(days=3), NOW - timedelta(days=1)
    ranged = load_window(_meta(), _Hourly(), STATE, since, until, False)
    assert (ranged.since, ranged.until, ranged.ranged) == (since, until, True)
    only_until = load_window(_meta(), _Hourly(), STATE, None, until, False)
    assert only_until.since == NOW - timedelta(hours=3) and only_until.until == until  # from the cursor
    ignored = load_window(_meta(time_range=False), _Hourly(), STATE, since, until, False)
    assert not ignored.ranged and ignored.until is None and ignored.since == NOW - timedelta(hours=3)
    no_time_cursor = load_window(
        _meta(cursor=Cursor(remembers="file fingerprints", resume_item=None)), _Hourly(), STATE, None, None, False
    )
    assert no_time_cursor.since is None


def test_whole_hours_and_billing_periods_follow_the_window():
    window = load_window(_meta(), _Hourly(lookback_hours=2), {"cursor": "2026-07-01T12:00:00+00:00"}, None, None, False)
    assert window.whole_hours(NOW + timedelta(minutes=42), timedelta(days=7)) == (NOW - timedelta(hours=2), NOW)
    first = load_window(_meta(), _Hourly(), {}, None, None, False)
    assert first.whole_hours(NOW, timedelta(days=7)) == (NOW - timedelta(days=7), NOW)
    ranged = load_window(
        _meta(), _Hourly(), {}, datetime(2026, 5, 20, tzinfo=UTC), datetime(2026, 7, 1, tzinfo=UTC), False
    )
    assert ranged.holds_period(datetime(2026, 5, 1, tzinfo=UTC))  # the month of --since, whole
    assert ranged.holds_period(datetime(2026, 6, 1, tzinfo=UTC))
    assert not ranged.holds_period(datetime(2026, 4, 1, tzinfo=UTC))
    assert not ranged.holds_period(datetime(2026, 7, 1, tzinfo=UTC))  # --until is exclusive


def test_a_dict_passed_to_the_runner_is_checked_like_the_config(tmp_path):
    from gpufinops.ingest.core.runner import run_source

    result = run_source(REGISTRY, tmp_path / "wh.duckdb", "smi", "nvidia_smi_csv", {"path": "a", "colour": "red"})
    assert result.status == "failed" and result.error.startswith("sources.smi.colour: unknown key"), result.error
    with pytest.raises(OptionError):
        REGISTRY.get("nvidia_smi_csv").meta.parse_options({"path": 5}, "sources.smi")
