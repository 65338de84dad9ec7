"""--recipe: the original's fine-tuning recipe by default, Hugging Face's by one flag; each of
its flags, given, overrides it (issue 37)."""

from conftest import run_command
from conftest import tiny_model_folder
import pytest

from official_bert.training import settings as settings_lib
from official_bert.training.settings import FinetuningSettings

pytestmark = pytest.mark.large  # trains or runs commands: `make test`, not `make test-fast`


def test_the_default_is_the_originals_recipe():
  s = FinetuningSettings()
  assert (s.recipe, s.lr_schedule, s.adam_bias_correction, s.last_partial_batch) == (
      "original", "bert", False, False)


def test_huggingface_sets_the_optimizer_schedule_and_batching_together():
  s = FinetuningSettings(recipe="huggingface")
  assert (s.lr_schedule, s.adam_bias_correction, s.last_partial_batch) == ("linear", True, True)


def test_a_single_flag_overrides_its_recipe():
  s = FinetuningSettings(recipe="huggingface", adam_bias_correction=False)
  assert (s.lr_schedule, s.adam_bias_correction, s.last_partial_batch) == ("linear", False, True)
  s = FinetuningSettings(lr_schedule="linear")
  assert (s.lr_schedule, s.adam_bias_correction) == ("linear", False)
  assert FinetuningSettings(optimizer="lamb").adam_bias_correction is True  # LAMB: n/a


def test_steps_count_as_each_recipe_does():
  # 10 examples, batch 4, 3 epochs: the original int(10 / 4 * 3) = 7 full batches; Hugging
  # Face's ceil(10 / 4) * 3 = 9 batches, every third one of 2 examples.
  original = FinetuningSettings(train_batch_size=4, num_train_epochs=3.0)
  huggingface = FinetuningSettings(train_batch_size=4, num_train_epochs=3.0,
                                   recipe="huggingface")
  assert settings_lib.finetuning_steps(original, 10) == (7, 0)
  assert settings_lib.finetuning_steps(huggingface, 10) == (9, 0)


def test_group_by_length_needs_full_batches():
  with pytest.raises(ValueError, match="--group_by_length"):
    FinetuningSettings(recipe="huggingface", group_by_length=True)
  assert FinetuningSettings(recipe="huggingface", group_by_length=True,
                            last_partial_batch=False).group_by_length


def test_the_commands_list_the_flag():
  out = run_command("official_bert.run_classifier", "--helpshort").stdout
  assert "--recipe" in out and "--last_partial_batch" in out


@pytest.mark.parametrize("recipe,steps", [("original", 2), ("huggingface", 3)])
def test_run_classifier_trains_the_recipes_steps(tmp_path, recipe, steps):
  """10 rows at batch 4, one epoch: the original's 2 full batches, Hugging Face's 3 (the
  last of 2 rows)."""
  train = tmp_path / "train.csv"
  train.write_text("text,label\n" + "".join(f"{w} film,{'pos' if i % 2 else 'neg'}\n"
                                            for i, w in enumerate(["good", "bad"] * 5)))
  proc = run_command("official_bert.run_classifier", f"--train_file={train}",
                     f"--init_checkpoint={tiny_model_folder(tmp_path / 'model')}",
                     "--max_seq_length=16", "--train_batch_size=4", "--num_train_epochs=1",
                     f"--recipe={recipe}", "--do_train", f"--output_dir={tmp_path / 'out'}")
  assert proc.returncode == 0, proc.stderr[-3000:]
  assert f"Training: 10 examples, {steps} steps" in proc.stderr, proc.stderr[-3000:]
  assert f"step {steps}/{steps}" in proc.stderr, proc.stderr[-3000:]
