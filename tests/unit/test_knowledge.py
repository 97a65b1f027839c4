"""docs/knowledge.md: every id a rule or a validate verdict cites exists, with public links."""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

from stormdeck.advisors import knowledge
from stormdeck.advisors.rules import ALL
from stormdeck.advisors.validate import judge

ROOT = Path(__file__).resolve().parents[2]
DOC = ROOT / "docs" / "knowledge.md"


def test_the_package_reads_the_same_page_as_the_repository() -> None:
    # assets/knowledge.md is a link to docs/knowledge.md: one text, two places it is read.
    assert knowledge.read_text() == DOC.read_text(encoding="utf-8")


def test_every_section_has_a_title_text_and_a_public_link() -> None:
    index = knowledge.parse(DOC.read_text(encoding="utf-8"))
    assert len(index) >= 30
    for s in index.values():
        assert s.title and len(s.text) > 80, f"{s.id}: no title or too little text"
        assert s.links, f"{s.id}: no link under Sources:"
        for link in s.links:
            assert re.fullmatch(r"https?://[^\s()<>]+", link.url), (s.id, link.url)
            assert link.label.strip(), (s.id, link.url)


def test_every_rule_cites_sections_that_exist() -> None:
    index = knowledge.sections()
    for r in ALL:
        ids = knowledge.cited(r.source)
        assert ids, f"{r.id} cites nothing"
        missing = [i for i in ids if i not in index]
        # A rule written against the working notes cites "K9.4": name the section that
        # took the number over, so the fix is one line.
        hint = {m: knowledge.by_note(index).get(n, []) for m in missing
                for n in knowledge.notes_in(m)}
        assert not missing, (f"{r.id} cites {missing}, which docs/knowledge.md does not have"
                             + (f"; cite instead: {hint}" if any(hint.values()) else ""))


def test_every_validate_verdict_cites_sections_that_exist() -> None:
    index = knowledge.sections()
    for source in judge.CITES:
        missing = [i for i in knowledge.cited(source) if i not in index]
        assert not missing, f"validate cites {missing}"
    # No verdict cites a bare string any more: each source argument is one of the names.
    for path in (ROOT / "advisors" / "validate").glob("*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Call) and getattr(node.func, "id", "") == "Verdict" \
                    and len(node.args) >= 4:
                src = node.args[3]
                assert not isinstance(src, ast.Constant) or src.value == "", \
                    f"{path.name}:{node.lineno}: a verdict's source is a literal, not a CITES name"


def test_older_numbers_in_rule_texts_still_lead_to_a_section() -> None:
    """Rule texts written before this page cite "(K1.4)": each such number is listed by a
    section, so explain and the console can show the section instead."""
    notes = knowledge.by_note()
    for path in (ROOT / "advisors" / "rules").glob("*.py"):
        for n in knowledge.notes_in(path.read_text()):
            if "." in n:  # "K1" alone names a family in a module docstring
                assert n in notes, f"{path.name} cites {n}, which no section lists"
    for r in ALL:
        shown = knowledge.readable(f"{r.explanation} {r.title}")
        assert not re.search(r"\bK\d+\.\d+", shown), f"{r.id}: {shown}"


def test_readable_turns_numbers_and_ranges_into_ids() -> None:
    assert knowledge.readable("knee (K1.4)") == "knee (osd-cpu-cluster-knee)"
    assert knowledge.readable("K1.2-K1.3") == \
        "osd-cpu-single-osd-scaling, osd-cpu-used-vs-allocated"
    assert knowledge.readable("4K stripe, K99.1") == "4K stripe, K99.1"
    # A number split over two sections names the one the rule cites, where it cites one.
    assert knowledge.readable("(K1.9)") == "(host-tuned-latency-profile, msgr-secure-mode-cost)"
    assert knowledge.readable("(K1.9)", prefer=("msgr-secure-mode-cost",)) == \
        "(msgr-secure-mode-cost)"


@pytest.mark.parametrize("text, error", [
    ("## Bad Id\n\n*t*\n", "not an id"),
    ("## a-b\n\nno title\n", "no *title*"),
    ("## a-b\n\n*t*\n\n## a-b\n\n*t*\n", "twice"),
])
def test_a_malformed_page_is_refused(text: str, error: str) -> None:
    with pytest.raises(ValueError, match=re.escape(error)):
        knowledge.parse(text)


def test_the_consoles_finding_detail_shows_the_reasons_and_links() -> None:
    from stormdeck.advisors.findings import Finding, Severity
    from stormdeck.advisors.rules import BY_ID
    from stormdeck.tui.views.findings import finding_detail

    rule = BY_ID["ceph.osd.iops_per_core"]
    f = Finding(rule=rule.id, title=rule.title, severity=Severity.WARNING, target="osd.1",
                summary="s", explanation="writes at the knee (K1.4)", source=rule.source,
                state="firing", first_seen=0.0, last_seen=0.0)
    text = finding_detail(f).plain
    assert "osd-cpu-cluster-knee: In a 60-OSD cluster" in text
    assert "https://ceph.com/en/news/blog/2022/ceph-osd-cpu-scaling/" in text
    assert "https://github.com/ceph/ceph/pull/32093" in text
    assert "(K1.4)" not in text and "knee (osd-cpu-cluster-knee)" in text


def test_no_finding_names_a_working_notes_number(tmp_path: Path) -> None:
    """What check prints and the console shows names sections that ship with stormdeck:
    on every rule's bad case, no summary, explanation or step says "K1.3"."""
    from tests.unit.test_rules import CASES, EVIDENCE, run

    seen = 0
    for rule_id, (bad, _, _) in sorted(CASES.items()):
        store = EVIDENCE[rule_id](tmp_path / rule_id) if rule_id in EVIDENCE else None
        for f in run(bad(), validated=store):
            seen += 1
            for text in (f.summary, f.explanation, *f.procedure):
                assert not re.search(r"\bK\d+\.\d+", text), f"{f.rule}: {text}"
    assert seen >= len(CASES)
