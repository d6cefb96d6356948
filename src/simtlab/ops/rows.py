"""What the row-wise families (softmax, layernorm) share: a rows x cols matrix stored as fp32, bf16
or fp16 (fp32 arithmetic either way), the operator a problem asks for (the forward or its
backward), its size syntax, 16-bit storage helpers, and the launch shape of the rungs that hold a
whole row in registers."""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from ..launch import Launch
from ..space import Space
from .base import ITEMSIZE, MAX_DIM, Reference, bf16_bits_to_float32, device_copy, parse_int, to_bf16_bits, torch_reference

DTYPE = "float32"
DTYPES = {"fp32": "float32", "bf16": "bfloat16", "fp16": "float16"}  # size suffixes
SHORT = {v: k for k, v in DTYPES.items()}
DT = {"float32": 0, "bfloat16": 1, "float16": 2}  # the kernels' DT template argument (simtlab_io.cuh)
MAX_REGISTER_ROW = 32768  # a row in registers: 1024 threads x 8 groups of 4


@dataclass(frozen=True)
class RowProblem:
    """rows x cols in a storage type, and the operator asked of each row: a family's OPS, its first
    the forward the early rungs compute (size syntax 'ROWSxCOLS[:bf16|:fp16][:OP]')."""
    rows: int
    cols: int
    dtype: str = DTYPE
    op: str = ""  # "" is the family's first operator
    what: ClassVar[str] = "row-wise"
    OPS: ClassVar[tuple[str, ...]] = ("",)
    STREAMS: ClassVar[dict[str, int]] = {}  # row-length streams an operator moves (read and written), where not 2

    def __post_init__(self):
        if int(self.rows) < 1 or int(self.cols) < 1:
            raise ValueError(f"{self.what} shape must be at least 1x1, got {self.rows}x{self.cols}")
        if self.dtype not in DT:
            raise ValueError(f"{self.what} storage is float32, bfloat16 or float16, not {self.dtype}")
        if self.op == "":
            object.__setattr__(self, "op", self.OPS[0])
        elif self.op not in self.OPS:
            raise ValueError(f"{self.what}: no operator {self.op!r}; the family computes {', '.join(self.OPS)}")

    @property
    def itemsize(self) -> int:
        return ITEMSIZE[self.dtype]

    @property
    def label(self) -> str:
        return (f"{self.rows}x{self.cols}" + ("" if self.dtype == DTYPE else f":{SHORT[self.dtype]}")
                + ("" if self.op == self.OPS[0] else f":{self.op}"))

    @property
    def backward(self) -> bool:
        return self.op.endswith("_backward")

    @property
    def streams(self) -> int:
        """Matrices of the problem's shape read or written once (x and y: 2; a backward's y or x, dy and dx: 3)."""
        return self.STREAMS.get(self.op, 2)

    @property
    def bytes(self) -> int:
        return self.streams * self.itemsize * self.rows * self.cols

    @classmethod
    def parse(cls, text: str, **_):
        """'ROWSxCOLS', then ':bf16' or ':fp16' for 16-bit storage and ':OP' for another of the
        family's operators, in either order."""
        size, *kinds = str(text).lower().split(":")
        dtype, op = DTYPE, ""
        for kind in kinds:
            if kind in DTYPES:
                dtype = DTYPES[kind]
            elif kind in cls.OPS:
                op = kind
            else:
                raise ValueError(f"{cls.what} {text!r}: {kind!r} is neither a storage type (fp32, bf16, fp16) nor one "
                                 f"of the family's operators ({', '.join(cls.OPS)})")
        parts = size.split("x")
        if len(parts) != 2:
            raise ValueError(f"{cls.what} size {text!r}: use ROWSxCOLS, e.g. 32768x4096 or 32768x4096:bf16")
        return cls(*(parse_int(q, f"{cls.what} size {text!r}") for q in parts), dtype, op)


def matrix_of(name: str, shape: tuple) -> tuple[int, int]:
    """(rows, cols) of an operand whose last dimension holds the rows (its leading ones, any
    number, flattened), or a one-line error."""
    if len(shape) < 1:
        raise ValueError(f"{name} is a 0-d array: the operation runs along a dimension")
    rows = 1
    for n in shape[:-1]:
        rows *= n
    if rows > MAX_DIM or shape[-1] > MAX_DIM:
        raise ValueError(f"{name} of shape {tuple(shape)} is {rows} rows of {shape[-1]}: the kernels count rows and "
                         f"columns with 32-bit integers (at most {MAX_DIM} each)")
    return rows, shape[-1]


def vector_of(op: str, name: str, shape: tuple | None, cols: int) -> None:
    """A per-column operand (weight, bias) must hold one value per column."""
    if shape is not None and tuple(shape) != (cols,):
        raise ValueError(f"simtlab.{op}: {name} has shape {tuple(shape)}; it takes one value per column, ({cols},)")


def forward_only(rung, p: RowProblem) -> str | None:
    """The early rungs compute the family's first operator only."""
    if p.op != p.OPS[0]:
        return f"rung {rung.stage} computes {p.OPS[0]} only; {p.op} runs on the family's operator rung"
    return None


def dtype_params(p: RowProblem, device=None, vec=None) -> dict:
    """The storage type picks the DT template argument."""
    return {"DT": DT[p.dtype]}


def row_params(p: RowProblem, device=None, vec=None) -> dict:
    """Launch shape of a rung that keeps its row in registers: a warp per row up to 1024 values, a
    block of 256 up to 8192 and of 1024 up to 32768, with VPT groups of 4 per thread covering the row."""
    if p.cols > MAX_REGISTER_ROW:
        raise ValueError(f"this rung keeps a row in registers: at most {MAX_REGISTER_ROW} columns, got {p.cols}")
    dt = DT[p.dtype]
    if p.cols <= 1024:
        return {"DT": dt, "BLOCK": 128, "VPT": -(-p.cols // 128), "WARP_ROWS": 1}
    block = 256 if p.cols <= 8192 else 1024
    return {"DT": dt, "BLOCK": block, "VPT": -(-p.cols // (4 * block)), "WARP_ROWS": 0}


def geometry_row(params, p: RowProblem, device=None) -> Launch:
    """A block per row."""
    return Launch((p.rows, 1, 1), (params["BLOCK"], 1, 1))


def register_row_space(max_smem: int, early: bool = False) -> Space:
    """The register-row rungs' knobs (softmax 4, layernorm 2-3; layernorm's EARLY too): threads a
    block, groups of 4 values a thread, a warp or a block per row. Whether a point covers a row
    depends on the row's length: one that does not is refused at launch (geometry_vectorized), so at
    a given size part of the space fails, each with its reason."""
    params = {"BLOCK": (32, 64, 128, 256, 512, 1024), "VPT": (1, 2, 3, 4, 6, 8, 12, 16, 24, 32), "WARP_ROWS": (0, 1)}
    if early:
        params["EARLY"] = (0, 1)
    def registers(c) -> int:  # measured with ptxas (sm_90): ~4 a group for softmax, ~5 for layernorm, ~15
        # when layernorm's weight and bias groups are loaded early and held as well
        per_group, base = (15, 16) if early and c["EARLY"] else (5 if early else 4, 24)
        return per_group * c["VPT"] + base

    return Space(params, [("a thread's values fit its share of the registers (no spill by design)",
                           lambda c: registers(c) <= min(255, 65536 // c["BLOCK"]))])


def geometry_vectorized(params, p: RowProblem, device=None) -> Launch:
    """A warp per row (WARP_ROWS) or a block per row; the lanes of a row hold it all in registers."""
    lanes = 32 if params["WARP_ROWS"] else params["BLOCK"]
    if lanes * 4 * params["VPT"] < p.cols:
        raise ValueError(f"{lanes} lanes a row x {params['VPT']} groups of 4 hold {lanes * 4 * params['VPT']} "
                         f"values, not a {p.cols}-value row: more VPT" + ("" if params["WARP_ROWS"] else " or BLOCK")
                         + (", or a block a row (WARP_ROWS 0)" if params["WARP_ROWS"] else ""))
    if params["WARP_ROWS"] and params["BLOCK"] % 32:
        raise ValueError(f"a warp a row needs whole warps: BLOCK {params['BLOCK']} is not a multiple of 32")
    rows_per_block = params["BLOCK"] // 32 if params["WARP_ROWS"] else 1
    return Launch((-(-p.rows // rows_per_block), 1, 1), (params["BLOCK"], 1, 1))


STREAMED = 0  # VPT of the operator rungs' rows streamed through L2 instead of held in registers


def geometry_rows(params, p: RowProblem, device=None) -> Launch:
    """The operator rungs: a warp or a block a row with the row in registers (geometry_vectorized),
    or a block a row streaming it (VPT 0)."""
    if params["VPT"] == STREAMED:
        if params["WARP_ROWS"]:
            raise ValueError("streamed rows (VPT 0) take a block each: WARP_ROWS 0")
        return Launch((p.rows, 1, 1), (params["BLOCK"], 1, 1))
    return geometry_vectorized(params, p, device)


def store(values, dtype: str):
    """A float32 CuPy array in the storage type (bf16 as uint16 bits: CuPy has no bfloat16)."""
    if dtype == "bfloat16":
        return to_bf16_bits(values)
    return values.astype(dtype, copy=False)


def load(stored, dtype: str):
    """The float32 values of stored data."""
    return bf16_bits_to_float32(stored) if dtype == "bfloat16" else stored.astype("float32", copy=False)


def torch_view(stored, dtype: str):
    """A PyTorch tensor over stored data (bf16 bits reinterpreted as torch.bfloat16, no copy)."""
    import torch

    t = torch.as_tensor(stored, device="cuda")
    return t.view(torch.bfloat16) if dtype == "bfloat16" else t


def poison_value(dtype: str):
    """NaN in the storage type."""
    return 0x7FC0 if dtype == "bfloat16" else float("nan")


def vec_ok(p: RowProblem, *arrays) -> bool:
    """Groups of 4 need rows that are a multiple of 4 long and bases aligned to 4 elements."""
    return p.cols % 4 == 0 and all(a.data.ptr % (4 * p.itemsize) == 0 for a in arrays)


def _copy_of_rows(ws):
    """A copy moving the bytes the problem must move (half read, half written)."""
    return device_copy(ws.p.bytes // 2)


def row_references(torch_name: str, torch_make) -> list[Reference]:
    """The row-wise families' bars: a device copy of the matrix, and the PyTorch operation."""
    return [Reference("device copy", _copy_of_rows, verifiable=False)] + torch_reference(torch_name, torch_make)
