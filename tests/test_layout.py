"""The package's architecture, checked from the source: the Pyodide wheel is the package
minus host/ and imports nothing of the host's, each pair of host/ folders that README's
"How it fits together" keeps apart stays apart (judging imports no runtime, runtimes/ and
serving/ import nothing of each other, only the command and the plugin import tools/), and
no two modules import each other, directly or round a loop (function-level imports count:
a cycle by lazy import is still a cycle)."""

from __future__ import annotations

import ast
import re
import tomllib
from pathlib import Path

import pytest

from py_harness.host.dist.build_wheel import in_browser_files

PACKAGE = Path(__file__).resolve().parents[1] / "py_harness"


def _module(path: Path) -> str:
    parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _imports(path: Path) -> set[str]:
    """Absolute names of what a module imports (anywhere in it)."""
    me = _module(path).split(".")
    package = me if path.name == "__init__.py" else me[:-1]
    found = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            found |= {alias.name for alias in node.names}
        elif isinstance(node, ast.ImportFrom):
            base = package[: len(package) - node.level + 1] if node.level else []
            stem = ".".join([*base, *([node.module] if node.module else [])])
            found.add(stem)
            found |= {f"{stem}.{alias.name}" for alias in node.names}
    return found


def _graph() -> dict[str, set[str]]:
    modules = {_module(p): p for p in PACKAGE.rglob("*.py")}
    return {m: {i for i in _imports(p) if i in modules and i != m} for m, p in modules.items()}


def _host_dependencies() -> set[str]:
    """Import names of the host distribution's dependencies (pyproject's, the optional ones
    included): none of them is in Pyodide."""
    project = tomllib.loads((PACKAGE.parent / "pyproject.toml").read_text())["project"]
    wanted = [*project["dependencies"], *sum(project["optional-dependencies"].values(), [])]
    names = {re.split(r"[\[=<>~! ]", w, maxsplit=1)[0].replace("-", "_") for w in wanted}
    return names - {"py_harness"}


def test_the_pyodide_wheel_is_the_package_minus_host() -> None:
    """The rule is a folder: everything outside host/ runs in the page, but for the entry
    point `python -m py_harness` needs at the top."""
    outside = {
        p
        for p in PACKAGE.rglob("*.py")
        if p.relative_to(PACKAGE).parts[0] != "host" and "__pycache__" not in p.parts
    }
    assert set(in_browser_files()) == outside - {PACKAGE / "__main__.py"}


def test_the_pyodide_wheel_imports_no_host_code_nor_host_libraries() -> None:
    host_libraries = _host_dependencies()
    assert {"numpy", "wgpu", "wgpudawn"} <= host_libraries
    for path in in_browser_files():
        for name in sorted(_imports(path)):
            top = name.split(".")[0]
            assert not name.startswith("py_harness.host") and top not in host_libraries, (
                f"{_module(path)} (in the Pyodide wheel, outside host/) imports {name}: "
                "host-only code belongs under py_harness/host/"
            )


HOST = "py_harness.host"


def _under(module: str, parts: tuple[str, ...]) -> bool:
    """Whether `module` is one of host/'s `parts` (a folder or a module) or inside one."""
    return any(module == f"{HOST}.{p}" or module.startswith(f"{HOST}.{p}.") for p in parts)


# The folder pairs README's "How it fits together" draws: (who, may not import, why).
SEPARATIONS = [
    (
        ("judge",),
        ("runtimes", "tools", "serving", "engine", "wire", "reproducers", "pytest_plugin", "cli"),
        "judging takes arrays: it runs nothing on a session",
    ),
    (("runtimes",), ("serving",), "runtimes and serving meet only below both"),
    (("serving",), ("runtimes",), "runtimes and serving meet only below both"),
    (
        ("gpu", "exchange", "dist"),
        ("runtimes", "serving", "engine", "tools", "pytest_plugin", "cli"),
        "what runtimes and serving share lies below both",
    ),
]
TOOL_USERS = ("tools", "cli", "pytest_plugin")


@pytest.mark.parametrize(
    ("who", "forbidden", "why"), SEPARATIONS, ids=["+".join(who) for who, _, _ in SEPARATIONS]
)
def test_folders_import_only_what_the_layout_allows(
    who: tuple[str, ...], forbidden: tuple[str, ...], why: str
) -> None:
    bad = [
        f"{module} imports {dep}"
        for module, deps in sorted(_graph().items())
        if _under(module, who)
        for dep in sorted(deps)
        if _under(dep, forbidden)
    ]
    assert not bad, f"{why}: " + "; ".join(bad)


def test_tools_are_imported_by_the_command_and_the_plugin_only() -> None:
    bad = [
        f"{module} imports {dep}"
        for module, deps in sorted(_graph().items())
        if not _under(module, TOOL_USERS)
        for dep in sorted(deps)
        if _under(dep, ("tools",))
    ]
    assert not bad, "tools/ sit on top, reached through cli/ or the plugin: " + "; ".join(bad)


def test_no_import_cycles() -> None:
    graph = _graph()
    # Packages import their own modules by being their parents: drop parent edges.
    graph = {m: {d for d in deps if not m.startswith(d + ".")} for m, deps in graph.items()}
    state: dict[str, int] = {}

    def visit(m: str, trail: list[str]) -> None:
        state[m] = 1
        for d in sorted(graph[m]):
            if state.get(d) == 1:
                cycle = trail[trail.index(d) :] + [d] if d in trail else [m, d]
                raise AssertionError("import cycle: " + " -> ".join(cycle))
            if d not in state:
                visit(d, [*trail, d])
        state[m] = 2

    for m in sorted(graph):
        if m not in state:
            visit(m, [m])


def test_tests_start_event_loops_on_a_thread_of_their_own() -> None:
    """A test that calls asyncio.run directly fails when a browser test ran before it in
    the same worker (Playwright's sync API leaves its loop running on the main thread): the
    outcome would depend on test order, which xdist changes from run to run. fakes.own_thread
    runs it on a thread of its own."""
    tests = Path(__file__).resolve().parent
    direct = []
    for path in sorted(tests.glob("*.py")):
        tree = ast.parse(path.read_text())
        wrapped = {
            id(arg)
            for node in ast.walk(tree)
            if isinstance(node, ast.Call) and getattr(node.func, "id", "") == "own_thread"
            for arg in node.args
        }
        direct += [
            f"{path.name}:{node.lineno}"
            for node in ast.walk(tree)
            if isinstance(node, ast.Attribute)
            and node.attr == "run"
            and getattr(node.value, "id", "") == "asyncio"
            and id(node) not in wrapped
        ]
    assert not direct, f"asyncio.run called directly (use fakes.own_thread): {direct}"
