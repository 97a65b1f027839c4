"""The command palette's stormdeck commands: views, clusters, go to a time, report, findings.

A command that changes something (a mute) asks first, Cancel focused, and is offered only
for a query whose every word is in its name: a fuzzy match of an unrelated word ("theme")
must never be the one Enter runs.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from functools import partial
from typing import Any

from textual.actions import parse as parse_action
from textual.command import DiscoveryHit, Hit, Hits, Provider
from textual.content import Content

from stormdeck.base.text import printable
from stormdeck.tui.keys import KEYS, keys_display
from stormdeck.tui.screens import Confirm


class StormdeckCommands(Provider):
    """Everything the keys do, findable by name (typing "view" or a rule id finds it)."""

    def commands(self) -> Iterator[tuple[str, Callable[[], Any], str, bool]]:
        """(text, what to run, help, whether it changes something) for each command,
        derived from the app as it is now; one that changes something runs only once
        confirmed."""
        app: Any = self.app
        # The registry's commands, as its keys run them: one list for keys, help and palette.
        for k in KEYS:
            if not k.palette:
                continue
            _, name, params = parse_action(k.action)
            method = getattr(app, f"action_{name}", None)
            if method is not None:
                yield (k.palette, partial(method, *params), f"key {keys_display(k.keys)}",
                       False)
        for i, tab in enumerate(app.tabs):
            if len(app.tabs) > 1:
                yield (f"Cluster: {printable(tab.name, 60)}", partial(app.activate_tab, i),
                       "switch to this cluster's tab", False)
        frame = app.tab.frame
        for f in (frame.findings if frame is not None else ()):
            if f.state != "firing":
                continue
            name = printable(f"{f.rule} on {f.target}", 120)
            if f.changes:  # the plan review is itself the question asked first
                yield (f"Review the change: {name}", partial(app.review_finding, f),
                       printable(f.summary, 120), False)
            text = f"Mute for an hour: {name}"
            yield (text, partial(self.confirm, f"{text}?\n{printable(f.summary, 200)}",
                                 "Mute", partial(app.mute_finding, f)),
                   printable(f.summary, 120), True)

    def confirm(self, question: str, verb: str, run: Callable[[], Any]) -> None:
        self.app.push_screen(Confirm(question, verb), lambda ok: run() if ok else None)

    async def discover(self) -> Hits:
        for text, run, help_text, _ in self.commands():
            # Content(...) is plain text: a rule target from the cluster is never markup.
            yield DiscoveryHit(Content(text), run, text=text, help=help_text)

    async def search(self, query: str) -> Hits:
        matcher = self.matcher(query)
        words = query.lower().split()
        for text, run, help_text, changes in self.commands():
            if changes and not all(w in text.lower() for w in words):
                continue
            score = matcher.match(text)
            if score > 0:
                yield Hit(score, Content(text), run, text=text, help=help_text)
