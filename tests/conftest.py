"""Shared test setup.

pytest puts this directory on `sys.path` because this conftest lives here, so
test modules import the shared helpers (`cli_helpers`, `workbook_helpers`,
the `fuzz` package) by name, with no path manipulation of their own.
"""

# The longest files run first (seconds measured on a 2-core machine).
# pytest-xdist (`--dist loadfile --no-loadscope-reorder`, setup.cfg) hands
# whole files to the workers in collection order, so a long file collected
# last would leave one worker idle while the other finishes it.  test_workbook
# exports the shared catalog workbook while the other worker runs
# test_robustness, which does not need it.
LONGEST_FIRST = ["test_workbook.py",  # 51
                 "test_second_engine.py",  # 30
                 "test_robustness.py",  # 23
                 "test_workbook_render.py",  # 25
                 "test_layer_shapes.py",  # 23
                 "test_import.py",  # 19
                 "test_faults.py",  # 17
                 "test_docs.py",  # 13
                 "test_engine_limits.py",  # 13
                 "test_fuzz.py",  # 12
                 "test_strict.py",  # 11
                 "test_solve.py",  # 11
                 "test_scaling.py"]  # 10


def pytest_collection_modifyitems(items):
    """Put the longest files first; tests keep their order within a file."""
    rank = {name: i for i, name in enumerate(LONGEST_FIRST)}
    items.sort(key=lambda item: rank.get(item.path.name, len(LONGEST_FIRST)))
