"""Excel export: printing SymPy expressions as live Excel formulas."""
