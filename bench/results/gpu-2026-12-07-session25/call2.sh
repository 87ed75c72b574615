# Session 25's second call (issue 17), on the machine next.sh left warm (/tmp/n, /tmp/zoo8b persist), about 520 s:
#   . bench/results/gpu-h200-2026-12-03-session15/setup.sh; bash bench/results/gpu-2026-12-07-session25/call2.sh
# 0. the GEMV chain with finer work items (block_n 32), alone and persistent;
# 1. BF12 against bf16 through one AR step (bench/bf12_step.py, random 8B-shape weights, bits compared): as chosen,
#    then with the fastest bit-equal chain variant of each format (next.sh's /tmp/n/chain.json), if one beat plain;
# 2. BF12 through the product: `specir compile` tree-bf12 (and tree-bf12-all when the rope tests passed), `specir
#    bench --check` at b1, and the step profile of the target as built (BF12's AR step against session 24's 4.895 ms).
nvidia-smi --query-gpu=name,memory.total --format=csv,noheader
R=/tmp/n2; rm -rf $R; mkdir -p $R
pack() { tar -C $R -czf $OUT/call2.tgz --exclude="trace-*" . ; }
# finer work items (block_n 32: q/k/v 1536 items where 64-row blocks make 768 for 528 resident programs), alone and
# on a persistent grid: the chain's tail, which persistent=4 alone keeps for equal-size items
timeout 150 python3 bench/gemv_chain.py --out $R/chain2.json --layers 16 --bf12-layers 8 --iters "" --bf12-iters "" \
  --variant bf16:block_n=32 --variant bf16:block_n=32,persistent=4 --variant bf16:block_n=32,persistent=2 \
  --variant bf12:block_n=32,persistent=4 --variant bf12:block_n=32 > $R/chain2-log.txt 2>&1
echo "chain2 rc=$? at ${SECONDS}s"; pack; tail -n 9 $R/chain2-log.txt
V=$(python3 - <<'PY'
import json
best = {}
for path in ("/tmp/n/chain.json", "/tmp/n2/chain2.json"):
    try:
        rows = json.load(open(path))["rows"]
    except (OSError, ValueError, KeyError):
        continue
    for fmt in ("bf16", "bf12"):
        plain = [r["ms"] for r in rows if r["format"] == fmt and r["variant"] == "plain"]
        for r in rows:
            if plain and r["format"] == fmt and r["bits_equal_plain"] and r["variant"].startswith("plain, "):
                ratio = r["ms"] / plain[0]
                if ratio < 0.99 and ratio < best.get(fmt, (1.0, ""))[0]:
                    best[fmt] = (ratio, r["variant"][len("plain, "):].replace(", ", ","))
print(" ".join(f"--variant {fmt}:{v}" for fmt, (_, v) in best.items()), end="")
PY
)
echo "chosen variants: ${V:-none}"
timeout 90 python3 bench/bf12_step.py --out $R/bf12 > $R/bf12-log.txt 2>&1; echo "bf12_step rc=$? at ${SECONDS}s"
tail -n 6 $R/bf12-log.txt; pack
if [ -n "$V" ]; then
  timeout 90 python3 bench/bf12_step.py --out $R/bf12-v $V > $R/bf12-v-log.txt 2>&1; echo "bf12_step $V rc=$? at ${SECONDS}s"
  tail -n 6 $R/bf12-v-log.txt; pack
fi
BUILDS=tree-bf12
grep -q "^VERIFIED_ON_GPU = True" backends/triton/kernels/rope_kv_epilogue.py || \
  { grep -q " passed" /tmp/n/gpu-rope-tests.txt && ! grep -q " failed" /tmp/n/gpu-rope-tests.txt && \
    sed -i 's/^VERIFIED_ON_GPU = False/VERIFIED_ON_GPU = True/' backends/triton/kernels/rope_kv_epilogue.py; }
grep -q "^VERIFIED_ON_GPU = True" backends/triton/kernels/rope_kv_epilogue.py && BUILDS=tree-bf12,tree-bf12-all
timeout 230 python3 bench/h200_session.py --out $R/s --stages inflate,compile,bench --builds $BUILDS --batch-sizes 1 \
  --limit 4 --max-new-tokens 64 --bench-limit-s 60 --budget-s 225 > $R/s-log.txt 2>&1; echo "8b rc=$? at ${SECONDS}s"; pack
grep -A4 "^build " $R/s-log.txt | head -6
for b in ${BUILDS//,/ }; do
  left=$((560 - SECONDS)); [ $left -gt 30 ] && [ -d /tmp/zoo8b/build-$b ] || continue
  timeout $left python3 bench/step_profile.py /tmp/zoo8b/build-$b --ar-as-built --batch-size 1 --limit 1 \
    --max-new-tokens 32 --out $R/sp-$b > $R/sp-$b-log.txt 2>&1; echo "sp $b rc=$? at ${SECONDS}s"; pack
  grep -h "^  op\|segment" $R/sp-$b-log.txt | head -6
done
