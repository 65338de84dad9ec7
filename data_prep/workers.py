"""The one worker pool of the writers: spawned processes that call one function on chunks.

    pool = workers.start(2, instances.serialize_chunk, options)
    pool.imap(workers.call, chunks)   # serialize_chunk(chunk, options) in a worker

Spawned, not forked: a worker imports only the module of its function (numpy), not the
TensorFlow the main process has loaded. The function's fixed arguments travel once, when a
worker starts, not with every chunk. Workers ignore Ctrl-C, which reaches the whole process
group: the main process alone reacts (it terminates the pool and removes partial outputs).
"""

import multiprocessing
import signal

_TASK = None  # (function, fixed arguments) in a worker


def _init(task):
  global _TASK
  _TASK = task
  signal.signal(signal.SIGINT, signal.SIG_IGN)


def call(chunk):
  """Runs the pool's function on `chunk` (in a worker of `start`)."""
  function, args = _TASK
  return function(chunk, *args)


def start(num_workers, function, *args):
  """A pool of `num_workers` spawned processes running `function(chunk, *args)`."""
  return multiprocessing.get_context("spawn").Pool(num_workers, initializer=_init,
                                                   initargs=((function, args),))
