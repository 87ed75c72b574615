"""The stable import path for plugins written against older specir: `from specir.pass_base import
Option, Pass` keeps working. The pass machinery lives in specir.pass_infra; new code imports it there."""
from .pass_infra import Option, Pass, models_option, selected_models  # noqa: F401
