# The tree shapes' tau on the shipped pair at the GPU protocol (code-completion, 4 prompts x 64 tokens, batch 1).
# Run in a folder holding `specir init > p.spec` (SPECIR=path/to/specir if not on PATH); prints one line a shape.
for b in 64 96 128; do for d in 8 10 12 14 16; do for k in 4 6 8; do
  n=b$b-d$d-k$k
  ${SPECIR:-specir} compile p.spec --target cpu -p "tree-verify{budget=$b,topk=$k,depth=$d}" -o $n >/dev/null 2>&1 || { echo "$n compile-fail"; continue; }
  ${SPECIR:-specir} bench $n --workload code-completion --batch-size 1 --limit 4 --max-new-tokens 64 --json --out o-$n 2>/dev/null | python3 -c "import json,sys; r=json.load(sys.stdin)['rows'][0]; print('$n', round(r['tau'],3), r['agree_with_ar'], flush=True)"
  rm -rf $n
done; done; done
