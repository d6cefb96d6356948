"""Launch chosen rungs of a family once each on fresh inputs, for a profiler or a
sanitizer to watch (`simtlab profile` and `simtlab sanitize` run this under them):

    python -m simtlab.tools.launch_once gemm 6 7 --size 2048
    python -m simtlab.tools.launch_once gemm_tc --reference cuBLAS --size 4096   # a library's kernel
    python -m simtlab.tools.launch_once gemm_tc 6 --size 4096 --param LEAN=0     # a variant of a rung
"""

from __future__ import annotations

import argparse

import cupy

from simtlab.catalog import family
from simtlab.device import device_info
from simtlab.launch import build, choose_params, runner


def parse_params(texts: list[str]) -> dict[str, int]:
    """NAME=VALUE texts as explicit parameters (choose_params puts them over the size defaults and
    the rung names any it does not have); a malformed text is an error that names it."""
    out = {}
    for text in texts:
        name, _, value = text.partition("=")
        try:
            out[name] = int(value)
        except ValueError:
            raise SystemExit(f"--param {text!r}: use NAME=integer") from None
    return out


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("family")
    ap.add_argument("rungs", nargs="*")
    ap.add_argument("--size", required=True)
    ap.add_argument("--reference", action="append", default=[],
                    help="also run the family's reference whose name starts with this (e.g. cuBLAS)")
    ap.add_argument("--param", action="append", default=[], metavar="NAME=VALUE",
                    help="a template parameter over the rung's size defaults (every rung named)")
    args = ap.parse_args()
    explicit = parse_params(args.param) or None
    fam = family(args.family)
    op = fam.op()
    problem = op.parse_size(args.size)
    dev = device_info()
    for key in args.rungs:
        rung = fam.rung(key)
        ws = op.workspace(problem, 1)
        vec = ws.vec_ok() if rung.vec_variant else None
        try:
            inst = build(rung, choose_params(rung, problem, dev, vec, explicit=explicit), dev.arch)
        except ValueError as exc:  # (a parameter the rung does not have, named)
            raise SystemExit(str(exc)) from None
        launch = inst.geometry(problem, dev)
        runner(inst, problem, ws, vec, dev)()
        cupy.cuda.get_current_stream().synchronize()
        print(f"{rung.id}: {inst.expression(vec)} grid={launch.grid} block={launch.block}", flush=True)
    for prefix in args.reference:
        refs = [r for r in op.references() if r.name.lower().startswith(prefix.lower())]
        if not refs:
            raise SystemExit(f"{fam.name} has no reference starting with {prefix!r}: "
                             f"{', '.join(r.name for r in op.references())}")
        ws = op.workspace(problem, 1)
        refs[0].make(ws)()
        cupy.cuda.get_current_stream().synchronize()
        print(f"{refs[0].name}: launched once", flush=True)


if __name__ == "__main__":
    main()
