def test_loop_cycles_lists_up_to_three_paths_then_a_range():
    from simtlab.analyze.sass import loop_cycles

    assert loop_cycles([{"cycles": 2202}, {"cycles": 2303}, {"cycles": 2535}]) == "2202 / 2303 / 2535"
    assert loop_cycles([{"cycles": c} for c in (9, 5, 7, 6)]) == "5-9"
    assert loop_cycles([]) == ""
