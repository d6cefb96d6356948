"""Roofline: where each kernel sits against the memory and compute ceilings.

The ceilings are measured, not quoted: the bandwidth roof is the fastest
device-to-device copy stored for the device (the elementwise ladder's
reference) and the compute roof the fastest library GEMM stored for it
(cuBLAS SGEMM for fp32). Datasheet peaks are shown beside them. A kernel's
arithmetic intensity comes from its family's FLOP and byte counts (the
fewest bytes the problem must move), so the roof it is held to is a floor
no implementation can beat.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Iterable

__all__ = ["GPUS", "GpuSpec", "gpu_spec", "Ceilings", "ceilings_from_store", "Point", "points_from_rows",
           "roofline_chart"]


@dataclass(frozen=True)
class GpuSpec:
    """Datasheet figures (dense, no sparsity), for plans on machines without the GPU."""

    name: str
    arch: str
    sms: int
    fp32_tflops: float
    bandwidth_gbs: float
    bf16_tflops: float
    memory_gb: float  # device memory, GB (1e9 bytes): the largest problem a plan for it takes


GPUS: dict[str, GpuSpec] = {
    key: g
    for key, g in (
        ("h200", GpuSpec("NVIDIA H200 SXM", "sm_90", 132, 66.9, 4800.0, 989.0, 141.0)),
        ("h100", GpuSpec("NVIDIA H100 SXM", "sm_90", 132, 66.9, 3350.0, 989.0, 80.0)),
        ("a100", GpuSpec("NVIDIA A100 SXM 80GB", "sm_80", 108, 19.5, 2039.0, 312.0, 80.0)),
        ("l40s", GpuSpec("NVIDIA L40S", "sm_89", 142, 91.6, 864.0, 362.0, 48.0)),
        ("rtx4090", GpuSpec("NVIDIA GeForce RTX 4090", "sm_89", 128, 82.6, 1008.0, 165.0, 24.0)),
        ("v100", GpuSpec("NVIDIA V100 SXM2", "sm_70", 80, 15.7, 900.0, 0.0, 32.0)),
    )
}


def gpu_spec(name: str) -> GpuSpec:
    try:
        return GPUS[name.lower()]
    except KeyError:
        raise ValueError(f"no datasheet entry for {name!r}; known: {', '.join(GPUS)}") from None


@dataclass(frozen=True)
class Ceilings:
    device: str
    bandwidth_gbs: float  # measured (or datasheet when nothing is measured)
    compute_gflops: float
    datasheet_bandwidth_gbs: float | None = None
    datasheet_compute_gflops: float | None = None
    measured: bool = True
    source: str = ""

    @property
    def ridge(self) -> float:
        """Intensity (FLOP/byte) where the two roofs meet."""
        return self.compute_gflops / self.bandwidth_gbs

    def roof(self, intensity: float) -> float:
        return min(self.compute_gflops, intensity * self.bandwidth_gbs)

    def bound(self, intensity: float) -> str:
        return "memory-bound" if intensity < self.ridge else "compute-bound"

    def as_dict(self) -> dict:
        d = asdict(self)
        d["ridge"] = self.ridge
        return d


def ceilings_from_store(store, device: str, bandwidth_ref: str = "device copy",
                        compute_ref: str = "cuBLAS") -> Ceilings:
    """The best verified measurements of the two references stored for `device`."""
    def best(rung: str, column: str):
        return store.best_reference(device, rung, column)

    bw, n_bw, runs_bw = best(bandwidth_ref, "gbs")
    fl, n_fl, runs_fl = best(compute_ref, "gflops")
    if not bw or not fl:
        missing = [n for n, v in ((f"'{bandwidth_ref}' (simtlab ladder elementwise)", bw),
                                  (f"'{compute_ref}' (simtlab ladder gemm)", fl)) if not v]
        raise LookupError(f"no stored {' and '.join(missing)} measurement for {device}: run those ladders first")
    flat = device.upper().replace(" ", "")
    spec = next((g for key, g in GPUS.items() if key.upper() in flat), None)
    return Ceilings(device, bw, fl, spec.bandwidth_gbs if spec else None,
                    spec.fp32_tflops * 1e3 if spec else None, True,
                    f"{bandwidth_ref}: best of {n_bw} rows (runs {runs_bw}); {compute_ref}: best of {n_fl} (runs {runs_fl})")


def datasheet_ceilings(spec: GpuSpec, dtype: str = "float32") -> Ceilings:
    """fp32 problems meet the CUDA-core peak; fp16/bf16 ones the dense tensor-core peak."""
    tflops = spec.bf16_tflops if dtype in ("float16", "bfloat16") and spec.bf16_tflops else spec.fp32_tflops
    kind = "tensor-core fp16/bf16" if tflops is spec.bf16_tflops else "fp32"
    return Ceilings(spec.name, spec.bandwidth_gbs, tflops * 1e3, spec.bandwidth_gbs, tflops * 1e3,
                    measured=False, source=f"datasheet ({kind})")


@dataclass(frozen=True)
class Point:
    family: str
    kernel: str
    problem: str
    intensity: float  # FLOP per byte of the problem's minimal traffic
    gflops: float
    roof_gflops: float
    bound: str

    @property
    def pct_of_roof(self) -> float:
        return 100.0 * self.gflops / self.roof_gflops if self.roof_gflops else 0.0


def points_from_rows(rows: Iterable[dict], ceilings: Ceilings) -> list[Point]:
    """Roofline points for stored result rows (verified rungs and references). The measured compute
    roof is the fp32 library GEMM, so only fp32 rows are placed under it (a tensor-core rung would
    sit above a roof that is not its own)."""
    from ..catalog import family

    pts = []
    for r in rows:
        if r["status"] not in ("ok", "reference") or not r.get("gflops") or not r.get("gbs"):
            continue
        if r.get("dtype") not in (None, "float32"):
            continue
        fam = family(r["family"])
        problem = fam.op().parse_size(r["problem"].split()[0])
        intensity = problem.flops / problem.bytes
        pts.append(Point(r["family"], r["rung"], r["problem"], intensity, r["gflops"], ceilings.roof(intensity),
                         ceilings.bound(intensity)))
    return pts


MARKERS = "osD^vP*Xhp<>"  # a rung's marker: its place in its family (colour: the family)


def roofline_chart(points: list[Point], ceilings: Ceilings, path, title: str = ""):
    """Every point placed under the measured roof (and the datasheet's, dashed), each roof labelled
    with its rate; a family one colour, its rungs told apart by marker (references hollow), each
    legend entry naming the rung and its best share of the roof. The legend stands under the axes
    in columns, and the figure grows to hold it whole."""
    import math

    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    families = list(dict.fromkeys(p.family for p in points))
    family_of = {p.kernel: p.family for p in points}
    # (grouped by family, its references first, then its rungs in ladder order)
    kernels = sorted(dict.fromkeys(p.kernel for p in points),
                     key=lambda k: (families.index(family_of[k]), "/" in k, k))
    columns = min(4, max(1, math.ceil(len(kernels) / 8)))
    rows = math.ceil((len(kernels) + 2) / columns)
    fig, ax = plt.subplots(figsize=(14, 6.5 + 0.16 * rows), layout="constrained")
    lo = min([p.intensity for p in points] + [0.05]) / 2
    hi = max([p.intensity for p in points] + [ceilings.ridge * 4]) * 2
    xs = [lo * (hi / lo) ** (i / 200) for i in range(201)]
    ax.loglog(xs, [ceilings.roof(x) for x in xs], color="black", linewidth=2, label="measured roof")
    _label_roof(ax, ceilings, lo, hi, "black", "measured")
    if ceilings.datasheet_bandwidth_gbs and ceilings.datasheet_compute_gflops:
        sheet = Ceilings(ceilings.device, ceilings.datasheet_bandwidth_gbs, ceilings.datasheet_compute_gflops)
        ax.loglog(xs, [sheet.roof(x) for x in xs], color="gray", linestyle="--", linewidth=1, label="datasheet roof")
        _label_roof(ax, sheet, lo, hi, "gray", "datasheet")
    palette = plt.get_cmap("tab10")
    seen: dict[str, int] = {}
    for k in kernels:
        mine = [p for p in points if p.kernel == k]
        fam = mine[0].family
        colour = palette(families.index(fam) % 10)
        nth = seen[fam] = seen.get(fam, -1) + 1
        reference = "/" not in k  # (rung ids are family/NN_name; a reference has its library's name)
        best = max(mine, key=lambda p: p.gflops)
        ax.scatter([p.intensity for p in mine], [p.gflops for p in mine], s=34, zorder=3,
                   marker=MARKERS[nth % len(MARKERS)], facecolors="none" if reference else colour, edgecolors=colour,
                   label=f"{fam}: {k.split('/')[-1]} (best {best.pct_of_roof:.0f}% of roof)")
    ax.set_xlabel("arithmetic intensity (FLOP / byte of minimal DRAM traffic)")
    ax.set_ylabel("GFLOP/s")
    ax.set_title(title or f"roofline, {ceilings.device}")
    ax.grid(True, which="both", alpha=0.25)
    fig.legend(fontsize=7, loc="outside lower center", ncols=columns)
    fig.savefig(path, dpi=110, format="png", bbox_inches="tight")  # a path or a binary file object
    plt.close(fig)
    return Path(path) if isinstance(path, (str, Path)) else path


def _label_roof(ax, c: Ceilings, lo: float, hi: float, colour: str, what: str) -> None:
    """The roof's two rates written on it: the bandwidth along its slope, the compute rate on its flat."""
    x_slope = max(lo * 2, c.ridge / 30)
    ax.annotate(f"{what} {c.bandwidth_gbs:.0f} GB/s", (x_slope, c.roof(x_slope)), textcoords="offset points",
                xytext=(0, 6), rotation=25, fontsize=8, color=colour)
    x_flat = min(hi / 3, c.ridge * 2)
    ax.annotate(f"{what} {c.compute_gflops / 1e3:.1f} TFLOP/s", (x_flat, c.compute_gflops), textcoords="offset points",
                xytext=(0, 5), fontsize=8, color=colour)
