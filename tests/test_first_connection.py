"""The first connection works as pasted: `init`, the config and `doctor` take ``s3://bucket/prefix/``, bucket ARNs
and trailing slashes and say what they understood; an ``aws_cur`` prefix anywhere from the bucket root down to
the export's own folder finds its manifests in `ingest` as `doctor` does (moto's S3 server on loopback); and
`doctor` says which features a config with a bill and no GPU metrics leaves unknown."""

from __future__ import annotations

import io
from decimal import Decimal

import pytest

from gpufinops.ingest.core import bucket_url
from gpufinops.interfaces import cli, doctor, init_cmd
from gpufinops.jobs import config as config_mod
from tests import aws_cur_data as data
from tests.aws_loopback import moto_s3, upload_tree, use_dummy_credentials

BUCKET = "acme-cur"
EXPORT = "gpufinops-export"  # the export's own folder, under cur2/ in the bucket


@pytest.mark.parametrize(
    ("pasted", "bucket", "prefix"),
    [
        ("acme-cur", "acme-cur", ""),
        ("acme-cur/", "acme-cur", ""),
        ("s3://acme-cur/", "acme-cur", ""),
        (" s3://acme-cur/cur2/gpufinops-export/ ", "acme-cur", "cur2/gpufinops-export"),
        ("arn:aws:s3:::acme-cur", "acme-cur", ""),
        ("arn:aws:s3:::acme-cur/cur2/", "acme-cur", "cur2"),
        ("https://acme-cur.s3.us-east-1.amazonaws.com/cur2/", "acme-cur", "cur2"),
    ],
)
def test_pasted_buckets_are_a_bucket_and_a_prefix(pasted, bucket, prefix) -> None:
    url = bucket_url.parse(pasted, "s3")
    assert (url.bucket, url.prefix) == (bucket, prefix)
    assert (url.understood() is None) == (pasted == bucket)
    assert bucket_url.parse("gs://acme-billing/exports/", "gs").prefix == "exports"


@pytest.mark.parametrize("bad", ["s3://", "Acme_Cur", "gs://acme-cur/", "arn:aws:s3:::"])
def test_a_bad_bucket_is_one_sentence_naming_the_rule(bad, tmp_path, capsys) -> None:
    with pytest.raises(ValueError, match=r"bucket") as raised:
        bucket_url.parse(bad, "s3")
    assert "\n" not in str(raised.value)
    args = cli._parser().parse_args(["init", "--out", str(tmp_path / "g.toml"), "--aws-cur-bucket", bad])
    assert init_cmd.run(args) == 2
    assert "bucket" in capsys.readouterr().err and not (tmp_path / "g.toml").exists()


def test_init_takes_an_s3_url_as_a_flag_and_interactively(tmp_path, capsys) -> None:
    out = tmp_path / "flag.toml"
    args = cli._parser().parse_args(["init", "--out", str(out), "--aws-cur-bucket", f"s3://{BUCKET}/cur2/{EXPORT}/"])
    assert init_cmd.run(args) == 0
    assert f"as bucket {BUCKET}, prefix cur2/{EXPORT}" in capsys.readouterr().out
    opts = config_mod.load(str(out), environ={}).sources["aws_cur"].parsed
    assert (opts.bucket, opts.prefix) == (BUCKET, f"cur2/{EXPORT}")
    answers = iter(["", f"arn:aws:s3:::{BUCKET}/cur2/"])  # the warehouse, the bucket; every other one: Enter
    asked = tmp_path / "asked.toml"
    args = cli._parser().parse_args(["init", "--out", str(asked), "--interactive"])
    assert init_cmd.run(args, prompt=lambda _q: next(answers, "")) == 0
    assert "as bucket acme-cur, prefix cur2" in capsys.readouterr().out
    opts = config_mod.load(str(asked), environ={}).sources["aws_cur"].parsed
    assert (opts.bucket, opts.prefix) == (BUCKET, "cur2")


def test_a_config_with_a_pasted_url_loads_normalised(tmp_path) -> None:
    path = tmp_path / "g.toml"
    path.write_text(f'[sources.aws_cur]\ntype = "aws_cur"\nbucket = "s3://{BUCKET}/cur2/"\nprefix = "{EXPORT}/"\n')
    opts = config_mod.load(str(path), environ={}).sources["aws_cur"].parsed
    assert (opts.bucket, opts.prefix) == (BUCKET, f"cur2/{EXPORT}")
    path.write_text('[sources.aws_cur]\ntype = "aws_cur"\nbucket = "s3://"\n')
    with pytest.raises(config_mod.ConfigError, match=r"sources\.aws_cur\.bucket: 's3://' is not an S3 bucket"):
        config_mod.load(str(path), environ={})


@pytest.fixture
def cur_bucket(tmp_path, monkeypatch):
    """A CUR 2.0 export delivered to s3://acme-cur/cur2/gpufinops-export/ on moto."""
    use_dummy_credentials(monkeypatch)
    monkeypatch.setenv("COLUMNS", "400")
    lines = data.lines("111122223333", "2026-10", Decimal(1))
    root = tmp_path / "bucket"
    data.write_cur2(root, {"2026-10": lines}, export=EXPORT, prefix="cur2")
    with moto_s3() as endpoint:
        upload_tree(endpoint, BUCKET, "cur2", root)
        yield endpoint, len(lines)


@pytest.mark.parametrize("prefix", ["", "cur2", "cur2/", f"cur2/{EXPORT}", f"cur2/{EXPORT}/"])
def test_ingest_finds_the_manifests_from_the_bucket_root_down_to_the_export_folder(
    cur_bucket, tmp_path, prefix
) -> None:
    endpoint, rows = cur_bucket
    config = tmp_path / "g.toml"
    config.write_text(
        f'[warehouse]\npath = "wh.duckdb"\n[sources.aws_cur]\ntype = "aws_cur"\nbucket = "s3://{BUCKET}/"\n'
        + (f'prefix = "{prefix}"\n' if prefix else "")  # an empty string is refused: leave the key out
        + f'endpoint_url = "{endpoint}"\n'
    )
    buffer = io.StringIO()
    assert doctor.run(str(config), timeout=30.0, out=buffer) == 0, buffer.getvalue()
    assert "1 manifest(s)" in buffer.getvalue() and f"understood 's3://{BUCKET}/'" in buffer.getvalue()
    assert cli.main(["--config", str(config), "ingest"]) == 0
    from gpufinops.warehouse import db

    with db.reader(tmp_path / "wh.duckdb") as con:
        assert con.execute("SELECT count(*) FROM cost_line_items").fetchall()[0][0] == rows


def test_doctor_says_which_features_a_bill_alone_leaves_unknown(tmp_path, monkeypatch) -> None:
    monkeypatch.setenv("COLUMNS", "200")
    (tmp_path / "cur").mkdir()
    config = tmp_path / "g.toml"
    config.write_text('[sources.aws_cur]\ntype = "aws_cur"\npath = "cur"\n')
    buffer = io.StringIO()
    doctor.run(str(config), timeout=5.0, out=buffer)
    printed = " ".join(buffer.getvalue().split())
    assert "Features that stay unknown with these sources" in printed
    assert "Idle GPU cost" in printed and "Idle GPU findings" in printed and "dcgm_exporter" in printed
    config.write_text(
        '[sources.aws_cur]\ntype = "aws_cur"\npath = "cur"\n'
        '[sources.gpu]\ntype = "dcgm_exporter"\ntargets = ["m/*.prom"]\n'
    )
    buffer = io.StringIO()
    doctor.run(str(config), timeout=5.0, out=buffer)
    printed = " ".join(buffer.getvalue().split())
    assert "Idle GPU cost" not in printed and "Idle GPU findings" not in printed  # metrics complete them
    assert "Storage tier findings" in printed  # still no storage inventory
