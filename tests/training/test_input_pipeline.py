"""input_pipeline: real TFRecords from our writer -> batches the model expects; errors up-front."""

import os
import shutil

from conftest import UNCASED_VOCAB
from conftest import corpus_text
from conftest import need
import numpy as np
import pytest
import tensorflow as tf

from data_prep import schema
from data_prep.pretraining import writer
from official_bert.training import input_pipeline as ip

L, P = 64, 10
KEYS = {"input_word_ids", "input_mask", "input_type_ids", "masked_lm_positions",
        "masked_lm_ids", "masked_lm_weights", "next_sentence_labels"}


@pytest.fixture(scope="module")
def data(tmp_path_factory):
  """Three runs of the writer on one corpus: same records (seeded), different encodings."""
  root = tmp_path_factory.mktemp("pipeline")
  corpus = root / "corpus.txt"
  corpus.write_text(corpus_text(60_000), encoding="utf-8")
  out = {}
  for name, kw in [("plain", {}), ("gzip", {"gzip_compress": True}),
                   ("v2", {"use_v2_feature_names": True})]:
    settings = writer.Settings(
        input_file=str(corpus), output_file=str(root / name / "pretrain.tfrecord"),
        vocab_file=need(UNCASED_VOCAB), max_seq_length=L, max_predictions_per_seq=P,
        dupe_factor=1, num_workers=1, num_output_shards=3, chunk_size_mb=0.05,
        min_docs_per_chunk=4, **kw)
    out[name] = writer.run(settings)["files"]
  out["root"] = root
  return out


def _raw(paths, compression=""):
  """The records as the writer wrote them, file by file: name -> [n, ...] int64/float32."""
  spec = schema.tf_feature_spec(schema.pretraining_features(L, P))
  rows = [{k: v.numpy() for k, v in tf.io.parse_single_example(r, spec).items()}
          for r in tf.data.TFRecordDataset(paths, compression_type=compression)]
  return {k: np.stack([r[k] for r in rows]) for k in rows[0]}


def _collect(ds):
  """Concatenates all batches of a finite dataset: name -> [n, ...]."""
  batches = list(ds.as_numpy_iterator())
  return {k: np.concatenate([b[k] for b in batches]) for k in batches[0]}


def _eval(pattern, batch_size=7, **kw):
  return ip.pretraining_dataset(pattern, L, P, batch_size, is_training=False, **kw)


def _rows(values):
  """One hashable key per record (its token ids) to compare record sets."""
  ids = values["input_word_ids"] if "input_word_ids" in values else values["input_ids"]
  return [row.astype(np.int64).tobytes() for row in ids]


def test_expand_patterns(data):
  paths = data["plain"]
  root = os.path.dirname(paths[0])
  assert ip.expand_patterns(os.path.join(root, "*")) == sorted(paths)
  # comma-separated, duplicates removed, sorted
  assert ip.expand_patterns(f"{paths[2]}, {paths[0]},{paths[2]}") == [paths[0], paths[2]]


def test_expand_patterns_skips_hidden_temporary_files_and_folders(tmp_path):
  """`out/*` is what a writer wrote, never its unfinished `.NAME.tmp-PID` (one rule with the
  writers: `tfrecord_io.expand_patterns`)."""
  for name in ("b.tfrecord", "a.tfrecord", ".b.tfrecord.tmp-123"):
    (tmp_path / name).write_bytes(b"")
  (tmp_path / "sub").mkdir()
  assert ip.expand_patterns(str(tmp_path / "*")) == [str(tmp_path / "a.tfrecord"),
                                                     str(tmp_path / "b.tfrecord")]
  assert ip.expand_patterns(str(tmp_path / ".*")) == [str(tmp_path / ".b.tfrecord.tmp-123")]
  with pytest.raises(ValueError, match=r"'/nonexistent/\*' matches no file"):
    ip.expand_patterns("/nonexistent/*")
  # A name that is also a glob matching nothing ([1] a character class) is the file it names.
  (tmp_path / "c[1].tfrecord").write_bytes(b"")
  assert ip.expand_patterns(str(tmp_path / "c[1].tfrecord")) == [str(tmp_path / "c[1].tfrecord")]
  with pytest.raises(ValueError, match="no input files"):
    ip.expand_patterns(" , ")


def test_shards_of_two_writes_with_other_counts_are_named(tmp_path):
  """create_pretraining_data written again with another --num_output_shards leaves the first
  write's shards: read together, the older data was trained on too."""
  for i, n in [(0, 4), (1, 4), (2, 4), (3, 4), (0, 2), (1, 2)]:
    (tmp_path / f"pre.tfrecord-{i:05d}-of-{n:05d}").write_bytes(b"")
  with pytest.raises(ValueError, match=r"shards of .*pre.tfrecord written with 2 shard counts "
                     r"\(.*-of-00002, .*-of-00004\)"):
    ip.expand_patterns(str(tmp_path / "pre.tfrecord-*"))
  assert len(ip.expand_patterns(str(tmp_path / "pre.tfrecord-*-of-00004"))) == 4


def test_training_batches_shapes_dtypes_keys(data):
  ds = ip.pretraining_dataset(",".join(data["plain"]), L, P, batch_size=8, seed=1)
  # drop_remainder defaults to True in training: the batch dimension is static.
  spec = ds.element_spec
  assert set(spec) == KEYS
  for k in ("input_word_ids", "input_mask", "input_type_ids"):
    assert spec[k].shape == (8, L) and spec[k].dtype == tf.int32
  for k in ("masked_lm_positions", "masked_lm_ids"):
    assert spec[k].shape == (8, P) and spec[k].dtype == tf.int32
  assert spec["masked_lm_weights"].shape == (8, P)
  assert spec["masked_lm_weights"].dtype == tf.float32
  assert spec["next_sentence_labels"].shape == (8,)
  assert spec["next_sentence_labels"].dtype == tf.int32
  assert ds.cardinality() == tf.data.INFINITE_CARDINALITY  # repeat()
  batch = next(iter(ds))
  assert set(np.unique(batch["next_sentence_labels"])) <= {0, 1}


def test_eval_values_equal_raw_records_in_order(data):
  raw = _raw(data["plain"])
  got = _collect(_eval(",".join(data["plain"])))
  assert len(got["input_word_ids"]) == len(raw["input_ids"]) > 100
  names = {"input_word_ids": "input_ids", "input_type_ids": "segment_ids"}
  for k in KEYS:
    want = raw[names.get(k, k)]
    if k == "next_sentence_labels":
      want = want[:, 0]  # [n, 1] -> [n]
    assert got[k].dtype == (np.float32 if k == "masked_lm_weights" else np.int32)
    np.testing.assert_array_equal(got[k], want, err_msg=k)


def test_gzip_autodetected_and_v2_names_accepted(data):
  plain = _collect(_eval(",".join(data["plain"])))
  assert ip.check_files(data["gzip"], schema.pretraining_features(L, P)) == ("GZIP", False)
  assert ip.check_files(data["v2"], schema.pretraining_features(L, P)) == ("", True)
  for variant in ("gzip", "v2"):
    got = _collect(_eval(",".join(data[variant])))
    for k in KEYS:
      np.testing.assert_array_equal(got[k], plain[k], err_msg=f"{variant} {k}")


def test_file_sharding_is_disjoint_and_covers_all(data):
  paths = data["plain"]
  everything = _rows(_raw(paths))
  seen = []
  for i in range(3):
    ctx = tf.distribute.InputContext(num_input_pipelines=3, input_pipeline_id=i)
    rows = _rows(_collect(_eval(",".join(paths), input_context=ctx)))
    assert rows == _rows(_raw([paths[i]]))  # pipeline i reads file i, whole
    seen += rows
  assert sorted(seen) == sorted(everything)


def test_record_sharding_when_fewer_files_than_pipelines(data):
  one_file = data["plain"][0]
  everything = _rows(_raw([one_file]))
  parts = []
  for i in range(3):
    ctx = tf.distribute.InputContext(num_input_pipelines=3, input_pipeline_id=i)
    parts.append(_rows(_collect(_eval(one_file, batch_size=4, input_context=ctx))))
  assert parts[0] == everything[0::3] and parts[2] == everything[2::3]
  assert sorted(sum(parts, [])) == sorted(everything)
  # Training, unseeded: the pipelines still split one record stream (no file shuffle).
  seen = []
  for i in range(3):
    ctx = tf.distribute.InputContext(num_input_pipelines=3, input_pipeline_id=i)
    ds = ip.pretraining_dataset(one_file, L, P, 1, input_context=ctx, shuffle_buffer_size=1)
    seen += _rows(_collect(ds.take(len(everything) // 3)))
  assert len(set(seen)) == len(seen)


def test_distribute_datasets_from_function(data):
  strategy = tf.distribute.OneDeviceStrategy("/cpu:0")

  def dataset_fn(ctx):
    return ip.pretraining_dataset(",".join(data["plain"]), L, P,
                                  ctx.get_per_replica_batch_size(8), input_context=ctx, seed=0)

  batch = next(iter(strategy.distribute_datasets_from_function(dataset_fn)))
  assert batch["input_word_ids"].shape == (8, L)


def _first_batches(paths, seed, n=4):
  ds = ip.pretraining_dataset(",".join(paths), L, P, batch_size=16, seed=seed,
                              shuffle_buffer_size=64)
  return [b["input_word_ids"] for b in ds.take(n).as_numpy_iterator()]


def test_same_seed_same_batches_different_seed_different(data):
  a, b, c = (_first_batches(data["plain"], s) for s in (7, 7, 8))
  for x, y in zip(a, b):
    np.testing.assert_array_equal(x, y)
  assert any(not np.array_equal(x, z) for x, z in zip(a, c))
  # shuffled: not simply the file order
  in_order = _collect(_eval(",".join(data["plain"]), batch_size=16))["input_word_ids"]
  assert not np.array_equal(a[0], in_order[:16])


def test_skip_examples_resumes_the_same_stream(data):
  def batches(skip):
    ds = ip.pretraining_dataset(",".join(data["plain"]), L, P, batch_size=16, seed=5,
                                shuffle_buffer_size=64, skip_examples=skip)
    return [b["input_word_ids"] for b in ds.take(3).as_numpy_iterator()]
  full, resumed = batches(0), batches(16)
  np.testing.assert_array_equal(resumed[0], full[1])
  np.testing.assert_array_equal(resumed[1], full[2])


def test_drop_remainder(data):
  n = len(_raw(data["plain"])["input_ids"])
  batch_size = 32
  assert n % batch_size  # a partial last batch exists
  sizes = [len(b["input_mask"]) for b in _eval(",".join(data["plain"]), batch_size)]
  assert sizes == [batch_size] * (n // batch_size) + [n % batch_size]  # eval keeps it
  ds = _eval(",".join(data["plain"]), batch_size, drop_remainder=True)
  assert ds.element_spec["input_mask"].shape == (batch_size, L)
  assert sum(len(b["input_mask"]) for b in ds) == batch_size * (n // batch_size)


def test_glob_matching_nothing_names_the_pattern(data, tmp_path):
  pattern = str(tmp_path / "nothing-*.tfrecord")
  with pytest.raises(ValueError, match="nothing-"):
    ip.pretraining_dataset(f"{data['plain'][0]},{pattern}", L, P, 8)


def test_length_mismatch_names_file_feature_and_lengths(data):
  with pytest.raises(ValueError) as e:
    ip.pretraining_dataset(data["plain"][0], 128, P, 8)
  msg = str(e.value)
  assert data["plain"][0] in msg and "input_ids" in msg and "64" in msg and "128" in msg
  assert "--max_seq_length" in msg
  with pytest.raises(ValueError, match="masked_lm_positions has length 10.*=20"):
    ip.check_files(data["plain"][:1], schema.pretraining_features(L, 20))


def test_corrupt_and_empty_files_are_named(data, tmp_path):
  corrupt = tmp_path / "random.tfrecord"
  corrupt.write_bytes(np.random.default_rng(0).bytes(5000))
  with pytest.raises(ValueError, match="random.tfrecord.*not a valid TFRecord"):
    ip.pretraining_dataset(f"{data['plain'][0]},{corrupt}", L, P, 8)
  empty = tmp_path / "empty.tfrecord"
  empty.write_bytes(b"")
  with pytest.raises(ValueError, match="empty.tfrecord.*empty"):
    ip.check_files([data["plain"][0], str(empty)], schema.pretraining_features(L, P))


def test_truncated_file_found_by_find_corrupt_files(data, tmp_path):
  good = data["plain"][1]
  truncated = tmp_path / "truncated.tfrecord"
  truncated.write_bytes(open(good, "rb").read()[:-100])
  # The first record is fine: the up-front check passes, the damage shows at runtime...
  ds = _eval(str(truncated))
  with pytest.raises(tf.errors.DataLossError):
    _collect(ds)
  # ...and find_corrupt_files attributes it.
  shutil.copy(good, tmp_path / "good.tfrecord")
  bad = ip.find_corrupt_files(str(tmp_path / "*.tfrecord"))
  assert [p for p, _ in bad] == [str(truncated)]


def test_mixed_compression_is_an_error(data):
  with pytest.raises(ValueError, match="mixed compression"):
    ip.pretraining_dataset(f"{data['plain'][0]},{data['gzip'][1]}", L, P, 8)


def test_mixed_feature_names_is_an_error(data):
  with pytest.raises(ValueError, match="feature names"):
    ip.check_files([data["plain"][0], data["v2"][1]], schema.pretraining_features(L, P))


def test_synthetic_matches_real_structure_and_is_well_formed(data):
  real = ip.pretraining_dataset(data["plain"][0], L, P, batch_size=8, seed=0)
  synth = ip.synthetic_pretraining_dataset(L, P, vocab_size=30522, batch_size=8, seed=3)
  assert synth.element_spec == real.element_spec
  batches = list(synth.take(3).as_numpy_iterator())
  again = next(ip.synthetic_pretraining_dataset(L, P, 30522, 8, seed=3).as_numpy_iterator())
  for k in KEYS:
    np.testing.assert_array_equal(batches[0][k], again[k])  # deterministic for a seed
  assert not np.array_equal(batches[0]["input_word_ids"], batches[1]["input_word_ids"])
  for b in batches:
    mask, ids = b["input_mask"], b["input_word_ids"]
    length = mask.sum(1)
    np.testing.assert_array_equal(mask, np.arange(L)[None] < length[:, None])  # prefix
    assert (ids[mask == 0] == 0).all() and (ids[mask == 1] > 0).all()
    assert (ids < 30522).all() and (b["input_type_ids"][mask == 0] == 0).all()
    w = b["masked_lm_weights"]
    pos = b["masked_lm_positions"]
    for row in range(8):
      real_pos = pos[row][w[row] == 1]
      assert len(real_pos) >= 1 and (np.diff(real_pos) > 0).all()
      assert (real_pos >= 1).all() and (real_pos < length[row]).all()
      assert (pos[row][w[row] == 0] == 0).all()
      np.testing.assert_array_equal(b["masked_lm_ids"][row][w[row] == 1], ids[row][real_pos])
    assert set(np.unique(b["next_sentence_labels"])) <= {0, 1}


def test_epoch_batches_end_each_epoch_with_its_partial_batch(data):
  """--last_partial_batch (Hugging Face's batching): each pass over the records is batched on
  its own, reshuffled, its last batch partial; a resume skips whole batches."""
  files = ",".join(data["plain"])
  n = len(_raw(data["plain"])["input_ids"])
  batch_size = 32
  per_epoch = -(-n // batch_size)

  def batches(skip=0, count=2 * per_epoch):
    ds = ip.pretraining_dataset(files, L, P, batch_size, seed=3, epoch_batches=True,
                                skip_examples=skip)
    return [b["input_word_ids"] for b in ds.take(count).as_numpy_iterator()]

  got = batches()
  sizes = [len(b) for b in got]
  assert sizes == ([batch_size] * (n // batch_size) + [n % batch_size]) * 2
  everything = sorted(_rows(_raw(data["plain"])))
  first, second = (np.concatenate(got[i * per_epoch:(i + 1) * per_epoch]) for i in (0, 1))
  assert sorted(_rows({"input_ids": first})) == everything  # each epoch: every record once
  assert sorted(_rows({"input_ids": second})) == everything
  assert not np.array_equal(first, second)  # reshuffled
  resumed = batches(skip=2 * batch_size, count=2)
  np.testing.assert_array_equal(resumed[0], got[2])
  np.testing.assert_array_equal(resumed[1], got[3])
  with pytest.raises(ValueError, match="not a whole number of batches"):
    batches(skip=5)
