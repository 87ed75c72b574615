# Session 25's fifth call (warm): the fused forwards' tests compiled on the GPU with the rope + KV epilogue enabled.
R=/tmp/n5; mkdir -p $R
sed -i 's/^VERIFIED_ON_GPU = False/VERIFIED_ON_GPU = True/' backends/triton/kernels/rope_kv_epilogue.py
timeout 170 python3 -m pytest -q --tb=short -p no:cacheprovider tests/triton_backend/test_linear_rope_kv.py \
  tests/triton_backend/test_fusion_policy.py > $R/gpu-fusion-tests.txt 2>&1; echo "rc=$? at ${SECONDS}s"
cp $R/gpu-fusion-tests.txt $OUT/; tail -n 15 $R/gpu-fusion-tests.txt | cut -c1-250
