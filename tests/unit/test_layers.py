"""The layer contract: arrows point one way (tui -> advisors -> collectors -> base), lab apart.

import-linter cannot see our layout (its graph follows one package's folder,
and ours are mapped into the `stormdeck` namespace from top-level folders), so
this reads every import statement itself, those inside functions included, as
grimp does, and checks the same contracts.
"""

from __future__ import annotations

import ast
import tomllib
from collections import defaultdict
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
PYPROJECT = tomllib.loads((ROOT / "pyproject.toml").read_text())
PACKAGE_DIR: dict[str, str] = PYPROJECT["tool"]["setuptools"]["package-dir"]

# Lower number = lower floor. A module may import its own floor or any below.
FLOORS = {"stormdeck.base": 0, "stormdeck.collectors": 1, "stormdeck.advisors": 2,
          "stormdeck.tui": 3}
FRONT_DOOR = 4  # stormdeck's own modules: the CLI, which may import every layer
LAB = "stormdeck.lab"


def _modules() -> dict[str, Path]:
    out: dict[str, Path] = {}
    for package, folder in PACKAGE_DIR.items():
        base = ROOT / folder
        for path in base.rglob("*.py"):
            rel = path.relative_to(base).with_suffix("")
            parts = [p for p in rel.parts if p != "__init__"]
            # A subfolder mapped on its own (stormdeck.base inside stormdeck/?) is
            # read under its own name only.
            name = ".".join([package, *parts])
            if any(name.startswith(other + ".") or name == other
                   for other in PACKAGE_DIR if other != package and other.startswith(package)):
                continue
            out[name] = path
    return out


MODULES = _modules()


def _imports(name: str, path: Path) -> set[str]:
    """Every module this one imports, at the top or inside a function, made absolute."""
    tree = ast.parse(path.read_text(), str(path))
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    found: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found.update(a.name for a in node.names)
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")
                base = base[: len(base) - node.level + 1]
                mod = ".".join(base + ([node.module] if node.module else []))
            else:
                mod = node.module or ""
            found.add(mod)
            # `from stormdeck.base import text` imports the module stormdeck.base.text.
            found.update(f"{mod}.{a.name}" for a in node.names if f"{mod}.{a.name}" in MODULES)
    return found


GRAPH = {name: _imports(name, path) for name, path in MODULES.items()}


def floor(module: str) -> int | str:
    for package, number in FLOORS.items():
        if module == package or module.startswith(package + "."):
            return number
    if module == LAB or module.startswith(LAB + "."):
        return "lab"
    return FRONT_DOOR


def ours(module: str) -> bool:
    return module == "stormdeck" or module.startswith("stormdeck.")


def test_every_folder_with_code_is_a_listed_package():
    """A new subfolder left out of pyproject's list would be missing from the wheel."""
    listed = set(PYPROJECT["tool"]["setuptools"]["packages"])
    for package, folder in PACKAGE_DIR.items():
        for init in (ROOT / folder).rglob("__init__.py"):
            rel = init.parent.relative_to(ROOT / folder).parts
            assert ".".join([package, *rel]) in listed, init


def test_the_contract_reads_the_whole_house():
    assert len(MODULES) > 60
    assert "stormdeck.collectors.hub" in MODULES and "stormdeck.tui.app" in MODULES
    assert "stormdeck.collectors.model" in GRAPH["stormdeck.collectors.hub"]


def test_no_arrow_runs_up():
    wrong = []
    for importer, imported in sorted(GRAPH.items()):
        a = floor(importer)
        for target in sorted(imported):
            if not ours(target) or target == "stormdeck":
                continue
            b = floor(target)
            if a == "lab" or b == "lab":
                continue  # the lab's own contract below
            if b > a:  # type: ignore[operator]
                wrong.append(f"{importer} -> {target}")
    assert not wrong, "imports that run up a floor:\n" + "\n".join(wrong)


def test_the_lab_stands_apart():
    wrong = []
    for importer, imported in sorted(GRAPH.items()):
        for target in imported:
            if not ours(target):
                continue
            if floor(importer) == "lab" and floor(target) not in ("lab", 0):
                wrong.append(f"{importer} -> {target}")
            if floor(target) == "lab" and floor(importer) not in ("lab", FRONT_DOOR):
                wrong.append(f"{importer} -> {target}")
    assert not wrong, "the lab uses only the ground floor, and only the CLI uses it:\n" + \
        "\n".join(wrong)


def test_textual_only_in_tui():
    wrong = [f"{importer} -> {target}" for importer, imported in sorted(GRAPH.items())
             for target in imported
             if target.split(".")[0] == "textual" and floor(importer) != FLOORS["stormdeck.tui"]
             and floor(importer) != FRONT_DOOR]
    assert not wrong, "\n".join(wrong)
    # The front door imports textual only inside the functions that open a screen.
    for name, path in MODULES.items():
        if floor(name) != FRONT_DOOR:
            continue
        tree = ast.parse(path.read_text())
        for node in tree.body:
            if isinstance(node, ast.Import | ast.ImportFrom):
                mods = [a.name for a in node.names] if isinstance(node, ast.Import) \
                    else [node.module or ""]
                assert not any(m.split(".")[0] == "textual" or m.startswith("stormdeck.tui")
                               for m in mods), f"{name} imports a screen at start-up"


def _cycles(edges: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components of more than one node (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on: set[str] = set()
    out: list[list[str]] = []
    counter = [0]

    def visit(v: str) -> None:
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on.add(v)
        for w in edges.get(v, ()):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                out.append(sorted(comp))

    for v in sorted(edges):
        if v not in index:
            visit(v)
    return out


@pytest.mark.parametrize("package", sorted({m.rpartition(".")[0] for m in MODULES}))
def test_no_cycles_between_siblings(package):
    """As import-linter's acyclic_siblings: the children of one package form no cycle."""
    depth = package.count(".") + 1
    edges: dict[str, set[str]] = defaultdict(set)
    for importer, imported in GRAPH.items():
        if not importer.startswith(package + "."):
            continue
        a = ".".join(importer.split(".")[: depth + 1])
        for target in imported:
            if target.startswith(package + "."):
                b = ".".join(target.split(".")[: depth + 1])
                if a != b:
                    edges[a].add(b)
    assert not _cycles(edges)


def test_the_wheel_installs_only_stormdeck(tmp_path):
    """PyPI has projects named lab, tui and collectors: ours must not land beside them."""
    # From a copy: setuptools leaves build/ and egg-info beside the sources it builds.
    import shutil
    import subprocess
    import sys
    import zipfile

    src = tmp_path / "src"
    shutil.copytree(ROOT, src, ignore=shutil.ignore_patterns(
        ".venv", ".git", "build", "*.egg-info", "__pycache__", ".hypothesis", "tests"))
    subprocess.run([sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "-w",
                    str(tmp_path), str(src)], check=True, capture_output=True, timeout=300)
    (wheel,) = tmp_path.glob("stormdeck-*.whl")
    names = zipfile.ZipFile(wheel).namelist()
    tops = {n.split("/")[0] for n in names}
    assert {t for t in tops if not t.endswith(".dist-info")} == {"stormdeck"}
    assert "stormdeck/assets/rules.toml" in names
    assert {"stormdeck/assets/stormdeck-alerts.yml",
            "stormdeck/assets/stormdeck-dashboard.json"} <= set(names)
    assert "stormdeck/collectors/hub.py" in names and "stormdeck/base/errors.py" in names
