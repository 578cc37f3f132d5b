"""The import guard: sae_lens is optional and imported only by the functions that need it."""

from __future__ import annotations

from tl_geometry.errors import TLGeometryError

__all__ = ["SAELensNotInstalledError"]


class SAELensNotInstalledError(ImportError, TLGeometryError):
    """sae_lens is needed and missing (install the ``sae`` extra)."""


def _sae_lens():
    try:
        import sae_lens  # noqa: F401
    except ImportError as exc:  # exercised by monkeypatching sys.modules
        from importlib.metadata import PackageNotFoundError, version

        try:
            tl = f"; installed: transformer-lens {version('transformer-lens')}"
        except PackageNotFoundError:
            tl = ""
        raise SAELensNotInstalledError(
            "tl_geometry.families.sae needs sae_lens, which is not installed: pip install 'tl-geometry[sae]' "
            f"(sae-lens>=6.50,<7, which needs transformer-lens < 4{tl})"
        ) from exc
    return sae_lens
