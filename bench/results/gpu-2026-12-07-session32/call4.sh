# Session 32's fourth device call (issue 17's BF12 target), about 150 s: bench/gemv_chain.py's BF12 chain (8 layers
# of the 8B's four GEMVs, plain launches) with order-neutral GEMV fields changed one at a time, against the rule and
# against bf16's chain; bits checked against each format's plain chain. Run after session 15's setup, carry .whl:
#   . bench/results/gpu-h200-2026-12-03-session15/setup.sh; bash bench/results/gpu-2026-12-07-session32/call4.sh
nvidia-smi --query-gpu=name,memory.total --format=csv,noheader
V=""
for f in depth=2 num_warps=8 num_warps=2 block_n=32 num_stages=1 num_stages=3 x_late=false weight_cache=cg \
         maxnreg=96 weight_cache=evict_first; do V="$V --variant bf12:$f"; done
timeout 180 python3 bench/gemv_chain.py --out $OUT/chain-bf12 --layers 8 --iters "" --bf12-layers 8 --bf12-iters "" \
  $V 2>&1 | tee $OUT/chain-bf12-log.txt | tail -n 16
