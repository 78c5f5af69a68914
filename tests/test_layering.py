"""The package's layering (docs/architecture.md): dependencies point down only, and no module imports itself
back through others. Imports are read from the source, those inside functions included; imports for type
checking only (`if TYPE_CHECKING:`) are not dependencies."""

from __future__ import annotations

import ast
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent / "engine"
# Each area and the areas it may import (besides itself). Foundations import only foundations.
FOUNDATIONS = {"machine_load", "openmp", "errors", "arguments", "devices"}
CORE = {"model", "kv", "loading", "prompts", "inspect"}
ALLOWED = {
    **{area: FOUNDATIONS for area in FOUNDATIONS},
    **{area: FOUNDATIONS | CORE for area in CORE},
    "runtime": FOUNDATIONS | CORE,
    "approx": FOUNDATIONS | CORE | {"runtime"},
    "traces": FOUNDATIONS | CORE,
    "cluster": FOUNDATIONS | CORE | {"traces"},
}


def module_name(path: Path) -> str:
    parts = path.relative_to(ROOT.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def area(module: str) -> str:
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else ""


def imports(path: Path) -> set[str]:
    """Modules of the engine package that `path` imports at run time."""
    tree = ast.parse(path.read_text())
    type_only = {
        id(n)
        for node in ast.walk(tree)
        if isinstance(node, ast.If) and ast.unparse(node.test) in ("TYPE_CHECKING", "typing.TYPE_CHECKING")
        for n in ast.walk(node)
    }
    found: set[str] = set()
    for node in ast.walk(tree):
        if id(node) in type_only:
            continue
        if isinstance(node, ast.Import):
            found |= {a.name for a in node.names if a.name.startswith("engine")}
        elif isinstance(node, ast.ImportFrom) and node.module and node.module.startswith("engine"):
            for a in node.names:  # `from engine.x import y` imports engine.x.y when y is a module
                sub = f"{node.module}.{a.name}"
                found.add(sub if sub in MODULES else node.module)
    return found


MODULES = {module_name(p): p for p in ROOT.rglob("*.py")}
GRAPH = {name: imports(path) for name, path in MODULES.items()}


def test_every_area_imports_only_the_areas_below_it() -> None:
    wrong = [
        f"{name} imports {dep}"
        for name, deps in GRAPH.items()
        if area(name) in ALLOWED
        for dep in deps
        if area(dep) != area(name) and area(dep) not in ALLOWED[area(name)]
    ]
    assert not wrong, "\n".join(wrong)


def test_no_import_cycles() -> None:
    state: dict[str, int] = {}  # 1: on the current path, 2: done

    def visit(name: str, path: list[str]) -> list[str] | None:
        state[name] = 1
        for dep in sorted(GRAPH.get(name, ())):
            if dep == name or dep not in GRAPH or dep == "engine":
                continue
            if state.get(dep) == 1:
                return [*path, name, dep]
            if dep not in state and (cycle := visit(dep, [*path, name])):
                return cycle
        state[name] = 2
        return None

    for name in sorted(GRAPH):
        if name not in state:
            cycle = visit(name, [])
            assert cycle is None, " -> ".join(cycle)


def map_sections() -> dict[str, list[str]]:
    """docs/architecture.md's module map: per package (`engine/<package>/`'s section; "" for the top-level
    modules, under Foundations) its table rows and its paragraphs."""
    text = (ROOT.parent / "docs" / "architecture.md").read_text()
    found: dict[str, list[str]] = {}
    for part in re.split(r"^### ", text, flags=re.M)[1:]:
        heading, _, body = part.partition("\n")
        body = body.split("\n## ")[0]  # a section ends at the next heading of the page's own level
        package = re.match(r"`engine/(\w+)/`", heading)
        key = package.group(1) if package else "" if heading.startswith("Foundations") else heading
        rows = [line for line in body.splitlines() if line.startswith("|")]
        found[key] = rows + [p for p in re.split(r"\n\s*\n", body) if not p.lstrip().startswith("|")]
    return found


def test_the_module_map_names_every_module_in_its_package_section() -> None:
    """A module split off or added has its name in docs/architecture.md, in its package's section (tables and
    prose alike) and, inside a subfolder, in the row or paragraph that names that folder."""
    sections = map_sections()
    missing = []
    for path in MODULES.values():
        parts = path.relative_to(ROOT).parts
        if path.stem == "__init__" and len(parts) > 1:
            continue
        package, folder = (parts[0], parts[1:-1]) if len(parts) > 1 else ("", ())
        named = re.compile(rf"(?<![\w.]){re.escape(path.name)}`")
        chunks = [c for c in sections.get(package, []) if not folder or f"`{folder[-1]}/`" in c]
        if not any(named.search(c) for c in chunks):
            missing.append(str(path.relative_to(ROOT.parent)))
    assert not missing, f"not in docs/architecture.md's module map: {missing}"
