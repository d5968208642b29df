"""Per-GPU kernel rate tables (data): bench/cost/kernel_rates.py reads them."""
