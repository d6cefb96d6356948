"""Search spaces of the tunable rungs, with the kernels' static_asserts and the
device's limits written as restrictions so invalid points never reach NVRTC."""

from __future__ import annotations

from ..hw.occupancy import arch_limits
from .space import Space

OPTIN_SMEM = arch_limits("sm_90").smem_per_block_optin  # the spaces are drawn for the H200 (sm_90)


def _warptile_restrictions(max_smem: int, with_stages: bool):
    def threads(c):
        return (c["BM"] // c["WM"]) * (c["BN"] // c["WN"]) * 32

    def sub(c):
        return c["WM"] // c["WMITER"], c["WN"] // c["WNITER"]

    rules = [
        ("warp tiles divide the block", lambda c: c["BM"] % c["WM"] == 0 and c["BN"] % c["WN"] == 0),
        ("sub-tiles are whole 4x4 lane tiles",
         lambda c: c["WM"] % c["WMITER"] == 0 and c["WN"] % c["WNITER"] == 0 and sub(c)[0] % 4 == 0 and sub(c)[1] % 4 == 0),
        ("a warp sub-tile holds 32 lanes of 4x4", lambda c: (sub(c)[0] // 4) * (sub(c)[1] // 4) == 32),
        ("32..1024 threads per block", lambda c: 32 <= threads(c) <= 1024),
        ("float4 tile loads divide among the threads",
         lambda c: c["BK"] % 4 == 0 and (c["BM"] * c["BK"]) % (4 * threads(c)) == 0
         and (c["BK"] * c["BN"]) % (4 * threads(c)) == 0),
        ("at most 128 accumulators per thread (255 registers)", lambda c: 16 * c["WMITER"] * c["WNITER"] <= 128),
        ("registers fit MINB blocks per SM",
         lambda c: (16 * c["WMITER"] * c["WNITER"] + 8 * (c["WMITER"] + c["WNITER"]) + 40) * threads(c) * c["MINB"]
         <= 65536),
    ]
    if with_stages:
        rules += [
            ("cp.async copy layout tiles the slice",
             lambda c: threads(c) % c["BK"] == 0 and threads(c) % (c["BN"] // 4) == 0
             and c["BM"] * c["BK"] // threads(c) <= 32),
            ("shared memory within the opt-in limit",
             lambda c: c["STAGES"] * (c["BK"] * (c["BM"] + 4) + c["BK"] * c["BN"]) * 4 <= max_smem),
        ]
    return rules


def gemm_warptile(max_smem: int = OPTIN_SMEM, stages: bool = True, group_m: bool = True) -> Space:
    """The tuned GEMM rung's space (rung 9 without GROUP_M, rung 8 without STAGES)."""
    params = {"BM": (64, 128, 256), "BN": (64, 128, 256), "BK": (8, 16, 32), "WM": (32, 64, 128),
              "WN": (32, 64, 128), "WMITER": (1, 2, 4), "WNITER": (1, 2, 4), "MINB": (1, 2)}
    if stages:
        params["STAGES"] = (2, 3, 4)
    fixed = {}
    if group_m:
        fixed["GROUP_M"] = 8
    return Space(params, _warptile_restrictions(max_smem, stages), fixed)


def gemm_features(config: dict) -> list[float]:
    """What the cost model sees of a configuration: the parameters and what they imply."""
    threads = (config["BM"] // config["WM"]) * (config["BN"] // config["WN"]) * 32
    accumulators = 16 * config["WMITER"] * config["WNITER"]
    smem = config.get("STAGES", 1) * (config["BK"] * (config["BM"] + 4) + config["BK"] * config["BN"]) * 4
    intensity = config["BM"] * config["BN"] / (config["BM"] + config["BN"])
    return [float(config[k]) for k in sorted(config)] + [threads, accumulators, smem, intensity,
                                                         threads * config["MINB"]]
