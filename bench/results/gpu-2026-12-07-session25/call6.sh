# Session 25's sixth call (warm): the persistent GEMV's and the weights' cache policy's kernel tests compiled on the GPU.
timeout 140 python3 -m pytest -q --tb=line -p no:cacheprovider tests/triton/test_linear.py -k "persistent or weight_cache or cache" \
  > $OUT/gpu-linear-persistent.txt 2>&1; echo "rc=$? at ${SECONDS}s"; tail -n 6 $OUT/gpu-linear-persistent.txt | cut -c1-250
