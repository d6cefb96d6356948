"""Static resource report of compiled kernels, with no GPU.

Two independent sources, cross-checked in the tests: ptxas's verbose log
(registers, shared memory, stack frame, spill stores/loads, barriers) and the
cubin's ELF attributes (registers, frame size, barriers, launch bounds, the
size of the kernel's shared-memory section). The log is preferred; where an
NVRTC build leaves it out, the ELF still gives everything but the spill split.
"""

from __future__ import annotations

import re
import struct
from dataclasses import asdict, dataclass

__all__ = ["KernelResources", "parse_ptxas_log", "launch_bounds_from_cubin", "code_identity", "param_sizes_from_cubin",
           "elf_resources", "kernel_resources"]


@dataclass(frozen=True)
class KernelResources:
    kernel: str  # mangled name
    registers: int
    shared_static: int  # bytes of __shared__ declared in the kernel (dynamic comes at launch)
    stack_frame: int
    spill_stores: int | None  # None: unknown (no ptxas log); 0 whenever the stack frame is 0
    spill_loads: int | None
    barriers: int
    constant: int  # bytes of cmem[0] (kernel parameters and constants), 0 if not reported
    max_threads_declared: int | None  # from __launch_bounds__, None when the kernel has none

    @property
    def spill_bytes(self) -> int | None:
        if self.spill_stores is None or self.spill_loads is None:
            return None
        return self.spill_stores + self.spill_loads

    @property
    def local_bytes(self) -> int:
        """Per-thread local memory: the stack frame (spills and local arrays live there)."""
        return self.stack_frame

    def as_dict(self) -> dict:
        d = asdict(self)
        d["spill_bytes"] = self.spill_bytes
        return d


_ENTRY = re.compile(r"(?:Compiling entry function|Function properties for) '?([\w$.]+)'?")
_FRAME = re.compile(r"(\d+) bytes stack frame, (\d+) bytes spill stores, (\d+) bytes spill loads")
_USED = re.compile(r"Used (\d+) registers")
_BARRIERS = re.compile(r"used (\d+) barriers")
_SMEM = re.compile(r"(\d+) bytes smem")
_CMEM = re.compile(r"(\d+) bytes cmem\[0\]")


def parse_ptxas_log(log: str) -> dict[str, dict[str, int]]:
    """Per kernel (mangled name): the numbers `ptxas -v` printed for it."""
    out: dict[str, dict[str, int]] = {}
    current: str | None = None
    for line in log.splitlines():
        m = _ENTRY.search(line)
        if m:
            current = m.group(1)
            out.setdefault(current, {})
            continue
        if current is None:
            continue
        entry = out[current]
        if m := _FRAME.search(line):
            entry["stack_frame"], entry["spill_stores"], entry["spill_loads"] = map(int, m.groups())
        if m := _USED.search(line):
            entry["registers"] = int(m.group(1))
            for key, rx in (("barriers", _BARRIERS), ("shared_static", _SMEM), ("constant", _CMEM)):
                mm = rx.search(line)
                entry[key] = int(mm.group(1)) if mm else 0
    return out


# .nv.info attribute records: 1 byte format, 1 byte attribute, then a payload.
_EIFMT_NVAL, _EIFMT_BVAL, _EIFMT_HVAL, _EIFMT_SVAL = 1, 2, 3, 4
_EIATTR_MAX_THREADS = 0x05  # SVAL: three u32, the __launch_bounds__ / maxntid block shape
_EIATTR_FRAME_SIZE = 0x11  # SVAL in .nv.info: u32 symbol index, u32 bytes
_EIATTR_REGCOUNT = 0x2F  # SVAL in .nv.info: u32 symbol index, u32 registers
_EIATTR_NUM_BARRIERS = 0x4C  # BVAL in .nv.info.<kernel>
_EIATTR_KPARAM_INFO = 0x17  # SVAL: u32 index, u16 ordinal, u16 offset, u32 flags with the size in bits 18..31
_SM90_SHARED_RESERVED = 1024  # with a .nv.shared.reserved.0 section the kernel's window starts after it


def _elf_sections(blob: bytes, with_headers: bool = False):
    if blob[:4] != b"\x7fELF" or blob[4] != 2 or blob[5] != 1:
        raise ValueError("not a little-endian ELF64 cubin")
    shoff = struct.unpack_from("<Q", blob, 0x28)[0]
    shentsize, shnum, shstrndx = struct.unpack_from("<HHH", blob, 0x3A)
    headers = []
    for i in range(shnum):
        name, sh_type, _flags, _addr, offset, size = struct.unpack_from("<IIQQQQ", blob, shoff + i * shentsize)
        headers.append((name, sh_type, offset, size))
    _, _, stroff, strsize = headers[shstrndx]
    strtab = blob[stroff : stroff + strsize]
    sections, sizes, order = {}, {}, []
    for name, sh_type, offset, size in headers:
        end = strtab.index(b"\0", name)
        key = strtab[name:end].decode()
        order.append(key)
        sizes[key] = size  # NOBITS sections (.nv.shared.*) have a size but no bytes
        sections[key] = b"" if sh_type == 8 else blob[offset : offset + size]
    if with_headers:
        return sections, sizes, order
    return sections


def _symbol_names(sections: dict[str, bytes]) -> list[str]:
    symtab, strtab = sections.get(".symtab", b""), sections.get(".strtab", b"")
    names = []
    for off in range(0, len(symtab) - 23, 24):
        (st_name,) = struct.unpack_from("<I", symtab, off)
        names.append(strtab[st_name : strtab.index(b"\0", st_name)].decode() if st_name < len(strtab) else "")
    return names


def elf_resources(cubin: bytes) -> dict[str, dict[str, int]]:
    """Per kernel: registers, stack frame, barriers, static shared memory, launch bounds, from the ELF alone."""
    sections, sizes, _ = _elf_sections(cubin, with_headers=True)
    symbols = _symbol_names(sections)
    out: dict[str, dict[str, int]] = {}
    for attr, payload in _nv_info_records(sections.get(".nv.info", b"")):
        if attr in (_EIATTR_REGCOUNT, _EIATTR_FRAME_SIZE) and len(payload) >= 8:
            sym, value = struct.unpack_from("<II", payload)
            if sym < len(symbols):
                key = "registers" if attr == _EIATTR_REGCOUNT else "stack_frame"
                out.setdefault(symbols[sym], {})[key] = value
    out = {k: v for k, v in out.items() if f".nv.info.{k}" in sections}  # entry points, not device functions
    reserved = _SM90_SHARED_RESERVED if ".nv.shared.reserved.0" in sizes else 0
    for kernel, entry in out.items():
        shared = sizes.get(f".nv.shared.{kernel}", 0)
        entry["shared_static"] = max(shared - reserved, 0) if shared else 0
        entry["barriers"] = 0
        for attr, payload in _nv_info_records(sections.get(f".nv.info.{kernel}", b"")):
            if attr == _EIATTR_NUM_BARRIERS:
                entry["barriers"] = payload[0]
    return out


def _nv_info_records(data: bytes):
    pos = 0
    while pos + 2 <= len(data):
        fmt, attr = data[pos], data[pos + 1]
        if fmt == _EIFMT_SVAL:
            (size,) = struct.unpack_from("<H", data, pos + 2)
            yield attr, data[pos + 4 : pos + 4 + size]
            pos += 4 + size
        elif fmt in (_EIFMT_NVAL, _EIFMT_BVAL, _EIFMT_HVAL):
            yield attr, data[pos + 2 : pos + 4]
            pos += 4
        else:  # unknown format: stop rather than misread the rest
            return


def param_sizes_from_cubin(cubin: bytes) -> dict[str, list[int]]:
    """Per kernel: the byte size of each parameter, in order (pointers are 8)."""
    out: dict[str, list[int]] = {}
    for name, data in _elf_sections(cubin).items():
        if not name.startswith(".nv.info."):
            continue
        params = {}
        for attr, payload in _nv_info_records(data):
            if attr == _EIATTR_KPARAM_INFO and len(payload) >= 12:
                _index, ordinal, _offset, flags = struct.unpack_from("<IHHI", payload)
                params[ordinal] = (flags >> 18) & 0x3FFF
        out[name[len(".nv.info."):]] = [params[i] for i in sorted(params)]
    return out


_NAMES_AND_DEBUG = ("strtab", "symtab", "debug", ".note")  # (the name tables, line and debug information)


def code_identity(cubin: bytes) -> str:
    """A digest of a module's machine code and resources with the functions' names left out: two
    builds whose template arguments differ but compile to the same code (a knob that changes
    nothing for this problem) have the same identity. Every section but the name tables and the
    debug and line information counts - code, relocations, attributes, constant banks, shared
    memory sizes - each under its name less the mangled function name it ends in."""
    import hashlib

    sections, sizes, _ = _elf_sections(cubin, with_headers=True)
    parts = []
    for name, data in sections.items():
        kind = name.split("._Z")[0]  # (".text._Z21gemm_tc...": ".text")
        if not kind or any(word in kind for word in _NAMES_AND_DEBUG):
            continue
        parts.append(kind.encode() + b":" + (hashlib.sha256(data).digest() if data else str(sizes[name]).encode()))
    return hashlib.sha256(b"".join(sorted(parts))).hexdigest()[:16]


def launch_bounds_from_cubin(cubin: bytes) -> dict[str, int]:
    """Per kernel (mangled name): threads per block its __launch_bounds__ allows."""
    bounds: dict[str, int] = {}
    for name, data in _elf_sections(cubin).items():
        if not name.startswith(".nv.info."):
            continue
        for attr, payload in _nv_info_records(data):
            if attr == _EIATTR_MAX_THREADS and len(payload) >= 12:
                x, y, z = struct.unpack_from("<III", payload)
                bounds[name[len(".nv.info.") :]] = x * y * z
    return bounds


def kernel_resources(log: str, cubin: bytes) -> dict[str, KernelResources]:
    bounds = launch_bounds_from_cubin(cubin)
    from_log = {k: v for k, v in parse_ptxas_log(log).items() if "registers" in v}  # entry points only
    report = {}
    for kernel, e in elf_resources(cubin).items():
        v = from_log.get(kernel)
        if v is None:  # no ptxas log for it: ELF values; spills are 0 when there is no frame at all
            no_frame = e["stack_frame"] == 0
            v = {**e, "spill_stores": 0 if no_frame else None, "spill_loads": 0 if no_frame else None}
        report[kernel] = KernelResources(
            kernel=kernel,
            registers=v["registers"],
            shared_static=v.get("shared_static", 0),
            stack_frame=v.get("stack_frame", 0),
            spill_stores=v.get("spill_stores"),
            spill_loads=v.get("spill_loads"),
            barriers=v.get("barriers", 0),
            constant=v.get("constant", 0),
            max_threads_declared=bounds.get(kernel),
        )
    return report
