"""Addressing of the recurrent state store from inside a kernel (layout: specir/runtime/recurrent_state.py):
the committed state of a slot, and node n's state at ring position (base + n) % W of that slot."""

import triton
import triton.language as tl


@triton.jit
def load_state(node, committed_row, scratch_ptr, slot, base, W, per_node, idx, mask):
    """The state after `node` (-1: the slot's committed state at `committed_row`) at offsets `idx`."""
    return tl.where(node < 0, tl.load(committed_row + idx, mask=mask & (node < 0), other=0.0),
                    tl.load(scratch_ptr + (slot * W + (base + tl.maximum(node, 0)) % W) * per_node + idx,
                            mask=mask & (node >= 0), other=0.0))


@triton.jit
def store_state(value, node, scratch_ptr, slot, base, W, per_node, idx, mask):
    """Write the state after `node` into its ring position."""
    tl.store(scratch_ptr + (slot * W + (base + node) % W) * per_node + idx, value, mask=mask)


@triton.jit
def load_state_at(node_ptr, committed_row, scratch_ptr, slot, base, W, per_node, idx, mask):
    """load_state of the node stored at `node_ptr` (a parent or start index, int64)."""
    return load_state(tl.load(node_ptr).to(tl.int64), committed_row, scratch_ptr, slot, base, W, per_node, idx, mask)
