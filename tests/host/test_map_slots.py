"""Learning where a tensor map holds its address (driver.learn_address_field) from encoders whose
formats are known: fakes on the CPU; the real driver in tests/ops/test_tma.py (GPU)."""

import ctypes
import random

import pytest

from simtlab.driver import AddressField, MapSlot, learn_address_field

FILL = bytes(range(7, 7 + 128))  # (the rest of a map: fields no address changes)


def _plain(word: int, shift: int, top: int = 57):
    """A map holding address bits 4..top-1 at `shift` of 64-bit word `word`; refuses higher addresses."""
    def encode(ptr: int):
        if ptr >> top or ptr & 15:
            return None
        raw = bytearray(FILL)
        at = 8 * word
        w = int.from_bytes(raw[at:at + 8], "little") & ~(((1 << (top - 4)) - 1) << shift)
        raw[at:at + 8] = (w | (ptr >> 4) << shift).to_bytes(8, "little")
        return bytes(raw)
    return encode


PTR = 0x7F3A_2C40_0000


@pytest.mark.parametrize("word,shift,top", [(0, 0, 57), (0, 4, 49), (2, 8, 48), (15, 3, 57)])
def test_a_plain_field_is_learned_and_places_any_address(word, shift, top):
    encode = _plain(word, shift, top)
    field = learn_address_field(encode, PTR)
    assert field == AddressField(word, shift, top)
    rng = random.Random(1)
    for _ in range(200):
        q = rng.randrange(1 << (top - 4)) << 4
        assert field.place(encode(PTR), q) == encode(q)
        assert not q & field.outside
    assert (1 << top) & field.outside and 8 & field.outside


def test_a_slot_is_repointed_by_one_write():
    encode = _plain(1, 2)
    field = learn_address_field(encode, PTR)
    slot = MapSlot(encode(PTR), field)
    for q in (0x1230, PTR + 4096, 0x7FFF_FFFF_FFF0):
        slot.word.value = slot.base | (q >> 4) << slot.shift
        assert ctypes.string_at(slot.address, 128) == encode(q)
    assert slot.address % 64 == 0


def _scrambled(ptr: int):  # the address with a checksum byte: a flip changes two places
    raw = bytearray(_plain(0, 0)(ptr))
    raw[100] = bin(ptr).count("1") & 0xFF
    return bytes(raw)


def _split(ptr: int):  # bits 4-35 in word 0, the rest in word 3
    raw = bytearray(FILL)
    raw[0:4] = ((ptr >> 4) & 0xFFFFFFFF).to_bytes(4, "little")
    raw[24:28] = (ptr >> 36).to_bytes(4, "little")
    return bytes(raw)


def _reversed(ptr: int):  # every bit there, in reverse order
    raw = bytearray(FILL)
    raw[0:8] = int(f"{ptr >> 4:053b}"[::-1], 2).to_bytes(8, "little")
    return bytes(raw)


@pytest.mark.parametrize("encode", [_scrambled, _split, _reversed, lambda ptr: None, lambda ptr: FILL],
                         ids=["checksum", "split", "reversed", "refused", "no-address"])
def test_a_format_the_rule_does_not_hold_for_gets_no_slot(encode):
    assert learn_address_field(encode, PTR) is None


def test_bits_the_map_ignores_end_the_field():
    def encode(ptr):  # bits from 49 up accepted but dropped
        return _plain(0, 0)(ptr & ((1 << 49) - 1)) if not ptr & 15 else None
    field = learn_address_field(encode, PTR)
    assert field == AddressField(0, 0, 49) and (1 << 52) & field.outside


def test_a_driver_that_refuses_high_addresses_early_gets_no_slot():
    assert learn_address_field(_plain(0, 0, 32), 0x1234_5670) is None  # (32 address bits: too few to trust)


def test_the_probes_catch_a_rule_that_holds_bit_by_bit_but_not_for_mixed_addresses():
    def encode(ptr):  # each bit alone looks plain; two high bits together flip a third
        plain = _plain(0, 0)(ptr)
        if plain is None:
            return None
        good = bytearray(plain)
        if (ptr >> 40) & 3 == 3:
            good[127] ^= 1
        return bytes(good)
    assert learn_address_field(encode, PTR & ~(3 << 40)) is None


def test_a_misaligned_or_null_address_learns_nothing():
    assert learn_address_field(_plain(0, 0), PTR + 8) is None
    assert learn_address_field(_plain(0, 0), 0) is None


class _FakeEncoder:
    """A TensorMapEncoder's interface over a fake format (the driver's job done by `encode`)."""

    def __init__(self, encode):
        self.encode, self.addresses, self._kept, self.encodings = encode, {}, {}, 0

    def address(self, ptr: int) -> int:
        self.encodings += 1
        buf = ctypes.create_string_buffer(self.encode(ptr), 128)
        self._kept[ptr], self.addresses[ptr] = buf, ctypes.addressof(buf)
        return self.addresses[ptr]

    def slot(self, ptr: int):
        field = learn_address_field(self.encode, ptr)
        return MapSlot(self.encode(ptr), field) if field else None


class _FakeLaunch:
    """A PackedLaunch whose driver call records the three maps and C's address it was given."""

    def __init__(self):
        self.params = (ctypes.c_void_p * 12)()
        self.values = [ctypes.c_uint64() for _ in range(12)]
        self.stream_value = ctypes.c_void_p()
        self.seen = []

    def bound(self) -> int:
        self.seen.append(tuple(ctypes.string_at(self.params[i], 128) for i in (4, 5, 6)) + (self.values[7].value,))
        return 0

    def failed(self, err):
        raise AssertionError(err)


def _tagged(tag: int, word: int = 2):
    """Address bits 4-48 in `word` (higher ones dropped, as a driver might), a tag of the operand."""
    plain = _plain(word, 0, 49)
    return lambda ptr: None if ptr & 15 else plain(ptr & ((1 << 49) - 1))[:120] + bytes([tag]) * 8


@pytest.mark.parametrize("learnable", [True, False], ids=["slots", "encoded"])
def test_rung6_launcher_gives_every_launch_the_maps_of_its_own_addresses(learnable):
    """ClusterKernel's per-call path on fake maps: learned once, re-pointed by one write a call
    (no encoding after the first), an address the slots cannot place encoded and the slots used
    again after it; where nothing is learnable, every new address encoded - each launch always
    sees the maps of its own three addresses."""
    from simtlab.ops.gemm_tc import ClusterKernel

    fmt = [_tagged(1), _tagged(2, word=5), _tagged(3)] if learnable else [_scrambled, _tagged(2), _tagged(3)]
    kernel = ClusterKernel.__new__(ClusterKernel)
    kernel.maps = tuple(_FakeEncoder(f) for f in fmt)
    kernel.packed = packed = _FakeLaunch()
    kernel.slots = None
    launch = kernel._launcher()
    rng = random.Random(2)
    calls = [tuple(rng.randrange(1, 1 << 44) << 4 for _ in range(3)) for _ in range(40)]
    calls.insert(20, (PTR, 1 << 50, PTR + 4096))  # (B beyond the learned field: encoded)
    for pa, pb, pc in calls:
        launch(pa, pb, pc, 7)
        maps = packed.seen[-1]
        assert maps == (fmt[0](pa), fmt[1](pb), fmt[2](pc), pc)
        assert packed.stream_value.value == 7
    encodings = [m.encodings for m in kernel.maps]
    if learnable:
        assert kernel.slots and encodings == [2, 2, 2]  # the first call, and the call B could not take
    else:
        assert not kernel.slots and encodings == [41, 41, 41]
