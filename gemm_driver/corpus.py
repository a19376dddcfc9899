"""The shape corpus: the GEMMs users bring, split once into a tuning and a validation set.

A kernel-selection rule is only as good as the shapes it was never shown. The corpus holds
three kinds of shape, each cited or reproducible, and assigns every shape to exactly one of
two sets by a fixed rule (``split``), so that no sweep, table or rule fitted on the tuning
set can have read a validation shape:

* **Model layers.** The linear layers of published transformer models, from the numbers in
  each model's ``config.json`` (cited per model below): a layer ``y = x W^T`` with x of
  ``tokens x in`` and W of ``out x in`` is the GEMM M = tokens, N = out, K = in. Per model:
  the fused QKV projection, the attention output projection, the (fused gate and up, or
  plain up) MLP projection and the MLP down projection; DeepSeek-V3 adds its low-rank
  attention projections and one routed expert. Token counts run from 1 (decode) to 16384.
* **Sizes that are not powers of two**: square and rectangular.
* **Odd shapes**: seeded random M, N, K, log-uniform over [48, 8192], none a multiple of 8.

The split rule (``split``): a model belongs to one set by name (``TUNING_MODELS`` /
``VALIDATION_MODELS``: different families and sizes on each side), and its layers are taken
at the token counts of that set (``TUNING_TOKENS`` / ``VALIDATION_TOKENS``: interleaved, no
count on both sides); the sized shapes alternate between the sets in listed order; the odd
shapes of each set come from their own seed. A shape that lands in both sets through two
routes (the same GEMM from two models) stays in tuning only. Shapes above ``MAX_FLOPS`` are
left out: with the reference on the host they took minutes per case, and they stay out now
that it runs on the GPU (device_reference.py) so that both sets keep the shapes they were
drawn with.
"""

from __future__ import annotations

import random
from dataclasses import dataclass

MAX_FLOPS = 2 ** 41  # 2.2 TFLOP: a float64 reference of about 10 s on a 16-core host (see above)


@dataclass(frozen=True)
class Model:
    """The layer sizes of one published model, from its config.json (``source``)."""

    name: str
    source: str  # the model repository whose config.json gives these numbers
    hidden: int  # hidden_size
    intermediate: int  # intermediate_size (per expert for an MoE expert entry)
    heads: int  # num_attention_heads
    kv_heads: int  # num_key_value_heads (== heads without grouped-query attention)
    head_dim: int  # head_dim, or hidden_size / num_attention_heads
    gated: bool = True  # a gated MLP (SwiGLU): gate and up fused into one GEMM of 2 x intermediate

    def layers(self) -> list[tuple[str, int, int]]:
        """(layer, N, K) of each linear layer: N = out features, K = in features."""
        q, kv = self.heads * self.head_dim, self.kv_heads * self.head_dim
        up = 2 * self.intermediate if self.gated else self.intermediate
        return [("qkv", q + 2 * kv, self.hidden), ("attn_out", self.hidden, q),
                ("mlp_up", up, self.hidden), ("mlp_down", self.hidden, self.intermediate)]


@dataclass(frozen=True)
class LowRankAttention:
    """DeepSeek-V3's multi-head latent attention and routed experts (config.json of
    deepseek-ai/DeepSeek-V3): hidden_size 7168, q_lora_rank 1536, kv_lora_rank 512,
    qk_nope_head_dim 128, qk_rope_head_dim 64, v_head_dim 128, 128 heads,
    moe_intermediate_size 2048, intermediate_size 18432 (the dense layers)."""

    name: str = "deepseek-v3"
    source: str = "deepseek-ai/DeepSeek-V3"

    def layers(self) -> list[tuple[str, int, int]]:
        hidden, q_rank, kv_rank, nope, rope, v, heads = 7168, 1536, 512, 128, 64, 128, 128
        return [("q_down", q_rank, hidden), ("q_up", heads * (nope + rope), q_rank),
                ("kv_down", kv_rank + rope, hidden), ("kv_up", heads * (nope + v), kv_rank),
                ("attn_out", hidden, heads * v), ("dense_up", 2 * 18432, hidden),
                ("dense_down", hidden, 18432), ("expert_up", 2 * 2048, hidden), ("expert_down", hidden, 2048)]


TUNING_MODELS = (
    Model("llama-3.1-8b", "meta-llama/Llama-3.1-8B", 4096, 14336, 32, 8, 128),
    Model("qwen2.5-7b", "Qwen/Qwen2.5-7B", 3584, 18944, 28, 4, 128),
    Model("phi-3-mini", "microsoft/Phi-3-mini-4k-instruct", 3072, 8192, 32, 32, 96),
    Model("gpt2-xl", "openai-community/gpt2-xl", 1600, 6400, 25, 25, 64, gated=False),
)
VALIDATION_MODELS = (
    Model("llama-3.1-70b", "meta-llama/Llama-3.1-70B", 8192, 28672, 64, 8, 128),
    Model("qwen2.5-14b", "Qwen/Qwen2.5-14B", 5120, 13824, 40, 8, 128),
    Model("mistral-nemo-12b", "mistralai/Mistral-Nemo-Base-2407", 5120, 14336, 32, 8, 128),
    Model("gpt-neox-20b", "EleutherAI/gpt-neox-20b", 6144, 24576, 64, 64, 96, gated=False),
    LowRankAttention(),
)
TUNING_TOKENS = (1, 32, 256, 2048, 8192)
VALIDATION_TOKENS = (16, 128, 1024, 4096, 16384)

# Alternate between the sets in this order: tuning, validation, tuning, ...
SIZED = ((768, 768, 768), (1280, 1280, 1280), (1536, 1536, 1536), (2560, 2560, 2560),
         (3072, 3072, 3072), (5120, 5120, 5120), (6144, 6144, 6144), (7168, 7168, 7168),
         (2000, 3000, 4000), (3000, 5000, 2000), (6144, 2048, 4096), (2048, 6144, 3072),
         (4096, 4096, 14336), (4096, 14336, 4096), (12288, 1536, 1536), (1536, 12288, 6144))
ODD_PER_SET = 12
ODD_SEEDS = {"tune": 20261125, "validate": 20261126}
SETS = ("tune", "validate")


@dataclass(frozen=True)
class Shape:
    """One corpus GEMM: M x N x K, where it came from, and its set."""

    m: int
    n: int
    k: int
    origin: str  # e.g. "llama-3.1-8b mlp_up x 2048 tokens", "sized", "odd"
    kind: str  # "model", "sized" or "odd"
    set: str  # "tune" or "validate"

    @property
    def flops(self) -> int:
        return 2 * self.m * self.n * self.k

    @property
    def small_m(self) -> bool:
        """Decode-like: few rows, so the GEMM is bound by reading W, not by arithmetic."""
        return self.m <= 128


def _odd(rng: random.Random) -> int:
    while True:
        value = round(2 ** rng.uniform(5.6, 13))  # log-uniform over [48, 8192]
        if value % 8:
            return value


def _model_shapes(models, tokens, which: str) -> list[Shape]:
    return [Shape(t, n, k, f"{model.name} {layer} x {t} tokens", "model", which)
            for model in models for layer, n, k in model.layers() for t in tokens]


def split() -> list[Shape]:
    """Every corpus shape once, in a fixed order, each with its set (see the module docstring)."""
    shapes = _model_shapes(TUNING_MODELS, TUNING_TOKENS, "tune")
    shapes += _model_shapes(VALIDATION_MODELS, VALIDATION_TOKENS, "validate")
    shapes += [Shape(m, n, k, "sized", "sized", SETS[i % 2]) for i, (m, n, k) in enumerate(SIZED)]
    for which in SETS:
        rng = random.Random(ODD_SEEDS[which])
        shapes += [Shape(_odd(rng), _odd(rng), _odd(rng), "odd", "odd", which) for _ in range(ODD_PER_SET)]
    kept: dict[tuple[int, int, int], Shape] = {}
    for shape in sorted(shapes, key=lambda s: s.set != "tune"):  # tuning first: it keeps a shared GEMM
        if shape.flops <= MAX_FLOPS:
            kept.setdefault((shape.m, shape.n, shape.k), shape)
    return [s for s in shapes if kept.get((s.m, s.n, s.k)) is s]


NAMES = ("llm", "sized", "odd", "all")


def corpus(spec: str) -> list[Shape]:
    """The shapes a corpus name selects: ``NAME`` or ``NAME:tune`` / ``NAME:validate``, with
    NAME one of ``NAMES`` (``llm`` the model layers, ``all`` everything); ValueError otherwise."""
    name, _, which = spec.partition(":")
    if name not in NAMES:
        raise ValueError(f"unknown corpus {name!r}: choose one of {', '.join(NAMES)}, "
                         "optionally with :tune or :validate")
    if which and which not in SETS:
        raise ValueError(f"corpus {spec!r}: the set after ':' must be tune or validate, got {which!r}")
    kind = {"llm": "model", "sized": "sized", "odd": "odd"}.get(name)
    return [s for s in split() if (kind is None or s.kind == kind) and (not which or s.set == which)]
