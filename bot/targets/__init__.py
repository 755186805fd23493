"""Stage targets: which ops to port, found in the checkout (discover, checkout, targets)."""
