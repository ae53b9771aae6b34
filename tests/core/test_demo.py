from gspdml.demo import format_table


def test_table_lists_test_metrics_in_percent_and_marks_reused_runs():
    rows = [
        {"method": "gap", "steps": 600, "seconds": 83.2, "test": {"map_at_r": 0.7437, "precision_at_1": 0.965, "r_precision": 0.7869,
                                                                  "recall_at_2": 0.9838, "recall_at_4": 0.9912}},
        {"method": "gsp", "steps": 600, "seconds": None, "test": {"map_at_r": 0.8819}},
    ]
    lines = format_table(rows).splitlines()
    assert lines[0].startswith("| method | MAP@R | P@1 |")
    assert lines[2] == "| gap | 74.37 | 96.50 | 78.69 | 98.38 | 99.12 | 600 | 83 |"
    assert lines[3] == "| gsp | 88.19 | - | - | - | - | 600 | reused |"
