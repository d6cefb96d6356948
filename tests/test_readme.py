"""The README reads as it should: setup first, balanced fences, samples that match their commands,
links that exist, and short enough for a first read (CPU)."""

import importlib.util
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
README = (ROOT / "README.md").read_text()


def test_setup_comes_first_and_the_page_stays_short():
    assert len(README.encode()) <= 15 * 1024
    headings = re.findall(r"^## (.+)$", README, re.MULTILINE)
    assert headings[:2] == ["Setup", "First steps, no GPU needed"]
    assert 'pip install -e ".[dev]"' in README and "python -m pytest" in README


def test_every_fence_is_closed_and_holds_no_prose():
    """A missing fence once swallowed the command table and a code example into one block."""
    from markdown_it import MarkdownIt

    fences = [t for t in MarkdownIt().parse(README) if t.type == "fence"]
    assert len(fences) == README.count("\n```") // 2 and README.count("\n```") % 2 == 0
    for f in fences:
        assert "\n## " not in f.content and "| command |" not in f.content, f.content[:200]


def test_local_links_exist():
    for target in re.findall(r"\]\(([^)#:]+)(?:#[^)]*)?\)", README):
        assert (ROOT / target).exists(), target


def test_samples_are_what_their_commands_print():
    spec = importlib.util.spec_from_file_location("readme_samples", ROOT / "benchmarks" / "readme_samples.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    found = mod.samples(README)
    assert found, "the README has a sample output"
    for command, shown in found:
        assert mod.run(command) == shown, f"{command}: run benchmarks/readme_samples.py"
