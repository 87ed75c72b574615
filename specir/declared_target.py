"""The declared target: the model a pipeline serves, and the identity of its checkpoint.

A pipeline names it in its attributes (`specir init` writes it; loading fills it in when a
hand-written pipeline leaves it out, from the step's final verify op before any pass runs):

    pipeline code attributes {target = {digest = "sha256:...", dtype = "bf16", model = @target,
                                        source = "zoo:code-target"}} { ... }

Contracts:
- `model` names a model of the pipeline; the step's final verify op verifies with it (the
  verifier); its `source` attribute equals `source` (the verifier, once the model is expanded).
- `digest` is `checkpoint_digest` of the folder `source` names; loading a pipeline whose
  checkpoint no longer has that digest is an error (the files changed under it).
- `dtype` is the dtype the reference decodes in (`check` judges against the checkpoint in it).
- No pass may change any of the four (the pass manager); passes may rewrite the model's graph.
`specir check` judges against this checkpoint, loaded fresh, and nothing else.
"""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from .errors import SpecirError
from .ir.nodes import Attrs, Op, Pipeline, Symbol

ATTR = "target"
_HINT = 'attributes {target = {model = @target, source = "path/to/checkpoint", digest = "sha256:...", dtype = "bf16"}}'


@dataclass(frozen=True)
class DeclaredTarget:
    model: str
    source: str
    digest: str
    dtype: str

    def as_attrs(self) -> Attrs:
        return Attrs({"model": Symbol(self.model), "source": self.source, "digest": self.digest,
                      "dtype": self.dtype})

    def as_dict(self) -> dict:
        return {"model": self.model, "source": self.source, "digest": self.digest, "dtype": self.dtype}

    @classmethod
    def from_dict(cls, data: dict, where: str = "manifest.json") -> "DeclaredTarget":
        try:
            return cls(str(data["model"]), str(data["source"]), str(data["digest"]), str(data["dtype"]))
        except (KeyError, TypeError):
            raise SpecirError(f"{where} has no valid declared target", path=where,
                              hint="recompile the build with specir compile") from None


def read(pipeline: Pipeline) -> DeclaredTarget | None:
    """The declared target of `pipeline`, or None when it declares none. Malformed: SpecirError."""
    value = pipeline.attrs.get(ATTR)
    if value is None:
        return None
    where = dict(location=pipeline.loc, path=None if pipeline.loc else pipeline.source_file)
    if not isinstance(value, Attrs):
        raise SpecirError("the pipeline attribute `target` must be a dictionary", hint=_HINT, **where)
    extra = sorted(set(value) - {"model", "source", "digest", "dtype"})
    if extra:
        raise SpecirError(f"unknown key {extra[0]!r} in the declared target", hint=_HINT, **where)
    if not isinstance(value.get("model"), Symbol):
        raise SpecirError("the declared target needs `model = @name`", hint=_HINT, **where)
    for key in ("source", "digest", "dtype"):
        if not isinstance(value.get(key), str) or isinstance(value.get(key), Symbol) or not value.get(key):
            raise SpecirError(f"the declared target needs `{key}` (a non-empty string)", hint=_HINT, **where)
    return DeclaredTarget(str(value["model"]), value["source"], value["digest"], value["dtype"])


def final_verify(pipeline: Pipeline) -> Op | None:
    """The step's last op whose definition has the role "verify", or None."""
    from .ir.opdefs import role_of
    if pipeline.step is None:
        return None
    verifies = [op for op in pipeline.step.ops if role_of(op) == "verify"]
    return verifies[-1] if verifies else None


def declare(pipeline: Pipeline) -> Pipeline:
    """Fill in the declared target from the final verify op (a pipeline that declares none), or check
    the one declared against its checkpoint on disk. Models must be expanded."""
    from .importers import resolve_source
    from .importers.checkpoint import tensor_index
    from .importers.digest import checkpoint_digest
    declared = read(pipeline)
    where = dict(location=pipeline.loc, path=None if pipeline.loc else pipeline.source_file)
    if declared is None:
        verify = final_verify(pipeline)
        if verify is None or not verify.symbols:
            return pipeline  # nothing is verified: the verifier says so where it matters
        model = pipeline.model(verify.symbols[0])
        if model is None or model.graph is None or not model.attrs.get("source"):
            return pipeline
        source = str(model.attrs["source"])
        declared = DeclaredTarget(model.name, source, checkpoint_digest(resolve_source(source)),
                                  str(model.attrs.get("dtype", "bf16")))
        return pipeline.with_(attrs=pipeline.attrs.set(**{ATTR: declared.as_attrs()}))
    model = pipeline.model(declared.model)
    if model is None:
        raise SpecirError(f"the declared target @{declared.model} is not a model of this pipeline",
                          hint="declare one of its models as the target", **where)
    folder = resolve_source(declared.source)
    if not Path(folder).is_dir():
        raise SpecirError(f"the declared target's checkpoint {declared.source!r} does not exist", hint=_HINT, **where)
    tensor_index(folder, pipeline.loc)  # a missing or unreadable file is named as such, before the digest
    digest = checkpoint_digest(folder)
    if digest != declared.digest:
        raise SpecirError(f"the declared target's checkpoint {declared.source} changed since this pipeline was "
                          f"written (digest {digest[:19]}..., declared {declared.digest[:19]}...)",
                          hint="re-run specir init for the checkpoint, or restore its files", **where)
    return pipeline


def check_declared(pipeline: Pipeline, error) -> None:
    """Verifier rule: the declared target is a model of the pipeline, the step's final verify op
    verifies with it, and its source attribute is the declared source. `error(msg, node, hint)`."""
    declared = read(pipeline)
    if declared is None:
        return
    model = pipeline.model(declared.model)
    if model is None:
        raise error(f"the declared target @{declared.model} is not a model of this pipeline", pipeline,
                    "declare one of its models as the target")
    if model.graph is not None and str(model.attrs.get("source", "")) != declared.source:
        raise error(f"model @{model.name} reads {model.attrs.get('source')!r}, but the pipeline declares its "
                    f"target's checkpoint as {declared.source!r}", model,
                    "the declared target's checkpoint is fixed; passes may rewrite its graph, not its source")
    verify = final_verify(pipeline)
    if verify is not None and verify.symbols and verify.symbols[0] != "@" + declared.model:
        raise error(f"the step's final verify op checks with {verify.symbols[0]}, but the pipeline declares "
                    f"@{declared.model} as its target", verify,
                    "the declared target must be the last judge of every token")
