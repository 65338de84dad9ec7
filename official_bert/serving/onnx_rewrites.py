"""Rewrites of tf2onnx's graph that let ONNX Runtime's CPU graph optimizations fuse it.

Each rewrite uses standard ONNX ops and keeps the values (the export's tests compare with the
SavedModel to 1e-4): LayerNorm as one LayerNormalization op (which ONNX Runtime then fuses
with the residual Add into SkipLayerNormalization), the Dense MatMuls without Tensordot's
Reshapes (then MatMul + bias kernels), and GELU's erf(x / sqrt(2)) as a Div (then one Gelu
kernel). The int8 MiniLM serves about 8% more sentences/s (bench/RESULTS.md). A node that
does not match a pattern exactly is left as it is.
"""


def rewrite_for_onnx_runtime(model):
  """All the rewrites, in place; {rewrite: how many places it changed}."""
  return {"tensordot_reshapes": fold_tensordot_reshapes(model),
          "layer_norms": fuse_layer_norms(model),
          "gelu_divisions": divide_gelu_by_sqrt2(model)}


def fuse_layer_norms(model):
  """Replaces tf2onnx's LayerNorm subgraphs with ONNX LayerNormalization ops, in place.

  tf2onnx spells Keras' LayerNormalization (last axis) as primitive ops, which no ONNX
  Runtime fusion recognizes (its patterns start from ReduceMean and Pow or Div):

    mean = Mean(x); var = Mean((x - mean) * (x - mean))
    (Mean over the last axis: GlobalAveragePool for x [batch, seq, hidden], ReduceMean for
    the packed [tokens, hidden] of `TokenPacking`)
    scale = Reciprocal(Sqrt(var + eps)) * gamma
    y = x * scale + (Neg(mean) * scale + beta)

  One LayerNormalization op (opset 17) computes the same, and lets ONNX Runtime's graph
  optimizations go on from there (a residual Add before it becomes SkipLayerNormalization,
  the Erf GELU one Gelu op). Nodes that do not match the pattern exactly are left as they are.

  Returns the number of LayerNorms replaced (`model`: tf2onnx's onnx.ModelProto).
  """
  import onnx  # pylint: disable=g-import-not-at-top
  from onnx import numpy_helper  # pylint: disable=g-import-not-at-top

  g = _Graph(model.graph)
  graph, consumers, made_by, only_use = g.graph, g.consumers, g.made_by, g.only_use

  def other(node, name):
    """The input of a two-input node that is not `name` (None if both or neither are)."""
    rest = [i for i in node.input if i != name]
    return rest[0] if len(rest) == 1 else None

  ranks = _ranks(model)

  def last_axis_mean(name):
    """The node that makes `name` as the mean over its input's last axis, else None."""
    node = g.producer.get(name)
    if node is None or node.op_type == "GlobalAveragePool":
      return node
    if node.op_type != "ReduceMean" or len(node.input) != 1:
      return None
    attributes = {a.name: a for a in node.attribute}
    axes = list(attributes["axes"].ints) if "axes" in attributes else None
    keepdims = attributes["keepdims"].i if "keepdims" in attributes else 1
    last = {-1, ranks.get(node.input[0], 0) - 1}
    return node if keepdims == 1 and axes is not None and len(axes) == 1 and axes[0] in last \
        else None

  def vector(name):
    """A constant's value as a 1-D array, or None if it is not one ([1, .., 1, D])."""
    value = g.value(name)
    if value is None:
      return None
    return value.reshape(-1) if value.ndim >= 1 and value.size == value.shape[-1] else None

  removed, added, count = set(), [], 0
  for reciprocal in [n for n in graph.node if n.op_type == "Reciprocal"]:
    sqrt = made_by(reciprocal.input[0], "Sqrt")
    add_eps = sqrt and made_by(sqrt.input[0], "Add")
    var = add_eps and next(filter(None, (last_axis_mean(i) for i in add_eps.input)), None)
    square = var and made_by(var.input[0], "Mul")
    if not square or square.input[0] != square.input[1]:
      continue
    diff = made_by(square.input[0], "Sub")
    mean = diff and last_axis_mean(diff.input[1])
    x = diff and diff.input[0]
    if not mean or mean.input[0] != x:
      continue
    eps = g.value(other(add_eps, var.output[0]))
    if eps is None or eps.size != 1:
      continue
    scale = only_use(reciprocal.output[0])
    if scale is None or scale.op_type != "Mul":
      continue
    gamma = vector(other(scale, reciprocal.output[0]))
    users = consumers.get(scale.output[0], [])
    neg = next((n for n in consumers.get(mean.output[0], []) if n.op_type == "Neg"), None)
    if gamma is None or neg is None or len(users) != 2:
      continue
    x_scaled = next((n for n in users if n.op_type == "Mul" and x in n.input), None)
    mean_scaled = next((n for n in users if n.op_type == "Mul" and neg.output[0] in n.input),
                       None)
    shift = mean_scaled and only_use(mean_scaled.output[0])
    out = x_scaled and only_use(x_scaled.output[0])
    if not shift or shift.op_type != "Add" or not out or out.op_type != "Add":
      continue
    beta = vector(other(shift, mean_scaled.output[0]))
    if beta is None or sorted(out.input) != sorted([x_scaled.output[0], shift.output[0]]):
      continue
    inner = [mean, neg, diff, square, var, add_eps, sqrt, reciprocal, scale, x_scaled,
             mean_scaled, shift]
    # The intermediate values must not be read outside the subgraph (they never are in
    # tf2onnx's LayerNorm; a graph where they are keeps its ops).
    inside = {id(n) for n in inner + [out]}
    if any(id(user) not in inside for n in inner for o in n.output
           for user in consumers.get(o, [])):
      continue
    prefix = out.name.rsplit("/", 1)[0]
    weights = [numpy_helper.from_array(gamma.astype("float32"), prefix + "/gamma"),
               numpy_helper.from_array(beta.astype("float32"), prefix + "/beta")]
    graph.initializer.extend(weights)
    added.append(onnx.helper.make_node(
        "LayerNormalization", [x, weights[0].name, weights[1].name], [out.output[0]],
        name=prefix + "/LayerNormalization", axis=-1,
        epsilon=float(eps.reshape(()))))
    removed.update(id(n) for n in inner + [out])
    count += 1
  # Each new op goes where the subgraph's last op was: the graph stays topologically sorted.
  g.replace_nodes(removed, {a.output[0]: a for a in added})
  return count


def fold_tensordot_reshapes(model):
  """Lets the Dense layers' MatMuls read their 3-D input directly, in place.

  Keras' Dense on [batch, seq, in] is a Tensordot, which tf2onnx converts as
  Reshape([-1, in]) -> MatMul(W) -> Reshape(concat(shape(x)[:-1], [out])). ONNX MatMul
  broadcasts over the leading axes, so the MatMul alone gives the same values; without the
  Reshapes, the bias Add follows the MatMul directly, which ONNX Runtime's fusions (MatMul +
  bias, quantized MatMul + bias, attention) need.

  Returns the number of MatMuls changed (`model`: tf2onnx's onnx.ModelProto).
  """
  g = _Graph(model.graph)
  producer, consumers, made_by, value = g.producer, g.consumers, g.made_by, g.value
  removed, count = set(), 0
  for matmul in [n for n in g.graph.node if n.op_type == "MatMul"]:
    flatten = made_by(matmul.input[0], "Reshape")
    weight = value(matmul.input[1])
    if flatten is None or weight is None or weight.ndim != 2:
      continue
    flat_shape = value(flatten.input[1])
    if flat_shape is None or flat_shape.tolist() != [-1, weight.shape[0]]:
      continue
    users = consumers.get(matmul.output[0], [])
    restore = users[0] if len(users) == 1 and users[0].op_type == "Reshape" else None
    if restore is None:
      continue
    # The restored shape must be x's leading dims + [out]: Cast?(Concat(Gather(Cast?(
    # Shape(x)), [0, .., k-1]), [out])).
    shape = producer.get(restore.input[1])
    shape = made_by(shape.input[0], "Concat") if shape is not None and shape.op_type == "Cast" \
        else shape
    if shape is None or shape.op_type != "Concat" or len(shape.input) != 2:
      continue
    gather, out_dim = made_by(shape.input[0], "Gather"), value(shape.input[1])
    if gather is None or out_dim is None or out_dim.reshape(-1).tolist() != [weight.shape[1]]:
      continue
    leading = value(gather.input[1])
    if leading is None or leading.reshape(-1).tolist() != list(range(leading.size)):
      continue
    source = producer.get(gather.input[0])
    if source is not None and source.op_type == "Cast":
      source = producer.get(source.input[0])
    if source is None or source.op_type != "Shape" or source.input[0] != flatten.input[0]:
      continue
    matmul.input[0] = flatten.input[0]
    matmul.output[0] = restore.output[0]
    removed.add(id(restore))
    count += 1
  g.replace_nodes(removed)
  return count


def divide_gelu_by_sqrt2(model):
  """Spells the exact GELU's erf(x / sqrt(2)) with a Div, as ONNX Runtime's Gelu fusion wants.

  TensorFlow's constant folding turned Keras' x / sqrt(2) into x * 0.70710677; ONNX Runtime
  fuses x * 0.5 * (1 + erf(x / sqrt(2))) into one Gelu kernel (and a bias Add before it into
  BiasGelu) only when it finds the Div. Unfused, its four element-wise ops took about a tenth
  of the int8 MiniLM's time on sentences (an ONNX Runtime profile).

  Returns the number of Erf inputs changed (`model`: tf2onnx's onnx.ModelProto).
  """
  import numpy as np  # pylint: disable=g-import-not-at-top
  from onnx import numpy_helper  # pylint: disable=g-import-not-at-top

  g = _Graph(model.graph)
  graph = g.graph
  sqrt2 = "gelu_sqrt2"
  count = 0
  for erf in [n for n in graph.node if n.op_type == "Erf"]:
    mul = g.made_by(erf.input[0], "Mul")
    if mul is None:
      continue
    constants = [i for i in mul.input if g.value(i) is not None]
    if len(constants) != 1:
      continue
    value = g.value(constants[0])
    if value.size != 1 or abs(float(value.reshape(())) - 0.5 ** 0.5) > 1e-6:
      continue
    x = [i for i in mul.input if i != constants[0]][0]
    mul.op_type = "Div"
    del mul.input[:]
    mul.input.extend([x, sqrt2])
    count += 1
  if count:
    graph.initializer.append(numpy_helper.from_array(np.array(2 ** 0.5, np.float32), sqrt2))
    g.replace_nodes(set())  # the old constant may now be unread
  return count


class _Graph:
  """An ONNX graph's indexes, as of its construction: who makes and who reads each value,
  and the constants (initializers)."""

  def __init__(self, graph):
    self.graph = graph
    self.initializers = {t.name: t for t in graph.initializer}
    self.producer = {out: node for node in graph.node for out in node.output}
    self.consumers = consumers_of(graph)

  def made_by(self, name, op_type):
    """The node of `op_type` that makes `name`, else None."""
    node = self.producer.get(name)
    return node if node is not None and node.op_type == op_type else None

  def only_use(self, name):
    """The one node that reads `name`, else None."""
    users = self.consumers.get(name, [])
    return users[0] if len(users) == 1 else None

  def value(self, name):
    """A constant's value (numpy), else None."""
    from onnx import numpy_helper  # pylint: disable=g-import-not-at-top
    tensor = self.initializers.get(name)
    return None if tensor is None else numpy_helper.to_array(tensor)

  def replace_nodes(self, removed, replacement=None):
    """Drops the nodes whose id() is in `removed`, except that one making a value in
    `replacement` ({value name: new node}) gives way to that node in its place; then prunes
    what nothing reads any more."""
    replacement = replacement or {}
    kept = []
    for node in self.graph.node:
      if id(node) not in removed:
        kept.append(node)
      elif node.output and node.output[0] in replacement:
        kept.append(replacement[node.output[0]])
    del self.graph.node[:]
    self.graph.node.extend(kept)
    _prune(self.graph)


def _ranks(model):
  """{value name: its rank}, where ONNX's shape inference knows it."""
  import onnx  # pylint: disable=g-import-not-at-top
  graph = onnx.shape_inference.infer_shapes(model).graph
  return {v.name: len(v.type.tensor_type.shape.dim)
          for v in list(graph.value_info) + list(graph.input) + list(graph.output)
          if v.type.tensor_type.HasField("shape")}


def consumers_of(graph):
  """{value name: the nodes that read it}; a node whose subgraphs (Loop, If bodies: the
  feature_tagger's LSTM) read an outer value counts as its reader."""
  consumers = {}
  for node in graph.node:
    for name in set(node.input) | _subgraph_reads(node):
      consumers.setdefault(name, []).append(node)
  return consumers


def _subgraph_reads(node):
  """The names that `node`'s subgraphs read, at any depth (outer values among them)."""
  names = set()
  for attribute in node.attribute:
    for subgraph in list(attribute.graphs) + ([attribute.g] if attribute.HasField("g") else []):
      for inner in subgraph.node:
        names.update(inner.input)
        names.update(_subgraph_reads(inner))
  return names


def _prune(graph):
  """Removes the nodes and initializers that nothing reads (after a rewrite)."""
  wanted = {o.name for o in graph.output}
  while True:
    read = wanted | set(consumers_of(graph))
    dead = [n for n in graph.node if not any(o in read for o in n.output)]
    if not dead:
      break
    for node in dead:
      graph.node.remove(node)
  read = wanted | set(consumers_of(graph))
  for t in [t for t in graph.initializer if t.name not in read]:
    graph.initializer.remove(t)
