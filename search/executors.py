"""Where candidates are evaluated in parallel: a local process pool (default) or Ray.

Contract: `make_executor(workers, ray)` -> an object with `submit(job) -> handle`,
`wait(handles) -> (done, pending)` (at least one done) , `result(handle) -> record` and `close()`.
`ray`: None (local pool of `workers` spawned processes), "local" (a Ray cluster started on this
machine, on loopback) or an address of a running cluster (`ray.init(address=...)`). Each job runs
search.evaluate.evaluate; timing takes the device's lock on the node it runs on, so GPU
candidates time one at a time per GPU and CPU candidates one at a time per machine. A local
worker dies with the search (specir/parent_death.py), so a killed search leaves nothing running.
"""
from __future__ import annotations

import concurrent.futures as cf
import multiprocessing
import os

from specir.errors import SpecirError
from specir.parent_death import die_with_parent

from .evaluate import evaluate


class LocalExecutor:
    def __init__(self, workers: int):
        self.pool = cf.ProcessPoolExecutor(max_workers=workers, mp_context=multiprocessing.get_context("spawn"),
                                           initializer=die_with_parent,  # no worker outlives the search
                                           initargs=(os.getpid(),))

    def submit(self, job):
        return self.pool.submit(evaluate, job)

    def wait(self, handles):
        done, pending = cf.wait(handles, return_when=cf.FIRST_COMPLETED)
        return list(done), list(pending)

    def result(self, handle):
        return handle.result()

    def close(self, cancel: bool = False):
        if cancel:
            for p in list(getattr(self.pool, "_processes", {}).values()):
                p.kill()
        self.pool.shutdown(wait=not cancel, cancel_futures=cancel)


class RayExecutor:
    def __init__(self, workers: int, address: str):
        try:
            import ray
        except ImportError:
            raise SpecirError("--ray needs the ray package", hint="pip install 'specir[search]' (or pip install ray)") \
                from None
        self.ray = ray
        kwargs = dict(include_dashboard=False, log_to_driver=False, ignore_reinit_error=True)
        try:
            if address == "local":
                ray.init(num_cpus=max(workers, 1), _node_ip_address="127.0.0.1", **kwargs)
            else:
                ray.init(address=address, **kwargs)
        except Exception as exc:  # noqa: BLE001 - ray's own errors are many kinds
            raise SpecirError(f"cannot connect to the Ray cluster {address!r}: {exc}",
                              hint="start one with `ray start --head --node-ip-address 127.0.0.1`, or use --ray local") \
                from None
        self.task = ray.remote(num_cpus=1, max_retries=0)(evaluate)

    def submit(self, job):
        return self.task.remote(job)

    def wait(self, handles):
        done, pending = self.ray.wait(list(handles), num_returns=1)
        return done, pending

    def result(self, handle):
        return self.ray.get(handle)

    def close(self, cancel: bool = False):
        self.ray.shutdown()


def make_executor(workers: int, ray: str | None):
    return RayExecutor(workers, ray) if ray else LocalExecutor(workers)
