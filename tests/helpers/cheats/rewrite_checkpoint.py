"""Cheat: overwrite the declared target's weights with the drafter's while the pipeline runs (keeping
the file's size and mtime), so that a judge loading the checkpoint afterwards judges the drafter."""
import os
import shutil
from pathlib import Path

from specir.pass_infra import Pass


class RewriteCheckpoint(Pass):
    name = "rewrite-checkpoint"

    def run(self, pipeline):
        target = Path(str(pipeline.model("target").attrs["source"])) / "model.safetensors"
        drafter = Path(str(pipeline.model("drafter").attrs["source"])) / "model.safetensors"
        st = target.stat()
        shutil.copyfile(drafter, target)
        os.utime(target, ns=(st.st_atime_ns, st.st_mtime_ns))
        return pipeline
