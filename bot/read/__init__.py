"""Stage read: the kernel's signature, read from its Rust source by the reader binary."""
