"""`read_file`: a user's own TSV, CSV or JSON-lines file as `fit`'s x and y.

The same reader as `run_classifier --train_file` (`data_prep.classification.own_files`): a
header names the columns, JSON lines name them by key; `quoting="none"` reads a .tsv/.csv with
quotes as plain characters, as the GLUE files are read (the default, "csv", is what pandas and
the csv module write). A bad line is a ValueError naming the file and line.
"""

from data_prep.classification import own_files


def read_file(path, text_column="text", text_b_column=None, label_column="label",
              problem_type="single_label", label_separator=",", quoting="csv"):
  """(x, y) of the file at `path`: x a list of texts, or a (first, second) pair of lists with
  `text_b_column`; y the labels (a list of labels per text for "multi_label", floats for
  "regression"), or None when the file has no `label_column` (texts to predict).

  Raises:
    ValueError: a missing column, a malformed line or an unknown `quoting` ("csv" or "none"),
      naming the file and line; a malformed quote under "csv" says to pass quoting="none".
  """
  if problem_type not in own_files.PROBLEM_TYPES:
    raise ValueError(f"problem_type={problem_type!r}: not one of "
                     f"{', '.join(own_files.PROBLEM_TYPES)}")
  columns = own_files.Columns(text_column, text_b_column, label_column)
  try:
    read = own_files.read_examples(str(path), columns, problem_type, label_separator,
                                   need_labels=False, quoting=quoting)
  except ValueError as e:
    raise ValueError(str(e).replace("pass --quoting=none", 'pass quoting="none"')) from None
  first = [e.text_a for e in read.examples]
  x = (first, [e.text_b for e in read.examples]) if text_b_column else first
  return x, ([e.label for e in read.examples] if read.has_labels else None)
