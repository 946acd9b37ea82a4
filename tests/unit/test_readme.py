"""The README keeps its promises: short, every link resolves, every ``sweeper`` flag exists.

A newcomer reads the README first and copies its commands, so a renamed flag, a moved page or
a README grown back past a five-minute read must fail here, not in the reader's terminal. The
``helm`` commands need helm to render and are checked in ``tests/chart/test_readme_helm.py``.
"""

from __future__ import annotations

import functools
import re
import tomllib
from pathlib import Path

import pytest
import yaml

from sweeper.cli import command
from tests.cli_runner import runner
from tests.markdown import CODE_SPAN, LINK, anchors, code_lines, prose

REPO = Path(__file__).resolve().parents[2]
README = REPO / "README.md"
MAX_WORDS = 2500

# Every Markdown page a reader follows links through.
PAGES = sorted(
    [
        README,
        REPO / "CHANGELOG.md",
        REPO / "SECURITY.md",
        REPO / "CONTRIBUTING.md",
        REPO / "chart" / "README.md",
        *(REPO / "docs").glob("*.md"),
    ]
)
# The pages whose shell examples run the sweeper.
COMMAND_PAGES = [README, *sorted((REPO / "docs").glob("*.md"))]

# An option's names on a help line: two spaces, then the names before the description.
_HELP_OPTION = re.compile(r"^  (-\S.*?)(?:\s{2,}|$)")
_FLAG = re.compile(r"^-{1,2}[A-Za-z][\w-]*$")
_SWEEPER = re.compile(r"^(?:\$\s+)?(?:\.venv/bin/)?sweeper(?:\s|$)")


def words(text: str) -> int:
    """Words as ``wc -w`` counts them: runs of non-blank characters."""
    return len(text.split())


def broken_links(page: Path, text: str) -> list[str]:
    """The relative links of a page whose file or anchor does not exist."""
    broken = []
    for match in LINK.finditer(CODE_SPAN.sub("", prose(text))):
        target = match.group(2)
        if re.match(r"^[a-z][a-z0-9+.-]*:", target):  # https:, mailto:: not ours to check
            continue
        path, _, anchor = target.partition("#")
        if not path:
            if anchor not in anchors(text):
                broken.append(f"{target}: no such heading")
            continue
        resolved = (page.parent / path).resolve()
        if not resolved.exists():
            broken.append(f"{target}: no such file")
        elif (
            anchor
            and resolved.suffix == ".md"
            and anchor not in anchors(resolved.read_text(encoding="utf-8"))
        ):
            broken.append(f"{target}: no such heading")
    return broken


def shown_flags(text: str) -> set[str]:
    """The flags of every ``sweeper`` command a page shows, in code blocks and code spans."""
    commands = [line.strip() for line in code_lines(text)]
    commands += [span.strip("`") for span in CODE_SPAN.findall(prose(text))]
    flags = set()
    for line in commands:
        if not _SWEEPER.match(line):
            continue
        for token in line.split("#", 1)[0].split()[1:]:
            name = token.split("=", 1)[0]
            if _FLAG.match(name):
                flags.add(name)
    return flags


@functools.cache
def help_flags() -> frozenset[str]:
    """Every option name ``sweeper --help`` lists."""
    result = runner().invoke(command, ["--help"], prog_name="sweeper")
    assert result.exit_code == 0, result.output
    names = set()
    for line in result.output.splitlines():
        match = _HELP_OPTION.match(line)
        if match:
            names |= {n for n in re.split(r"[\s,/]+", match.group(1)) if _FLAG.match(n)}
    return frozenset(names)


def test_the_readme_is_a_five_minute_read() -> None:
    assert words(README.read_text(encoding="utf-8")) <= MAX_WORDS


@pytest.mark.parametrize("page", PAGES, ids=lambda p: str(p.relative_to(REPO)))
def test_every_relative_link_resolves(page: Path) -> None:
    assert broken_links(page, page.read_text(encoding="utf-8")) == []


@pytest.mark.parametrize("page", COMMAND_PAGES, ids=lambda p: str(p.relative_to(REPO)))
def test_every_sweeper_flag_shown_exists(page: Path) -> None:
    assert shown_flags(page.read_text(encoding="utf-8")) - help_flags() == set()


def test_the_readme_shows_sweeper_commands() -> None:
    # The flag check above passes vacuously if the commands stop being recognised.
    assert {"--dry-run", "--action", "-n", "-l", "-o", "--explain", "--watch"} <= shown_flags(
        README.read_text(encoding="utf-8")
    )


def test_the_help_parser_reads_every_option_form() -> None:
    assert {"-n", "--namespace", "--leader-elect", "--no-leader-elect", "-h", "--version"} <= (
        help_flags()
    )


def test_the_readme_keeps_the_two_set_up_commands() -> None:
    text = README.read_text(encoding="utf-8")
    lines = code_lines(text)
    assert "python3 -m venv .venv && .venv/bin/pip install . && .venv/bin/sweeper --dry-run" in (
        lines
    )
    assert "scripts/test" in lines
    # Both stay true: the package installs a `sweeper` command, and CI runs scripts/test.
    scripts = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]["scripts"]
    assert "sweeper" in scripts
    assert "exec scripts/test" in (REPO / ".ci" / "run").read_text()


def test_the_release_name_is_not_doubled() -> None:
    # The chart's fullname is the release name alone when it contains the chart's name;
    # otherwise every object is named "<release>-kubeflow-deadline-sweeper".
    chart = yaml.safe_load((REPO / "chart" / "Chart.yaml").read_text())["name"]
    releases = {
        line.split()[2]
        for line in code_lines(README.read_text(encoding="utf-8"))
        if re.match(r"^helm (install|upgrade|uninstall) ", line)
    }
    assert releases
    assert all(chart in release for release in releases), releases


def test_nothing_in_the_readme_points_outside_the_repository() -> None:
    text = README.read_text(encoding="utf-8")
    assert "../" not in text


# The checks themselves: each catches what it exists for.


@pytest.mark.parametrize(
    ("text", "broken"),
    [
        pytest.param("[a](no-such-file.md)", ["no-such-file.md: no such file"], id="file"),
        pytest.param("# Here\n[a](#there)", ["#there: no such heading"], id="anchor"),
        pytest.param("# Here\n[a](#here)", [], id="own-anchor"),
        pytest.param("## Why? (really)\n[a](#why-really)", [], id="punctuation"),
        pytest.param("# A\n# A\n[a](#a-1)", [], id="repeated-heading"),
        pytest.param(
            "```\n# not a heading\n```\n[a](#not-a-heading)",
            ["#not-a-heading: no such heading"],
            id="fenced-heading",
        ),
        pytest.param("`[a](nowhere.md)` and [b](https://example.com/x)", [], id="code-and-url"),
        pytest.param("[a](test_readme.py)", [], id="a-file"),
    ],
)
def test_the_link_check(text: str, broken: list[str]) -> None:
    assert broken_links(Path(__file__), text) == broken


def test_the_link_check_reads_another_page_headings() -> None:
    assert broken_links(README, "[a](docs/cli.md#exit-codes)") == []
    assert broken_links(README, "[a](docs/cli.md#exit-codez)") == [
        "docs/cli.md#exit-codez: no such heading"
    ]


def test_the_flag_check_catches_an_unknown_flag() -> None:
    text = "```sh\nsweeper --dry-run \\\n  --no-such-flag=1  # --not-this\nkubectl get -A\n```\n"
    assert shown_flags(text) - help_flags() == {"--no-such-flag"}
    assert shown_flags("Run `sweeper --nope` or `--alone`.") == {"--nope"}


def test_words_count_as_wc_does() -> None:
    assert words("a  b\n`c` d-e\n") == 4


def test_the_install_page_waits_for_a_run_as_the_quick_start_does() -> None:
    # tests/e2e/test_first_hour.py runs the README's wait against a real kube-apiserver.
    def waits(text: str) -> list[str]:
        joined = re.sub(r"\\\n\s*", "", text)
        return [ln for ln in code_lines(joined) if ln.startswith("kubectl ") and " wait " in ln]

    install = (REPO / "docs" / "install.md").read_text(encoding="utf-8")
    (readme,) = waits(README.read_text(encoding="utf-8"))
    assert waits(install) == [readme]
