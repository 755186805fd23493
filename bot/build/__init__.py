"""Stage build: the crates built with cargo, and the compiler's words made into annotations."""
