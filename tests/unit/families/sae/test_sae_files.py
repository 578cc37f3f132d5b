"""A saved SAE whose weights file is truncated is refused with the sizes, before sae_lens reads it."""

import pytest

pytest.importorskip("sae_lens")

from tl_geometry.families import sae as S  # noqa: E402
from tl_geometry.io.weight_files import CorruptFileError  # noqa: E402


def test_truncated_saved_sae_names_the_file_and_sizes(tmp_path):
    from sae_lens import StandardSAE, StandardSAEConfig
    from sae_lens.saes.sae import SAEMetadata

    sae = StandardSAE(StandardSAEConfig(d_in=16, d_sae=32, metadata=SAEMetadata(hook_name="blocks.0.hook_resid_post")))
    sae.save_model(tmp_path / "sae")
    S.load(path=tmp_path / "sae")  # whole: loads
    (weights,) = (tmp_path / "sae").glob("*.safetensors")
    data = weights.read_bytes()
    weights.write_bytes(data[:-64])
    with pytest.raises(
        CorruptFileError,
        match=rf"{weights.name} is truncated: .* says {len(data):,} bytes but the file has {len(data) - 64:,}",
    ):
        S.load(path=tmp_path / "sae")
