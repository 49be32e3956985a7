"""Shared test setup.

pytest puts this directory on `sys.path` because this conftest lives here, so
test modules import the shared helpers (`cli_helpers`, `workbook_helpers`,
the `fuzz` package) by name, with no path manipulation of their own.
"""

# The longest files run first (seconds measured on a 2-core machine).
# pytest-xdist (`--dist loadfile --no-loadscope-reorder`, setup.cfg) hands
# whole files to the workers in collection order, so a long file collected
# last would leave one worker idle while the other finishes it.  test_workbook
# exports the shared catalog workbook while the other worker starts test_solve.
LONGEST_FIRST = ["test_workbook.py",  # 51
                 "test_solve.py",  # 42
                 "test_workbook_render.py",  # 26
                 "test_robustness.py",  # 22
                 "test_layer_shapes.py",  # 22
                 "test_engine_logs.py",  # 20
                 "test_domain.py",  # 16
                 "test_faults.py",  # 16
                 "test_import.py",  # 16
                 "test_docs.py",  # 16
                 "test_engine_sizing_tests.py",  # 15
                 "test_fuzz.py"]  # 12


def pytest_collection_modifyitems(items):
    """Put the longest files first; tests keep their order within a file."""
    rank = {name: i for i, name in enumerate(LONGEST_FIRST)}
    items.sort(key=lambda item: rank.get(item.path.name, len(LONGEST_FIRST)))
