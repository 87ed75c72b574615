import pytest
import torch

from specir import kernel_reference as ref
from specir.backends.triton.kernels.accept import greedy_accept_tree


def _random_tree(B, T, vocab, chain=False):
    parents = torch.empty(B, T, dtype=torch.int32)
    parents[:, 0] = -1
    for t in range(1, T):
        parents[:, t] = t - 1 if chain else torch.randint(0, t, (B,))
    tokens = torch.randint(0, vocab, (B, T))
    target = torch.randint(0, vocab, (B, T))
    return tokens, parents, target


def _check(tokens, parents, target, device, kt):
    tokens, parents, target = tokens.to(device), parents.to(device), target.to(device)
    B, T = tokens.shape
    want_idx, want_n, want_bonus = ref.greedy_accept_tree_reference(tokens, parents, target)
    acc_idx, n_acc = kt.poisoned((B, T), torch.int32, device), kt.poisoned((B,), torch.int32, device)
    bonus, emitted = kt.poisoned((B,), target.dtype, device), kt.poisoned((B, T), tokens.dtype, device)
    greedy_accept_tree(tokens, parents, target, acc_idx=acc_idx, n_acc=n_acc, bonus=bonus, emitted=emitted)
    assert torch.equal(n_acc, want_n), (n_acc, want_n)
    assert torch.equal(acc_idx, want_idx), (acc_idx, want_idx)
    assert torch.equal(bonus, want_bonus)
    for b in range(B):
        n = int(want_n[b])
        want_emitted = [int(tokens[b, i]) for i in want_idx[b, 1:n].tolist()] + [int(want_bonus[b])]
        assert emitted[b, :n].tolist() == want_emitted and (emitted[b, n:] == -1).all()


@pytest.mark.parametrize("T", [1, 2, 9, 40])
@pytest.mark.parametrize("chain", [False, True])
def test_greedy_accept_tree(seed, device, kt, T, chain):
    # a tiny vocabulary makes matches (and deep accepted paths and depth ties) frequent
    _check(*_random_tree(6, T, vocab=2, chain=chain), device, kt)


def test_greedy_accept_full_tree_of_128(seed, device, kt):
    _check(*_random_tree(2, 128, vocab=2), device, kt)


def test_everything_accepted_on_a_chain(seed, device, kt):
    B, T = 2, 7
    target = torch.randint(0, 1000, (B, T))
    tokens = torch.cat([torch.randint(0, 1000, (B, 1)), target[:, :-1]], dim=1)   # each draft = target's choice
    parents = torch.arange(-1, T - 1, dtype=torch.int32).repeat(B, 1)
    _check(tokens, parents, target, device, kt)
    _, n_acc, bonus = greedy_accept_tree(tokens.to(device), parents.to(device), target.to(device))
    assert n_acc.tolist() == [T, T] and torch.equal(bonus.cpu(), target[:, -1])


def test_padding_nodes_are_never_accepted(seed, device, kt):
    tokens, parents, target = _random_tree(3, 8, vocab=2, chain=True)
    parents[:, 5:] = -1                          # 5 real nodes, 3 padding nodes
    tokens[:, 5:] = target[:, 0:1]               # padding tokens that would match node 0's target
    _check(tokens, parents, target, device, kt)
    _, n_acc, _ = greedy_accept_tree(tokens.to(device), parents.to(device), target.to(device))
    assert (n_acc <= 5).all()
