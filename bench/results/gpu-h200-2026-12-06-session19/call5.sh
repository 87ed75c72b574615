# session 19 call 5: batch-fusion on a hybrid target, compiled on the GPU: the packed verify's recurrent ops run per
# request around the packed rows (packed_recurrent.py), under the engine's CUDA-graph capture
. bench/results/gpu-h200-2026-12-03-session15/setup.sh
nvidia-smi --query-gpu=name --format=csv,noheader
timeout 150 python3 -m pytest -q -p no:cacheprovider tests/hybrid/test_hybrid_batch_fusion.py -k "triton or pad_rows" > $OUT/gpu-tests.txt 2>&1; echo "tests rc=$?"
tail -n 4 $OUT/gpu-tests.txt
