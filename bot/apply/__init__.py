"""Stage apply: the generated files written into the checkout."""
