"""Shared test setup.

pytest puts this directory on `sys.path` because this conftest lives here, so
test modules import the shared helpers (`cli_helpers`, `workbook_helpers`,
the `fuzz` package) by name, with no path manipulation of their own.
"""
