"""One GPU architecture name, parsed once: `Arch("90")`, `Arch("sm_90a")`, `Arch.of((9, 0))`.

An `Arch` is the canonical string NVRTC takes ("sm_90", "sm_90a", "sm_100f"), so it goes wherever
an architecture string went, and it carries what other modules used to cut out of that string
themselves: the compute capability, the "a"/"f" suffix, the base architecture whose limits apply,
and the target an architecture-specific build needs."""

from __future__ import annotations

import re

__all__ = ["Arch"]

_FORM = re.compile(r"(?:sm_)?(\d{2,3})([af]?)")


class Arch(str):
    """'sm_90' and its parts. Raises ValueError, naming the text, for anything else."""

    major: int
    minor: int
    suffix: str  # "" | "a" (architecture-specific: wgmma, setmaxnreg) | "f" (family)

    def __new__(cls, text: str | Arch):
        if isinstance(text, Arch):
            return text
        m = _FORM.fullmatch(str(text).strip().lower())
        if not m:
            raise ValueError(f"arch must look like 'sm_90' (or 'sm_90a'), got {text!r}")
        digits, suffix = m.groups()
        self = super().__new__(cls, f"sm_{digits}{suffix}")
        self.major, self.minor, self.suffix = int(digits[:-1]), int(digits[-1]), suffix
        return self

    @classmethod
    def of(cls, capability: tuple[int, int]) -> Arch:
        return cls(f"sm_{capability[0]}{capability[1]}")

    @property
    def capability(self) -> tuple[int, int]:
        return self.major, self.minor

    @property
    def number(self) -> int:
        """90 for sm_90a: how NVRTC lists what it supports."""
        return self.major * 10 + self.minor

    @property
    def base(self) -> Arch:
        """sm_90 for sm_90a: the architecture whose resources (and tuned defaults) apply."""
        return Arch(f"sm_{self.number}") if self.suffix else self

    @property
    def specific(self) -> Arch:
        """sm_90a for sm_90: the target of a build that uses architecture-specific instructions."""
        return self if self.suffix == "a" else Arch(f"sm_{self.number}a")

    def __reduce__(self):  # (pickles as the name it was parsed from)
        return Arch, (str(self),)
