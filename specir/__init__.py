"""specir: a compiler for speculative-decoding pipelines."""
__version__ = "0.2.0"
