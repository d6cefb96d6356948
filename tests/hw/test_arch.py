import pickle

import pytest

from simtlab.hw.arch import Arch


@pytest.mark.parametrize("text", ["sm_90", "90", "SM_90", " sm_90 "])
def test_the_forms_of_one_architecture_parse_to_one_name(text):
    arch = Arch(text)
    assert arch == "sm_90" and arch.capability == (9, 0) and arch.suffix == "" and arch.number == 90


def test_suffixes_base_and_specific_target():
    a = Arch("sm_90a")
    assert a.suffix == "a" and a.base == "sm_90" and a.specific is a and a.capability == (9, 0)
    assert Arch("sm_80").specific == "sm_80a" and Arch("sm_100f").base == "sm_100"
    assert Arch("sm_120").capability == (12, 0) and Arch.of((8, 6)) == "sm_86"


def test_it_stands_in_for_the_string_and_survives_a_pickle():
    a = Arch("sm_90a")
    assert {"sm_90a": 1}[a] == 1 and f"{a}" == "sm_90a" and Arch(a) is a
    back = pickle.loads(pickle.dumps(a))
    assert back == a and back.capability == (9, 0) and isinstance(back, Arch)


@pytest.mark.parametrize("text", ["ninety", "sm_9", "sm_90b", "compute_90", ""])
def test_anything_else_is_named(text):
    with pytest.raises(ValueError, match="arch must look like 'sm_90'"):
        Arch(text)
