"""Rich tables from rows."""


def test_dict_table_keeps_the_rows_keys_and_order():
    from rich.console import Console

    from simtlab.report.table import dict_table

    t = dict_table("calls", [{"call": "a", "ms": 1.5}, {"call": "bb", "ms": 2}], left=("call",))
    assert [c.header for c in t.columns] == ["call", "ms"] and t.row_count == 2
    assert [c.justify for c in t.columns] == ["left", "right"]
    console = Console(width=80, record=True)
    console.print(t)
    text = console.export_text()
    assert "1.5" in text and "bb" in text
