"""The reference re-spelling corpus, split along its stages (tests/respell_corpus.py gathers it)."""
