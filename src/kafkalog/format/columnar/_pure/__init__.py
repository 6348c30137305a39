"""The pure-Python twins of the compiled kernels (the reference the C code must match)."""
