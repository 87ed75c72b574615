"""Cheat: the pipeline's process ends with status 0 before writing any result."""
import os

from specir.pass_infra import Pass


class ExitSilently(Pass):
    name = "exit-silently"

    def run(self, pipeline):
        os._exit(0)
