"""The ES-module import graph of web/: every relative import names a file that exists, and no
module imports itself through others. A cycle loads in a browser, but whichever module of it
runs first sees the others' bindings uninitialised, so the order of imports decides what
works; the demo once had one (demo-run, demo-history, demo-compare)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from py_harness.host import paths

WEB = paths.WEB_DIR
# Static imports and re-exports: `import {a, b} from "./x.js"` (over several lines too),
# `import "./x.js"`, `export {a} from "./x.js"`. Dynamic import() loads after the importer
# has run, so it cannot form such a cycle, and is left out.
STATIC_IMPORT = re.compile(
    r"""^\s*(?:import\s*|(?:import|export)\b[^;"'`()]*?\bfrom\s*)["']([^"']+)["']""",
    re.MULTILINE,
)


def modules(root: Path = WEB) -> list[Path]:
    return sorted(p for p in root.rglob("*") if p.suffix in (".js", ".mjs"))


def imports_of(module: Path) -> list[str]:
    """The specifiers of `module`'s static imports, in order."""
    return STATIC_IMPORT.findall(module.read_text())


def import_graph(root: Path = WEB) -> dict[str, list[str]]:
    """Each module under `root` (by its path relative to it) -> the modules it imports there.
    Only relative specifiers name files here ("node:fs", "/pyodide/..." do not)."""
    graph: dict[str, list[str]] = {}
    for module in modules(root):
        targets = []
        for spec in imports_of(module):
            if spec.startswith(("./", "../")):
                target = (module.parent / spec).resolve()
                targets.append(target.relative_to(root.resolve()).as_posix())
        graph[module.relative_to(root).as_posix()] = targets
    return graph


def find_cycle(graph: dict[str, list[str]]) -> list[str] | None:
    """A cycle as the modules along it, the first repeated at the end; None when there is none."""
    done: set[str] = set()
    path: list[str] = []

    def visit(node: str) -> list[str] | None:
        if node in path:
            return [*path[path.index(node) :], node]
        if node in done:
            return None
        path.append(node)
        for target in graph.get(node, []):
            if cycle := visit(target):
                return cycle
        path.pop()
        done.add(node)
        return None

    for start in sorted(graph):
        if cycle := visit(start):
            return cycle
    return None


def test_the_parser_sees_the_known_imports() -> None:
    graph = import_graph()
    assert "harness/harness-core.mjs" in graph["harness/node-harness.mjs"]
    assert "harness/harness-core.mjs" in graph["harness/harness.js"]
    # Multi-line import lists count too.
    assert {"demo/demo-run.js", "demo/demo-util.js", "demo/demo-startup.js"} <= set(
        graph["demo/demo.js"]
    )


@pytest.mark.parametrize("module", [p.relative_to(WEB).as_posix() for p in modules()])
def test_relative_imports_name_files_that_exist(module: str) -> None:
    missing = [t for t in import_graph()[module] if not (WEB / t).is_file()]
    assert not missing, f"web/{module} imports what is not there: {missing}"


def test_web_has_no_import_cycle() -> None:
    cycle = find_cycle(import_graph())
    assert cycle is None, "import cycle in web/: " + " -> ".join(cycle or [])


def test_a_cycle_is_found_and_named(tmp_path: Path) -> None:
    (tmp_path / "a.js").write_text('import { b } from "./b.js";\nexport const a = 1;\n')
    (tmp_path / "b.js").write_text('import {\n  c,\n} from "./sub/c.mjs";\nexport const b = 2;\n')
    (tmp_path / "sub").mkdir()
    (tmp_path / "sub" / "c.mjs").write_text('export { a as c } from "../a.js";\n')
    (tmp_path / "d.js").write_text(
        'import "./a.js";\nimport("./d.js");\nexport const NAME = "./d.js";\n'
    )
    graph = import_graph(tmp_path)
    assert graph["d.js"] == ["a.js"]  # neither import() nor a string is an edge
    assert find_cycle(graph) == ["a.js", "b.js", "sub/c.mjs", "a.js"]
    del graph["sub/c.mjs"]
    assert find_cycle(graph) is None
