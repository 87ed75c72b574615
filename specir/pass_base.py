"""The stable import path for plugins written against older specir: `from specir.pass_base import
Option, Pass` (and the module's other public names) keeps working. The pass machinery lives in
specir.pass_infra; new code imports it there."""
from .pass_infra.base import KEBAB, Option, Pass, TooLarge, models_option, selected_models  # noqa: F401
