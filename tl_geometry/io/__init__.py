"""Room 2, **io**: files and the network, as files — nothing here knows a metric or a model's math.

* [`corpus`][tl_geometry.io.corpus] — real text → token batches, offline;
* [`hub`][tl_geometry.io.hub] — is the Hugging Face hub usable right now (one answer for everyone);
* [`weight_files`][tl_geometry.io.weight_files] — a GGUF or safetensors file checked against its own header;
* [`outfile`][tl_geometry.io.outfile] — every check before any work, then an atomic write;
* [`outdir`][tl_geometry.io.outdir] — output directories: the writability check, the lock and the
  swap (the one output-directory protocol of every command).
"""
