"""What the HF oracle fixtures are: the tiny model configs, their seeds and the prompt set."""

import dataclasses

import transformers

# Shared by every tiny model: the real layouts scaled down to a few kilobytes per layer. The Qwen
# vocabulary stays full size so the tokenizer fixtures apply; its tied embedding is the bulk of each file
# (151,936 x 16 x 2 bytes = 4.9 MB in bf16).
TINY = dict(
    hidden_size=16,
    num_attention_heads=4,
    num_key_value_heads=2,  # GQA, 2 query heads per KV head
    head_dim=8,
    intermediate_size=48,
    num_hidden_layers=2,
    vocab_size=151936,
    tie_word_embeddings=True,
    rms_norm_eps=1e-6,
    bos_token_id=151643,  # <|endoftext|>, as in the Qwen2.5 and Qwen3 configs
    eos_token_id=151645,  # <|im_end|>
)

# Weight init: normal matrices with std 0.2, norm weights uniform in 1 +- 0.1, nonzero biases, and a
# log-normal per-row scale on the embedding (see make_fixtures.init_weights).
INIT = dict(matrix_std=0.2, embed_std=0.1, embed_row_log_std=0.1, norm_spread=0.1, bias_std=0.1)


@dataclasses.dataclass(frozen=True)
class Spec:
  name: str
  description: str
  config_class: type
  model_class: type
  config_kwargs: dict
  seed: int
  init: dict
  max_shard_size: str = ""     # set: save_pretrained writes shards and model.safetensors.index.json
  classic_config: bool = True  # rewrite config.json as hub checkpoints have it (torch_dtype, rope_theta)
  residuals: bool = True       # also store the per-layer residual stream


SPECS = [
    Spec(
        name="llama3-tiny",
        description="LlamaForCausalLM, Llama-3.1 RoPE (theta 5e5, llama3 scaling factor 8), no biases",
        config_class=transformers.LlamaConfig,
        model_class=transformers.LlamaForCausalLM,
        config_kwargs=dict(
            TINY,
            # Llama-3.1's context; original_max_position_embeddings must stay below it.
            max_position_embeddings=131072,
            rope_theta=500000.0,
            rope_scaling=dict(rope_type="llama3", factor=8.0, low_freq_factor=1.0, high_freq_factor=4.0,
                              original_max_position_embeddings=8192),
        ),
        seed=104,
        init=INIT,
    ),
    Spec(
        name="qwen2-tiny",
        description="Qwen2ForCausalLM (Qwen2.5 layout: qkv bias, theta 1e6), sharded in two files, "
                    "config.json as transformers 5 writes it",
        config_class=transformers.Qwen2Config,
        model_class=transformers.Qwen2ForCausalLM,
        config_kwargs=dict(TINY, max_position_embeddings=4096, rope_theta=1000000.0),
        seed=106,
        init=INIT,
        max_shard_size="4MB",
        classic_config=False,
    ),
    Spec(
        name="qwen3-tiny",
        description="Qwen3ForCausalLM (q/k RMSNorm per head, explicit head_dim, theta 1e6)",
        config_class=transformers.Qwen3Config,
        model_class=transformers.Qwen3ForCausalLM,
        config_kwargs=dict(TINY, max_position_embeddings=4096, rope_theta=1000000.0),
        seed=108,
        init=INIT,
    ),
]

# For the block-quantized paths (Q8_0 blocks of 32, Q4_K super-blocks of 256), every matrix row must be a
# multiple of 256 values long. Hidden 256 with the full Qwen vocabulary would make a 78 MB embedding, so
# this model has 2,048 tokens and reads the prompt set's ids modulo 2,048 (they are not meant as text).
QUANT = dict(TINY, hidden_size=256, head_dim=64, intermediate_size=512, vocab_size=2048, bos_token_id=0,
             eos_token_id=1)

# The same gains as INIT at 16x the width: matrix std scaled by sqrt(16 / 256). The embedding keeps std
# 0.1, so a logit row (a normalised hidden state against 256-long embedding rows) has a standard
# deviation near 1.6, a distribution a trained model's softmax resembles more than a flat one.
QUANT_INIT = dict(matrix_std=0.05, embed_std=0.1, embed_row_log_std=0.1, norm_spread=0.1, bias_std=0.1)

SPECS.append(
    Spec(
        name="qwen2-256",
        description="Qwen2ForCausalLM at hidden 256 (head_dim 64, FFN 512, 2 layers, vocab 2,048, qkv bias): "
                    "rows long enough for Q8_0 and Q4_K, for the quantized paths' top-1 and KL bounds",
        config_class=transformers.Qwen2Config,
        model_class=transformers.Qwen2ForCausalLM,
        config_kwargs=dict(QUANT, max_position_embeddings=4096, rope_theta=1000000.0),
        seed=110,
        init=QUANT_INIT,
        residuals=False,
    ))

# The Qwen3.5 hybrid: three Gated-DeltaNet layers then one gated full-attention layer, twice. Four value
# heads over two key heads, so HF's grouped value-head order and llama.cpp's tiled one differ; a quarter of
# each 16-wide attention head rotated (4 dims); zero-centred norms (scale 1 + w). Shared by the three
# hybrid fixtures.
HYBRID = dict(
    TINY,
    head_dim=16,
    num_hidden_layers=8,
    layer_types=["linear_attention"] * 3 + ["full_attention"] + ["linear_attention"] * 3 + ["full_attention"],
    linear_conv_kernel_dim=4,
    linear_key_head_dim=8,
    linear_value_head_dim=8,
    linear_num_key_heads=2,
    linear_num_value_heads=4,
    max_position_embeddings=4096,
)
QWEN35_ROPE = dict(rope_type="default", rope_theta=10000000.0, partial_rotary_factor=0.25,
                   mrope_section=[1, 1, 0], mrope_interleaved=True)
# A mixture of experts in every layer: 8 experts of width 32, 2 per token, renormalised, and a
# sigmoid-gated shared expert of width 48.
EXPERTS = dict(num_experts=8, num_experts_per_tok=2, moe_intermediate_size=32, shared_expert_intermediate_size=48)

SPECS.append(
    Spec(
        name="qwen35-tiny",
        description="Qwen3_5ForCausalLM (Gated-DeltaNet + gated attention, 6 linear and 2 full layers, 2 key and "
                    "4 value heads of 8 in the linear layers, partial RoPE 0.25, theta 1e7)",
        config_class=transformers.Qwen3_5TextConfig,
        model_class=transformers.Qwen3_5ForCausalLM,
        config_kwargs=dict(HYBRID, rope_parameters=QWEN35_ROPE),
        seed=112,
        init=dict(INIT, zero_centred_norms=True),
        classic_config=False,
    ))

# Qwen3-Next: the hybrid layout with experts. Its linear layers keep HF's fused in_proj_qkvz / in_proj_ba,
# value heads grouped by key head (four over two), as llama.cpp's qwen3next does. Key and value heads share
# a size (llama.cpp's qwen3next assumes it).
SPECS.append(
    Spec(
        name="qwen3next-tiny",
        description="Qwen3NextForCausalLM (Gated-DeltaNet + gated attention, 6 linear and 2 full layers, every "
                    "FFN a mixture of 8 experts, 2 per token, plus a gated shared expert)",
        config_class=transformers.Qwen3NextConfig,
        model_class=transformers.Qwen3NextForCausalLM,
        config_kwargs=dict(
            HYBRID,
            **EXPERTS,
            norm_topk_prob=True,
            decoder_sparse_step=1,
            mlp_only_layers=[],
            rope_parameters=dict(rope_type="default", rope_theta=10000000.0, partial_rotary_factor=0.25),
        ),
        seed=114,
        init=dict(INIT, zero_centred_norms=True),
        classic_config=False,
    ))

# Qwen3.5-MoE: qwen35-tiny's layers (separate in_proj_qkv/z/b/a, value heads reordered to llama.cpp's tiled
# order at load) with the experts in every layer; no dense FFN width in its config.
SPECS.append(
    Spec(
        name="qwen35moe-tiny",
        description="Qwen3_5MoeForCausalLM (qwen35-tiny's Gated-DeltaNet + gated attention layers, every FFN a "
                    "mixture of 8 experts, 2 per token, plus a gated shared expert)",
        config_class=transformers.Qwen3_5MoeTextConfig,
        model_class=transformers.Qwen3_5MoeForCausalLM,
        config_kwargs=dict({k: v for k, v in HYBRID.items() if k != "intermediate_size"}, **EXPERTS,
                           rope_parameters=QWEN35_ROPE),
        seed=116,
        init=dict(INIT, zero_centred_norms=True),
        classic_config=False,
    ))

LONG_TEXT = (
    "The lighthouse keeper climbed the spiral stairs every evening at dusk, counting the one hundred and "
    "twelve steps out of habit rather than necessity. At the top he wound the clockwork that turned the "
    "great lens, trimmed the wick, and wrote the weather in a leather logbook: wind from the north-east, "
    "sea moderate, visibility good. Ships passed far out on the horizon, their lights small and steady, "
    "and none of them knew his name."
)

CHAT = [
    {"role": "system", "content": "Answer in one short sentence."},
    {"role": "user", "content": "Name three prime numbers greater than 10."},
]


def prompts(tokenizer):
  """The fixed prompt set: text, token ids (no special tokens added) and which logits rows are stored.

  Full logits rows are 151,936 floats (594 KiB) each, so only the last position of each prompt is stored
  whole; every position has its final hidden state (from which W_out . h rebuilds the row), argmax and top-k.
  """
  chat_text = tokenizer.apply_chat_template(CHAT, tokenize=False, add_generation_prompt=True)
  items = [
      ("english", "The quick brown fox jumps over the lazy dog.", 1),
      ("code", "def fibonacci(n):\n    if n < 2:\n        return n\n    return fibonacci(n - 1) + fibonacci(n - 2)\n",
       1),
      ("cjk", "北京是中国的首都，也是一座历史悠久的城市。東京は日本の首都です。", 1),
      ("chat", chat_text, 1),
      ("long", LONG_TEXT, 1),
      ("single", "Hello", 1),
  ]
  out = []
  for name, text, n_rows in items:
    ids = tokenizer.encode(text, add_special_tokens=False)
    positions = list(range(len(ids) - n_rows, len(ids)))
    out.append({"name": name, "text": text, "ids": ids, "n_tokens": len(ids), "logits_positions": positions})
  if out[-1]["n_tokens"] != 1:
    raise RuntimeError(f"the single-token prompt encodes to {out[-1]['ids']}")
  return out
