"""A student task that learns from a frozen teacher as well as from labels (`Task`).

Wraps the student's own task (a `ClassificationTask` or a `TaggingTask`) and the teacher's
(the same task on the teacher's config). The loop trains `build_model()`, the student; the
teacher is built beside it (under the same strategy scope), loaded from its folder and never
trained, and runs on each batch inside the loss. The loss has up to three parts, each a sum
over the batch and its normalizer, as every task's (`base.Task`):

  <the task's loss>    (1 - distill_weight) x the student task's own loss, on examples (or
                       tokens) that have a label
  distillation_loss    distill_weight x the soft loss against the teacher's outputs
                       (`distillation_losses`: T^2 KL for classes and tags, squared difference
                       for regression), on every real example or token, labeled or not
  hidden_loss          hidden_weight x TinyBERT's hidden-state loss over the real tokens
                       (student hidden state i against the teacher's `hidden_pairs[i]`)
  attention_loss       attention_weight x TinyBERT's attention loss over the real tokens
                       (student layer i's attention scores against those of the teacher's
                       layer `hidden_pairs[i]`; the same number of heads, any width)

An example without a label (the transfer set, `--unlabeled_file`) carries `UNLABELED` where
its label would be (NaN for a regression score): the task's loss and metrics skip it, the
soft loss uses it. With distill_weight 0 and hidden_weight 0 the teacher is not run and the
task is exactly the student's own (the baseline).
"""

from keras import ops

from official_bert.tasks import base
from official_bert.tasks import distillation_losses
from official_bert.tasks import losses
from official_bert.tasks.tagging import TaggingTask

# The label of an example or token that has none (PyTorch's ignore_index); a regression
# score that has none is NaN.
UNLABELED = -100
SOFT_LOSS = "distillation_loss"
HIDDEN_LOSS = "hidden_loss"
ATTENTION_LOSS = "attention_loss"
# What `base.Task` reads as attributes and the student task decides.
_DELEGATED = ("bert_config", "features", "shapes", "shuffle_buffer_size", "keep_features",
              "token_features", "position_outputs", "loss_epsilons")


class DistillationTask(base.Task):
  """Args: student_task, teacher_task (the same kind of task; the teacher's config);
  load_teacher: model -> None, loads the teacher's weights into its built model;
  temperature (> 0); distill_weight in [0, 1]; hidden_weight >= 0; attention_weight >= 0;
  hidden_pairs: the teacher hidden-state index for each student hidden state (0 =
  embeddings; entry i >= 1 is also the teacher layer whose attention student layer i
  matches), when hidden_weight or attention_weight."""

  def __init__(self,
               student_task,
               teacher_task,
               load_teacher,
               temperature=2.0,
               distill_weight=0.5,
               hidden_weight=0.0,
               hidden_pairs=None,
               attention_weight=0.0):
    if temperature <= 0:
      raise ValueError(f"--temperature must be > 0, got {temperature}")
    if not 0.0 <= distill_weight <= 1.0:
      raise ValueError(f"--distill_weight must be in [0, 1], got {distill_weight}")
    if hidden_weight < 0:
      raise ValueError(f"--hidden_weight must be >= 0, got {hidden_weight}")
    if attention_weight < 0:
      raise ValueError(f"--attention_weight must be >= 0, got {attention_weight}")
    self.student_task = student_task
    self.teacher_task = teacher_task
    self.load_teacher = load_teacher
    self.temperature = float(temperature)
    self.distill_weight = float(distill_weight)
    self.hidden_weight = float(hidden_weight)
    self.attention_weight = float(attention_weight)
    self.hidden_pairs = list(hidden_pairs or [])
    self.tagging = isinstance(student_task, TaggingTask)
    self.problem_type = "tagging" if self.tagging else student_task.problem_type
    self.teacher = None
    self._student = None  # the model `attach` gave the teacher to
    for name in _DELEGATED:
      setattr(self, name, getattr(student_task, name))
    if self.matches_layers:
      self._check_hidden_pairs()

  @property
  def matches_layers(self):
    """Whether the models return their hidden states (and attention scores) for a loss."""
    return bool(self.hidden_weight or self.attention_weight)

  def _check_hidden_pairs(self):
    student, teacher = self.student_task.bert_config, self.teacher_task.bert_config
    if self.hidden_weight and student.hidden_size != teacher.hidden_size:
      raise ValueError(f"--hidden_weight matches hidden states, which needs the student's "
                       f"hidden_size ({student.hidden_size}) to equal the teacher's "
                       f"({teacher.hidden_size}); use --hidden_weight=0")
    if self.attention_weight and student.num_attention_heads != teacher.num_attention_heads:
      raise ValueError(f"--attention_weight matches attention scores head by head, which "
                       f"needs the student's num_attention_heads "
                       f"({student.num_attention_heads}) to equal the teacher's "
                       f"({teacher.num_attention_heads}); use --attention_weight=0")
    if len(self.hidden_pairs) != student.num_hidden_layers + 1:
      raise ValueError(f"hidden_pairs: {student.num_hidden_layers + 1} entries (embeddings and "
                       f"each student layer), got {self.hidden_pairs}")
    if self.attention_weight and not all(1 <= p <= teacher.num_hidden_layers
                                         for p in self.hidden_pairs[1:]):
      raise ValueError(f"hidden_pairs: a student layer's entry is a teacher layer, 1.."
                       f"{teacher.num_hidden_layers}, got {self.hidden_pairs}")

  @property
  def uses_teacher(self):
    return bool(self.distill_weight or self.matches_layers)

  def build_model(self):
    student = self.student_task.build_model()
    if self.uses_teacher:
      teacher = self.teacher_task.build_model()
      self.load_teacher(teacher)
      self.attach(student, teacher)
    return student

  def attach(self, student, teacher):
    """Makes `teacher` (a built, loaded model) the frozen teacher of `student`, whose
    training calls then return what the losses match."""
    self.teacher = teacher
    self._student = student
    teacher.trainable = False
    if self.matches_layers:
      student.hidden_states_output = "training"
      teacher.hidden_states_output = "always"
    if self.attention_weight:
      student.attention_scores_layers = list(range(1, len(self.hidden_pairs)))
      teacher.attention_scores_layers = list(self.hidden_pairs[1:])

  def detach(self, student):
    """`student` as a plain model again (no extra outputs), the teacher let go."""
    student.hidden_states_output = None
    student.attention_scores_layers = []
    self.teacher = self._student = None

  # ---- the records ------------------------------------------------------------------------
  def input_id_limits(self):
    return self.student_task.input_id_limits()

  def record_features(self, is_training):
    return self.student_task.record_features(is_training)

  def batch_transform(self, input_context=None):
    return self.student_task.batch_transform(input_context)

  def metric_names(self):
    return self.student_task.metric_names()

  # ---- which examples have labels ---------------------------------------------------------
  def _weight_name(self):
    return "label_weights" if self.tagging else "is_real_example"

  def _has_label(self, features):
    """1.0 where the example (classifier: [b]) or token (tagger: [b, s]) has a label."""
    labels = features["label_ids"]
    if self.problem_type == "regression":
      labels = ops.reshape(ops.cast(labels, "float32"), (-1,))
      return ops.cast(ops.logical_not(ops.isnan(labels)), "float32")
    if self.problem_type == "multi_label" and len(labels.shape) > 1:
      labels = labels[:, 0]  # an unlabeled example has UNLABELED for every label
    elif not self.tagging:
      labels = ops.reshape(labels, (-1,))
    return ops.cast(ops.greater_equal(ops.cast(labels, "float32"), 0.0), "float32")

  def _labeled(self, features):
    """`features` with the unlabeled examples or tokens weighed 0 and given a harmless label
    (the student task's loss gathers by label)."""
    has_label = self._has_label(features)
    name = self._weight_name()
    weights = ops.cast(features[name], "float32")
    labels = features["label_ids"]
    if self.problem_type == "regression":
      labels = ops.where(ops.isnan(ops.cast(labels, "float32")), 0.0, labels)
    else:
      labels = ops.where(ops.greater_equal(ops.cast(labels, "float32"), 0.0), labels,
                         ops.zeros_like(labels))
    out = dict(features)
    out[name] = (weights if self.tagging else ops.reshape(weights, (-1,))) * has_label
    out["label_ids"] = labels
    return out

  # ---- the losses -------------------------------------------------------------------------
  def _soft_weights(self, features):
    """[b] (classifier) or [b, s] (tagger): every real example or labelable token."""
    weights = ops.cast(features[self._weight_name()], "float32")
    return weights if self.tagging else ops.reshape(weights, (-1,))

  def loss_normalizers(self, features):
    out = dict(self.student_task.loss_normalizers(self._labeled(features)))
    if self.distill_weight:
      out[SOFT_LOSS] = losses.count(None, self._soft_weights(features))
    if self.hidden_weight:
      out[HIDDEN_LOSS] = losses.count(None, features["input_mask"])
    if self.attention_weight:
      out[ATTENTION_LOSS] = losses.count(None, features["input_mask"])
    return out

  def soft_loss(self, student_logits, teacher_logits):
    """The per-example (per-token) soft loss for this task's kind."""
    if self.problem_type == "regression":
      return distillation_losses.regression_distance(student_logits, teacher_logits)
    if self.problem_type == "multi_label":
      return distillation_losses.binary_soft_cross_entropy(student_logits, teacher_logits,
                                                           self.temperature)
    return distillation_losses.soft_cross_entropy(student_logits, teacher_logits, self.temperature)

  def loss_sums(self, features, outputs):
    own = self.student_task.loss_sums(self._labeled(features), outputs)
    sums = {k: v * (1.0 - self.distill_weight) for k, v in own.items()}
    if not self.uses_teacher:
      return sums
    if self._student is not None:
      # The teacher runs at inference inside the student's step: on the real tokens when
      # that step is packed (`pack_training`; the same outputs at the real positions, which
      # every loss here reads).
      self.teacher.encoder.skip_padding = self._student.encoder.pack_training
    teacher = self.teacher(features, training=False)
    if self.distill_weight:
      per_item = self.soft_loss(outputs["logits"], ops.stop_gradient(teacher["logits"]))
      sums[SOFT_LOSS] = self.distill_weight * losses.weighted_sum(per_item,
                                                                  self._soft_weights(features))
    if self.hidden_weight and "hidden_states" in outputs:  # training calls (not evaluation)
      targets = [ops.stop_gradient(teacher["hidden_states"][i]) for i in self.hidden_pairs]
      per_token = distillation_losses.hidden_distance(outputs["hidden_states"], targets)
      sums[HIDDEN_LOSS] = self.hidden_weight * losses.weighted_sum(per_token,
                                                                   features["input_mask"])
    if self.attention_weight and "attention_scores" in outputs:  # training calls
      targets = [ops.stop_gradient(t) for t in teacher["attention_scores"]]
      per_token = distillation_losses.attention_distance(outputs["attention_scores"], targets,
                                                         features["input_mask"])
      sums[ATTENTION_LOSS] = self.attention_weight * losses.weighted_sum(
          per_token, features["input_mask"])
    return sums

  def metric_sums(self, features, outputs):
    return self.student_task.metric_sums(self._labeled(features), outputs)


def default_attention_weight(attention_weight, hidden_weight, student_config, teacher_config):
  """`attention_weight`, or if None `hidden_weight` where the student has the teacher's
  number of heads (TinyBERT matches attention and hidden states together), else 0."""
  if attention_weight is not None:
    return float(attention_weight)
  if student_config.num_attention_heads != teacher_config.num_attention_heads:
    return 0.0
  return float(hidden_weight)
