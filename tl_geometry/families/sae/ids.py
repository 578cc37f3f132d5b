"""What an SAE's id says: its width d_sae and its hook (pure string parsing, no sae_lens).

sae_lens's directory has no width field; [`parse_width`][tl_geometry.families.sae.ids.parse_width] reads it from the id, the
repository path, the release name or the repo id by the first matching rule of
[`WIDTH_RULES`][tl_geometry.families.sae.ids.WIDTH_RULES]; [`parse_hook`][tl_geometry.families.sae.ids.parse_hook] reads the TransformerLens hook and the layer.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable

__all__ = ["WIDTH_RULES", "parse_width", "parse_hook"]


def _k(n: str, unit: str) -> int:
    """``16k`` → 16384: the power of two within 5 % of N·1000 (N·10⁶ for m), else N·1024 (N·2²⁰)."""
    x = float(n) * (1_000 if unit.lower() == "k" else 1_000_000)
    p = 2 ** round(math.log2(x))
    if abs(p - x) <= 0.05 * x:
        return int(p)
    return int(round(float(n) * (1024 if unit.lower() == "k" else 2**20)))


WIDTH_RULES: tuple[tuple[str, re.Pattern, Callable[[re.Match, int | None], int | None]], ...] = (
    ("width_Nk", re.compile(r"width[_-]?(\d+(?:\.\d+)?)([km])(?![a-z0-9])", re.I), lambda m, d: _k(m[1], m[2])),
    ("2powN", re.compile(r"2pow(\d+)(?![0-9])", re.I), lambda m, d: 2 ** int(m[1])),
    ("wNk", re.compile(r"(?<![a-z0-9])w[_-]?(\d+(?:\.\d+)?)([km])(?![a-z0-9])", re.I), lambda m, d: _k(m[1], m[2])),
    ("v5_Nk", re.compile(r"v5[_-](\d+)([km])(?![a-z0-9])", re.I), lambda m, d: _k(m[1], m[2])),
    ("dsN", re.compile(r"(?<![a-z0-9])ds(\d+)(?![0-9])", re.I), lambda m, d: int(m[1])),
    ("hook_N", re.compile(r"hook_[a-z_]*?[a-z]_(\d{3,})(?![0-9])", re.I), lambda m, d: int(m[1])),
    # expansion factor (Llama Scope "l0r_8x"): factor × d_model, only when d_model is known
    ("Nx", re.compile(r"(?<![a-z0-9])(\d+)x(?![a-z0-9])", re.I), lambda m, d: int(m[1]) * d if d else None),
)
"""(name, regex, value) in order; the first rule that matches the id, then the path, then the release name, then the repo id, gives d_sae. ``value(match, d_model)`` returns an int or None."""


def parse_width(*texts: str | None, d_model: int | None = None) -> tuple[int | None, str | None]:
    """d_sae parsed from the first text (id, path, release, repo id) that a rule matches.

    Rules ([`WIDTH_RULES`][tl_geometry.families.sae.ids.WIDTH_RULES], first match wins): ``width_16k``/``width-1m`` (k, m as described
    in the module docstring), ``2pow14`` → 16384, ``w32k``/``W80K``/``w-32k``, ``v5_32k``,
    ``ds24576``, a number after a hook name (``hook_resid_pre_768``, ``hook_mlp_out_24576:v1``),
    and an expansion factor ``8x`` × ``d_model`` (when ``d_model`` is given).

    Returns:
        (d_sae, rule name) or (None, None).

    Examples:
        >>> parse_width("layer_20/width_16k/average_l0_71")
        (16384, 'width_Nk')
        >>> parse_width("layer_5_width_1m_l0_big")
        (1048576, 'width_Nk')
        >>> parse_width("blocks.3.hook_resid_post__trainer_1", "x", "sae_bench_width-2pow14_date")
        (16384, '2powN')
        >>> parse_width("l0r_8x", d_model=4096)
        (32768, 'Nx')
        >>> parse_width("blocks.0.hook_resid_pre")
        (None, None)
    """
    for text in texts:
        if not text:
            continue
        for name, rx, value in WIDTH_RULES:
            m = rx.search(str(text))
            if m:
                v = value(m, d_model)
                if v:
                    return int(v), name
    return None, None


_HOOK_RX = re.compile(r"blocks\.(\d+)\.((?:attn\.|mlp\.)?hook_[a-z]+(?:_[a-z]+)*)")


_LAYER_RX = re.compile(r"(?:^|[/_.-])(?:layer_?|l)(\d+)(?:[amr]?(?=[_/.-]|$))", re.I)


def parse_hook(*texts: str | None) -> tuple[str | None, int | None]:
    """(TransformerLens hook name, layer) named in an id or path, e.g.
    ``blocks.8.hook_resid_pre_768`` → (``blocks.8.hook_resid_pre``, 8); ``layer_12/width_16k``
    → (None, 12); nothing → (None, None).

    Examples:
        >>> parse_hook("blocks.12.hook_resid_post__trainer_0")
        ('blocks.12.hook_resid_post', 12)
        >>> parse_hook("layer_20/width_16k/canonical")
        (None, 20)
    """
    for text in texts:
        if text:
            m = _HOOK_RX.search(str(text))
            if m:
                return f"blocks.{m[1]}.{m[2]}", int(m[1])
    for text in texts:
        if text:
            m = _LAYER_RX.search(str(text))
            if m:
                return None, int(m[1])
    return None, None
