r"""The official SQuAD v1.1 and v2.0 evaluation, with the official scripts' interface.

  python -m official_bert.squad_evaluate dev-v1.1.json predictions.json
  python -m official_bert.squad_evaluate dev-v2.0.json predictions.json \
    --na-prob-file null_odds.json [--na-prob-thresh 1.0] [--out-file eval.json]

The version is read from the data file; the definitions are in `tasks/squad_scorer.py`.
Prints the official JSON (or writes it to --out-file).
"""

import json

from absl import flags

from data_prep import tfrecord_io
from official_bert.tasks import squad_scorer
from official_bert.training import runner


def define_flags():
  # The official scripts' spellings (with hyphens and their one-letter forms).
  flags.DEFINE_string("out-file", None, "Write accuracy metrics to file (default is stdout).",
                      short_name="o")
  flags.DEFINE_string("na-prob-file", None,
                      "v2.0: model estimates of probability of no answer.", short_name="n")
  flags.DEFINE_float("na-prob-thresh", 1.0, 'v2.0: predict "" if the no-answer probability '
                     "exceeds this.", short_name="t")
  flags.DEFINE_bool("strict", False, "Fail (exit 1) when the predictions answer under half of "
                    "the questions (without it: a warning).")


def main(flag_values, data_file, pred_file):
  """Scores `pred_file` against `data_file`; prints or writes the official JSON."""
  out_file = flag_values["out-file"].value
  inputs = {"the data file": data_file, "the predictions file": pred_file,
            "--na-prob-file": flag_values["na-prob-file"].value}
  for what, path in inputs.items():
    if out_file and path and tfrecord_io.absolute(out_file) == tfrecord_io.absolute(path):
      raise ValueError(f"--out-file={out_file} is also {what}: writing the scores would "
                       "replace it; choose another --out-file")
  result = squad_scorer.evaluate_files(data_file, pred_file, flag_values["na-prob-file"].value,
                                       flag_values["na-prob-thresh"].value,
                                       flag_values.strict)
  if out_file:
    tfrecord_io.write_text(out_file, json.dumps(result))
  else:
    print(json.dumps(result, indent=2) if "exact" in result else json.dumps(result))


def console_main():
  """The `bert-squad-evaluate` command (pyproject.toml's [project.scripts])."""
  define_flags()
  runner.launch(main, required_flags=(), positional=("data.json", "pred.json"))


if __name__ == "__main__":
  console_main()
