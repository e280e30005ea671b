"""fak against HuggingFace transformers on a full-size random model (Qwen2.5-1.5B geometry).

Builds a random-weight Qwen2ForCausalLM at the real geometry (bf16 weights, std 0.02), saves it as a
HF checkpoint, runs 25 prompts through transformers in float32 on the GPU (TF32 off, eager attention)
and through `fak run` on the CPU (bf16 weights, f32 arithmetic), and compares the greedy
continuations token by token and the logits of every generated position (cosine).

Usage (on a machine with torch + transformers and a fak binary):
  python3 h200_parity.py --fak PATH/fak --tokenizer DIR_WITH_tokenizer.json --out report.json
"""
import argparse, json, os, subprocess, sys, time

import numpy as np
import torch
from transformers import AutoTokenizer, Qwen2Config, Qwen2ForCausalLM

PROMPTS = [
    "The capital of France is", "def fibonacci(n):", "Once upon a time in a small village,",
    "The mitochondria is the powerhouse of", "import numpy as np\nx = np.", "In 1969, astronauts",
    "東京は日本の", "Les fleurs du printemps", "SELECT name FROM users WHERE", "The quick brown fox",
    "To be or not to be,", "A haiku about autumn:\n", "Photosynthesis converts", "for i in range(10):\n    ",
    "The GDP of a country measures", "Der schnelle braune Fuchs", "int main(int argc, char** argv) {",
    "Water boils at", "My favourite recipe is", "The theory of relativity states",
    "Hello! How are you today?", "1, 1, 2, 3, 5, 8,", "Dear hiring manager,",
    "Машинное обучение", "The best way to learn a language is",
]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--fak", required=True)
    ap.add_argument("--tokenizer", required=True)
    ap.add_argument("--out", required=True)
    ap.add_argument("--work", default="/tmp/fak-h200")
    ap.add_argument("--gen", type=int, default=16)
    ap.add_argument("--threads", type=int, default=os.cpu_count())
    ap.add_argument("--kv-type", default="f16",
                    help="fak's KV cache type: f16 or f32, or both as f16,f32 (one report each, -kv-TYPE.json)")
    ap.add_argument("--ref-dtype", default="float32", choices=["float32", "float64"],
                    help="the reference's arithmetic; with float64, HF in float32 is also compared against it")
    a = ap.parse_args()
    os.makedirs(a.work, exist_ok=True)
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    torch.manual_seed(0)
    cfg = Qwen2Config(hidden_size=1536, intermediate_size=8960, num_hidden_layers=28, num_attention_heads=12,
                      num_key_value_heads=2, vocab_size=151936, max_position_embeddings=32768, rms_norm_eps=1e-6,
                      rope_theta=1e6, tie_word_embeddings=True, bos_token_id=151643, eos_token_id=151645,
                      initializer_range=0.02, attn_implementation="eager")
    model = Qwen2ForCausalLM(cfg).to(torch.bfloat16)
    with torch.no_grad():
        for name, p in model.named_parameters():
            if "norm" in name:
                p.copy_(1.0 + 0.05 * torch.randn_like(p.float()))
            elif name.endswith("bias"):
                p.copy_(0.02 * torch.randn_like(p.float()))
    ckpt = os.path.join(a.work, "qwen2.5-1.5b-random")
    model.save_pretrained(ckpt, safe_serialization=True)
    tok = AutoTokenizer.from_pretrained(a.tokenizer)
    tok.save_pretrained(ckpt)
    ref32 = model.float().cuda().eval()
    ref = ref32 if a.ref_dtype == "float32" else Qwen2ForCausalLM.from_pretrained(
        ckpt, dtype=torch.float64, attn_implementation="eager").cuda().eval()
    kv_types = a.kv_type.split(",")
    reports = {kv: {"schema": "fak.h200_parity.v1", "geometry": "qwen2.5-1.5b", "weights": "bf16 random, std 0.02",
                    "reference": f"transformers {__import__('transformers').__version__}, torch {torch.__version__}, "
                                 f"{a.ref_dtype} on {torch.cuda.get_device_name(0)}, TF32 off, eager attention",
                    "fak": f"fak run (bf16 weights, f32 arithmetic, {kv} KV cache) on the CPU", "prompts": []}
               for kv in kv_types}
    agree = {kv: 0 for kv in kv_types}
    agree32 = 0
    for i, text in enumerate(PROMPTS):
        ids = tok(text, add_special_tokens=False)["input_ids"]
        with torch.no_grad():
            out = ref.generate(torch.tensor([ids]).cuda(), max_new_tokens=a.gen, min_new_tokens=a.gen, do_sample=False, output_scores=True,
                               return_dict_in_generate=True, pad_token_id=151643, eos_token_id=None)
        hf_ids = out.sequences[0, len(ids):].tolist()
        hf_logits = torch.stack(out.scores, 0)[:, 0].double().cpu().numpy()
        margins = np.sort(hf_logits, axis=1)
        hf32_ids = None
        if ref is not ref32:
            with torch.no_grad():
                out32 = ref32.generate(torch.tensor([ids]).cuda(), max_new_tokens=a.gen, min_new_tokens=a.gen,
                                       do_sample=False, pad_token_id=151643, eos_token_id=None)
            hf32_ids = out32[0, len(ids):].tolist()
            agree32 += int(hf32_ids == hf_ids)
        for kv in kv_types:
            report = reports[kv]
            npy = os.path.join(a.work, f"fak_p{i}.npy")
            t0 = time.time()
            r = subprocess.run([a.fak, "run", "-m", ckpt, "-p", text, "-n", str(a.gen), "--no-special", "--ignore-eos",
                                "--print-ids", "--dump-logits", npy, "-t", str(a.threads), "--kv-type", kv],
                               capture_output=True, text=True)
            if r.returncode != 0:
                print(r.stderr[-2000:], file=sys.stderr)
                report["prompts"].append({"index": i, "error": r.stderr[-2000:]})
                continue
            line = [l for l in r.stderr.splitlines() if l.startswith('{"output_ids"')][-1]
            got = json.loads(line)
            fak_logits = np.load(npy)
            cos = [float(np.dot(x, y) / np.linalg.norm(x) / np.linalg.norm(y)) for x, y in zip(fak_logits, hf_logits)]
            same_prompt = got["prompt_ids"] == ids
            same = got["output_ids"] == hf_ids
            first_diff = next((k for k, (x, y) in enumerate(zip(got["output_ids"], hf_ids)) if x != y), None)
            agree[kv] += int(same and same_prompt)
            report["prompts"].append({"index": i, "text": text, "prompt_ids_equal": same_prompt, "greedy_equal": same,
                                      "first_difference": first_diff, "hf": hf_ids, "fak": got["output_ids"],
                                      "min_cosine": min(cos),
                                      "min_top2_margin": float((margins[:, -1] - margins[:, -2]).min()),
                                      "fak_seconds": round(time.time() - t0, 2)})
            if hf32_ids is not None:
                report["prompts"][-1]["hf_float32"] = hf32_ids
                report["prompts"][-1]["hf_float32_equal"] = hf32_ids == hf_ids
            print(f"prompt {i} ({kv} KV): greedy {'equal' if same else 'DIFFERENT at %s' % first_diff}, "
                  f"min cosine {min(cos):.7f}", flush=True)
    for kv in kv_types:
        report = reports[kv]
        report["greedy_agreement"] = f"{agree[kv]} of {len(PROMPTS)}"
        if ref is not ref32:
            report["hf_float32_agreement"] = f"{agree32} of {len(PROMPTS)}"
            print("HF float32 against HF float64:", report["hf_float32_agreement"])
        report["worst_cosine"] = min(p.get("min_cosine", 0) for p in report["prompts"])
        out = a.out if len(kv_types) == 1 else a.out.replace(".json", f"-kv-{kv}.json")
        json.dump(report, open(out, "w"), indent=1)
        print(f"{kv} KV:", report["greedy_agreement"], "worst cosine", report["worst_cosine"])


if __name__ == "__main__":
    main()
