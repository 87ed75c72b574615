"""The built-in step ops: one file each, holding the op's definition and its semantics."""
from . import accept_greedy, accept_sample, commit, draft_cascade, draft_chain, draft_ngram, draft_tree, verify  # noqa: F401
