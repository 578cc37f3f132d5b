"""The Ray side of [`tl_geometry.runtime.jobs.run_jobs`][tl_geometry.runtime.jobs.run_jobs]: resources checked first, tasks or one actor per group.

Two ways to run units on Ray:

* **tasks** (the default): each unit a Ray task running ``fn(params)``;
* **actors** (``actor_fn=``): units grouped by ``group_by(params)`` (a sweep groups by model), one
  actor per group built with ``actor_fn(*shared)``, which returns the callable that runs the
  group's units one after another in that actor: a sweep's actor loads its model once and runs
  every seed / checkpoint of it. ``shared`` objects (a sweep's tokens) are put in the object
  store once (``ray.put``) and handed to every actor. An actor is killed once its units are done,
  so its CPUs / GPUs go to the next group's actor.

Before anything is submitted, the request is checked against ``ray.cluster_resources()``: a GPU
(or more CPUs) per unit than the cluster has, or ``device="cuda"`` with ``num_gpus=0``, is an
[`InputError`][tl_geometry.errors.InputError] within seconds instead of a task that waits forever.

Whatever runs where, only the driver writes the results file (``record``), so the file has one
writer whatever the cluster size.

ray is an optional dependency (``pip install 'tl-geometry[ray]'``), imported only in these functions.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Callable, Hashable, Iterator, Mapping, Sequence
from typing import Any

from tl_geometry.errors import InputError

logger = logging.getLogger(__name__)

__all__ = ["check_resources", "init_ray", "local_runtime_env", "run_ray"]


def _ray():
    try:
        import ray
    except ImportError:
        raise InputError("executor='ray' needs ray: pip install 'tl-geometry[ray]'") from None
    return ray


def local_runtime_env() -> dict[str, Any]:
    """The runtime environment of a Ray cluster started here: the workers import modules as this
    process does (``PYTHONPATH`` = the current directory, then this process's ``PYTHONPATH``), so a
    ``--loader mod:fn`` resolves on a worker exactly as it does locally."""
    path = [os.getcwd(), *[p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p]]
    return {"env_vars": {"PYTHONPATH": os.pathsep.join(dict.fromkeys(path))}}


def _merge_env(base: Mapping[str, Any], extra: Mapping[str, Any] | None) -> dict[str, Any]:
    out = dict(base)
    for k, v in (extra or {}).items():
        if k == "env_vars" and "env_vars" in out:
            out["env_vars"] = {**out["env_vars"], **dict(v)}
        else:
            out[k] = v
    return out


def init_ray(address: str | None = None, runtime_env: Mapping[str, Any] | None = None) -> bool:
    """Connect to Ray: the running session if there is one, else ``address`` (``"auto"``, or
    ``"ray://host:10001"``), else a fresh local cluster. Returns True when this call started it
    (the caller shuts it down).

    ``runtime_env`` (e.g. ``{"working_dir": "."}``: the directory is packed and shipped to every
    worker, which runs in it and imports from it) is merged into [`local_runtime_env`][tl_geometry.runtime.ray_executor.local_runtime_env] for a
    local cluster. A session already running keeps its own environment (a warning says so when
    one was asked for).
    """
    ray = _ray()
    if ray.is_initialized():
        if runtime_env or address:
            logger.warning("Ray is already initialized: address/runtime_env of this call are ignored")
        return False
    if address is None:
        env = _merge_env(local_runtime_env(), runtime_env)
        ray.init(include_dashboard=False, log_to_driver=False, runtime_env=env)
    else:
        ray.init(address=address, log_to_driver=False, runtime_env=dict(runtime_env or {}) or None)
    return True


def _this_machine() -> dict[str, float]:
    """The CPUs and GPUs a local Ray instance would have (``os.cpu_count()``, CUDA devices)."""
    gpus = 0
    try:
        import torch

        gpus = torch.cuda.device_count() if torch.cuda.is_available() else 0
    except Exception:  # noqa: BLE001 - no torch / no driver: no GPU
        gpus = 0
    return {"CPU": float(os.cpu_count() or 1), "GPU": float(gpus)}


def check_resources(
    num_cpus: float, num_gpus: float, *, device: str | None = None, resources: Mapping[str, float] | None = None
) -> None:
    """Refuse a request the cluster cannot serve, before anything is submitted.

    Args:
        num_cpus, num_gpus: per unit (task or actor).
        device: the device the units load their models on (``"cuda"`` needs ``num_gpus`` > 0:
            Ray hides every GPU from a worker that did not ask for one).
        resources: the cluster's resources (default: ``ray.cluster_resources()``).

    Raises:
        InputError: naming what was asked, what the cluster has, and what to change.
    """
    if device is not None and str(device).startswith("cuda") and not num_gpus:
        raise InputError(
            f"device={device!r} with num_gpus=0: Ray hides the GPUs from a worker that asks for none; "
            "pass num_gpus=1 (--num-gpus 1), or device='cpu'"
        )
    if resources is None:
        resources = _ray().cluster_resources()
    have_gpu, have_cpu = float(resources.get("GPU", 0)), float(resources.get("CPU", 0))
    if num_gpus > have_gpu:
        raise InputError(
            f"each job asks for num_gpus={num_gpus:g} but the Ray cluster has {have_gpu:g} GPU(s) "
            f"(resources: CPU={have_cpu:g}, GPU={have_gpu:g}); it would wait forever: use num_gpus=0 with "
            "device='cpu', or connect to a cluster with GPUs (--address)"
        )
    if num_cpus > have_cpu:
        raise InputError(
            f"each job asks for num_cpus={num_cpus:g} but the Ray cluster has {have_cpu:g} CPU(s); "
            f"use num_cpus <= {have_cpu:g}"
        )


def _run_unit_with(fn, params, catch: bool, on_error) -> tuple[str, dict]:
    from tl_geometry.runtime.results_file import _run_unit

    return _run_unit(fn, params, catch, on_error)


class _Worker:
    """The body of a Ray actor: ``actor_fn(*shared)`` once, then one call per unit."""

    def __init__(self, actor_fn: Callable[..., Callable], *shared: Any):
        self.fn = actor_fn(*shared)

    def run(self, params: Mapping[str, Any], catch: bool, on_error) -> tuple[str, dict]:
        return _run_unit_with(self.fn, params, catch, on_error)


def run_ray(
    todo: Sequence[Mapping[str, Any]],
    fn: Callable[[Mapping[str, Any]], Mapping[str, Any]],
    record: Callable[[Mapping[str, Any], str, dict], dict],
    *,
    catch: bool,
    on_error: Callable[[BaseException], Mapping[str, Any]],
    num_cpus: float,
    num_gpus: float,
    progress: bool,
    desc: str,
    address: str | None = None,
    runtime_env: Mapping[str, Any] | None = None,
    device: str | None = None,
    actor_fn: Callable[..., Callable] | None = None,
    group_by: Callable[[Mapping[str, Any]], Hashable] | None = None,
    shared: Sequence[Any] = (),
) -> Iterator[dict]:
    """Run ``todo`` on Ray and yield ``record(params, status, result)`` for each, as they finish.

    Args:
        todo, fn, record, catch, on_error, num_cpus, num_gpus, progress, desc: as
            [`tl_geometry.runtime.jobs.run_jobs`][tl_geometry.runtime.jobs.run_jobs] hands them over.
        address, runtime_env: see [`init_ray`][tl_geometry.runtime.ray_executor.init_ray].
        device: checked with [`check_resources`][tl_geometry.runtime.ray_executor.check_resources].
        actor_fn: with it, one actor per ``group_by`` group runs the group's units with the callable
            ``actor_fn(*shared)`` built once in that actor (``fn`` is not used). Without it, one task
            per unit runs ``fn``.
        group_by: ``params → group`` (default: one group for all).
        shared: objects put in the object store once and passed to every ``actor_fn``.

    Raises:
        InputError: ray missing; a request the cluster cannot serve (before any submission).
    """
    ray = _ray()
    if not todo:
        return
    # the device/GPU mismatch needs no cluster: refuse it before starting one
    if address is None and not _ray().is_initialized():  # a local Ray: this machine's, known before it starts (35 s)
        check_resources(num_cpus, num_gpus, device=device, resources=_this_machine())
    else:
        check_resources(num_cpus, num_gpus, device=device, resources={"CPU": float("inf"), "GPU": float("inf")})
    started = init_ray(address, runtime_env)
    try:
        check_resources(num_cpus, num_gpus, device=device)
        from tqdm.auto import tqdm

        pending: dict[Any, tuple[Mapping[str, Any], Hashable | None]] = {}
        actors: dict[Hashable, Any] = {}
        left: dict[Hashable, int] = {}
        if actor_fn is None:
            task = ray.remote(num_cpus=num_cpus, num_gpus=num_gpus, max_retries=0)(_run_unit_with)
            for p in todo:
                pending[task.remote(fn, p, catch, on_error)] = (p, None)
        else:
            refs = [ray.put(obj) for obj in shared]  # once: every actor reads the same object
            cls = ray.remote(num_cpus=num_cpus, num_gpus=num_gpus, max_restarts=0, max_task_retries=0)(_Worker)
            groups: dict[Hashable, list[Mapping[str, Any]]] = {}
            for p in todo:
                groups.setdefault(group_by(p) if group_by else None, []).append(p)
            for g, units in groups.items():
                actors[g] = cls.remote(actor_fn, *refs)
                left[g] = len(units)
                for p in units:  # an actor runs its calls in submission order, one at a time
                    pending[actors[g].run.remote(p, catch, on_error)] = (p, g)
            logger.info("ray: %d actor(s) for %d job(s)", len(actors), len(todo))

        bar = tqdm(total=len(pending), desc=f"{desc}[ray]", disable=not progress)
        try:
            while pending:
                done, _ = ray.wait(list(pending), num_returns=1)
                for ref in done:
                    params, g = pending.pop(ref)
                    try:
                        status, result = ray.get(ref)
                    except Exception as exc:  # the worker died (OOM kill, node lost), or fn raised without catch
                        if not catch:
                            raise
                        status, result = "error", dict(on_error(exc))
                    if status == "error":  # the worker's log does not reach the driver
                        from tl_geometry.runtime.results_file import job_key

                        logger.error("job %s failed: %s", job_key(params), result.get("error"))
                    yield record(params, status, result)  # the driver is the only writer
                    bar.update(1)
                    if g in left:
                        left[g] -= 1
                        if left[g] == 0:  # free its CPUs / GPUs for the next group's actor
                            ray.kill(actors.pop(g))
        finally:
            bar.close()
            for a in actors.values():
                ray.kill(a)
    finally:
        if started:
            ray.shutdown()
