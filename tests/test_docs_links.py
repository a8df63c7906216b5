"""Every documentation path the repository names exists.

Two kinds of reference are checked:

- a `docs/....md` path (docs/verdict.md, docs/records/gpu.md) anywhere in README.md,
  CHANGELOG.md, docs/ and the text files under py_harness/, tests/, scripts/, benchmarks/,
  web/, shaders/ and examples/: resolved from the repository root, where the docs live;
- a relative markdown link or image, `[text](path)` or `![alt](path)`, in those Markdown
  files: resolved from the linking file's folder, its `#anchor` dropped.

This file is left out: its examples name missing paths on purpose. A failure names each
reference as file:line and the path that is missing, so a renamed or moved document
cannot leave a stale pointer behind.
"""

from __future__ import annotations

import re
import sys
from pathlib import Path

SELF = Path(__file__).resolve()
ROOT = SELF.parent.parent
TOP_FILES = ("README.md", "CHANGELOG.md")
TREES = ("docs", "py_harness", "tests", "scripts", "benchmarks", "web", "shaders", "examples")
SKIP_DIRS = {"node_modules", "__pycache__", "build", "dist", ".venv", "venv", ".pytest_cache"}
TEXT_SUFFIXES = {
    ".md",
    ".py",
    ".pyi",
    ".wgsl",
    ".sh",
    ".mjs",
    ".js",
    ".cjs",
    ".ts",
    ".html",
    ".css",
    ".toml",
    ".json",
    ".txt",
    ".cfg",
    ".ini",
    ".yml",
    ".yaml",
}

# docs/x.md or docs/sub/x.md, not part of a longer path or URL (examples/foo/docs/...).
DOCS_PATH = re.compile(r"(?<![\w./-])docs/(?:[\w-]+/)*[\w.-]+\.md\b")
# [text](target) and ![alt](target), with an optional "title".
MD_LINK = re.compile(r"!?\[[^\]\n]*\]\(\s*<?([^)\s>]+)>?(?:\s+\"[^\"]*\")?\s*\)")
EXTERNAL = re.compile(r"^(?:[a-zA-Z][a-zA-Z0-9+.-]*:|//|#)")


def _files() -> list[Path]:
    out = [ROOT / name for name in TOP_FILES if (ROOT / name).is_file()]
    for tree in TREES:
        base = ROOT / tree
        if not base.is_dir():
            continue
        for path in sorted(base.rglob("*")):
            rel = path.relative_to(ROOT).parts
            if any(part in SKIP_DIRS or part.startswith(".") for part in rel[:-1]):
                continue
            if path.is_file() and path.suffix in TEXT_SUFFIXES and path != SELF:
                out.append(path)
    return out


def _missing(path: Path) -> list[str]:
    try:
        text = path.read_text(encoding="utf-8")
    except (UnicodeDecodeError, OSError):
        return []
    rel = path.relative_to(ROOT).as_posix()
    problems = []
    for lineno, line in enumerate(text.splitlines(), 1):
        for match in DOCS_PATH.finditer(line):
            target = match.group(0)
            if not (ROOT / target).is_file():
                problems.append(f"{rel}:{lineno}: {target}")
        if path.suffix != ".md":
            continue
        for match in MD_LINK.finditer(line):
            target = match.group(1).split("#", 1)[0]
            if not target or EXTERNAL.match(target):
                continue
            base = ROOT if target.startswith("/") else path.parent
            resolved = base / target.lstrip("/")
            if not resolved.exists():
                shown = resolved.relative_to(ROOT) if resolved.is_relative_to(ROOT) else resolved
                problems.append(f"{rel}:{lineno}: {match.group(1)} (no {shown.as_posix()})")
    return problems


def test_the_scan_sees_the_docs():
    files = {p.relative_to(ROOT).as_posix() for p in _files()}
    assert "README.md" in files
    assert any(f.startswith("docs/records/") for f in files)
    assert "py_harness/host/judge/cases.py" in files
    assert "tests/test_docs_links.py" not in files


def test_every_docs_path_and_relative_link_exists():
    problems = [problem for path in _files() for problem in _missing(path)]
    assert not problems, "references to missing files:\n" + "\n".join(problems)


def test_the_checker_catches_a_missing_path(tmp_path, monkeypatch):
    fake = tmp_path / "docs"
    fake.mkdir()
    (fake / "real.md").write_text("see [there](real.md) and docs/real.md\n")
    (fake / "page.md").write_text(
        "fine: docs/real.md, [ok](real.md), [web](https://example.org/x.md), [a](#top)\n"
        "gone: docs/records/gone.md\n"
        "![plot](missing.svg)\n"
    )
    monkeypatch.setattr(sys.modules[__name__], "ROOT", tmp_path)
    problems = _missing(fake / "page.md")
    assert problems == [
        "docs/page.md:2: docs/records/gone.md",
        "docs/page.md:3: missing.svg (no docs/missing.svg)",
    ]
