"""Benchmarks and checks of tl_geometry: a package, run from the repository root as

    python -m benchmarks.<name> [--small] [--help]

``--small`` runs the smallest sizes (under a minute on 2 shared cores: to check a script works; its
timings are not for publishing). Every script imports :mod:`benchmarks._util`, the one utilities
module (timing harness, SmolLM2 loading, tiny models, real text, headless matplotlib); none imports
``tests``.

Timing benchmarks (``_util``'s harness: environment, BLAS library and kernel via threadpoolctl and the
variables that change it, warm-up, rotating order, best and median of ``--repeats`` ≥ 3, then the
ratio lines ours / reference and ours / floor):

=======================  ==================================  ====================================  ==================================
script                   ours                                reference (the best simple one)       floor
=======================  ==================================  ====================================  ==================================
bench_epsilon            ``similarity_stats`` ε of           six-line numpy float64 script, with   float32 GEMM UᵀU (numpy ?syrk,
                         262,144 × 640 (Gemma-3-270M W_E)    numpy's own kernel (subprocess)       torch; as set here and isolated)
bench_capacity_stream    ``embedding_capacity(gguf)`` with   the same, serial (``prefetch=False``) read + dequantize alone; float32 GEMM
                         the reader thread                                                         of the embedding's shape
bench_pga                ``pga_score`` (N=2048, 100 nulls)   scipy pdist + spearmanr per subspace  one torch.sort of the N(N−1)/2
                         (``--ccr 0 1 5``: ``pga_profile``,  (extrapolated)                        distances per subspace
                         a report hook)
bench_pga_smollm2        the report's ``pga`` on SmolLM2     capture + scipy loop (extrapolated)   the capture alone
bench_pga_history        one layer of the paper-size         the same layer at an earlier commit   this tree's z alone
                         profile, z ± stderr                 (before the error bars), same machine (``stderr="none"``)
bench_agop               ``tg.agop``: one backward per       one backward per hook per probe       30 float32 Grams gᵀg per probe
                         probe for all 30 hooks
bench_agop_probes        ``agop(probes="readout")``          ``agop(probes="logits")``             one forward + 30 Grams per probe
bench_agop_layout        ``tg.agop``, TL's weight copies as  the same in the model's own layout    one forward with the graph + one
                         views (``COPIES_AS_VIEWS``)         (TL copies every forward)             backward per probe, no Grams
bench_packing            ``optimized_packing`` (hand         autograd + Adam (the paper's loop)    U Uᵀ and G U per step
                         gradient)
bench_sae                ``cosine_exceedance``,              full n × n cosine matrix              float32 U Uᵀ; UᵀU
                         ``similarity_stats`` of a decoder
bench_load               ``tg.models.load`` (SmolLM2,        transformers' GGUF load alone         one read of the file; read +
                         ``--model gemma``: Gemma-3-270M)                                          dequantize every tensor
bench_memory             peak RSS and time of ``load`` /     TransformerLens's own loader (what    the float32 weights; one read of
                         ``scaled`` (SmolLM2, Gemma, 0.5/1 B) ``load`` did before)                 the file
bench_report             ``run_report`` (one shared capture) ``capture="separate"``                load + one forward pass
bench_report_scaling     ``run_report`` on ``tg.models.      none simpler: the log-log slope of    AGOP: forward + backward passes;
                         scaled`` models, time and peak RSS  time against parameters × tokens     PGA: one sort per null; one
                         against parameters × tokens         (1: time grows as the work)           forward; the memory estimate
bench_report_overlap     AGOP then PGA, torch's threads (as  the two side by side, one core each   one float32 GEMM of a layer's
                         the report runs them)               (fresh workers, a barrier)            activations (1,024 × 576)
bench_report_render      ``write_outputs``                   each figure + savefig, JSON, markdown plain JSON + markdown dump
bench_sweep              fsynced line per job; one-read      dump at the end; ``done()`` per job;  bare write + fsync; file read;
                         resume scan; Ray executor           local executor                        load + analyze per job
bench_spectral_pool      ``tg.spectral``, hooks on the       the same with the plain loop          one forward pass (the capture)
                         thread pool (SmolLM2)
bench_ray                ``sweep`` loading once (local,      ``sweep`` loading per job (local)     one load + analyze per seed
                         Ray actor)
bench_contention         slowdown beside one busy loop       ``TL_GEOMETRY_THREADS=inherit``;      one sort per subspace; one
                         (pga, tiny, smollm2 workloads)      the scipy loop                        forward pass
=======================  ==================================  ====================================  ==================================

Checks and profiles (not timing benchmarks; they use ``_util``'s loading helpers):

* ``calibrate_stderr``: every sampled report metric's standard error against its spread over K
  disjoint pydoc samples on SmolLM2-135M (median and p90 of sd / rms stderr, pairwise 95 %
  coverage), one sample at a time, resumable (docs/reliability.md keeps its last table);
* ``check_agop_probe_bias``: the AGOP rows at the report's 16 probes against 64 on one SmolLM2-135M text, in
  their own standard errors (plug-in vs bias-corrected AOFE and ratio);
* ``check_condition_number_error``: the condition number's jackknife error and its first-order version against the
  spread over disjoint SmolLM2-135M samples;
* ``check_agop_memory``: AGOP step time and peak RSS on SmolLM2-135M, this tree vs another checkout; graph bound vs held;
* ``check_cache_smollm2``: cache / activations vs capture on SmolLM2-135M, max |difference| per metric;
* ``check_report_phases``: a report's resident memory every 20 ms, each metric's interval marked: the
  phase that holds the peak, beside the report's own estimate;
* ``check_corpus_memory``: peak RSS and time of ``corpus.tokens`` on a 100 MB file, streamed vs whole;
* ``check_padding_smollm2``: a padded batch on SmolLM2-135M with / without ``attention_mask`` (ε, RankMe);
* ``check_stderr_repartition``: ε of activations, the AGOP trace and the spectral rows on many random 8-sequence subsets of
  the pooled calibration text, spread vs the jackknife error (the expectation over partitions);
* ``check_pga_stderr_calibration``: PGA z's standard error over many seeds on a tiny model, jackknife
  refit against the influence error (sd of t, coverage);
* ``check_pga_stderr_smollm2``: calibration of PGA z's standard error across two seeds;
* ``check_verdict_flips_smollm2``: reproduce's PGA verdicts (one verdict rule vs 2·stderr alone) on K
  disjoint pydoc samples, how many samples flip each verdict;
* ``check_tl_generations``: one model on TransformerLens 3 and 4 (each in its own venv): logits, the
  report's rows and PGA z, max differences;
* ``dtype_agreement``: bf16 / f16 / float64 / numpy input vs float32 input, per pure function;
* ``pga_profile_smollm2``: subspace PGA profile of SmolLM2 (raw, TL-processed, random init), doc figures;
* ``gemma_pga_processing``: which weight-processing step flips Gemma-3-270M's PGA z (paper vs library
  preset; docs/gemma_pga.md), the outlier dimensions, doc figures;
* ``gpu_check``: ε, PGA and AGOP on CUDA vs CPU (``bash benchmarks/gpu_check.sh`` runs it);
* ``study_cost``: wall time and peak RSS of ``tl-geometry study`` on real models beside the sum of
  their single reports (one fresh process each; a round takes tens of minutes, so one by default).

Each script's docstring (``--help``) says why its reference is the best simple one and what its
``--small`` sizes are. ``make bench`` runs every ``bench_*`` at full size.
"""
