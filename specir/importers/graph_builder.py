"""A small builder for importers: declares weights (checked against the safetensors headers by
name and shape, without loading a tensor), appends ops with canonical attributes, and wraps the
result into a model region. Errors are SpecirErrors naming the checkpoint and the config key."""
from __future__ import annotations

from ..errors import SourceLocation, SpecirError
from ..ir.nodes import Attrs, Graph, Model, Op, Weight
from ..ir.opdefs import without_defaults
from ..ir.types import IDS, POSITIONS, TensorType, act, logits, mask
from .checkpoint import TensorInfo


class GraphBuilder:
    def __init__(self, tensors: dict[str, TensorInfo], *, source: str, where: SourceLocation | None,
                 config_path: str | None, mask_kind: str = "causal"):
        self.tensors, self.source, self.where, self.config_path = tensors, source, where, config_path
        self.weights: dict[str, TensorType] = {}
        self.ops: list[Op] = []
        self.mask_kind = mask_kind

    # ------------------------------------------------------------------ errors
    def refuse(self, message: str, key: str, hint: str) -> SpecirError:
        """A SpecirError about config.json key `key` (raise it)."""
        return SpecirError(f"{message} (config.json: {key})", location=self.where, path=self.config_path, hint=hint)

    # ------------------------------------------------------------------ weights and ops
    def has(self, tensor: str) -> bool:
        return tensor in self.tensors

    def w(self, tensor: str, *shape: int, optional: bool = False) -> str | None:
        info = self.tensors.get(tensor)
        if info is None:
            if optional:
                return None
            raise SpecirError(f"the checkpoint has no tensor {tensor!r}", location=self.where, path=self.source,
                              hint="config.json and the safetensors files disagree: the checkpoint is "
                                   "incomplete or of another architecture")
        if tuple(info.shape) != tuple(shape):
            raise SpecirError(f"tensor {tensor!r} has shape {list(info.shape)} in {info.file.name}, "
                              f"but config.json implies {list(shape)}", location=self.where, path=str(info.file),
                              hint="config.json does not describe these weights")
        self.weights[tensor] = TensorType(info.dtype, tuple(shape))
        return tensor

    def op(self, result: str | None, opname: str, *operands: str, type_=None, **attrs) -> str | None:
        self.ops.append(Op(opname, tuple(operands), Attrs(without_defaults(opname, attrs)), result, type_))
        return result

    def linear(self, result: str, x: str, prefix: str, out: int, inp: int, bias: bool = False, type_=None) -> str:
        weight = self.w(prefix + ".weight", out, inp)
        bias_name = self.w(prefix + ".bias", out) if bias else None
        return self.op(result, "linear", x, type_=type_ or act(out), weight=weight, bias=bias_name)

    def scale(self, result: str, x: str, width: int, factor: float = 1.0, divisor: float = 1.0) -> str:
        """x * factor / divisor, or x itself when both are 1."""
        if float(factor) == 1.0 and float(divisor) == 1.0:
            return x
        return self.op(result, "scale", x, type_=act(width), factor=float(factor), divisor=float(divisor))

    # ------------------------------------------------------------------ the model
    def model(self, name: str, result: str, vocab: int, attrs: dict) -> Model:
        """The model region; the graph returns `result` (logits<vocab>)."""
        graph = Graph((("%ids", IDS), ("%pos", POSITIONS), ("%mask", mask(self.mask_kind))), tuple(self.ops),
                      result, logits(vocab))
        return Model(name, Attrs({k: v for k, v in attrs.items() if v is not None}),
                     tuple(Weight(n, t) for n, t in self.weights.items()), graph, loc=self.where)
