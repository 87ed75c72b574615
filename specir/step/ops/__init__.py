"""The built-in step ops: one file each, holding the op's definition and its semantics."""
from . import (accept_greedy, accept_sample, batch_budget, commit, draft_cascade, draft_chain,  # noqa: F401
               draft_ngram, draft_tree, verify, verify_packed)
