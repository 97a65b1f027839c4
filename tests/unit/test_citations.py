"""Each rule's cited sections exist and name a public source; knowledge.md's links resolve."""

from __future__ import annotations

import re
from pathlib import Path
from urllib.parse import unquote, urlsplit

import pytest

from stormdeck.advisors import knowledge
from stormdeck.advisors.rules import ALL
from stormdeck.advisors.validate import judge

ROOT = Path(__file__).resolve().parents[2]
DOC = ROOT / "docs" / "knowledge.md"

# Where a user can read the fact for himself: the projects' own documentation, source,
# trackers and blogs, the kernel's documentation, and vendors' manuals. (host, path
# prefix): a link on github.com counts only under the projects' organisations.
PUBLIC = (
    ("docs.ceph.com", "/"), ("ceph.io", "/"), ("ceph.com", "/"), ("tracker.ceph.com", "/"),
    ("github.com", "/ceph/"), ("github.com", "/opencurve/"), ("opencurve.io", "/"),
    ("www.opencurve.io", "/"), ("docs.kernel.org", "/"), ("www.kernel.org", "/doc/"),
    ("git.kernel.org", "/"), ("man7.org", "/linux/man-pages/"),
    ("manpages.debian.org", "/"), ("manpages.ubuntu.com", "/"),
    ("www.ibm.com", "/docs/"), ("docs.redhat.com", "/"), ("access.redhat.com", "/documentation/"),
    ("documentation.suse.com", "/"), ("github.com", "/canonical/"), ("ubuntu.com", "/ceph/"),
    ("docs.clyso.com", "/"),
)

# Cross-references in the prose: a markdown link that is not a URL, an older note number
# ("K2.3"), a section named in the text ("(section write-cache-raid-ssd-verify)", "see
# running-config"), and a repository path ("docs/mgr-failure.md").
LINK = re.compile(r"\[[^\]]*\]\(([^)\s]+)\)")
NAMED = re.compile(r"\b(?:[Ss]ections?|see)\s+([a-z0-9]+(?:-[a-z0-9]+)+)\b")
PATH = re.compile(r"(?<![\w/.~$-])((?:advisors|assets|base|bench|collectors|docs|lab|stormdeck|"
                  r"tests|tui)/[\w./-]*\w)")


def public(url: str) -> bool:
    parts = urlsplit(url)
    return parts.scheme == "https" and any(
        parts.hostname == host and parts.path.startswith(prefix) for host, prefix in PUBLIC)


def headings(page: Path) -> set[str]:
    """The anchors a Markdown renderer makes of a page's headings (as tests/unit/test_docs)."""
    text = re.sub(r"^```.*?^```", "", page.read_text(encoding="utf-8"), flags=re.M | re.S)
    return {re.sub(r"[^\w\- ]", "", h.strip().lower()).replace(" ", "-")
            for h in re.findall(r"^#+ (.+)$", text, re.M)}


def unresolved_citations(text: str) -> list[str]:
    """What is wrong with every shipped rule's and validate verdict's citations, read
    against the page `text`: one line per broken citation, empty when all resolve."""
    index = knowledge.parse(text)
    wrong = []
    sources = [(r.id, r.source) for r in ALL] + [(f"validate {s}", s) for s in judge.CITES]
    for who, source in sources:
        cited = knowledge.cited(source)
        if not cited:
            wrong.append(f"{who} cites nothing")
        for sid in cited:
            section = index.get(sid)
            if section is None:
                wrong.append(f"{who} cites {sid}, which docs/knowledge.md does not have")
            elif not any(public(link.url) for link in section.links):
                wrong.append(f"{who} cites {sid}, whose Sources name nothing public a user "
                             f"can open: {[link.url for link in section.links]}")
    return wrong


def unresolved_references(text: str, page: Path = DOC) -> list[str]:
    """Every cross-reference in the page `text` (read as if at `page`) that leads nowhere."""
    index = knowledge.parse(text)
    notes = knowledge.by_note(index)
    own = {re.sub(r"[^\w\- ]", "", h.strip().lower()).replace(" ", "-")
           for h in re.findall(r"^#+ (.+)$", text, re.M)}
    wrong = []
    for target in LINK.findall(text):
        if re.match(r"[a-z]+:", target):  # a URL: public() judges those a rule rests on
            continue
        file, _, anchor = unquote(target).partition("#")
        dest = (page.parent / file).resolve() if file else page
        if file and not dest.exists():
            wrong.append(f"link to {target}: no such file")
        elif anchor and anchor not in (own if not file else headings(dest)
                                       if dest.suffix == ".md" else set()):
            wrong.append(f"link to {target}: no such heading")
    prose = "\n".join(line for line in text.splitlines()
                      if not line.strip().startswith(("Earlier notes:", "- [")))
    for note in knowledge.notes_in(prose):
        if "." in note and note not in notes:
            wrong.append(f"{note}: no section took that number over")
    for sid in NAMED.findall(LINK.sub("]", prose)):
        if sid not in index:
            wrong.append(f"names section {sid}, which the page does not have")
    for path in sorted(set(PATH.findall(LINK.sub("]", prose)))):
        if not (ROOT / path).exists():
            wrong.append(f"names {path}, which the repository does not have")
    return wrong


def test_every_rule_cites_sections_with_a_public_source() -> None:
    assert len(ALL) >= 44
    wrong = unresolved_citations(DOC.read_text(encoding="utf-8"))
    assert not wrong, "\n".join(wrong)


def test_every_cross_reference_in_the_knowledge_page_resolves() -> None:
    wrong = unresolved_references(DOC.read_text(encoding="utf-8"))
    assert not wrong, "\n".join(wrong)


# The checks above fail on what they are for: each break below, made on a copy of the
# page, is found.
def _first_rule_section() -> str:
    return knowledge.cited(ALL[0].source)[0]


@pytest.mark.parametrize("break_it, said", [
    (lambda t, sid: t.replace(f"## {sid}\n", f"## {sid}-gone\n"), "does not have"),
    (lambda t, sid: re.sub(rf"(## {sid}\n(?:(?!\n## ).)*?Sources:\n)((?:- .*\n|\n)*)",
                           r"\1- [a private note](https://example.com/x)\n\n", t,
                           count=1, flags=re.S), "nothing public"),
])
def test_a_broken_citation_is_found(break_it, said: str) -> None:
    text = DOC.read_text(encoding="utf-8")
    broken = break_it(text, _first_rule_section())
    assert broken != text
    assert any(said in w for w in unresolved_citations(broken))


@pytest.mark.parametrize("line, said", [
    ("See [the list](rules-gone.md).", "no such file"),
    ("See [the list](rules.md#no-such-rule).", "no such heading"),
    ("See [above](#no-such-section).", "no such heading"),
    ("As K99.9 said.", "K99.9"),
    ("(section no-such-section)", "no-such-section"),
    ("docs/no-such-page.md has it.", "docs/no-such-page.md"),
])
def test_a_broken_cross_reference_is_found(line: str, said: str) -> None:
    text = DOC.read_text(encoding="utf-8")
    broken = text.replace("\n## ", f"\n{line}\n\n## ", 1)
    assert any(said in w for w in unresolved_references(broken)), said
