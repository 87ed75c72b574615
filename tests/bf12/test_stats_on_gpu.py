"""analyze() on the GPU gives the CPU's statistics (the stats cache analyses checkpoints on the GPU
when there is one). Runs on a CUDA machine only."""
import pytest
import torch

from specir.bf12.stats import analyze

pytestmark = pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")


@pytest.mark.parametrize("shape", [(1024, 4096), (300, 4100)])
def test_gpu_statistics_equal_cpu(shape):
    g = torch.Generator().manual_seed(3)
    w = (torch.randn(*shape, generator=g) * 0.02).to(torch.bfloat16)
    w[5, :300] = 1e4          # a row no window covers: kept raw
    w[7, 17] = 0.0
    w[9, 130] = 3e-30         # an exponent outlier: an escape
    assert analyze(w.cuda()) == analyze(w)
