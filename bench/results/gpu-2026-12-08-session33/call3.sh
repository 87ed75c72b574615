# Session 33's third device call (issue 17's BF12 target), about 200 s: the four BF12 GEMV fields most likely to
# add bytes in flight (session 32's call4 ran out of time twice), one at a time in bench/gemv_chain.py's BF12 chain
# (8 layers), bits checked against the plain BF12 chain. Run after session 15's setup, carry .whl:
#   . bench/results/gpu-h200-2026-12-03-session15/setup.sh; bash bench/results/gpu-2026-12-08-session33/call3.sh
nvidia-smi --query-gpu=name,memory.total --format=csv,noheader
V=""
for f in depth=2 x_late=false num_warps=8 block_n=32; do V="$V --variant bf12:$f"; done
timeout 230 python3 bench/gemv_chain.py --out $OUT/chain-bf12 --layers 8 --iters "" --bf12-layers 8 --bf12-iters "" \
  $V 2>&1 | tee $OUT/chain-bf12-log.txt | tail -n 12
