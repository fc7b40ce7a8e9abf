"""The docs cannot drift: each command's page holds its --help as the CLI prints it (cog blocks,
regenerated with `cog -r docs/commands/*.md`), every command has a page, every link resolves, and the
README stays the short way in (issue 27)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from cogapp import Cog
from ctxpipe.cli.help_render import command_names, help_markdown

ROOT = Path(__file__).resolve().parent.parent
DOCS = ROOT / "docs"
README_MAX_LINES = 400
LINK = re.compile(r"(?<!!)\[[^\]]*\]\(([^)\s]+)\)")
IMAGE = re.compile(r"!\[[^\]]*\]\(([^)\s]+)\)")


def markdown_files() -> list[Path]:
    return [ROOT / "README.md", ROOT / "CONTRIBUTING.md", *sorted(DOCS.rglob("*.md"))]


def test_every_command_has_a_page_whose_help_is_what_the_cli_prints(tmp_path: Path) -> None:
    pages = {path.stem: path for path in (DOCS / "commands").glob("*.md")}
    assert set(command_names()) <= set(pages), f"commands without a page: {set(command_names()) - set(pages)}"
    for name in command_names():
        text = pages[name].read_text(encoding="utf-8")
        assert f'help_markdown("{name}")' in text, f"{pages[name]} has no help block for {name}"
        # The block holds today's help, byte for byte (what `cog --check` also finds below).
        assert help_markdown(name) in text, f"{pages[name]}: its --help block is stale; run cog -r docs/commands/*.md"


def test_cog_finds_nothing_to_regenerate(capsys: pytest.CaptureFixture[str]) -> None:
    files = [str(path) for path in sorted((DOCS / "commands").glob("*.md"))]
    status = Cog().main(["cog", "--check", *files])
    assert status == 0, capsys.readouterr().out


def _anchors(path: Path) -> set[str]:
    """GitHub's anchors for the headings of a Markdown file."""
    anchors, fence = set(), False
    for line in path.read_text(encoding="utf-8").splitlines():
        if line.startswith("```"):
            fence = not fence
        elif not fence and line.startswith("#"):
            title = line.lstrip("#").strip().lower()
            anchors.add(re.sub(r"[^\w\- ]", "", title).replace(" ", "-"))
    return anchors


@pytest.mark.parametrize("path", markdown_files(), ids=lambda p: str(p.relative_to(ROOT)))
def test_every_relative_link_and_image_resolves(path: Path) -> None:
    text = re.sub(r"```.*?```", "", path.read_text(encoding="utf-8"), flags=re.S)
    for target in LINK.findall(text) + IMAGE.findall(text):
        if re.match(r"[a-z]+:", target):
            continue  # a URL: not this test's to fetch
        file, _, anchor = target.partition("#")
        resolved = (path.parent / file).resolve() if file else path
        assert resolved.exists(), f"{path.relative_to(ROOT)}: link to {target} points nowhere"
        if anchor and resolved.suffix == ".md":
            assert anchor in _anchors(resolved), f"{path.relative_to(ROOT)}: {target}: no such heading"


def test_the_readme_is_the_short_way_in() -> None:
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    assert len(readme.splitlines()) <= README_MAX_LINES
    for name in command_names():  # every command named, with its page
        assert f"(docs/commands/{name}.md)" in readme and f"ctxpipe {name}" in readme, name
