"""The console's keys, mouse actions, views and palette commands: the one registry that the
bindings, the key bar, help, the command palette and the man page are all made from.

No textual here: the man page (`stormdeck manpage`) reads this without loading the TUI.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class Key:
    """One key binding of the console (Textual key names, "a,b" for several keys)."""

    keys: str
    action: str
    description: str
    scope: str = "console"  # where it works: see SCOPES
    bar: str = ""  # its label in the key bar; "" keeps it out of the bar
    short: str = ""  # the label when the bar is narrow (80 columns)
    rank: int = 9  # the key bar drops the highest rank first; 0 is never dropped
    palette: str = ""  # its name in the command palette; "" when it has none

    @property
    def priority(self) -> bool:
        """A console key runs as it arrives, before the keys behind it are handed on (see
        StormdeckApp.run_action); End and Esc are left to the tables, boxes and dialogs."""
        return self.scope == "console" and not {"end", "escape"} & set(self.keys.split(","))


@dataclass(frozen=True, slots=True)
class ViewInfo:
    """One view of the console, registered once (register_view): its number key, help
    line, palette command, key bar label, man page entry and its place in the console all
    follow from this; `widget` names its class, imported only when the console is made."""

    key: str
    id: str
    name: str
    short: str  # its label in a narrow key bar
    summary: str  # one line of help
    description: str  # the man page's VIEWS
    widget: str  # "module:Class" of stormdeck.tui.views (or a full module path)
    rank: int = 2  # the key bar drops the highest rank first

    @property
    def module(self) -> str:
        name = self.widget.partition(":")[0]
        return name if "." in name else f"stormdeck.tui.views.{name}"

    @property
    def class_name(self) -> str:
        return self.widget.partition(":")[2]


# Where a key works, in the order help and the man page list them.
SCOPES = {
    "console": "Everywhere in the console",
    "table": "In a table (daemons, latency, disks, findings, journal)",
    "daemons": "In the daemons view",
    "findings": "In the findings view",
    "journal": "In the journal view",
    "dialog": "In a dialog (help, a plan review, a daemon's detail, a menu)",
}

# The views, in the order of their keys: register_view adds one (views/__init__ explains).
VIEWS: list[ViewInfo] = []

_BUILT_IN = (
    ViewInfo("1", "overview", "Overview", "Over",
             "what limits the cluster, at a glance",
             "health, PG states, slow ops, client IO, cores, the slowest OSD, the hottest "
             "disk, leader spread and the findings firing", "overview:Overview"),
    ViewInfo("2", "daemons", "Daemons", "Daem",
             "cores, IOPS and latency per daemon",
             "per daemon: cores used of allowed, IOPS, IOPS per core, latency, primaries or "
             "leaders, device and its utilisation; Enter opens a daemon's detail",
             "daemons:DaemonTable"),
    ViewInfo("3", "leaders", "Leaders", "Lead",
             "leader and primary spread",
             "leader spread per Curve pool, primary PGs per Ceph OSD and per pool",
             "leaders:Leaders"),
    ViewInfo("4", "latency", "Latency", "Lat",
             "commit/apply, raft, p99 and op latency",
             "commit/apply (OSDs) or raft append/send (chunkservers), p99 and op latency "
             "(from Prometheus), with their history", "latency:LatencyTable"),
    ViewInfo("5", "disks", "Disks", "Disk",
             "utilisation, await, cache and daemons per disk",
             "per disk: utilisation, IOPS, await, queue, write cache (kernel/device), "
             "transport and the daemons on it, above the selected disk's detail",
             "disks:DisksView"),
    ViewInfo("6", "findings", "Findings", "Find",
             "the advisors' findings and their changes",
             "the advisors' findings, above the selected one's evidence and change",
             "findings:FindingsView"),
    ViewInfo("7", "journal", "Journal", "Jrnl",
             "every change made, and its undo",
             "every change stormdeck made, how it ended, and its undo",
             "journal:JournalTable", rank=3),
    ViewInfo("8", "triage", "Triage", "Tri",
             "an incident on one screen",
             "an incident on one screen: PG states over time, what happened, who, the "
             "cluster log", "triage:Triage", rank=3),
    ViewInfo("9", "fullness", "Fullness", "Full",
             "health checks, OSD and pool fullness",
             "Ceph's health checks with their detail lines (muted ones marked), each OSD's "
             "use as a bar against the nearfull, backfillfull and full ratios, each pool's "
             "fill and its days to full at its growth", "fullness:FullnessView", rank=3),
)

# A list, changed in place by register_view: whoever imported it sees a view added later.
KEYS: list[Key] = [
    Key("question_mark,f1", "help", "Help: every key, mouse action and palette command",
        bar="Help", short="Help", rank=0, palette="Help: every key"),
    # The views' keys go here, in VIEWS' order (register_view).
    Key("slash", "filter", "Filter the rows (Enter keeps it, Esc clears it)",
        bar="Filter", short="Filt", rank=4, palette="Filter the rows"),
    Key("p", "pause", "Pause or resume the view (collection goes on)", bar="Pause",
        short="Pause", rank=5, palette="Pause or resume the view"),
    Key("colon,ctrl+p", "command_palette", "The command palette: every command by name",
        bar="Palette", short="Cmd", rank=6),
    Key("left_square_bracket", "step(-1)", "Back one frame (collection goes on)"),
    Key("right_square_bracket", "step(1)", "Forward one frame"),
    Key("left_curly_bracket", "jump(-60)", "Back 60 s"),
    Key("right_curly_bracket", "jump(60)", "Forward 60 s"),
    # n as well: in a table End is its last row, so End alone could not bring a table's
    # view back to now.
    Key("n,end", "follow", "Back to now (the newest frame); in a table End is its last row",
        palette="Back to now"),
    Key("g", "goto", "Go to a time: HH:MM:SS, or -30 for 30 s back",
        palette="Go to a time (HH:MM:SS, or -90 for 90 s back)"),
    Key("R", "report", "Write an incident report of the session",
        palette="Write an incident report of the session"),
    Key("less_than_sign", "cluster(-1)", "The previous cluster's tab"),
    Key("greater_than_sign", "cluster(1)", "The next cluster's tab"),
    Key("plus,equals_sign", "faster", "Faster: poll more often (a replay: play faster)"),
    Key("minus", "slower", "Slower: poll less often (a replay: play slower)"),
    Key("escape", "clear", "Clear the filter, close the time box"),
    Key("q", "quit", "Quit", bar="Quit", short="Quit", rank=0),
    # In every table.
    Key("up", "move(-1)", "The row above", scope="table"),
    Key("down", "move(1)", "The row below", scope="table"),
    Key("pageup", "page(-1)", "A page up", scope="table"),
    Key("pagedown", "page(1)", "A page down", scope="table"),
    Key("home", "jump(0)", "The first row", scope="table"),
    Key("end", "jump(-1)", "The last row", scope="table"),
    Key("enter", "select", "Open the row (a daemon's detail, a finding's review)",
        scope="table"),
    Key("s", "sort", "Sort by the next column, largest first (the header's arrow shows it)",
        scope="table", bar="Sort", short="Sort", rank=7),
    Key("I", "reverse", "Reverse the sort (as htop's I)", scope="table"),
    Key("S,f6", "sort_menu", "Sort by a column chosen from a menu (as htop's F6)",
        scope="table"),
    # In one view.
    Key("enter", "select", "On a daemon: its detail (figures, disks, findings)",
        scope="daemons"),
    Key("enter", "review", "On a finding: review its change", scope="findings"),
    Key("M", "mutes", "The mutes in force on this cluster, to lift one",
        palette="Mutes: list and lift them"),
    Key("m", "mute", "On a finding: mute it for an hour (asks first from the palette)",
        scope="findings"),
    Key("e", "experiment", "On a finding: measure its change in alternated rounds under "
        "the live load (an experiment; it ends undone)", scope="findings"),
    Key("u", "undo", "On a journal entry: undo it", scope="journal"),
    # In the dialogs.
    Key("escape", "close", "Close the dialog; in a plan review: cancel", scope="dialog"),
    Key("tab", "focus_next", "The next button or field", scope="dialog"),
    Key("x,delete", "lift", "In the mutes list (M): lift the selected mute", scope="dialog"),
    Key("c", "cut", "In a running experiment: stop it (the change is undone)",
        scope="dialog"),
    Key("o", "whatif_out", "In an OSD's detail: what if it goes out (predicted; nothing "
        "changes)", scope="dialog"),
]


def view_key(v: ViewInfo) -> Key:
    """A view's key: its digit shows it; in help, the key bar and the palette by name."""
    return Key(v.key, f"view('{v.id}')", f"{v.name}: {v.summary}", bar=v.name, short=v.short,
               rank=v.rank, palette=f"View: {v.name}")


def register_view(v: ViewInfo) -> ViewInfo:
    """The one registration of a view: its key joins the registry after the other views',
    and the console composes it (tui/app.py reads VIEWS). A key or id already taken is a
    programming error, said at import."""
    taken = {k for key in KEYS if key.scope == "console" for k in key.keys.split(",")}
    if v.key in taken or any(w.id == v.id for w in VIEWS):
        raise ValueError(f"view {v.id!r}: its key {v.key!r} or its id is already registered")
    VIEWS.append(v)
    KEYS.insert(len(VIEWS), view_key(v))  # after help and the views before it
    return v


def unregister_view(view_id: str) -> None:
    """Take a view out again (the registry's own test registers one of its own)."""
    for i, v in enumerate(VIEWS):
        if v.id == view_id:
            del VIEWS[i]
            KEYS.remove(view_key(v))
            return


for _v in _BUILT_IN:
    register_view(_v)

MOUSE: tuple[tuple[str, str], ...] = (
    ("click a column header", "sort by that column, largest first; again: the other way"),
    ("click a row", "select it"),
    ("double-click a row", "open it, as Enter does"),
    ("click a key in the key bar", "do what the key does"),
    ("wheel", "scroll the view"),
)

# Palette commands made from what is on screen (besides those of KEYS above).
PALETTE_MADE: tuple[tuple[str, str], ...] = (
    ("Review the change: RULE on TARGET", "for each firing finding that proposes a change"),
    ("Mute for an hour: RULE on TARGET", "for each firing finding; asks first"),
    ("Cluster: NAME", "with several clusters open: switch to its tab"),
    ("Change theme, Keys, Quit, ...", "Textual's own commands"),
)

# How a key is written for a person: the Textual name of a symbol is not what is typed.
_SYMBOLS = {
    "question_mark": "?", "slash": "/", "colon": ":", "left_square_bracket": "[",
    "right_square_bracket": "]", "left_curly_bracket": "{", "right_curly_bracket": "}",
    "less_than_sign": "<", "greater_than_sign": ">", "plus": "+", "equals_sign": "=",
    "minus": "-", "escape": "Esc", "enter": "Enter", "end": "End", "home": "Home",
    "up": "Up", "down": "Down", "pageup": "PgUp", "pagedown": "PgDn", "tab": "Tab",
}


def key_display(name: str) -> str:
    """One Textual key name as a person types it: "<" for less_than_sign, F6, Ctrl+P."""
    if name in _SYMBOLS:
        return _SYMBOLS[name]
    if name.startswith("ctrl+"):
        return "Ctrl+" + key_display(name.removeprefix("ctrl+")).upper()
    if len(name) > 1 and name[0] == "f" and name[1:].isdigit():
        return name.upper()
    return name


def keys_display(keys: str) -> str:
    """Every key of a binding ("plus,equals_sign"): "+ or =", the first the one to type."""
    return " or ".join(key_display(k) for k in keys.split(","))


def in_scope(scope: str) -> tuple[Key, ...]:
    return tuple(k for k in KEYS if k.scope == scope)


def help_sections() -> list[tuple[str, list[tuple[str, str]]]]:
    """(heading, [(keys, what)]) for help and the man page alike, every entry of the
    registry: keys by where they work, then the mouse, then the palette's commands."""
    out = [(title, [(keys_display(k.keys), k.description) for k in in_scope(scope)])
           for scope, title in SCOPES.items()]
    out.append(("Mouse", list(MOUSE)))
    palette = [(k.palette, f"key {keys_display(k.keys)}") for k in KEYS if k.palette]
    out.append(("Command palette (: or Ctrl+P, then type part of a name)",
                [*palette, *PALETTE_MADE]))
    return out
