"""Writing a model folder into a path that may hold the user's files: the one rule.

Every writer of a model folder (the Python API's `save`, `export` and the `export` command)
goes through `write_folder`:
  - a path that does not exist is built beside it and renamed into place when complete;
  - an existing empty folder gets the files when they are complete;
  - an existing non-empty folder is refused (`FolderNotEmptyError`, nothing written) unless
    the caller says overwrite; then the entries the previous model there owned
    (`owned(folder)`: its checkpoint, config, vocabulary, ...) are replaced, and every other
    entry (the user's data, notes, a run's logs) is kept. A name the new model writes that is
    held by an entry the old model does not own (a user's vocab.txt in a folder without
    weights) is refused, not replaced.
The new content is complete on disk before anything old is moved, and the old entries are
deleted only after the new ones are in place. A folder wholly ours (a run's best/ or
restart_K/) is swapped in whole instead (`replace_own_folder`).
"""

import os

import tensorflow as tf

from data_prep import tfrecord_io


class FolderNotEmptyError(ValueError):
  """A write into a non-empty folder without overwrite; `path` and `entries` say what."""

  def __init__(self, path, entries, option):
    shown = ", ".join(sorted(entries)[:5]) + (", ..." if len(entries) > 5 else "")
    super().__init__(
        f"{path} is not empty ({len(entries)} {'entry' if len(entries) == 1 else 'entries'}: "
        f"{shown}); nothing was written. Choose "
        f"a new folder, or pass {option} to replace the model files in it (other files are "
        f"kept)")
    self.path = path
    self.entries = sorted(entries)


def _entries(directory):
  return [name.rstrip("/") for name in tf.io.gfile.listdir(directory)]


def _local(path):
  return "://" not in path


def check_writable(path, overwrite, option):
  """Raises before any work: `path` is a file, or a non-empty folder without `overwrite`
  (`option` names the argument that allows it: "--overwrite", "overwrite=True")."""
  path = os.fspath(path)
  if not tf.io.gfile.exists(path):
    return
  if not tf.io.gfile.isdir(path):
    raise ValueError(f"{path} is a file, not a folder: nothing was written")
  entries = _entries(path)
  if entries and not overwrite:
    raise FolderNotEmptyError(path, entries, option)


def write_folder(path, fill, overwrite=False, owned=None, option="overwrite=True"):
  """Writes a folder's content to `path` by the module's rule.

  Args:
    path: the folder (local or any tf.io.gfile file system).
    fill: `fill(building)` writes the content into the empty folder `building`.
    overwrite: whether a non-empty folder at `path` may have its model entries replaced.
    owned: `owned(folder)` -> the entry names of the model already in `folder` (replaced with
      overwrite besides the new content's own names); None: only the new names.
    option: how the caller allows overwriting, for the error message.

  Returns:
    The names of the entries that replaced old ones (empty for a new folder).
  """
  path = os.fspath(path).rstrip("/") or "/"
  target = os.path.abspath(path) if _local(path) else path
  check_writable(target, overwrite, option)
  exists = tf.io.gfile.exists(target)
  if exists:  # built inside, so "." or a folder whose parent is read-only works too
    building = tfrecord_io.temporary_path(os.path.join(target, ".new"))
    stale_of = os.path.join(target, ".new")
  else:
    tfrecord_io.make_dirs(os.path.dirname(target), "the parent of the folder")
    building = tfrecord_io.temporary_path(target)
    stale_of = target
  stale = [stale_of, os.path.join(target, ".old")] if exists else [stale_of]
  tfrecord_io.remove_stale_temporaries(stale)
  if tf.io.gfile.exists(building):
    tf.io.gfile.rmtree(building)
  tf.io.gfile.makedirs(building)
  try:
    fill(building)
  except BaseException:
    tf.io.gfile.rmtree(building)
    raise
  if not exists:
    tf.io.gfile.rename(building, target)
    return []
  new = _entries(building)
  present = set(_entries(target)) - {os.path.basename(building)}
  previous = set(owned(target)) if owned else set(new)
  clash = sorted(present & set(new) - previous)
  if clash:  # a name the new content writes, held by a file that is not the old model's
    tf.io.gfile.rmtree(building)
    raise ValueError(f"{path} holds {', '.join(clash)}, which the new files would replace "
                     f"but which are not a model's there (yours?): nothing was written. Move "
                     f"{'them' if len(clash) > 1 else 'it'}, or choose a new folder")
  replaced = sorted(present & (set(new) | previous))
  old = tfrecord_io.temporary_path(os.path.join(target, ".old"))
  if replaced:
    tf.io.gfile.makedirs(old)
    for name in replaced:
      tf.io.gfile.rename(os.path.join(target, name), os.path.join(old, name))
  for name in new:
    tf.io.gfile.rename(os.path.join(building, name), os.path.join(target, name))
  tf.io.gfile.rmtree(building)
  if replaced:
    tf.io.gfile.rmtree(old)
  return replaced


def replace_own_folder(directory, fill):
  """Builds `directory`, a folder wholly ours (a run's best/, restart_K/), anew beside the old
  one and swaps it in, so an interruption never leaves half a folder (and the next build
  removes the half folder a killed run left: `tfrecord_io.remove_stale_temporaries`)."""
  parent, name = os.path.split(directory)
  building = tfrecord_io.temporary_path(directory)
  tfrecord_io.remove_stale_temporaries([directory])
  if tf.io.gfile.exists(building):
    tf.io.gfile.rmtree(building)
  tf.io.gfile.makedirs(building)
  fill(building)
  old = os.path.join(parent, f".{name}.old-{os.getpid()}")
  if tf.io.gfile.exists(directory):
    tf.io.gfile.rename(directory, old)
  tf.io.gfile.rename(building, directory)
  if tf.io.gfile.exists(old):
    tf.io.gfile.rmtree(old)
