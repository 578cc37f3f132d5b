"""base.linalg.gram64: the float64 Gram in blocks equals the float64 product of the whole matrix."""

import pytest
import torch

from tl_geometry.base.linalg import gram64
from tl_geometry.errors import InputError


@pytest.mark.parametrize("n", [1, 7, 8, 9, 50])
@pytest.mark.parametrize("rows", [False, True])
def test_blocks_equal_the_whole_product(n, rows):
    W = torch.randn(n, 5) if rows else torch.randn(5, n)
    W64 = W.double()
    want = W64.T @ W64 if rows else W64 @ W64.T  # the slow reference: a float64 copy of all of W
    got = gram64(W, rows=rows, chunk=8)
    assert got.dtype == torch.float64 and got.shape == (5, 5)
    torch.testing.assert_close(got, want, rtol=1e-13, atol=1e-13)


def test_a_known_gram():
    W = torch.tensor([[1.0, 0.0, 2.0], [0.0, 3.0, 0.0]])  # rows orthogonal: W Wᵀ = diag(5, 9)
    assert torch.equal(gram64(W, chunk=2), torch.tensor([[5.0, 0.0], [0.0, 9.0]], dtype=torch.float64))


@pytest.mark.parametrize("bad", [float("nan"), float("inf")])
def test_non_finite_refused_only_when_asked(bad):
    W = torch.ones(3, 30)
    W[1, 25] = bad
    with pytest.raises(InputError, match="the matrix contains NaN or inf"):
        gram64(W, chunk=8, check_finite=True)
    assert not torch.isfinite(gram64(W, chunk=8)).all()


@pytest.mark.parametrize(
    "bad, message",
    [
        (torch.ones(3), "gram64 needs a 2-D floating-point tensor, got Tensor (3,) torch.float32"),
        (
            torch.ones(2, 3, dtype=torch.int64),
            "gram64 needs a 2-D floating-point tensor, got Tensor (2, 3) torch.int64",
        ),
        ([[1.0, 2.0]], "gram64 needs a 2-D floating-point tensor, got list ()"),
    ],
)
def test_bad_inputs_are_refused(bad, message):
    import re

    with pytest.raises(InputError, match=re.escape(message) + "$"):
        gram64(bad)
