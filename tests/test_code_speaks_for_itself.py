"""The code speaks for itself: no file in txviz/, app/ or tests/ cites what a reader does not have (a
numbered issue, a QA round or finding, a section number of the tutorial or of a paper, a style-guide habit
by its number, an issue's item). A reason is written in words; a tutorial concept is named, not numbered.

The patterns are regular expressions whose own text does not match them (a digit class is not a digit),
so this file passes its own scan.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
FOLDERS = ("txviz", "app", "tests")
SUFFIXES = {".py", ".js", ".css", ".html", ".md", ".txt", ".toml", ".cfg", ".ini", ".json", ".yaml", ".yml"}

CITATIONS = {
    "an issue by number": r"\bissues?\s*#?\d",
    "a QA round or finding": r"\bQA\s*\d|\bQA\b[\s,]*(round|finding|session)\s*\d",
    "a finding by number": r"\bfindings?\s*#?\d",
    "a round by number": r"\bround\s+\d",
    "a section sign and number": r"\u00a7\s*\d",  # the sign written as its code point, so no line here holds it
    "a section by number": r"\bsection\s+\d",
    "a style habit by number": r"\b(STYLE(\.md)?|habit)\s*(habit\s*)?#?\d",
    "an issue's item by number": r"\bitem\s+\d+\s*[:,)]",
    "a test named after an issue or finding": r"\btest_\w*?(issue|finding|qa)_?\d",
}
PATTERN = re.compile("|".join(f"(?P<p{i}>{rx})" for i, rx in enumerate(CITATIONS.values())), re.IGNORECASE)
NAMES = list(CITATIONS)


def citations(text: str) -> list[tuple[int, str, str]]:
    """(line number, what kind of citation, the line) for each line of ``text`` that cites by number."""
    found = []
    for number, line in enumerate(text.splitlines(), start=1):
        for match in PATTERN.finditer(line):
            kind = NAMES[int(next(name for name, value in match.groupdict().items() if value is not None)[1:])]
            found.append((number, kind, line.strip()))
    return found


def scanned_files() -> list[Path]:
    return sorted(path for folder in FOLDERS for path in (ROOT / folder).rglob("*")
                  if path.is_file() and path.suffix in SUFFIXES and "__pycache__" not in path.parts)


def test_no_file_cites_an_issue_a_qa_round_or_a_section_number():
    assert len(scanned_files()) > 100  # the scan reads the tree, not an empty folder
    cited = [f"{path.relative_to(ROOT)}:{number}: {kind}: {line[:120]}"
             for path in scanned_files()
             for number, kind, line in citations(path.read_text(encoding="utf-8", errors="replace"))]
    assert not cited, "write the reason in words instead:\n" + "\n".join(cited)


# Each citation built from parts, so that this file's own text holds none of them whole.
@pytest.mark.parametrize("line, kind", [
    ("# see " + "issue " + "17", "an issue by number"),
    ('"""Fixed in ' + "issues #" + '74."""', "an issue by number"),
    ("(" + "QA" + "2 find" + "ing 3)", "a QA round or finding"),
    ("(" + "QA" + ", session 13)", "a QA round or finding"),
    ("# " + "finding " + "8: Gemma reads 987 tokens", "a finding by number"),
    ("(QA " + "round " + "2)", "a QA round or finding"),
    ('"""Normalization (see ' + "\u00a7" + '2)."""', "a section sign and number"),
    ("see " + "section " + "3.1", "a section by number"),
    ("(" + "STYLE" + " 11)", "a style habit by number"),
    ("(STYLE.md " + "habit " + "9)", "a style habit by number"),
    ("# ---- " + "item " + "12: the whole bill", "an issue's item by number"),
    ("def " + "test_" + "issue_12_keeps_state():", "a test named after an issue or finding"),
])
def test_each_kind_of_citation_is_caught(line, kind):
    assert [found for _, found, _ in citations(line)][:1] == [kind]


@pytest.mark.parametrize("line", [
    "weights around 0, norms around 1",
    "round(tokens / seconds, 1)",
    "a 64-token prompt in 0.7 s (Dao et al. 2022)",
    "the tutorial's \"it\" example of coreference",
    "the KV cache issues one update per layer",
    "items 0..3 of the list",
])
def test_ordinary_words_are_not_citations(line):
    assert citations(line) == []
