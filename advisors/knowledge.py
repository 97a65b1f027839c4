"""The sections of docs/knowledge.md (shipped as stormdeck/assets/knowledge.md) a rule cites.

A rule's `source` names sections by id, comma-separated ("osd-cpu-cluster-knee,
osd-cpu-recommendation"). Each section has a title, its text in the project's words,
the public links it rests on, and the numbers of the working notes older texts cite
(K1.4 and so on), so that such a number can still be turned into a section anyone can
open. The file is parsed once; what a user sees of it goes through printable().
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from functools import cache
from importlib.resources import files

# A section id: what the heading says, and the anchor a Markdown renderer makes of it.
ID = re.compile(r"[a-z0-9]+(?:-[a-z0-9]+)*")
_HEADING = re.compile(r"^## (.+?)\s*$")
_TITLE = re.compile(r"^\*(.+)\*$")
_LINK = re.compile(r"\[([^\]]+)\]\((https?://[^)\s]+)\)")
_BARE = re.compile(r"<(https?://[^>\s]+)>")
_ALIASES = re.compile(r"^Earlier notes:\s*(.+)$")
# "K1.4", "K3", and ranges "K1.2-K1.5" / "K3.3-K3.5" as older texts wrote them.
_NOTE = re.compile(r"\bK(\d+)(?:\.(\d+))?(?:-K?(\d+)\.(\d+))?\b")
DOC = "docs/knowledge.md"


@dataclass(frozen=True, slots=True)
class Link:
    label: str
    url: str


@dataclass(frozen=True, slots=True)
class Section:
    id: str
    title: str
    text: str  # the paragraphs between the title and "Sources:", joined with blank lines
    links: tuple[Link, ...]
    aliases: tuple[str, ...]  # "K1.4", ...


def read_text() -> str:
    return files("stormdeck.assets").joinpath("knowledge.md").read_text(encoding="utf-8")


def parse(text: str) -> dict[str, Section]:
    """Every `## id` section of the page, in order; a malformed one raises ValueError,
    which the tests turn into a failure naming it."""
    out: dict[str, Section] = {}
    chunks: list[tuple[str, list[str]]] = []
    for line in text.splitlines():
        m = _HEADING.match(line)
        if m:
            chunks.append((m.group(1), []))
        elif chunks:
            chunks[-1][1].append(line)
    for sid, lines in chunks:
        if not ID.fullmatch(sid):
            raise ValueError(f"section heading {sid!r} is not an id (lower-case words and -)")
        if sid in out:
            raise ValueError(f"section {sid} appears twice")
        out[sid] = _section(sid, lines)
    return out


def _section(sid: str, lines: list[str]) -> Section:
    body = list(lines)
    while body and not body[0].strip():
        body.pop(0)
    m = _TITLE.match(body[0].strip()) if body else None
    if m is None:
        raise ValueError(f"section {sid} has no *title* line under its heading")
    title = m.group(1).strip()
    text_lines: list[str] = []
    links: list[Link] = []
    aliases: tuple[str, ...] = ()
    in_sources = False
    for line in body[1:]:
        stripped = line.strip()
        a = _ALIASES.match(stripped)
        if a:
            aliases = tuple(x.strip() for x in a.group(1).split(",") if x.strip())
            continue
        if stripped == "Sources:":
            in_sources = True
            continue
        if in_sources:
            links += [Link(lab, url) for lab, url in _LINK.findall(line)]
            links += [Link(url, url) for url in _BARE.findall(line)]
        else:
            text_lines.append(line)
    paragraphs = [" ".join(p.split()) for p in "\n".join(text_lines).split("\n\n")]
    return Section(sid, title, "\n\n".join(p for p in paragraphs if p), tuple(links), aliases)


@cache
def sections() -> dict[str, Section]:
    return parse(read_text())


def cited(source: str) -> tuple[str, ...]:
    """The section ids a rule's `source` names, in its order."""
    return tuple(x.strip() for x in source.split(",") if x.strip())


def _expand(m: re.Match[str]) -> list[str]:
    major, minor, end_major, end_minor = m.groups()
    if minor is None:
        return [f"K{major}"]
    if end_minor is None:
        return [f"K{major}.{minor}"]
    if end_major != major:
        return [f"K{major}.{minor}", f"K{end_major}.{end_minor}"]
    return [f"K{major}.{n}" for n in range(int(minor), int(end_minor) + 1)]


def notes_in(text: str) -> list[str]:
    """The working-notes numbers a text cites, ranges spelled out: "K1.2-K1.4" gives
    K1.2, K1.3, K1.4."""
    return [n for m in _NOTE.finditer(text) for n in _expand(m)]


def by_note(index: dict[str, Section] | None = None) -> dict[str, list[str]]:
    """Working-notes number -> the ids of the sections that took it over."""
    out: dict[str, list[str]] = {}
    for s in (index if index is not None else sections()).values():
        for a in s.aliases:
            out.setdefault(a, []).append(s.id)
    return out


@cache
def _notes() -> dict[str, list[str]]:
    return by_note()


def readable(text: str, index: dict[str, Section] | None = None,
             prefer: tuple[str, ...] = ()) -> str:
    """`text` with the working-notes numbers it cites replaced by section ids, so that
    what a user reads names something docs/knowledge.md has: "(K1.4)" becomes
    "(osd-cpu-cluster-knee)". Where a number was split over several sections, those in
    `prefer` (the rule's own citations) are named alone if any is. A number no section
    took over is left as it was."""
    if "K" not in text:  # the common case, on every finding of every tick
        return text
    notes = by_note(index) if index is not None else _notes()

    def swap(m: re.Match[str]) -> str:
        ids: list[str] = []
        for n in _expand(m):
            found = notes.get(n, [])
            mine = [sid for sid in found if sid in prefer]
            for sid in mine or found:
                if sid not in ids:
                    ids.append(sid)
        return ", ".join(ids) if ids else m.group(0)

    return _NOTE.sub(swap, text)
