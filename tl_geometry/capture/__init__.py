"""The capture layer: the only place (with [`tl_geometry.models`][tl_geometry.models]) that runs models and adds hooks.

It knows no metric. [`activations`][tl_geometry.capture.activations] names hook points, runs token
batches, drops BOS/padding, upcasts and streams activations into whatever consumers the caller
hands it (one forward pass can feed several: [`run_shared`][tl_geometry.capture.activations.run_shared]); [`backward`][tl_geometry.capture.backward]
records activations that gradients can be taken with respect to and runs the probe loops behind
AGOP. Hooks are added through the model's own ``hooks()`` context manager, so they are removed
even on error; a global ``reset_hooks()`` is never called.

The flow of the house: capture → accumulate (the consumers, pure, in [`tl_geometry.metrics`][tl_geometry.metrics])
→ compute → rows ([`tl_geometry.families`][tl_geometry.families]) → figures and readings.
"""

from tl_geometry.capture.activations import (
    Captured,
    Consumer,
    FnPass,
    Pass,
    Sample,
    activation_source,
    as_batch_pos,
    collect,
    eval_mode,
    flatten_valid,
    kept_rows,
    replay_shared,
    run,
    run_shared,
    sample_positions,
)
from tl_geometry.capture.backward import (
    EXACT_MAX_ENTRIES,
    JVP_CHUNK,
    PROBE_MODES,
    READOUT_HOOK,
    ProbeConsumer,
    check_grad_hooks,
    check_probes,
    float32_model,
    grad_capture,
    gradients,
    jacobian_grams,
    loss_gradient_grams,
    output_gram,
    output_jvps,
    probe_gradients,
    readout_factor,
)
from tl_geometry.capture.hooks import (
    EMBED_HOOK,
    FINAL_HOOK,
    FINAL_STATE_HOOK,
    HookedModel,
    bos_token_id,
    check_model,
    check_tokens,
    hidden_state_hooks,
    model_device,
    resid_hooks,
    standard_hooks,
    valid_mask,
    validate_hooks,
    weight,
)

__all__ = [
    "EMBED_HOOK",
    "FINAL_HOOK",
    "FINAL_STATE_HOOK",
    "Captured",
    "Consumer",
    "FnPass",
    "HookedModel",
    "Pass",
    "Sample",
    "activation_source",
    "as_batch_pos",
    "bos_token_id",
    "check_model",
    "check_tokens",
    "collect",
    "eval_mode",
    "flatten_valid",
    "hidden_state_hooks",
    "kept_rows",
    "model_device",
    "replay_shared",
    "resid_hooks",
    "run",
    "run_shared",
    "sample_positions",
    "standard_hooks",
    "valid_mask",
    "validate_hooks",
    "weight",
    "EXACT_MAX_ENTRIES",
    "JVP_CHUNK",
    "ProbeConsumer",
    "check_grad_hooks",
    "float32_model",
    "grad_capture",
    "gradients",
    "jacobian_grams",
    "loss_gradient_grams",
    "output_gram",
    "output_jvps",
    "probe_gradients",
    "check_probes",
    "PROBE_MODES",
    "READOUT_HOOK",
    "readout_factor",
]
