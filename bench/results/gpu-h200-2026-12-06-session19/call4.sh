# session 19 call 4: the new Triton kernel compiled on the GPU: vocab_scatter bit-equal to the reference, and the
# Triton step backend with a frequency-narrowed drafter decoding as the target (the tests CI runs under the interpreter)
. bench/results/gpu-h200-2026-12-03-session15/setup.sh
nvidia-smi --query-gpu=name --format=csv,noheader
timeout 200 python3 -m pytest -q -p no:cacheprovider tests/triton/test_triton_vocab_scatter.py \
  "tests/passes/test_draft_vocab.py" -k "vocab_scatter or inverse or triton" > $OUT/gpu-tests.txt 2>&1; echo "tests rc=$?"
tail -n 4 $OUT/gpu-tests.txt
