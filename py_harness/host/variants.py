"""The kernel variants the host knows: the built-in ones (kernels.VARIANTS, WGSL from
shaders/) and those declared in variant files (variant_file.py, WGSL beside the file).

A built-in variant travels to a runtime by name; a file's variant travels as its
declaration (Variant.to_dict) with its WGSL, so a page needs nothing installed for it.
"""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path
from typing import Any

from ..config import PACKED, AttentionConfig
from ..kernels import VARIANTS, Variant
from .judge import generated
from .judge.cases import Case
from .judge.verdict import Precision
from .paths import SHADER_DIR, shader_sources

_FROM_FILES: dict[str, tuple[Variant, dict[str, str], Path]] = {}
_FILE_CASES: dict[str, tuple[Case, ...]] = {}  # a file's own cases (its `cases` ids)
_LIMITATIONS_OF: dict[str, str] = {}  # a file's variant -> the built-in one it follows
# Where the built-in variants' WGSL is read from (pytest --shaders, check --shaders).
_BUILT_IN_DIR = [SHADER_DIR]


def snapshot() -> tuple[Any, ...]:
    """The registry's state (loaded files, the built-ins' folder), for restore()."""
    return dict(_FROM_FILES), dict(_LIMITATIONS_OF), dict(_FILE_CASES), _BUILT_IN_DIR[0]


def restore(state: tuple[Any, ...]) -> None:
    """Back to a snapshot(): what a pytest session loaded ends with it, including one run
    inside another's process (pytester), which would otherwise leave its --shaders folder
    or its variant files to the tests after it."""
    files, limitations, cases, folder = state
    _FROM_FILES.clear()
    _FROM_FILES.update(files)
    _LIMITATIONS_OF.clear()
    _LIMITATIONS_OF.update(limitations)
    _FILE_CASES.clear()
    _FILE_CASES.update(cases)
    _BUILT_IN_DIR[0] = folder


def use_shader_dir(folder: Path, judged: Iterable[str] = tuple(VARIANTS)) -> None:
    """Judge the built-in variants with the .wgsl files of another folder (an edited copy),
    which must hold the files of each built-in variant among `judged`: a folder with the
    seed's two files serves `--variant seed`."""
    if why := shader_dir_refusal(folder, judged):
        raise ValueError(f"--shaders: {why}")
    _BUILT_IN_DIR[0] = folder


def shader_dir_refusal(folder: Path, judged: Iterable[str]) -> str | None:
    """Why `folder` cannot stand in for shaders/ for the built-in variants among `judged`
    (None: it can)."""
    if not folder.is_dir():
        return f"{folder} is not a folder"
    have = set(shader_sources(folder))
    needs = {n: set(VARIANTS[n].files) - have for n in judged if n in VARIANTS}
    if missing := sorted(set().union(*needs.values())):
        lacking = [n for n, files in needs.items() if files]
        return f"{folder} lacks {', '.join(missing)} (the files of variant {', '.join(lacking)})"
    return None


def load_file(path: Path) -> str:
    """Load and check a variant file (variant_file.load); returns the variant's name."""
    from .variant_file import load

    loaded = load(path)
    name = loaded.variant.name
    if name in VARIANTS:
        raise ValueError(f"{path}: name {name!r} is a built-in variant's; choose another")
    known = _FROM_FILES.get(name)
    if known is not None and known[2].resolve() != Path(path).resolve():
        raise ValueError(f"{path}: variant {name!r} is declared in {known[2]} already")
    _FROM_FILES[name] = (loaded.variant, loaded.sources, Path(path))
    _FILE_CASES[name] = loaded.cases
    if loaded.limitations_of:
        _LIMITATIONS_OF[name] = loaded.limitations_of
    return name


def load_options(variant_files: list[Path], shaders: Path | None, judged: str) -> None:
    """A tool's --variant-file and --shaders options, applied for the variant it judges
    (ValueError names either)."""
    for path in variant_files:
        load_file(path)
    if shaders:
        use_shader_dir(shaders, [judged])


# Built-in variants that keep another's loops and arithmetic (so its driver limitations).
BUILT_IN_LIMITATIONS_OF = {"fast_f16": "fast", "fast_f16x2": "fast"}


def limitations_of(name: str) -> str:
    """The variant whose declared limitations apply to `name`: itself, the built-in one
    its file names in `limitations_of`, or the one a built-in variant keeps the loops of."""
    return _LIMITATIONS_OF.get(name, BUILT_IN_LIMITATIONS_OF.get(name, name))


def names() -> list[str]:
    return [*VARIANTS, *_FROM_FILES]


def get(name: str) -> Variant:
    if name in VARIANTS:
        return VARIANTS[name]
    if name in _FROM_FILES:
        return _FROM_FILES[name][0]
    raise KeyError(f"--variant: unknown {name!r}; known: {', '.join(names())}")


def parse(spec: str, among: Iterable[str] | None = None) -> list[str]:
    """'seed,fast' -> names, checked; 'all' -> every variant (files' too), or every one
    `among` (a tool that runs the built-in ones only: VARIANTS); none is refused
    (ValueError; an unknown name: KeyError, both naming --variant)."""
    known = names() if among is None else list(among)
    chosen = known if spec == "all" else [s.strip() for s in spec.split(",") if s.strip()]
    if unknown := [n for n in chosen if n not in known]:
        raise KeyError(f"--variant: unknown {unknown[0]!r}; known: {', '.join(known)}")
    if not chosen:
        raise ValueError(f"--variant: name at least one of {', '.join(known)}, or all")
    return chosen


def sources(name: str) -> dict[str, str]:
    """The WGSL files a variant's kernels are composed from, by file name."""
    return _FROM_FILES[name][1] if name in _FROM_FILES else shader_sources(_BUILT_IN_DIR[0])


def request_form(name: str) -> str | dict[str, Any]:
    """How a request names the variant: built-ins by name, the rest by declaration."""
    return name if name in VARIANTS else get(name).to_dict()


def refusal(name: str, cfg: AttentionConfig) -> str | None:
    """Why the variant does not support this configuration (None: it does)."""
    return get(name).refusal(cfg)


def matrix(name: str) -> tuple[Case, ...]:
    """The cases the variant is judged on (generated.matrix: the fixed matrix, or its
    envelope's), then its file's own cases."""
    own = _FILE_CASES.get(name, ())
    cases = generated.matrix(get(name))
    ids = {c.id for c in cases}
    return (*cases, *(c for c in own if c.id not in ids))


def precision(name: str) -> Precision:
    """What the variant's kernels store as f16 (its declared dtypes, packed roles by their
    parts) and compute in, in the judge's terms."""
    v = get(name)
    f16 = {p for r, d in v.dtypes.items() if d == "f16" for p in PACKED.get(r, (r,))}
    if v.lse_from and any(v.dtype(r) == "f16" for r in v.lse_from):
        f16.add("lse")  # derived from f16 row maxima and sums
    return Precision(frozenset(f16 - set(v.scratch)), v.arithmetic)
