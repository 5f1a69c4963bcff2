"""Dataset builder scripts (thin wrappers over `causaldiag build`) and the curated source files in `sources/`."""
