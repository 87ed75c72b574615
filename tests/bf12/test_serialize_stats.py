"""Safetensors storage, bits-per-weight accounting, the does-it-pay decision, reference linear."""
import json

import pytest
import torch
from safetensors import safe_open
from safetensors.torch import save_file

from specir.bf12 import (analyze, bits_per_weight, decide, format_report, gaussian_report, linear_reference,
                         load, pack, safetensors_report, save, unpack)
from specir.errors import SpecirError


def bits(t):
    return t.contiguous().view(torch.int16)


def test_safetensors_roundtrip_and_naming(tmp_path, seed):
    # |a| in [0.01, 0.03): two binades, so no seed can give `a` a raw row (a Gaussian's rare tiny value can)
    sign = torch.randint(0, 2, (40, 300)) * 2 - 1
    a = ((torch.rand(40, 300) + 0.5) * 0.02 * sign).to(torch.bfloat16)
    b = ((torch.rand(8, 256) + 0.5) * 0.02).to(torch.bfloat16)
    b[3, 7], b[3, 9] = 1e-30, 1e-35  # one raw row
    path = tmp_path / "m.safetensors"
    save(path, {"layers.0.q.weight": pack(a), "lm_head.weight": pack(b)},
         extra={"norm.weight": torch.ones(4, dtype=torch.bfloat16)})
    with safe_open(str(path), framework="pt") as f:
        keys, meta = set(f.keys()), f.metadata()
    assert {"layers.0.q.weight.bf12.mant", "layers.0.q.weight.bf12.code", "layers.0.q.weight.bf12.base",
            "layers.0.q.weight.bf12.esc", "lm_head.weight.bf12.raw", "lm_head.weight.bf12.raw_rows",
            "norm.weight"} <= keys
    assert "layers.0.q.weight.bf12.raw" not in keys
    assert json.loads(meta["layers.0.q.weight.bf12"])["shape"] == [40, 300]
    got = load(path)
    assert set(got) == {"layers.0.q.weight", "lm_head.weight"}
    assert torch.equal(bits(unpack(got["layers.0.q.weight"])), bits(a))
    assert torch.equal(bits(unpack(got["lm_head.weight"])), bits(b))
    assert got["lm_head.weight"].raw_rows.tolist() == [3]


def test_corrupt_file_is_a_specir_error(tmp_path, seed):
    p = pack((torch.randn(4, 128) * 0.02).to(torch.bfloat16))
    path = tmp_path / "bad.safetensors"
    save_file({"w.bf12.mant": p.mant, "w.bf12.base": p.base, "w.bf12.esc": p.esc}, str(path),
              metadata={"w.bf12": json.dumps({"format": "bf12", "version": 1, "shape": [4, 128], "group": 128})})
    with pytest.raises(SpecirError, match="w.bf12.code"):
        load(path)
    (tmp_path / "junk.safetensors").write_bytes(b"not a safetensors file")
    with pytest.raises(SpecirError):
        load(tmp_path / "junk.safetensors")


def test_gaussian_4096_bits_per_weight():
    row = gaussian_report(4096, 4096, std=0.02, seed=1)
    assert row["bits_per_weight"] <= 12.35
    assert row["bits_per_weight"] >= 12.125  # 12 bits + 2 exponent bytes per 128 weights
    assert "gaussian" in format_report([row])


def test_analyze_matches_packed_size(seed):
    w = (torch.randn(64, 1000) * 0.05).to(torch.bfloat16)
    w[5, 3], w[5, 7] = 1e-30, 1e-36
    s = analyze(w)
    p = pack(w)
    assert s.raw_rows == p.raw_row_count >= 1
    assert s.bits_per_weight == pytest.approx(bits_per_weight(p))


def test_safetensors_report(tmp_path, seed):
    path = tmp_path / "ckpt.safetensors"
    save_file({"a": (torch.randn(256, 512) * 0.02).to(torch.bfloat16), "bias": torch.zeros(8),
               "b": (torch.randn(128, 256) * 0.01).to(torch.bfloat16)}, str(path))
    rows = safetensors_report(path)
    assert [r["name"] for r in rows] == ["a", "b", "TOTAL"]
    assert all(r["bits_per_weight"] < 12.6 for r in rows)


def test_decision(seed):
    gauss = (torch.randn(256, 512) * 0.02).to(torch.bfloat16)
    d = decide(gauss)
    assert d.pack and "bits/weight" in d.reason

    sparse = gauss.clone()
    sparse[torch.rand(sparse.shape) < 0.6] = 0
    d = decide(sparse)
    assert not d.pack and "sparse" in d.reason

    noise = torch.randint(-32768, 32768, (256, 512), dtype=torch.int32).to(torch.int16).view(torch.bfloat16)
    d = decide(noise)
    assert not d.pack and "raw bf16" in d.reason

    assert not decide(gauss.float()).pack
    assert not decide(gauss[:4, :128]).pack
    assert not decide(gauss[0]).pack


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float32])
def test_linear_reference_bits(seed, dtype):
    w = (torch.randn(96, 300) * 0.02).to(torch.bfloat16)
    w[1, 3], w[1, 5] = 1e-30, 1e-36  # a raw row too
    p = pack(w)
    x = torch.randn(5, 300).to(dtype)
    b = torch.randn(96).to(dtype)
    want = torch.nn.functional.linear(x, unpack(p).to(dtype), b)
    assert torch.equal(linear_reference(x, p, b).view(torch.int16 if dtype == torch.bfloat16 else torch.int32),
                       want.view(torch.int16 if dtype == torch.bfloat16 else torch.int32))


def _pack_version_1(w):
    """The first BF12 layout (version 1), for files written before version 2: bytes sign + mantissa,
    4-bit codes (exponent = base - code), no escapes needed for these test weights."""
    n, k = w.shape
    b = w.view(torch.int16).to(torch.int32) & 0xFFFF
    g = b.view(n, k // 128, 128)
    e = (g >> 7) & 0xFF
    base = e.amax(-1)
    code = base[..., None] - e
    assert int(code.max()) < 15
    kk = torch.arange(128)
    r, t, par = kk // 32, (kk % 32) // 2, kk % 2
    mant = torch.empty_like(g)
    mant[..., 8 * t + 4 * (r // 2) + (r % 2) + 2 * par] = ((g >> 8) & 0x80) | (g & 0x7F)
    nib = torch.empty_like(g)
    nib[..., 8 * t + r + 4 * par] = code
    code_bytes = nib[..., 0::2] | (nib[..., 1::2] << 4)
    u8 = lambda x: x.reshape(n, -1).to(torch.uint8)
    return {"w.bf12.mant": u8(mant), "w.bf12.code": u8(code_bytes), "w.bf12.base": u8(base),
            "w.bf12.esc": u8(torch.zeros_like(base))}


def test_version_1_files_are_read_and_repacked(tmp_path, seed):
    w = ((torch.rand(6, 256) + 0.5) * 0.02 * torch.where(torch.rand(6, 256) < 0.5, -1, 1)).to(torch.bfloat16)
    path = tmp_path / "v1.safetensors"
    save_file(_pack_version_1(w), str(path),
              metadata={"w.bf12": json.dumps({"format": "bf12", "version": 1, "shape": [6, 256], "group": 128})})
    got = load(path)["w"]
    assert torch.equal(bits(unpack(got)), bits(w))
    assert torch.equal(got.code, pack(w).code)  # now in the current layout
