"""draft-vocab: the drafter proposes from `size` token ids of its vocabulary only.

A drafter's step reads its whole lm head once per draft level (at a 128k-248k vocabulary and a
1B-width drafter, most of a level's bytes). This pass gives each drafting model a head of `size`
rows of its lm head weight, so a level reads size/V of those bytes. Which ids (`order`):
- "id": the first `size` ids. Byte-level BPE vocabularies number tokens in merge order, so low ids
  lean frequent, but only somewhat: on the shipped 4096-id BPE half the ids cost 15-36 % of a
  tree's tau (bench/results/draft-vocab-cpu-2026-12-06).
- "frequency" (FR-Spec's choice): the `size` ids most frequent in `corpus` tokenised with the
  drafter's tokenizer (specir/token_ranking.py; "stdlib" = the zoo's training documents, or a file
  or folder of your traffic). The head is the checkpoint rows at those ids, and a `vocab_scatter`
  puts its logits back at their ids (-inf elsewhere), so the drafter's logits stay V wide and the
  draft ops, ranking and sampling are unchanged.
The tokens a drafter can no longer propose are never drafted, so acceptance drops; never
correctness: the target still verifies every token (lossless, as any drafter; sampling stays exact
because the drafter's q is 0 off the kept ids). Measure it on your checkpoint and workload; the
zoo's inflated checkpoints hide the cost (their real ids are all low), so search skips this pass.

Preconditions: the step drafts with a model (an op that only proposes, opdefs.proposes_only:
`draft.chain` / `draft.tree` @model); no op that judges (a verify, a two-level mid level) runs it,
so it is not the declared target; its logits come from a `linear` or `packed_linear` without a
bias, possibly through logits `scale` ops (Falcon-H1's and Granite's multipliers); it was not
narrowed by frequency before. order=frequency needs the drafter's tokenizer (at load: the ids
are derived there) and the corpus. Postconditions: each such model declares the head weight
`"<tensor>[:size]"` {rows_of = "<tensor>"} (id) or `"<tensor>[freq:size]"` {rows_of, row_ids} and
the derived ids weight `"<tensor>[freq:size].ids"` : i32[size] {ranked_by = corpus, vocab = V}
(frequency); a head narrowed before names its tensor, not itself. The head reads it, and it and
the scales after it return logits<size>; with frequency a `vocab_scatter` then returns
logits<V>. The full head's declaration is dropped where nothing else reads it (a tied head keeps
the embedding). A model whose vocabulary is at most `size` is left as it is. Ranks and scores of a
tree draft are over the kept ids (log-probabilities normalised over them). Provides no fact.

Before:
    weight "lm_head.weight" : bf16[4096, 256]
    %logits = linear %norm {weight = "lm_head.weight"} : logits<4096>
After (draft-vocab{size=1024}):
    weight "lm_head.weight[:1024]" : bf16[1024, 256] {rows_of = "lm_head.weight"}
    %logits = linear %norm {weight = "lm_head.weight[:1024]"} : logits<1024>
After (draft-vocab{size=1024,order=frequency}):
    weight "lm_head.weight[freq:1024].ids" : i32[1024] {ranked_by = "stdlib", vocab = 4096}
    weight "lm_head.weight[freq:1024]" : bf16[1024, 256] {row_ids = "lm_head.weight[freq:1024].ids",
                                                          rows_of = "lm_head.weight"}
    %logits = linear %norm {weight = "lm_head.weight[freq:1024]"} : logits<1024>
    %logits.vocab = vocab_scatter %logits {ids = "lm_head.weight[freq:1024].ids", vocab = 4096} : logits<4096>
"""
from __future__ import annotations

from dataclasses import replace

from specir.errors import SpecirError
from specir.ir.nodes import Attrs, Model, Op, Pipeline, Weight
from specir.ir.opdefs import narrows_vocab, ops_of_role, proposes_only
from specir.ir.types import TensorType, logits
from specir.ir.verifier import logits_head
from specir.pass_infra import Option, Pass

HEADS = ("linear", "packed_linear")


def _reads(model: Model, name: str, skip) -> bool:
    """Whether any op of the graph other than `skip` names weight `name` in an attribute."""
    return any(op is not skip and name in op.attrs.values() for op in model.graph.ops)


class DraftVocab(Pass):
    name = "draft-vocab"
    options = {"size": Option(int, 32768, "token ids the drafter proposes from", min=1,
                              max=1 << 20, search=(8192, 16384, 32768, 65536)),
               "order": Option(str, "id", "which ids: the first (id) or the most frequent in `corpus` (frequency)",
                               choices=("id", "frequency")),
               "corpus": Option(str, "stdlib", "order=frequency's ranking text: stdlib, or a text / JSONL file "
                                               "or folder (specir/token_ranking.py)", search=("stdlib",))}

    def run(self, pipeline: Pipeline) -> Pipeline:
        ops = pipeline.step.ops
        drafters = {s.lstrip("@") for op in ops if proposes_only(op) for s in op.symbols}
        if not drafters:
            kinds = ops_of_role(ops, "draft")
            raise SpecirError(f"draft-vocab narrows a draft model's head; this step drafts with: {kinds}",
                              hint="use it on a pipeline whose step drafts with draft.chain or draft.tree @model")
        # every other op naming a model judges with it (verify ops, a two-level step's mid level; the
        # declared target is the final verify's model)
        judges = {s.lstrip("@") for op in ops if not proposes_only(op) for s in op.symbols}
        for op in ops:  # a tree ranks `topk` children a node among the ids its drafter keeps
            if proposes_only(op) and int(op.attrs.get("topk", 0)) > self.size:
                raise SpecirError(f"{op.name} ranks topk = {op.attrs['topk']} children a node, more than the {self.size} "
                                  f"ids draft-vocab keeps", location=op.loc, hint="use a size of at least topk")
        models = []
        for model in pipeline.models:
            if model.name in drafters:
                if model.name in judges:
                    raise SpecirError(f"draft-vocab would narrow @{model.name}, which also verifies",
                                      hint="a verifier's logits must cover the whole vocabulary: draft with "
                                           "another model")
                model = self._narrow(model)
            models.append(model)
        return replace(pipeline, models=tuple(models))

    def _narrow(self, model: Model) -> Model:
        if model.graph is None:
            raise SpecirError(f"draft-vocab needs @{model.name}'s graph", location=model.loc,
                              hint="run it on a pipeline whose models are imported (specir opt expands them)")
        head, chain = logits_head(model.graph)
        vocab = model.graph.result_type.width
        if narrows_vocab(head):
            raise SpecirError(f"@{model.name} already proposes from its most frequent ids (draft-vocab{{order=frequency}})",
                              location=model.loc, hint="run draft-vocab once per drafter")
        if head is None or head.name not in HEADS or "weight" not in head.attrs:
            found = head.name if head is not None else "nothing"
            raise SpecirError(f"draft-vocab needs @{model.name}'s logits from a linear, found {found}",
                              location=model.loc, hint="its graph must end in the lm head's linear")
        if head.attrs.get("bias"):
            raise SpecirError(f"draft-vocab does not narrow @{model.name}'s head bias {head.attrs['bias']!r}",
                              location=model.loc, hint="draft with a model whose lm head has no bias")
        if vocab is None or vocab <= self.size:
            return model
        source = model.weight(head.attrs["weight"])
        tensor = str(source.attrs.get("rows_of", source.name))  # a head narrowed before: its checkpoint tensor
        frequency = self.order == "frequency"
        name = f"{tensor}[freq:{self.size}]" if frequency else f"{tensor}[:{self.size}]"
        added = [Weight(name, TensorType(source.type.dtype, (self.size, *source.type.shape[1:])),
                        Attrs({"rows_of": tensor, **({"row_ids": f"{name}.ids"} if frequency else {})}), source.loc)]
        if frequency:
            added.insert(0, Weight(f"{name}.ids", TensorType("i32", (self.size,)),
                                   Attrs({"ranked_by": self.corpus, "vocab": vocab}), source.loc))
        retyped = {id(head), *(id(op) for op in chain)}
        graph_ops = [(replace(op, attrs=op.attrs.set(weight=name), type=logits(self.size)) if op is head else
                      replace(op, type=logits(self.size))) if id(op) in retyped else op
                     for op in model.graph.ops]
        result, result_type = model.graph.result, logits(self.size)
        if frequency:  # the kept ids' logits back at their ids: the drafter's vocabulary stays whole
            result, result_type = f"{model.graph.result}.vocab", logits(vocab)
            graph_ops.append(Op("vocab_scatter", (model.graph.result,), Attrs({"ids": f"{name}.ids", "vocab": vocab}),
                                result, result_type, head.loc))
        weights = [w for w in model.weights if w.name != source.name or _reads(model, source.name, head)]
        at = next((i for i, w in enumerate(model.weights) if w.name == source.name), len(weights))
        weights[at:at] = added
        graph = replace(model.graph, ops=tuple(graph_ops), result=result, result_type=result_type)
        return replace(model, weights=tuple(weights), graph=graph)
