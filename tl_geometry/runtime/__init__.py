"""Room 3, **runtime**: how work runs on this machine — threads, jobs, executors.

* [`threads`][tl_geometry.runtime.threads] — how many CPU threads each kernel uses, chosen from
  the machine's load (the metrics are handed the choice, never read the load);
* [`jobs`][tl_geometry.runtime.jobs] — the one resumable job runner and its crash-safe results files;
* [`ray_executor`][tl_geometry.runtime.ray_executor] — the Ray side of the job runner.
"""
