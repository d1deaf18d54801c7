"""The README's tables that describe options are generated from the code, and checked (as Datasette does)."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

from gpufinops.ingest.core import docs
from gpufinops.ingest.core.registry import default_registry

README = Path(__file__).resolve().parent.parent / "README.md"


def test_the_readme_source_table_is_the_one_the_specs_generate():
    expected = docs.source_table()
    assert docs.readme_block(README.read_text()) == expected, (
        "README.md's source table drifted from the ingestor specs: run "
        "`.venv/bin/python -m gpufinops.ingest.core.docs --write README.md` and commit the result"
    )


def test_the_table_lists_every_source_type_with_its_keys():
    table = docs.source_table()
    registry = default_registry()
    rows = [line for line in table.splitlines()[2:]]
    assert [row.split("|")[1].strip() for row in rows] == [f"`{name}`" for name in registry.names()]
    prometheus = next(row for row in rows if row.startswith("| `prometheus`"))
    assert "`url`; optional" in prometheus and "`lookback_hours` (3)" in prometheus and "`7 * * * *`" in prometheus


def test_a_drifted_readme_is_caught_and_rewritten(tmp_path):
    stale = tmp_path / "README.md"
    stale.write_text(f"# x\n\n{docs.BEGIN}\n| `type` | an old hand-copied table |\n{docs.END}\n\nafter\n")
    assert docs.readme_block(stale.read_text()) != docs.source_table()
    subprocess.run(
        [sys.executable, "-m", "gpufinops.ingest.core.docs", "--write", str(stale)], check=True, cwd=README.parent
    )
    text = stale.read_text()
    assert docs.readme_block(text) == docs.source_table() and text.startswith("# x\n") and text.endswith("after\n")


def test_one_type_reference_prints_types_defaults_and_descriptions():
    out = subprocess.run(
        [sys.executable, "-m", "gpufinops.ingest.core.docs", "cloudwatch_gpu"],
        capture_output=True,
        text=True,
        check=True,
        cwd=README.parent,
    ).stdout
    assert "  region (a string; required): " in out
    assert "  lookback_hours (a number; default 3): " in out
    bad = subprocess.run(
        [sys.executable, "-m", "gpufinops.ingest.core.docs", "nope"], capture_output=True, text=True, cwd=README.parent
    )
    assert bad.returncode == 2 and "unknown source type 'nope'" in bad.stderr


def _table_after(heading: str) -> list[list[str]]:
    """The cells of the first Markdown table after the line starting with ``heading``."""
    lines = README.read_text().splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith(heading))
    first = next(i for i in range(start, len(lines)) if lines[i].startswith("|"))
    rows = []
    for line in lines[first + 2 :]:
        if not line.startswith("|"):
            break
        rows.append([cell.strip() for cell in line.strip("|").split("|")])
    return rows


def test_the_readme_command_table_lists_every_cli_command_and_no_other():
    import argparse

    from gpufinops.jobs import cli

    parser = cli._parser()  # noqa: SLF001
    (sub,) = [a for a in parser._actions if isinstance(a, argparse._SubParsersAction)]  # noqa: SLF001
    documented = {cells[0].strip("`").split()[1] for cells in _table_after("| command | does |")}
    assert documented == set(sub.choices)


def test_the_readme_daemon_table_gives_the_code_s_default_schedules():
    from gpufinops.jobs.serve_settings import DEFAULT_FEED, DEFAULT_RECOMMEND, DEFAULT_REPORT

    rows = {cells[0].strip("`"): cells[1] for cells in _table_after("| job | default schedule |")}
    for job, cron in (("recommend", DEFAULT_RECOMMEND), ("report", DEFAULT_REPORT), ("feed", DEFAULT_FEED)):
        assert rows[job].startswith(f"`{cron}`"), (job, rows[job])


def test_the_readme_freshness_table_gives_the_code_s_expected_lags():
    import re

    from gpufinops.warehouse.freshness import EXPECTED_LAG_HOURS

    documented: dict[str, float] = {}
    for types, lag in _table_after("| source types | expected lag |"):
        # "`aws_spot_prices` | 24 h; `aws_pricing`, `gcp_catalog` 7 days": each name takes the next figure
        text = f"{types} {lag}"
        pending: list[str] = []
        for token in re.finditer(r"`(\w+)`|(\d+) (h|days?)\b", text):
            if token.group(1):
                pending.append(token.group(1))
            else:
                hours = float(token.group(2)) * (24 if token.group(3).startswith("day") else 1)
                documented |= {name: hours for name in pending}
                pending = []
    assert documented == {name: hours for name, (_, hours) in EXPECTED_LAG_HOURS.items()}


SHELL_FENCES = ("sh", "bash", "shell", "console", "")


def readme_commands(text: str) -> list[str]:
    """The shell commands the README gives: lines of its shell code blocks and inline code spans that
    start like a command (``.venv/bin/``, ``make``, ``python``, ``pip``), comments dropped."""
    text = re.sub(r"<!--.*?-->", "", text, flags=re.S)
    fence = re.compile(r"^```([\w-]*)\n(.*?)^```", flags=re.M | re.S)
    lines = [
        line.strip().removeprefix("$ ")
        for lang, body in fence.findall(text)
        if lang in SHELL_FENCES
        for line in body.splitlines()
    ]
    spans = re.findall(r"(?<!`)(`+)(?!`)(.+?)(?<!`)\1(?!`)", fence.sub("", text), flags=re.S)  # `a`, ``a`b``
    lines += [" ".join(span.split()) for _, span in spans]
    commands = [re.sub(r"\s+#.*", "", line).strip() for line in lines]
    # a program named alone (`.venv/bin/gpufinops`) is a name in a sentence, not a command to run
    return [c for c in commands if re.match(r"(\.venv/bin/|make |python3? |pip )", c) and " " in c]


def command_problem(command: str) -> str | None:
    """Why a README command would not run as written in a clone after `make install`, or None."""
    import importlib.util
    import shlex
    import tomllib

    from gpufinops.jobs import cli

    root = README.parent
    words = shlex.split(command)
    if words[0] in ("python", "python3"):
        return "a bare `python` has no gpufinops in a clone: write `.venv/bin/python`"
    if words[0] == "make":
        targets = set(re.findall(r"^([\w.-]+):", (root / "Makefile").read_text(), flags=re.M))
        missing = [w for w in words[1:] if "=" not in w and w not in targets]
        return f"no make target {missing[0]!r}" if missing else None
    if words[0].startswith(".venv/bin/"):
        words[0] = words[0].removeprefix(".venv/bin/")
    if words[0] in ("pip", "python") and "install" in words:
        extras = set(tomllib.loads((root / "pyproject.toml").read_text())["project"]["optional-dependencies"])
        for spec in re.findall(r"(?:^|gpufinops|\.)\[([\w,-]+)\]", command):
            unknown = set(spec.split(",")) - extras
            if unknown:
                return f"no extra {sorted(unknown)[0]!r} in pyproject.toml"
        return None
    if words[0] == "python":
        if words[1:2] == ["-m"]:
            return None if importlib.util.find_spec(words[2]) else f"no module {words[2]!r}"
        return None if (root / words[1]).is_file() else f"no file {words[1]!r}"
    if words[0] == "gpufinops":
        if any(w in ("…", "COMMAND") for w in words):  # the usage line: its options must exist
            options = {o for a in cli._parser()._actions for o in a.option_strings}  # noqa: SLF001
            flags = [w.strip("[]") for w in words[1:] if w.startswith("[-")]
            strange = [f for f in flags if f not in options]
            return f"no option {strange[0]!r}" if strange else None
        try:
            cli._parser().parse_args(words[1:])  # noqa: SLF001
        except SystemExit:
            return "gpufinops does not accept these arguments"
        return None
    if not (Path(sys.executable).parent / words[0]).exists():
        return f"no {words[0]!r} in .venv/bin"
    return None


def test_every_readme_command_names_what_exists():
    """`python -m gpufinops.ingest.core.docs` and `python docs/capture_screenshots.py` once stood in
    the README: no `python` on a clone's PATH has gpufinops. Every make target, module, script, extra
    and gpufinops command a README command names exists."""
    commands = readme_commands(README.read_text())
    assert len(commands) > 20 and any(c.startswith(".venv/bin/gpufinops ") for c in commands)
    problems = {c: p for c in commands if (p := command_problem(c))}
    assert not problems, problems


@pytest.mark.parametrize(
    ("command", "problem"),
    [
        ("python -m gpufinops.ingest.core.docs", "a bare `python`"),
        ("make demos", "no make target 'demos'"),
        (".venv/bin/python -m gpufinops.ingest.core.nodocs", "no module"),
        (".venv/bin/python docs/capture_screenshot.py", "no file"),
        (".venv/bin/pip install -e '.[aws,gpc]'", "no extra 'gpc'"),
        (".venv/bin/gpufinops recomend", "does not accept"),
        (".venv/bin/gpufinops [--confg PATH] COMMAND …", "no option '--confg'"),
    ],
)
def test_a_broken_command_is_caught(command, problem):
    assert problem in (command_problem(command) or "")
