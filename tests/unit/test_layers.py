"""The layer contract, read from the tree by import-linter (pyproject's [tool.importlinter]).

stormdeck/ links to each top-level folder, so grimp sees every layer as it is
installed; what import-linter cannot say (the CLI opens textual only inside the
functions that open a screen; every folder with code is a package the wheel
carries) is checked here.
"""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
FOLDERS = ("base", "collectors", "advisors", "tui", "lab", "assets")


def test_import_linter_keeps_every_contract():
    lint = Path(sys.executable).with_name("lint-imports")
    done = subprocess.run([str(lint), "--no-cache"], cwd=ROOT, capture_output=True,
                          text=True, timeout=300)
    assert done.returncode == 0, done.stdout[-4000:] + done.stderr[-2000:]
    # Five contracts, and the graph holds the whole house (not one folder's worth).
    assert "5 kept, 0 broken" in done.stdout, done.stdout[-2000:]
    analyzed = int(done.stdout.split("Analyzed ")[1].split(" files")[0])
    assert analyzed > 100


def test_the_tree_links_every_top_level_folder():
    for folder in FOLDERS:
        link = ROOT / "stormdeck" / folder
        assert link.is_symlink() and link.resolve() == (ROOT / folder).resolve(), link


def test_every_folder_with_code_is_a_package():
    """setuptools' find skips a folder without __init__.py: it would be missing from the wheel."""
    for folder in FOLDERS:
        for path in (ROOT / folder).rglob("*.py"):
            if "__pycache__" in path.parts:
                continue
            assert (path.parent / "__init__.py").exists(), path


def test_the_cli_opens_textual_only_inside_functions():
    for path in (ROOT / "stormdeck").glob("*.py"):
        tree = ast.parse(path.read_text())
        for node in tree.body:
            if isinstance(node, ast.Import | ast.ImportFrom):
                mods = [a.name for a in node.names] if isinstance(node, ast.Import) \
                    else [node.module or ""]
                assert not any(m.split(".")[0] == "textual" or m.startswith("stormdeck.tui")
                               for m in mods), f"{path.name} imports a screen at start-up"


def test_the_wheel_installs_only_stormdeck(tmp_path):
    """PyPI has projects named lab, tui and collectors: ours must not land beside them."""
    # From a copy: setuptools leaves build/ and egg-info beside the sources it builds.
    import shutil
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
    # The sources every finding cites travel with it (a link in the tree, a file in the wheel).
    assert zipfile.ZipFile(wheel).read("stormdeck/assets/knowledge.md") == \
        (ROOT / "docs" / "knowledge.md").read_bytes()
    assert {"stormdeck/assets/stormdeck-alerts.yml",
            "stormdeck/assets/stormdeck-dashboard.json"} <= set(names)
    assert "stormdeck/collectors/hub.py" in names and "stormdeck/base/errors.py" in names
