"""Regenerates the small test fixtures in tests/data/ from the real data in ../shared/data.

    .venv/bin/python tests/data/make_fixtures.py

Deterministic: the same ../shared gives the same bytes. See tests/data/README.md for what each
file is.

The vocabulary slices are the first lines of the real vocab, every single-character piece (not
for Chinese, whose vocab is mostly characters), plus every piece the real vocab produces on the
fixture texts and on the string literals of tests/, in the real vocab's order. WordPiece output
on those texts is then the same token strings as with the full vocabulary (greedy longest match
never finds a longer piece in a subset); only ids past the first lines differ.
"""

import ast
import csv
import glob
import json
import os

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
SHARED = os.path.join(os.path.dirname(REPO), "shared", "data")
OUT = os.path.join(REPO, "tests", "data")

CORPUS_START, CORPUS_BYTES = 3_000_000, 300_000
VOCAB_HEAD = 3000  # first lines kept as they are (ids unchanged): specials, characters, ...

# GLUE: (task, split, first rows); dev files also get their longest rows (truncation cases).
GLUE_ROWS = [("CoLA", "train", 40), ("CoLA", "dev", 40), ("CoLA", "test", 20),
             ("SST-2", "train", 40), ("SST-2", "dev", 40),
             ("MRPC", "train", 40), ("MRPC", "dev", 40), ("MRPC", "test", 20),
             ("RTE", "train", 20), ("RTE", "dev", 30), ("RTE", "test", 20),
             ("STS-B", "dev", 40), ("QNLI", "dev", 20), ("WNLI", "train", 20)]
GLUE_LONGEST = {"dev": 10}
GLUE_HEADERLESS = {"CoLA": ("train", "dev")}
SQUAD_V1 = ("dev-v1.1.json", [12, 6, 6, 6])  # paragraphs kept per leading article
SQUAD_V2 = ("cs224n-dev-v2.0-half.json", [8, 4, 5])
CONLL_SENTENCES = {"eng.train": 40, "eng.testa": 60, "valid.txt": 60, "eng.testb": 30}


def _write(rel, text):
  path = os.path.join(OUT, rel)
  os.makedirs(os.path.dirname(path), exist_ok=True)
  with open(path, "w", encoding="utf-8", newline="") as f:
    f.write(text)
  return text


def corpus():
  with open(os.path.join(SHARED, "corpus", "gutenberg_books.txt"), "rb") as f:
    f.seek(CORPUS_START)
    data = f.read(CORPUS_BYTES)
  data = data[data.find(b"\n") + 1:data.rfind(b"\n") + 1]  # whole lines only
  return [_write("corpus/gutenberg_slice.txt", data.decode("utf-8"))]


def glue():
  texts = []
  for task, split, rows in GLUE_ROWS:
    with open(os.path.join(SHARED, "glue", task, split + ".tsv"), encoding="utf-8") as f:
      lines = f.read().split("\n")
    if lines and not lines[-1]:
      lines.pop()
    header = [] if split in GLUE_HEADERLESS.get(task, ()) else lines[:1]
    body = lines[len(header):]
    keep = set(range(rows))
    if split == "test" and task == "RTE":
      keep.add(len(body) - 1)  # the last GLUE submission index
    by_length = sorted(range(rows, len(body)), key=lambda i: (-len(body[i]), i))
    keep.update(by_length[:GLUE_LONGEST.get(split, 0)])
    chosen = [body[i] for i in sorted(keep)]
    _write(f"glue/{task}/{split}.tsv", "\n".join(header + chosen) + "\n")
    for row in csv.reader(chosen, delimiter="\t", quotechar=None):
      texts.extend(row)
  return texts


def squad():
  texts = []
  for name, paragraphs in (SQUAD_V1, SQUAD_V2):
    with open(os.path.join(SHARED, "squad", name), encoding="utf-8") as f:
      dataset = json.load(f)
    dataset["data"] = dataset["data"][:len(paragraphs)]
    for article, n in zip(dataset["data"], paragraphs):
      article["paragraphs"] = article["paragraphs"][:n]
      for p in article["paragraphs"]:
        texts.append(p["context"])
        for qa in p["qas"]:
          texts.append(qa["question"])
          texts.extend(a["text"] for a in qa["answers"])
    _write(f"squad/{name.replace('.json', '-slice.json')}", json.dumps(dataset) + "\n")
  return texts


def conll():
  texts = []
  for name, sentences in CONLL_SENTENCES.items():
    with open(os.path.join(SHARED, "conll2003", name), encoding="utf-8") as f:
      lines = f.read().split("\n")
    kept, count = [], 0
    for i, line in enumerate(lines):
      kept.append(line)
      if not line.strip() and i > 0 and lines[i - 1].strip() and not lines[i - 1].startswith(
          "-DOCSTART-"):
        count += 1
        if count == sentences:
          break
    _write(f"conll2003/{name}", "\n".join(kept) + "\n")
    texts.append(" ".join(line.split(" ")[0] for line in kept if line.strip()))
  return texts


def test_literals():
  texts = []
  for path in sorted(glob.glob(os.path.join(REPO, "tests", "**", "*.py"), recursive=True)):
    with open(path, encoding="utf-8") as f:
      tree = ast.parse(f.read())
    texts.extend(n.value for n in ast.walk(tree)
                 if isinstance(n, ast.Constant) and isinstance(n.value, str))
  return texts


def vocab_slice(name, lower, texts, out_name, all_characters=True):
  from official.nlp.tools import tokenization  # pylint: disable=import-outside-toplevel
  path = os.path.join(SHARED, "vocab", name, "vocab.txt")
  with open(path, encoding="utf-8") as f:
    tokens = f.read().split("\n")
  if tokens and not tokens[-1]:
    tokens.pop()
  tokenizer = tokenization.FullTokenizer(path, do_lower_case=lower)
  needed = set()
  for text in texts:
    for line in text.split("\n"):
      needed.update(tokenizer.tokenize(line))
  keep = [t for i, t in enumerate(tokens)
          if i < VOCAB_HEAD or t in needed
          or all_characters and (len(t) == 1 or (t.startswith("##") and len(t) == 3))]
  _write(f"vocab/{out_name}", "\n".join(keep) + "\n")
  return len(keep), len(tokens)


def main():
  texts = corpus() + glue() + squad() + conll() + test_literals()
  print("uncased", vocab_slice("bert-base-uncased", True, texts, "uncased_vocab.txt"))
  literals = test_literals()
  print("cased", vocab_slice("bert-base-cased", False, literals, "cased_vocab.txt"))
  print("chinese", vocab_slice("bert-base-chinese", True, literals, "chinese_vocab.txt",
                                 all_characters=False))


if __name__ == "__main__":
  main()
