"""`interop.model_files.write` under its old name, for official_bert/api/presets.py only.

The model-folder files (names, reading, writing) are `interop.model_files`'; remove this module
once presets.py calls `model_files.write`.
"""

from official_bert.interop import model_files

write = model_files.write
