"""Every Markdown file the repository ships renders as meant (CPU): fences balanced, no prose
swallowed into a code block, and every local link - file and #anchor - pointing at something
that exists."""

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PAGES = sorted(p for p in ROOT.rglob("*.md") if not any(part.startswith(".") or part in ("node_modules",)
                                                          for part in p.relative_to(ROOT).parts))


def slug(heading: str) -> str:
    """GitHub's anchor for a heading: lower case, punctuation but hyphens and underscores dropped,
    spaces to hyphens."""
    text = re.sub(r"<[^>]+>", "", heading).strip().lower()
    text = re.sub(r"[^\w\- ]", "", text)
    return text.replace(" ", "-")


def anchors(path: Path) -> set[str]:
    from markdown_it import MarkdownIt

    tokens = MarkdownIt().parse(path.read_text())
    seen: dict[str, int] = {}
    out = set()
    for i, t in enumerate(tokens):
        if t.type == "heading_open":
            base = slug(tokens[i + 1].content)
            n = seen.get(base, 0)
            seen[base] = n + 1
            out.add(base if n == 0 else f"{base}-{n}")
    return out


@pytest.mark.parametrize("page", PAGES, ids=lambda p: str(p.relative_to(ROOT)))
def test_fences_are_balanced_and_hold_no_prose(page):
    from markdown_it import MarkdownIt

    text = page.read_text()
    opening = re.findall(r"^\s*```", text, re.MULTILINE)
    assert len(opening) % 2 == 0, f"{page.name}: {len(opening)} fence lines (one unclosed)"
    for t in MarkdownIt().parse(text):
        if t.type == "fence":
            assert not re.search(r"^#{1,4} \w", t.content, re.MULTILINE), f"{page.name}: a heading inside a code block"


@pytest.mark.parametrize("page", PAGES, ids=lambda p: str(p.relative_to(ROOT)))
def test_local_links_and_anchors_exist(page):
    text = re.sub(r"```.*?```", "", page.read_text(), flags=re.DOTALL)
    for target in re.findall(r"\]\(([^)\s]+)\)", text):
        if re.match(r"[a-z]+:", target):
            continue  # (http:, mailto:)
        file, _, anchor = target.partition("#")
        dest = (page.parent / file).resolve() if file else page
        assert dest.exists(), f"{page.relative_to(ROOT)}: link to {target}: no such file"
        if anchor and dest.suffix == ".md":
            assert anchor in anchors(dest), f"{page.relative_to(ROOT)}: link to {target}: no such heading"


GUIDES = [p for p in PAGES if "results" not in p.relative_to(ROOT).parts and not p.stem.endswith("_record")]


@pytest.mark.parametrize("page", GUIDES, ids=lambda p: str(p.relative_to(ROOT)))
def test_scripts_a_page_runs_exist(page):
    """A command a page tells the reader to run names a script that is in the tree (records of past
    runs under benchmarks/results/ keep the commands they ran)."""
    for script in re.findall(r"(?:python3?|bash) (benchmarks/[\w./-]+\.(?:py|sh))", page.read_text()):
        assert (ROOT / script).is_file(), f"{page.relative_to(ROOT)} runs {script}, which is not in the tree"


def test_the_benchmarks_index_lists_every_script():
    index = (ROOT / "benchmarks" / "README.md").read_text()
    scripts = sorted(p.name for p in (ROOT / "benchmarks").iterdir() if p.suffix in (".py", ".sh"))
    missing = [s for s in scripts if f"`{s}`" not in index]
    assert not missing, f"benchmarks/README.md does not list {missing}"
