"""The layout the README's Architecture section promises, checked on the source itself.

Imports point downward: the facade and the commands (``sync``, ``cli``, ``server``,
``worker``) over the side jobs (``reindex``, ``status``, ``repair``, ``dryrun``) over the
pipeline stages (``ragsync.pipeline``) over the parts (state, fetch, extract, policy, …). And
no module reaches into another module's private names.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
FACADE = {"ragsync.sync", "ragsync.cli", "ragsync.server", "ragsync.worker", "ragsync.__main__"}
SIDE = {"ragsync.reindex", "ragsync.status", "ragsync.repair", "ragsync.dryrun"}
MAX_LINES = 500
# Private names of the standard library's public types (namedtuple and urlsplit results) and
# of the interpreter that are documented for use; and atexit's own runner of its handlers,
# for the process that ends without teardown (ragsync/__main__.py).
ALLOWED_PRIVATE = {"_replace", "_asdict", "_fields", "_exit", "_getframe", "_run_exitfuncs"}


def module_name(path: Path) -> str:
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def engine_modules() -> dict[str, Path]:
    return {
        module_name(path): path
        for path in sorted((ROOT / "ragsync").rglob("*.py"))
        if path.name != "__init__.py" or path.parent.name != "ragsync"
    }


def imports(path: Path) -> set[str]:
    """Every module ``path`` imports, at the top or inside a function."""
    found: set[str] = set()
    package = module_name(path).rsplit(".", 1)[0]
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                base = ".".join(package.split(".")[: len(package.split(".")) - node.level + 1])
                base = f"{base}.{node.module}" if node.module else base
            found.add(base)
            found.update(f"{base}.{alias.name}" for alias in node.names)
    return found


def layer(name: str) -> str:
    if name in FACADE:
        return "facade"
    if name in SIDE:
        return "side"
    if name.startswith("ragsync.pipeline"):
        return "pipeline"
    if name.startswith("ragsync.testing"):
        return "testing"
    return "parts"


FORBIDDEN = {
    "pipeline": {"facade", "side", "testing"},
    "side": {"facade", "testing"},
    "parts": {"facade", "side", "pipeline", "testing"},
}


@pytest.mark.parametrize("name", sorted(engine_modules()))
def test_imports_point_downward(name):
    own = layer(name)
    if own not in FORBIDDEN:
        return
    wrong = sorted(
        target
        for target in imports(engine_modules()[name])
        if target.startswith("ragsync.") and layer(target) in FORBIDDEN[own]
    )
    assert not wrong, f"{name} ({own}) imports {wrong}"


def test_connectors_use_only_the_parts():
    for path in sorted((ROOT / "connectors").glob("*.py")):
        wrong = sorted(
            target
            for target in imports(path)
            if target.startswith("ragsync.") and layer(target) != "parts"
        )
        assert not wrong, f"{path.name} imports {wrong}"


def private(name: str) -> bool:
    return name.startswith("_") and not (name.startswith("__") and name.endswith("__"))


def private_access(path: Path) -> list[str]:
    """``obj._name`` where ``_name`` is not defined in the same module (and ``obj`` is not
    ``self``/``cls``), and ``from x import _name``."""
    tree = ast.parse(path.read_text())
    defined = set(ALLOWED_PRIVATE)
    for node in ast.walk(tree):
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
            defined.add(node.name)
        elif isinstance(node, ast.Attribute) and isinstance(node.ctx, ast.Store):
            defined.add(node.attr)
        elif isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store):
            defined.add(node.id)
        elif isinstance(node, ast.arg):
            defined.add(node.arg)
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Attribute) and private(node.attr):
            if isinstance(node.value, ast.Name) and node.value.id in ("self", "cls"):
                continue
            if node.attr not in defined:
                found.append(f"{path.relative_to(ROOT)}:{node.lineno}: .{node.attr}")
        elif isinstance(node, ast.ImportFrom):
            found.extend(
                f"{path.relative_to(ROOT)}:{node.lineno}: import {alias.name}"
                for alias in node.names
                if private(alias.name)
            )
    return found


def test_no_private_access_across_modules():
    files = [
        path
        for folder in ("ragsync", "connectors", "tests", "eval", "examples")
        for path in sorted((ROOT / folder).rglob("*.py"))
        if "fixtures" not in path.parts
    ]
    found = [line for path in files for line in private_access(path)]
    assert not found, "private names used outside their module:\n" + "\n".join(found)


def test_the_checks_see_what_they_forbid(tmp_path, monkeypatch):
    """The two checks above fail on the code they exist to stop."""
    monkeypatch.setattr(f"{__name__}.ROOT", tmp_path)
    (tmp_path / "ragsync" / "pipeline").mkdir(parents=True)
    stage = tmp_path / "ragsync" / "pipeline" / "stage.py"
    stage.write_text("from ragsync.sync import Syncer\n\ndef f(s: Syncer):\n    return s._run()\n")
    assert "ragsync.sync" in imports(stage)
    assert private_access(stage) == ["ragsync/pipeline/stage.py:4: ._run"]


def readme_sections() -> set[str]:
    """The README's headings and the bold names of its bullets ("- **Journal.** …")."""
    text = (ROOT / "README.md").read_text()
    headings = re.findall(r"^#+ (.+?)\s*$", text, flags=re.M)
    bullets = re.findall(r"^(?:- )?\*\*([^*]+?)\.?\*\*", text, flags=re.M)
    return {name.split(" (")[0].strip() for name in [*headings, *bullets]}


def test_comments_cite_readme_sections_that_exist():
    sections = readme_sections()
    missing = []
    for folder in ("ragsync", "connectors"):
        for path in sorted((ROOT / folder).rglob("*.py")):
            for cited in re.findall(r'README,?\s+"([^"]+)"', path.read_text()):
                if " ".join(cited.split()) not in sections:
                    missing.append(f"{path.relative_to(ROOT)}: README {cited!r}")
    assert not missing, "citations of README sections that do not exist:\n" + "\n".join(missing)


@pytest.mark.parametrize("name", sorted(engine_modules()))
def test_modules_stay_small(name):
    lines = len(engine_modules()[name].read_text().splitlines())
    assert lines <= MAX_LINES, f"{name} has {lines} lines (at most ~{MAX_LINES})"


def test_the_facade_stays_thin():
    source = (ROOT / "ragsync" / "sync.py").read_text()
    syncer = next(
        node
        for node in ast.parse(source).body
        if isinstance(node, ast.ClassDef) and node.name == "Syncer"
    )
    lines = syncer.end_lineno - syncer.lineno + 1
    assert lines <= 350, f"Syncer has {lines} lines"
