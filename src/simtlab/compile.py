"""CUDA C++ -> cubin through NVRTC (cuda-core), with an on-disk cache.

Works with no GPU or driver: pass `arch="sm_90"`. Without `arch`, the current
device's architecture is used. The cache key covers the source, every header it
includes (transitively, by content), the options, the architecture, the name
expressions and the NVRTC version, so a stale binary is never reused.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import shlex
from dataclasses import dataclass, field
from functools import cache
from pathlib import Path
from typing import Iterable, Mapping

from .hw.arch import Arch
from .hw.resources import KernelResources, kernel_resources

__all__ = ["CompileError", "Cubin", "KernelResources", "compile_file", "compile_source", "cache_dir", "nvrtc_version",
           "KERNELS_DIR"]

KERNELS_DIR = Path(__file__).resolve().parent / "kernels"
COMPAT_DIR = KERNELS_DIR / "compat"  # the standard headers a kernel written for nvcc includes, for NVRTC
INCLUDE_DIRS = (KERNELS_DIR / "include", KERNELS_DIR)
_CACHE_FORMAT = 1  # bump when the cached entry layout changes
_INCLUDE = re.compile(r'^\s*#\s*include\s*([<"])([^>"]+)[>"]', re.MULTILINE)  # quoted and angle includes
_MACRO_INCLUDE = re.compile(r"^\s*#\s*include\s+[A-Za-z_]", re.MULTILINE)  # #include SOME_MACRO
_HEADER_SUFFIXES = {".h", ".hh", ".hpp", ".cuh", ".inc", ".inl", ".cu"}
_ERROR_LINE = re.compile(r"^(?P<file>[^\s(][^(]*)\((?P<line>\d+)\): (?:catastrophic )?error: (?P<msg>.*)$", re.MULTILINE)


_MISSING_HEADER = re.compile(r'cannot open source file "([^"]+)"')
# headers of host libraries and of the C++ host library: a file that includes them holds host code
_HOST_ONLY = ("cublas", "cublasLt", "cudnn", "cufft", "curand.h", "cusparse", "cusolver", "nccl", "thrust/",
              "iostream", "fstream", "sstream", "vector", "string", "map", "algorithm", "memory", "chrono", "thread",
              "cuda_profiler_api.h", "helper_cuda", "helper_functions")


def header_hint(header: str) -> str:
    """What to do about a header NVRTC cannot open."""
    if header.startswith(_HOST_ONLY) or header.split("/")[-1].startswith(_HOST_ONLY):
        return (f"<{header}> belongs to host code, which NVRTC (device code only) does not compile: drop the include "
                "and the host code using it (main(), library calls) from the file, or put them under "
                "#ifndef __CUDACC_RTC__")
    return (f"<{header}> is not available under NVRTC; simtlab supplies <cstdio>, <cassert>, <cstdint>, <cmath>, "
            "<climits>, <cfloat>, <cstddef>, <cstring>, <cstdlib> (and their .h names) for kernels compiled through "
            "simtlab.Kernel - include one of those, or pass the folder holding this header in include_dirs")


class CompileError(RuntimeError):
    """NVRTC rejected a source. `log` is the full compiler log; `file`/`line` the first error; a
    header NVRTC could not open comes with what to do about it."""

    def __init__(self, name: str, log: str):
        self.name, self.log = name, log
        m = _ERROR_LINE.search(log)
        self.file = m.group("file") if m else name
        self.line = int(m.group("line")) if m else None
        where = f"{self.file}:{self.line}" if self.line else name
        first = m.group("msg").strip() if m else (log.strip().splitlines() or ["no log"])[-1]
        missing = _MISSING_HEADER.search(first)
        if missing:
            first += f" - {header_hint(missing.group(1))}"
        super().__init__(f"{where}: {first}\n{log.strip()}")


def user_source(source: str, filename: str) -> str:
    """A user's kernel source as NVRTC should see it: the nvcc compatibility prelude first
    (kernels/compat/simtlab_nvcc_compat.h: uint, ushort, ulong), then the source, its lines numbered
    as in the user's file."""
    name = filename.replace("\\", "/").replace('"', "")
    return f'#include "simtlab_nvcc_compat.h"\n#line 1 "{name}"\n{source}'



@dataclass(frozen=True)
class Cubin:
    """A compiled module: the cubin on disk and what NVRTC/ptxas said about it."""

    path: Path
    arch: str
    symbols: Mapping[str, str]  # name expression -> mangled kernel name
    log: str
    key: str
    from_cache: bool
    _resources: dict = field(default_factory=dict, repr=False, compare=False)

    def data(self) -> bytes:
        return self.path.read_bytes()

    def resources(self, name_expression: str | None = None):
        """Static report per kernel, or for one name expression."""
        if not self._resources:
            self._resources.update(kernel_resources(self.log, self.data()))
        if name_expression is None:
            return dict(self._resources)
        return self._resources[self.mangled(name_expression)]

    def mangled(self, name_expression: str) -> str:
        try:
            return self.symbols[name_expression]
        except KeyError:
            raise KeyError(f"{name_expression!r} was not instantiated in this module; have {list(self.symbols)}") from None


def cache_dir() -> Path:
    env = os.environ.get("SIMTLAB_CACHE_DIR")
    if env:
        return Path(env)
    base = os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache"
    return Path(base) / "simtlab" / "cubin"


TIMEOUT_ENV = "SIMTLAB_COMPILE_TIMEOUT"
DEFAULT_TIMEOUT_S = 300.0


def compile_timeout() -> float:
    """Seconds a compile may take (SIMTLAB_COMPILE_TIMEOUT; 0 means no limit, in this process)."""
    text = os.environ.get(TIMEOUT_ENV, "").strip()
    if not text:
        return DEFAULT_TIMEOUT_S
    try:
        value = float(text)
    except ValueError:
        raise ValueError(f"{TIMEOUT_ENV}={text!r}: give seconds, e.g. 300 (0 for no limit)") from None
    if value < 0 or value != value:
        raise ValueError(f"{TIMEOUT_ENV}={text!r}: give seconds >= 0 (0 for no limit)")
    return value


WHEEL_HEADERS_ONLY = "SIMTLAB_WHEEL_HEADERS_ONLY"  # =1: never a system toolkit's headers (CI proves the wheels do)


@cache
def toolkit_include_dirs() -> tuple[Path, ...]:
    """The CUDA headers NVRTC does not carry (cuda_fp16.h, cuda_bf16.h, mma.h and the crt/
    headers they include): from the nvidia-cuda-runtime and nvidia-cuda-crt wheels simtlab
    depends on, found through cuda-pathfinder; else a toolkit (CUDA_HOME, CUDA_PATH,
    /usr/local/cuda), unless SIMTLAB_WHEEL_HEADERS_ONLY=1. Empty where neither has a complete
    set; kernels that need none still compile."""
    candidates = []
    try:
        from cuda.pathfinder import find_nvidia_header_directory

        found = find_nvidia_header_directory("cudart")
        if found:
            candidates.append(Path(found))
    except Exception:  # an older cuda-pathfinder, or nothing found: try the usual places
        pass
    candidates += [Path(b) / "include" for b in (os.environ.get("CUDA_HOME"), os.environ.get("CUDA_PATH"),
                                                   "/usr/local/cuda") if b]
    if os.environ.get(WHEEL_HEADERS_ONLY) == "1":  # only what this Python environment installed
        candidates = [d for d in candidates if {"site-packages", "dist-packages"} & set(d.resolve().parts)]
    for d in candidates:  # a complete set: mma.h and the crt/ headers it includes come in two wheels
        if (d / "mma.h").is_file() and (d / "crt" / "mma.h").is_file() and (d / "cuda_fp16.h").is_file():
            return (d,)
    return ()


@cache
def nvrtc_version() -> tuple[int, int]:
    from cuda.bindings import nvrtc

    err, major, minor = nvrtc.nvrtcVersion()
    if err != nvrtc.nvrtcResult.NVRTC_SUCCESS:  # pragma: no cover - broken install
        raise RuntimeError(f"nvrtcVersion failed: {err}")
    return major, minor


@cache
def nvrtc_build() -> str:
    """NVRTC's version as the cache key needs it: major.minor and the library file itself (its
    name and size), so two builds of one minor version never share a cached binary."""
    major, minor = nvrtc_version()
    try:
        from cuda.pathfinder import load_nvidia_dynamic_lib

        path = Path(load_nvidia_dynamic_lib("nvrtc").abs_path)
        return f"{major}.{minor} {path.name} {path.stat().st_size}"
    except Exception:  # an older cuda-pathfinder: the version alone
        return f"{major}.{minor}"


def normalise_arch(arch: str | None) -> Arch:
    """The architecture to build for, parsed once (an `Arch`), and one this NVRTC compiles for."""
    if arch is None:
        from .device import current_arch

        return Arch(current_arch())
    arch = Arch(arch)
    supported = nvrtc_archs()
    if supported and arch.number not in supported:
        major, minor = nvrtc_version()
        raise ValueError(f"NVRTC {major}.{minor} does not compile for {arch}: it takes "
                         f"{', '.join(f'sm_{a}' for a in sorted(supported))}")
    return arch


@cache
def nvrtc_archs() -> frozenset[int]:
    """The architectures this NVRTC compiles for (75, 80, ... 121), or empty where it cannot say."""
    try:
        from cuda.bindings import nvrtc

        err, archs = nvrtc.nvrtcGetSupportedArchs()
        return frozenset(int(a) for a in archs) if err == nvrtc.nvrtcResult.NVRTC_SUCCESS else frozenset()
    except Exception:  # pragma: no cover - an old binding
        return frozenset()


def _includes(text: str, here: Path | None, dirs: Iterable[Path], seen: dict[str, str]) -> None:
    """Record the content hash of every header a source includes, transitively: quoted includes
    (looked up beside the including file first) and angle includes (the toolkit's: cuda_fp16.h,
    mma.h and what they include), as NVRTC would find them. A header found nowhere is NVRTC's
    error to report, or one of its built-in headers (versioned with NVRTC itself)."""
    if _MACRO_INCLUDE.search(text):
        seen["<macro include>"] = ""  # the file it names is known only to the preprocessor: see _key
    for kind, name in _INCLUDE.findall(text):
        candidates = ([here / name] if here and kind == '"' else []) + [d / name for d in dirs]
        path = next((p for p in candidates if p.is_file()), None)
        if path is None or str(path) in seen:
            continue
        body, digest = _header(path)
        seen[str(path)] = digest
        _includes(body, path.parent, dirs, seen)


COMMENTS = re.compile(r"//[^\n]*|/\*.*?\*/", re.DOTALL)  # C++ comments, line and block


def _code(text: str) -> bytes:
    """A source's code: comments dropped, whitespace runs made one space (a comment edit is not a
    new version of a kernel)."""
    return " ".join(COMMENTS.sub(" ", text).split()).encode()


def source_digest(path: str | Path) -> str:
    """A short digest of a kernel file's code - its own and that of every header of ours it
    includes, transitively (not the toolkit's), comments aside: which version of a rung's source a
    stored result measured. A path relative to the package's kernels folder is taken there, as
    `compile_file` does."""
    path = Path(path)
    if not path.is_absolute() and not path.is_file():
        path = KERNELS_DIR / path
    body, _ = _header(path)
    seen: dict[str, str] = {}
    _includes(body, path.parent, INCLUDE_DIRS, seen)
    h = hashlib.sha256(_code(body))
    for name in sorted(n for n in seen if Path(n).is_file()):  # (file names, not paths: the same anywhere)
        h.update(Path(name).name.encode() + b":" + _code(_header(Path(name))[0]))
    return h.hexdigest()[:12]


_HEADERS: dict[tuple, tuple[str, str]] = {}  # (path, size, mtime) -> (text, sha256): the toolkit's are large


def _header(path: Path) -> tuple[str, str]:
    st = path.stat()
    key = (str(path), st.st_size, st.st_mtime_ns)
    hit = _HEADERS.get(key)
    if hit is None:
        body = path.read_text(errors="replace")
        hit = _HEADERS[key] = (body, hashlib.sha256(body.encode()).hexdigest())
    return hit


def _folders_digest(dirs: Iterable[Path]) -> str:
    """One digest of every header-like file under `dirs`: by content for ours and the caller's,
    by name and size for a toolkit's (hundreds of files, versioned with their wheel)."""
    toolkit = set(toolkit_include_dirs())
    h = hashlib.sha256()
    for d in dirs:
        if not d.is_dir():
            continue
        for path in sorted(d.rglob("*")):
            if path.suffix not in _HEADER_SUFFIXES and not (d in toolkit and path.is_file()):
                continue
            if not path.is_file():
                continue
            h.update(str(path.relative_to(d)).encode())
            h.update(str(path.stat().st_size).encode() if d in toolkit else _header(path)[1].encode())
    return h.hexdigest()


def _key(source: str, name: str, exprs: tuple[str, ...], arch: str, options: Mapping, dirs: tuple[Path, ...]) -> str:
    headers: dict[str, str] = {}
    _includes(source, None, dirs, headers)
    if "<macro include>" in headers:  # any file in the include path may be the one it names
        headers["<macro include>"] = _folders_digest(dirs)
    material = {
        "format": _CACHE_FORMAT,
        "source": hashlib.sha256(source.encode()).hexdigest(),
        "headers": sorted((Path(p).name, h) for p, h in headers.items()),
        "name": name,
        "exprs": list(exprs),
        "arch": arch,
        "options": sorted((k, repr(v)) for k, v in options.items()),
        "nvrtc": nvrtc_build(),
    }
    return hashlib.sha256(json.dumps(material, sort_keys=True).encode()).hexdigest()[:32]


def _load_cached(meta_path: Path, cubin_path: Path) -> dict | None:
    """The cached entry, or None when it is missing or damaged (then it is rebuilt): unreadable,
    its cubin not the one its checksum names, or a field missing or of the wrong kind."""
    try:
        meta = json.loads(meta_path.read_text())
        blob = cubin_path.read_bytes()
    except (OSError, ValueError):
        return None
    if not isinstance(meta, dict) or meta.get("sha256") != hashlib.sha256(blob).hexdigest():
        return None
    if not isinstance(meta.get("symbols"), dict) or not isinstance(meta.get("log"), str):
        return None
    return meta


def _atomic_write(path: Path, data: bytes) -> None:
    """`data` to `path` through a temporary file beside it, renamed into place: a reader sees the
    old file or the new one whole. An interrupted write removes its temporary file; a folder in
    the file's place (ours to clear: the cache's) is removed first."""
    from .files import sweep_stale_temporaries, temporary_beside

    if path.is_dir():
        import shutil

        shutil.rmtree(path)
    tmp = temporary_beside(path)
    sweep_stale_temporaries(path.parent)
    try:
        tmp.write_bytes(data)
        os.replace(tmp, path)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise


def compile_source(
    source: str,
    name: str = "user_kernel.cu",
    name_expressions: Iterable[str] = (),
    arch: str | None = None,
    options: Mapping | None = None,
    include_dirs: Iterable[Path] = (),
    use_cache: bool = True,
    timeout: float | None = None,
) -> Cubin:
    """Compile CUDA C++ `source` to a cubin for `arch`.

    `name_expressions` instantiate templates (``"gemm_naive<16>"``); `options`
    are extra `cuda.core.ProgramOptions` fields (``{"use_fast_math": True}``).
    A compile that is not cached runs in a child process and is stopped after `timeout` seconds
    (default: SIMTLAB_COMPILE_TIMEOUT, else 300; 0 compiles in this process with no limit).
    Raises `CompileError` with the NVRTC log on failure or timeout.
    """
    if timeout is not None and not timeout >= 0:  # (NaN too)
        raise ValueError(f"timeout={timeout}: give seconds >= 0 (0: in this process, no limit; math.inf: no limit)")
    arch = normalise_arch(arch)
    exprs = tuple(dict.fromkeys(name_expressions))
    options = dict(options or {})
    dirs = tuple(Path(d) for d in include_dirs) + INCLUDE_DIRS + toolkit_include_dirs()
    key = _key(source, name, exprs, arch, options, dirs)
    folder = cache_dir()
    cubin_path, meta_path = folder / f"{key}.cubin", folder / f"{key}.json"
    if use_cache:
        meta = _load_cached(meta_path, cubin_path)
        if meta is not None:
            return Cubin(cubin_path, arch, meta["symbols"], meta["log"], key, True)

    from cuda.core import ProgramOptions

    extra_ptxas = options.pop("ptxas_options", ())  # added to the -v the resource report needs
    extra_ptxas = shlex.split(extra_ptxas) if isinstance(extra_ptxas, str) else list(extra_ptxas)
    fields = dict(name=name, arch=arch, std="c++17", lineinfo=True, include_path=[str(d) for d in dirs],
                  ptxas_options=["-v", *extra_ptxas], **options)
    try:
        ProgramOptions(**fields)  # checked here, so a bad option is named before any process starts
    except TypeError as exc:  # an option cuda-core's ProgramOptions does not have
        import dataclasses

        known = ", ".join(f.name for f in dataclasses.fields(ProgramOptions)) if dataclasses.is_dataclass(
            ProgramOptions) else "see cuda.core.ProgramOptions"
        raise ValueError(f"unknown compile option in {sorted(options)}: {exc}; the options are {known}") from None
    limit = compile_timeout() if timeout is None else timeout
    if limit > 0:
        from .nvrtc_worker import CompileTimeout, CompilerDied, shared_worker

        try:
            reply = shared_worker().compile(source, fields, exprs, limit)
        except CompileTimeout:
            raise CompileError(name, f"NVRTC did not finish within {limit:g} s and was stopped (raise the "
                                     f"limit with {TIMEOUT_ENV}=<seconds>, or 0 for none)") from None
        except CompilerDied as exc:
            raise CompileError(name, f"NVRTC crashed: {exc}") from None
    else:
        from .nvrtc_worker import nvrtc_compile

        reply = nvrtc_compile(source, fields, exprs)
    if reply[0] != "ok":
        raise CompileError(name, reply[1])
    _, blob, symbols, text = reply
    missing = [e for e in exprs if e not in symbols]
    if missing:  # (never cached: a module must hold what it was asked for)
        raise CompileError(name, f"the compiler's module lacks {missing} (it has {sorted(symbols)}): not cached")
    folder.mkdir(parents=True, exist_ok=True)
    _atomic_write(cubin_path, blob)
    meta = {"symbols": symbols, "log": text, "sha256": hashlib.sha256(blob).hexdigest(), "arch": arch, "name": name}
    _atomic_write(meta_path, json.dumps(meta).encode())
    return Cubin(cubin_path, arch, symbols, text, key, False)


def compile_file(
    path: str | Path,
    name_expressions: Iterable[str] = (),
    arch: str | None = None,
    options: Mapping | None = None,
    use_cache: bool = True,
    timeout: float | None = None,
) -> Cubin:
    """Compile a .cu file: a path relative to the package's kernels/ folder, or any path."""
    p = Path(path)
    # a relative path is the caller's (from the working directory) where such a file exists, else
    # one of the package's kernels ("gemm/01_naive.cu")
    full = p if p.is_absolute() or p.is_file() else KERNELS_DIR / p
    if not full.is_file():
        raise FileNotFoundError(f"no CUDA source at {full}")
    try:
        display = str(full.relative_to(KERNELS_DIR))
    except ValueError:
        display = full.name
    return compile_source(
        full.read_text(), display, name_expressions, arch, options, include_dirs=(full.parent,), use_cache=use_cache,
        timeout=timeout,
    )

