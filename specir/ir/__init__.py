"""The specir IR: immutable nodes, types, op definitions, grammar, parser, printer, verifier."""
from .nodes import (Attrs, Graph, Model, Op, Pipeline, Step, Weight, make_attrs)
from .types import TensorType, Type

__all__ = ["Attrs", "Graph", "Model", "Op", "Pipeline", "Step", "Weight", "make_attrs",
           "TensorType", "Type"]
