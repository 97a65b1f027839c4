"""`stormdeck explain`: what a rule judges, its thresholds, and the public sources behind it.

The thresholds are the rule's own settings (assets/rules.toml under the user's file), so
what is printed is what `check` runs with; the reasons are the sections of
docs/knowledge.md the rule cites, with their links. `--all -f markdown --shipped` writes
docs/rules.md, which a test compares with the committed page so the two cannot drift.
"""

from __future__ import annotations

import argparse
import json
import re
import textwrap
from importlib.resources import files
from pathlib import Path
from typing import Any

from stormdeck.base.errors import UserError
from stormdeck.base.text import printable

FORMATS = ("plain", "json", "json-pretty", "markdown")
GENERATE = "stormdeck explain --all -f markdown --shipped > docs/rules.md"
# What the engine's own keys mean (assets/rules.toml says it once, at its top).
ENGINE = {
    "enabled": "whether the rule runs at all",
    "for_seconds": "how long the condition must hold before the finding fires",
    "warmup_samples": "how many snapshots the rule needs before it judges at all",
    "window_seconds": "how much history its evidence (min, average, max) covers",
}
WIDTH = 92


def register(sub: Any) -> None:
    p = sub.add_parser("explain", help="what a rule judges, its thresholds and its sources",
                       description="Print what a rule judges, the thresholds it runs with "
                                   "(the shipped defaults under your rules file) and the "
                                   "sections of docs/knowledge.md it rests on, with their "
                                   "public links. A section id (or an older K-number) "
                                   "prints that section and the rules that cite it.")
    p.add_argument("rule", nargs="?", metavar="RULE_ID",
                   help="a rule id (stormdeck check --list-rules) or a section id")
    p.add_argument("--all", action="store_true", help="every rule, in check --list-rules order")
    p.add_argument("-f", "--format", choices=FORMATS, default="plain",
                   help="plain (default), json (one line), json-pretty, or markdown (the "
                        "format of docs/rules.md)")
    p.add_argument("--json", dest="format", action="store_const", const="json-pretty",
                   help="the same as -f json-pretty")
    p.add_argument("--rules", type=Path, default=None,
                   help="a rules.toml overriding thresholds (default "
                        "~/.config/stormdeck/rules.toml, or $STORMDECK_RULES)")
    p.add_argument("--shipped", action="store_true",
                   help="the shipped thresholds only, ignoring any rules file (how "
                        "docs/rules.md is made)")
    p.set_defaults(handler=cmd_explain)


def cmd_explain(args: argparse.Namespace) -> int:
    from stormdeck.advisors import knowledge
    from stormdeck.advisors.rules import ALL, BY_ID

    if args.all == (args.rule is not None):
        raise UserError("name one rule (stormdeck check --list-rules), or give --all")
    settings = _settings(args)
    if args.all:
        rules = list(ALL)
    elif args.rule in BY_ID:
        rules = [BY_ID[args.rule]]
    else:
        return _explain_section(args, knowledge)
    docs = [rule_doc(r, settings) for r in rules]
    if args.format == "markdown":
        print(markdown(docs), end="")
    elif args.format in ("json", "json-pretty"):
        out: Any = docs if args.all else docs[0]
        print(json.dumps(out, separators=(",", ":")) if args.format == "json"
              else json.dumps(out, indent=4))
    else:
        print("\n\n".join(_safe(plain(d)) for d in docs))
    return 0


def _settings(args: argparse.Namespace) -> dict[str, Any]:
    from stormdeck.advisors import settings as st

    if args.shipped:
        return {rid: st._settings(st.defaults().get(rid, {})) for rid in st.BY_ID}
    return st.load_settings(args.rules)


def _explain_section(args: argparse.Namespace, knowledge: Any) -> int:
    from stormdeck.advisors.rules import ALL

    index = knowledge.sections()
    name = args.rule
    ids = [name] if name in index else knowledge.by_note(index).get(name, [])
    if not ids:
        raise UserError(f"there is no rule or docs/knowledge.md section {printable(name, 80)!r} "
                        "(see stormdeck check --list-rules)")
    out = []
    for sid in ids:
        doc = section_doc(index[sid])
        doc["cited_by"] = [r.id for r in ALL if sid in knowledge.cited(r.source)]
        out.append(doc)
    if args.format in ("json", "json-pretty"):
        value: Any = out[0] if len(out) == 1 else out
        print(json.dumps(value, separators=(",", ":")) if args.format == "json"
              else json.dumps(value, indent=4))
    elif args.format == "markdown":
        print("\n".join(_section_markdown(d, level="##") for d in out), end="")
    else:
        lines: list[str] = []
        for d in out:
            lines += _section_plain(d, indent="")
            lines.append("cited by: " + (", ".join(d["cited_by"]) or "no rule"))
            lines.append("")
        print(_safe("\n".join(lines).rstrip()))
    return 0


def section_doc(s: Any) -> dict[str, Any]:
    return {"id": s.id, "title": s.title, "text": s.text,
            "links": [{"label": link.label, "url": link.url} for link in s.links],
            "earlier_notes": list(s.aliases)}


def rule_doc(rule: Any, settings: dict[str, Any]) -> dict[str, Any]:
    """Everything explain says of one rule, as data: the three formats render this."""
    from stormdeck.advisors import knowledge
    from stormdeck.advisors.settings import defaults

    index = knowledge.sections()
    s = settings[rule.id]
    shipped = defaults().get(rule.id, {})
    about = threshold_notes().get(rule.id, {})
    thresholds = []
    values = {"for_seconds": s.for_seconds, "warmup_samples": s.warmup_samples, **s.params}
    for key, value in values.items():
        default = shipped.get(key, 0 if key == "for_seconds" else 1
                              if key == "warmup_samples" else value)
        thresholds.append({"name": key, "value": value, "shipped": default,
                           "about": knowledge.readable(ENGINE.get(key) or about.get(key, ""),
                                                       prefer=knowledge.cited(rule.source))})
    sections = []
    for sid in knowledge.cited(rule.source):
        if sid not in index:  # a test keeps this from shipping; say it rather than fail
            sections.append({"id": sid, "title": "(missing from docs/knowledge.md)",
                             "text": "", "links": [], "earlier_notes": []})
        else:
            sections.append(section_doc(index[sid]))
    return {
        "rule": rule.id,
        "title": rule.title,
        "enabled": s.enabled,
        "judges": knowledge.readable(rule.explanation, prefer=knowledge.cited(rule.source)),
        "thresholds": thresholds,
        "proposes": [{"kind": p.kind, "keys": list(p.keys), "target": p.target}
                     for p in rule.proposes],
        "sections": sections,
        "knowledge": knowledge.DOC,
    }


def threshold_notes() -> dict[str, dict[str, str]]:
    """rule id -> setting -> the comment beside it in the shipped assets/rules.toml."""
    out: dict[str, dict[str, str]] = {}
    table: dict[str, str] | None = None
    text = files("stormdeck.assets").joinpath("rules.toml").read_text(encoding="utf-8")
    for line in text.splitlines():
        head = re.match(r'^\["([^"]+)"\]', line)
        if head:
            table = out.setdefault(head.group(1), {})
            continue
        m = re.match(r"^(\w+)\s*=\s*[^#]*#\s*(.+)$", line)
        if m and table is not None:
            table[m.group(1)] = m.group(2).strip()
    return out


def _value(v: Any) -> str:
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, float) and v.is_integer():
        return f"{v:g}"
    return json.dumps(v) if isinstance(v, str | list) else str(v)


def _wrap(text: str, indent: str) -> list[str]:
    out: list[str] = []
    for para in text.split("\n\n"):
        out += textwrap.wrap(para, WIDTH, initial_indent=indent, subsequent_indent=indent,
                             break_on_hyphens=False) or [""]
        out.append("")
    return out[:-1]


def _section_plain(d: dict[str, Any], indent: str) -> list[str]:
    lines = [f"{indent}{d['id']}: {d['title']}"]
    if d["text"]:
        lines += _wrap(d["text"], indent + "  ")
    for link in d["links"]:
        lines.append(f"{indent}  - {link['label']}")
        lines.append(f"{indent}    {link['url']}")
    return lines


def plain(d: dict[str, Any]) -> str:
    lines = [f"{d['rule']}: {d['title']}" + ("" if d["enabled"] else "  (disabled)"), "",
             "What it judges:"]
    lines += _wrap(d["judges"], "  ")
    lines += ["", "Thresholds (the shipped defaults under your rules file):"]
    wide = max(len(f"{t['name']} = {_value(t['value'])}") for t in d["thresholds"])
    for t in d["thresholds"]:
        left = f"{t['name']} = {_value(t['value'])}"
        note = t["about"]
        if t["value"] != t["shipped"]:
            note = f"(shipped: {_value(t['shipped'])}) {note}".strip()
        lines.append(f"  {left:<{wide}}  {note}".rstrip())
    if d["proposes"]:
        lines += ["", "Changes it may propose (each shown for review before anything runs):"]
        lines += [f"  {p['kind']}: {', '.join(p['keys'])} on {p['target']}" for p in d["proposes"]]
    lines += ["", f"Why ({d['knowledge']}):"]
    for s in d["sections"]:
        lines += _section_plain(s, "  ")
        lines.append("")
    return "\n".join(lines).rstrip()


def _safe(text: str) -> str:
    """Each line through printable(): nothing read from a file reaches the terminal raw."""
    return "\n".join(printable(line, 4000) for line in text.split("\n"))


def _md(text: str) -> str:
    """Text inside a Markdown table cell or line: pipes and angle brackets kept literal."""
    return (str(text).replace("\\", "\\\\").replace("|", "\\|").replace("<", "&lt;")
            .replace(">", "&gt;").replace("\n", " "))


def _section_markdown(d: dict[str, Any], level: str) -> str:
    lines = [f"{level} {d['id']}", "", f"*{_md(d['title'])}*", "", _md(d["text"]), ""]
    lines += [f"- [{_md(link['label'])}]({link['url']})" for link in d["links"]]
    return "\n".join(lines) + "\n"


def markdown(docs: list[dict[str, Any]]) -> str:
    """docs/rules.md: the rule list and each rule's thresholds and sources."""
    out = ["# The rules of stormdeck check", "",
           f"Generated by `{GENERATE}` from the rules themselves; "
           "`tests/unit/test_explain.py` fails when this page and the rules differ. The "
           "thresholds are the shipped defaults (assets/rules.toml); a rules file "
           "(~/.config/stormdeck/rules.toml, or `--rules`) overrides them, and "
           "`stormdeck explain RULE_ID` prints the ones in force. The sections named are in "
           "[knowledge.md](knowledge.md).", "",
           "| rule | what it flags | rests on |", "|---|---|---|"]
    for d in docs:
        refs = ", ".join(f"[{s['id']}](knowledge.md#{s['id']})" for s in d["sections"])
        out.append(f"| [`{d['rule']}`](#{_anchor(d['rule'])}) | {_md(d['title'])} | {refs} |")
    for d in docs:
        out += ["", f"## {d['rule']}", "", f"**{_md(d['title'])}**"
                + ("" if d["enabled"] else " (disabled by default)"), "", _md(d["judges"]), "",
                "| setting | default | what it means |", "|---|---|---|"]
        for t in d["thresholds"]:
            out.append(f"| `{t['name']}` | `{_md(_value(t['shipped']))}` | {_md(t['about'])} |")
        if d["proposes"]:
            out += ["", "May propose (reviewed before anything runs): " + "; ".join(
                f"{p['kind']} {', '.join(f'`{k}`' for k in p['keys'])}" for p in d["proposes"])]
        out += ["", "Rests on: " + ", ".join(
            f"[{s['id']}](knowledge.md#{s['id']}) ({_md(s['title'])})" for s in d["sections"])]
    return "\n".join(out) + "\n"


def _anchor(heading: str) -> str:
    """The anchor GitHub makes of a heading: lower case, dots and such dropped."""
    return re.sub(r"[^a-z0-9_ -]", "", heading.lower()).replace(" ", "-")
