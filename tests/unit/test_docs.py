"""The README and the user guide stay short and true: every link resolves, every repository
path they name exists, and the README stays a front page."""

from __future__ import annotations

import re
from pathlib import Path
from urllib.parse import unquote

ROOT = Path(__file__).resolve().parents[2]
DOCS = ROOT / "docs"
# Pages other work adds to docs/ (merged by the lead): a link to one of them is checked
# as soon as it exists, and tolerated only while it does not.
ARRIVING = {"fleet.md", "curve.md", "health.md", "blast-radius.md", "knowledge.md",
            "rules.md"}
# Pages whose named paths this test checks: the README and the guide. architecture.md and
# the pages above name files of their own work (and files a reader is told to create).
NOT_GUIDE = ARRIVING | {"architecture.md"}
TOP = ("advisors", "assets", "base", "bench", "collectors", "docs", "lab", "stormdeck",
       "tests", "tui")

LINK = re.compile(r"\]\(([^)\s]+)\)")
PATH = re.compile(rf"(?<![\w/.~$-])((?:{'|'.join(TOP)})/[\w./-]*\w/?)")


def pages() -> list[Path]:
    return [ROOT / "README.md", *sorted(DOCS.glob("*.md"))]


def slug(heading: str) -> str:
    """GitHub's anchor for a heading: lower case, punctuation dropped, spaces to hyphens."""
    text = re.sub(r"[^\w\- ]", "", heading.strip().lower())
    return text.replace(" ", "-")


def anchors(page: Path) -> set[str]:
    text = re.sub(r"^```.*?^```", "", page.read_text(), flags=re.M | re.S)
    return {slug(m) for m in re.findall(r"^#+ (.+)$", text, re.M)}


def test_the_readme_is_a_front_page() -> None:
    lines = (ROOT / "README.md").read_text().splitlines()
    assert len(lines) <= 250, len(lines)


def test_every_link_resolves() -> None:
    broken = []
    for page in pages():
        for target in LINK.findall(page.read_text()):
            if re.match(r"[a-z]+:", target):  # http(s), mailto: not this test's business
                continue
            file, _, anchor = unquote(target).partition("#")
            dest = (page.parent / file).resolve() if file else page
            if not dest.exists():
                if dest.parent == DOCS and dest.name in ARRIVING:
                    continue
                broken.append(f"{page.name}: {target}")
            elif anchor and dest.suffix == ".md" and anchor not in anchors(dest):
                broken.append(f"{page.name}: {target} (no such heading)")
    assert not broken, broken


def test_every_named_path_exists() -> None:
    missing = []
    for page in pages():
        if page.name in NOT_GUIDE:
            continue
        text = LINK.sub("]", page.read_text())  # link targets: the test above
        for path in sorted(set(PATH.findall(text))):
            arriving = path.startswith("docs/") and path.removeprefix("docs/") in ARRIVING
            if not (ROOT / path).exists() and not arriving:
                missing.append(f"{page.name}: {path}")
    assert not missing, missing


def test_the_readme_keeps_the_two_commands() -> None:
    readme = (ROOT / "README.md").read_text()
    assert "./dev demo" in readme and "./dev test" in readme
    dev = (ROOT / "dev").read_text()
    assert re.search(r"^\s+demo\)", dev, re.M) and re.search(r"^\s+test\)", dev, re.M)
