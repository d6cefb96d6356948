"""The static profile of every configuration of the committed measured tables (tests/fixtures/*_h200_*.json):
each built through NVRTC as `simtlab tune` builds it (the problem's own parameters and the space's
fixed ones under it), its registers, the blocks an SM holds and the rounds of its work at the table's
problem on the table's GPU (tune.static), and its compiled code's identity (hw.resources.code_identity:
two configurations with one identity are one kernel, which the command measures once). Written beside
each table as
tests/fixtures/static/<table>.json, so the replays give the cost model what the command computes
live - no GPU needed, about 20 minutes on two cores for all ten tables.

    python benchmarks/table_static.py [--jobs 2] [--sms 132] [TABLE ...]
"""

from __future__ import annotations

import argparse
import datetime
import json
import subprocess
from concurrent.futures import ProcessPoolExecutor
from functools import lru_cache
from pathlib import Path

from simtlab.tune.replay import load_table, static_path, table_rung

FIXTURES = Path(__file__).resolve().parent.parent / "tests" / "fixtures"


@lru_cache(maxsize=None)
def _table(path: str):
    """(in each worker, once a table) the table, its rung and problem, and how it completes a point."""
    from simtlab.tune.session import completion

    t = load_table(path)
    rung, space, problem = table_rung(t)
    return t, rung, problem, completion(rung, space, problem)


def _profile(job):
    path, config, sms = job
    from simtlab.compile import CompileError
    from simtlab.tune.static import profile_of
    from simtlab.tune.worker import build_identity

    t, rung, problem, complete = _table(path)
    arch = t.meta["arch"]
    params = rung.params(arch, complete(config))
    p, reason = profile_of(rung, params, problem, arch, sms)
    try:  # the compiled code's identity, as the command's compilers hand it back
        code = build_identity(rung.family, rung.name, params, arch)
    except CompileError:
        code = None
    return config, {**(p.as_dict() if p else {"error": reason}), "code": code}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("tables", nargs="*", type=Path)
    ap.add_argument("--jobs", type=int, default=2)
    ap.add_argument("--sms", type=int, default=132, help="the table's GPU's SMs (the H200: 132)")
    args = ap.parse_args()
    from simtlab.compile import nvrtc_version

    commit = subprocess.run(["git", "rev-parse", "--short=7", "HEAD"], capture_output=True, text=True).stdout.strip()
    tables = args.tables or sorted(FIXTURES.glob("*_h200_*.json"))
    with ProcessPoolExecutor(args.jobs) as ex:
        for path in tables:
            t = load_table(path)
            jobs = [(str(path), dict(k), args.sms) for k in t.times]
            rows = [[*(c[n] for n in t.params), r] for c, r in ex.map(_profile, jobs, chunksize=4)]
            out = static_path(path)
            out.parent.mkdir(exist_ok=True)
            out.write_text(json.dumps({
                "table": path.name, "arch": t.meta["arch"], "sms": args.sms, "nvrtc": ".".join(map(str, nvrtc_version())),
                "commit": commit, "date": datetime.date.today().isoformat(),
                "command": "python benchmarks/table_static.py",
                "note": "each configuration's static profile as simtlab tune computes it before the search "
                        "(tune.static): registers, blocks and warps an SM, the work's units and slots; and "
                        "its compiled code's identity (code), by which the command measures one kernel once",
                "params": t.params, "rows": rows}, indent=None) + "\n")
            bad = sum("error" in r[-1] for r in rows)
            print(f"{path.name}: {len(rows)} configurations, {bad} without a profile -> {out}", flush=True)


if __name__ == "__main__":
    main()
