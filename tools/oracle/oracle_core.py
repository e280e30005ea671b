"""Records what a HuggingFace transformers causal LM computes for a prompt, in the fixture layout.

Shared by make_fixtures.py (tiny random models, committed) and record.py (any local checkpoint, e.g. a
real model on the GPU machine). The layout is described in tests/fixtures/hf/README.md.
"""

import hashlib
import json
import os

import numpy as np
import torch
import transformers

SCHEMA = "fak.hf_oracle.v1"
TOKENIZER_DIR = "../shared/fixtures/tokenizers/qwen3"
TOP_K = 8
GREEDY_TOKENS = 16


def sha256_file(path):
  h = hashlib.sha256()
  with open(path, "rb") as f:
    for chunk in iter(lambda: f.read(1 << 20), b""):
      h.update(chunk)
  return h.hexdigest()


def load_tokenizer(path=TOKENIZER_DIR):
  # A folder with tokenizer.json and tokenizer_config.json (which holds the chat template).
  return transformers.AutoTokenizer.from_pretrained(path)


def load_checkpoint(model_dir, dtype, device="cpu"):
  model = transformers.AutoModelForCausalLM.from_pretrained(model_dir, dtype=dtype, attn_implementation="eager")
  return model.to(device).eval()


def top2_margin(logits):
  top = torch.topk(logits, 2, dim=-1).values
  return top[..., 0] - top[..., 1]


def cosine_rows(a, b):
  a = a.double()
  b = b.double()
  return (a * b).sum(-1) / (a.norm(dim=-1) * b.norm(dim=-1))


@torch.no_grad()
def forward_all(model, ids):
  """Returns (logits (n, vocab), final hidden (n, d), residuals (n_layer + 1, n, d)), float32 on the CPU.

  The final hidden state is the lm_head input (after the last RMSNorm); residuals[0] is the embedding
  output and residuals[i] the residual stream after decoder layer i - 1.
  """
  residuals = []

  def keep(module, inputs, output):
    residuals.append((output[0] if isinstance(output, tuple) else output)[0])

  hooks = [model.model.embed_tokens.register_forward_hook(keep)]
  hooks += [layer.register_forward_hook(keep) for layer in model.model.layers]
  try:
    out = model(input_ids=torch.tensor([ids], device=model.device), output_hidden_states=True, use_cache=False)
  finally:
    for h in hooks:
      h.remove()
  logits = out.logits[0].float().cpu()
  hidden = out.hidden_states[-1][0].float().cpu()
  return logits, hidden, torch.stack(residuals).float().cpu()


@torch.no_grad()
def greedy(model, ids, n_new):
  """HF generate (greedy, KV cache), cross-checked step by step against a full recompute without cache.

  Returns (tokens, top-1/top-2 margin per step). EOS does not stop the continuation.
  """
  gen = model.generate(torch.tensor([ids], device=model.device), do_sample=False, max_new_tokens=n_new,
                       eos_token_id=None, pad_token_id=0, output_scores=True, return_dict_in_generate=True)
  tokens = gen.sequences[0, len(ids):].tolist()
  scores = torch.stack([s[0] for s in gen.scores]).float().cpu()
  seq = list(ids)
  for step in range(n_new):
    logits = model(input_ids=torch.tensor([seq], device=model.device), use_cache=False).logits[0, -1]
    tok = int(torch.argmax(logits))
    if tok != tokens[step]:
      raise RuntimeError(f"greedy step {step}: generate gave {tokens[step]}, full recompute {tok}")
    seq.append(tok)
  return tokens, top2_margin(scores).tolist()


def record_prompt(out_dir, index, prompt, model32, model16=None, keep_residuals=True):
  """Writes logits_p<N>.npy, hidden_p<N>.npy, residual_p<N>.npy and returns the prompt's oracle.json entry.

  model32 is the float32 reference; model16 (optional) a bfloat16 run recorded for information only.
  """
  ids = prompt["ids"]
  logits, hidden, residuals = forward_all(model32, ids)
  n = len(ids)
  # The lm_head input reproduces the logits, so a consumer may rebuild any row as W_out . h.
  w_out = model32.get_output_embeddings().weight.detach().float().cpu()
  rebuild_err = float((hidden @ w_out.T - logits).abs().max())
  if rebuild_err > 1e-3 * float(logits.abs().max()):
    raise RuntimeError(f"p{index}: logits rebuilt from the final hidden state differ by {rebuild_err}")

  positions = prompt["logits_positions"]
  np.save(os.path.join(out_dir, f"logits_p{index}.npy"), logits[positions].numpy().astype("<f4"))
  np.save(os.path.join(out_dir, f"hidden_p{index}.npy"), hidden.numpy().astype("<f4"))
  if keep_residuals:
    np.save(os.path.join(out_dir, f"residual_p{index}.npy"), residuals.numpy().astype("<f4"))

  top = torch.topk(logits, TOP_K, dim=-1)
  argmax = torch.argmax(logits, dim=-1)
  if not torch.equal(argmax, top.indices[:, 0]):
    raise RuntimeError(f"p{index}: argmax and top-k disagree (an exact tie)")
  tokens, greedy_margins = greedy(model32, ids, GREEDY_TOKENS)

  record = {
      "index": index,
      "name": prompt["name"],
      "text": prompt["text"],
      "token_ids": ids,
      "n_tokens": n,
      "argmax": argmax.tolist(),
      "top2_margin": top2_margin(logits).tolist(),
      "top_k": {"k": TOP_K, "ids": top.indices.tolist(), "logits": top.values.tolist()},
      "logits_file": f"logits_p{index}.npy",
      "logits_positions": positions,
      "hidden_file": f"hidden_p{index}.npy",
      "logits_rebuild_max_abs_diff": rebuild_err,
      "greedy": {"max_new_tokens": GREEDY_TOKENS, "tokens": tokens, "top2_margin": greedy_margins},
  }
  if keep_residuals:
    record["residual_file"] = f"residual_p{index}.npy"
  if model16 is not None:
    logits16, _, _ = forward_all(model16, ids)
    cos16 = cosine_rows(logits16, logits)
    argmax16 = torch.argmax(logits16, dim=-1)
    record["bf16_run"] = {
        "argmax": argmax16.tolist(),
        "argmax_agree": int((argmax16 == argmax).sum()),
        "min_cosine": float(cos16.min()),
        "mean_cosine": float(cos16.mean()),
    }
  return record


def reference_info(device):
  return {
      "dtype": "float32",
      "note": "checkpoint loaded with dtype=float32 (bf16 weights upcast exactly); eager attention",
      "attn_implementation": "eager",
      "device": device,
      "torch": torch.__version__,
      "transformers": transformers.__version__,
      "numpy": np.__version__,
  }


def checkpoint_digests(model_dir):
  """SHA-256 of every config and safetensors file of a checkpoint folder."""
  names = sorted(f for f in os.listdir(model_dir)
                 if f.endswith(".safetensors") or f in ("config.json", "generation_config.json")
                 or f.endswith(".safetensors.index.json"))
  return {f: sha256_file(os.path.join(model_dir, f)) for f in names}


def _json_text(value, indent):
  pad = " " * indent
  if isinstance(value, dict):
    if not value:
      return "{}"
    items = [f"{pad} {json.dumps(k, ensure_ascii=False)}: {_json_text(v, indent + 1)}" for k, v in value.items()]
    return "{\n" + ",\n".join(items) + "\n" + pad + "}"
  if isinstance(value, list) and any(isinstance(v, (dict, list)) for v in value):
    items = [f"{pad} {_json_text(v, indent + 1)}" for v in value]
    return "[\n" + ",\n".join(items) + "\n" + pad + "]"
  return json.dumps(value, ensure_ascii=False)


def write_json(path, value):
  """JSON with nested objects indented and lists of numbers kept on one line."""
  text = _json_text(value, 0)
  assert json.loads(text) == value
  with open(path, "w", encoding="utf-8") as f:
    f.write(text + "\n")
