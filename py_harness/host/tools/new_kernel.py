"""`py-harness new-kernel A.wgsl [B.wgsl ...]`: a variant file's skeleton from a team's WGSL.

Reads the files' bindings, structs and @compute entry points (wgsl_decls) and writes a TOML
variant file that lists every pass with every binding it uses, each given the role its name
suggests (Q, key, out, dO, ...) or a scratch buffer's, the uniform struct's fields with the
expressions their names suggest, and TODO where the WGSL cannot say (layouts, grids, sizes,
the envelope). `py-harness lint-kernel FILE.toml` then checks it without running anything;
docs/own-kernels.md explains each key.
"""

from __future__ import annotations

import argparse
import re
import sys
from pathlib import Path

from ...params import KNOWN_PARAMS
from ..wgsl_decls import Module, Resource, scan

# Role by a binding's name, lower-cased with _buf / _buffer / _in / _out tails removed.
ROLE_NAMES: dict[str, tuple[str, ...]] = {
    "q": ("q", "query", "queries"),
    "k": ("k", "key", "keys"),
    "v": ("v", "value", "values"),
    "o": ("o", "out", "output", "attn_out"),
    "lse": ("l", "lse", "logsumexp", "softmax_lse"),
    "d_out": ("do", "d_out", "dout", "grad_out", "grad_o", "go"),
    "dq": ("dq", "grad_q", "gq"),
    "dk": ("dk", "grad_k", "gk"),
    "dv": ("dv", "grad_v", "gv"),
    "mask": ("mask", "attn_mask", "bias"),
    "kv": ("kv",),
    "qkv": ("qkv", "inp"),
}
# A uniform struct field's likely value, by its lower-cased name.
FIELD_GUESSES: dict[str, str] = {
    **dict.fromkeys(("b", "batch", "bs", "n_batch"), "batch"),
    **dict.fromkeys(("h", "nh", "heads", "n_head", "n_heads"), "num_heads"),
    **dict.fromkeys(("n", "t", "s", "seq", "seq_len", "seqlen", "n_ctx"), "seq_q"),
    **dict.fromkeys(("d", "hs", "hd", "dim", "head_size"), "head_dim"),
    **dict.fromkeys(("sm_scale", "softmax_scale", "scale_factor"), "scale"),
    **dict.fromkeys(("is_causal", "causal_mask"), "causal"),
    "c": "num_heads * head_dim",
}
_TAILS = re.compile(r"(_buf|_buffer|_in|_tensor|_data)$")


def role_of(resource: Resource) -> str:
    """The role a binding's name suggests; a scratch buffer's own name where none does."""
    if resource.kind == "uniform":
        return "params"
    name = _TAILS.sub("", resource.name.lower())
    for role, names in ROLE_NAMES.items():
        if name in names:
            return role
    return resource.name


def skeleton(files: list[Path], name: str, base: Path) -> str:
    """The TOML text of a variant file for these WGSL files, written in folder `base`."""
    sources = [(str(_relative(p, base)), p.read_text()) for p in files]
    module = scan(sources)
    entries = [f for f in module.functions.values() if f.is_compute]
    if not entries:
        raise ValueError(f"no @compute entry point in {', '.join(n for n, _ in sources)}")
    passes = []
    scratch: list[str] = []
    structs = {}
    for fn in entries:
        used = module.used_resources(fn.name)
        roles = {r.binding: role_of(r) for r in used if r.group == 0}
        for r in used:
            role = roles.get(r.binding)
            if role == "params" and r.type in module.structs:
                structs[r.type] = module.structs[r.type]
            elif role not in (*ROLE_NAMES, "params") and role not in scratch:
                scratch.append(str(role))
        writes = {roles[r.binding] for r in used if r.kind == "storage" and r.binding in roles}
        backward = bool(writes & {"dq", "dk", "dv"}) or re.search(r"bwd|backward|grad", fn.name)
        passes.append((fn.name, roles, bool(backward), _grid_guess(module, fn.name)))
    named = ", ".join(n for n, _ in sources)
    out = [
        f"# A variant file for {named}, written by py-harness new-kernel:",
        "# check every TODO, then `py-harness lint-kernel` this file (docs/own-kernels.md).",
        f'name = "{name}"',
        'description = "TODO: what these kernels compute"',
        f"files = {_toml_list([n for n, _ in sources])}",
        'supports = ["causal"]  # TODO: what a configuration may use (causal, gqa, mask, ...)',
        "# TODO: each tensor's layout where it is not [B, S, H, D] (the LSE: [B, H, S]), e.g.",
        '# layouts = { q = "BHSD", k = "BHSD", v = "BHSD", o = "BHSD", lse = "BHS" }',
        '# lse = "log2"  # TODO: if the LSE is in base 2; "none" if the kernels write none',
        "",
    ]
    for struct in structs.values():
        out.append(f"[params]  # struct {struct.name} ({struct.file}:{struct.line})")
        for field, ftype in struct.fields:
            out.append(_field_line(field, ftype))
        out.append("")
    for buf in scratch:
        out += [f"[scratch.{buf}]", 'size = "TODO"  # floats, an expression', "zeroed = false", ""]
    out += [
        "[envelope]  # TODO: what the kernels claim to compute",
        "# head_dim = [64]",
        "# seq_q = { max = 4096 }",
        '# require = ["seq_q == seq_k"]',
        "",
    ]
    forward = [p for p in passes if not p[2]]
    for entry, roles, is_backward, grid in passes:
        header = (
            "[[backward]]" if is_backward else "[[forward]]" if len(forward) > 1 else "[forward]"
        )
        bindings = ", ".join(f"{role} = {n}" for n, role in sorted(roles.items()))
        out += [
            header,
            f'entry_point = "{entry}"',
            f"bindings = {{ {bindings} }}  # TODO: check each role",
            f"grid = {_toml_list(grid)}  # TODO: the workgroups along x, y, z",
            "",
        ]
    return "\n".join(out)


def _field_line(field: str, ftype: str) -> str:
    low = field.lower()
    if field in KNOWN_PARAMS:
        return f"# {field}: the harness's own field of that name"
    if low.startswith(("_pad", "pad")):
        return f"# {field}: padding (zeros)"
    guess = FIELD_GUESSES.get(low)
    if guess:
        return f'{field} = "{guess}"  # TODO: check ({ftype})'
    return f'{field} = "TODO"  # {ftype}: an expression over the configuration'


def _grid_guess(module: Module, entry: str) -> list[str]:
    size = module.workgroup_size(entry)
    rows = size[0] if size else "TODO"
    return [f"ceil(seq_q / {rows})", "num_heads", "batch"]


def _toml_list(items: list[str]) -> str:
    return "[" + ", ".join(f'"{i}"' for i in items) + "]"


def _relative(path: Path, base: Path) -> Path:
    try:
        return path.resolve().relative_to(base.resolve())
    except ValueError:
        return path.resolve()


def main(argv: list[str]) -> int:
    ap = argparse.ArgumentParser(prog="py-harness new-kernel", description=__doc__)
    ap.add_argument("wgsl", nargs="+", type=Path, help="the kernels' .wgsl files, in module order")
    ap.add_argument("-o", "--out", type=Path, help="the TOML to write (default: beside the first)")
    ap.add_argument("--name", help="the variant's name (default: the first file's stem)")
    ap.add_argument("--force", action="store_true", help="overwrite an existing --out")
    args = ap.parse_args(argv)
    for p in args.wgsl:
        if not p.is_file():
            ap.error(f"{p}: no such file")
    out = args.out or args.wgsl[0].with_suffix(".toml")
    if out.exists() and not args.force:
        ap.error(f"--out: {out} exists (--force to overwrite it)")
    name = args.name or re.sub(r"[^A-Za-z0-9_.-]", "_", args.wgsl[0].stem)
    try:
        text = skeleton(args.wgsl, name, out.parent)
    except ValueError as exc:
        ap.error(str(exc))
    out.write_text(text)
    print(f"new-kernel: wrote {out}; fill in its TODOs, then: py-harness lint-kernel {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
