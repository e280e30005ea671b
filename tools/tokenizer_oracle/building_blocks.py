#!/usr/bin/env python3
"""Generates tests/fixtures/tokenizer/building_blocks/: tokenizer.json building blocks against HuggingFace.

Two small BPE vocabularies are trained here with HuggingFace `tokenizers` on a corpus this script
writes itself (fixed seed): a byte-level one and a SentencePiece-style one (raw UTF-8 pieces, U+2581 for
spaces, <0xAB> byte fallback). Each configuration in CONFIGS pairs one of them with a normalizer and
pre-tokenizer built from HuggingFace's building blocks (Split with every behaviour, ByteLevel, Digits,
Metaspace, Punctuation, Whitespace, NFC/NFKC/NFD, Lowercase, Strip, StripAccents, Replace, Prepend),
written the way the families llama.cpp tests (llama-bpe, starcoder, deepseek, falcon, qwen35, gemma,
llama 2) write theirs. `tokenizers` encodes:

  - the texts of llama.cpp's vocabulary vectors (ggml-vocab-gpt-2.gguf.inp, read from
    ../shared/fixtures/vocab at test time; not copied here), and
  - EXTRA_TEXTS below,

and the ids go to cases.json. tokenizer/tokenizer_vocab_test.cpp builds each tokenizer.json from the
vocabulary file and the configuration and checks that fak gives the same ids.

Run from the repository root:
  .venv/bin/python tools/tokenizer_oracle/building_blocks.py
"""

import argparse
import json
import os
import random

from tokenizers import Regex, Tokenizer, decoders, models, normalizers, pre_tokenizers, trainers

OUT_DIR = "tests/fixtures/tokenizer/building_blocks"
VECTORS = "../shared/fixtures/vocab/ggml-vocab-gpt-2.gguf.inp"
SEP = "\n__ggml_vocab_test__\n"
MS = "\u2581"

EXTRA_TEXTS = [
    "",
    " ",
    "   leading spaces and trailing   ",
    "a--b-c- 12345678 x-1-2",
    "Hello, World!! It's 3.14159... isn't it?",
    "CamelCaseWords and snake_case_names and UPPER",
    "\u00c9l\u00e8ve na\u00efve caf\u00e9 \u0130stanbul \u00df \ufb01ne \u2460\u2461 \uff21\uff22\uff23",
    "e\u0301 combining vs \u00e9 precomposed",
    "\u4f60\u597d\u4e16\u754c\uff0c\u3053\u3093\u306b\u3061\u306f \ud55c\uad6d\uc5b4 123\u4e00\u4e8c\u4e09",
    "line one\nline two\r\n\n\ttabbed\t\tend",
    "\u00b2\u00b3 superscripts, \u0663\u0664\u0665 arabic digits, \u2167 roman",
    "emoji \U0001f600\U0001f44d\U0001f3fd and \u200b zero width",
    "def f(x):\n    return x ** 2  # square\n",
    "\u2581already\u2581metaspaced text",
]


def corpus(seed=7):
    rnd = random.Random(seed)
    words = ("the of and to in is that it for was on are with as his they be at one have this from or had by "
             "word but what some we can out other were all there when up use your how said an each she which do "
             "their time if will way about many then them write would like so these her long make thing see him "
             "two has look more day could go come did number sound no most people my over know water than call "
             "first who may down side been now find any new work part take get place made live where after back "
             "little only round man year came show every good me give our under name very through just form "
             "sentence great think say help low line differ turn cause much mean before move right boy old too "
             "same tell does set three want air well also play small end put home read hand port large spell add "
             "even land here must big high such follow act why ask men change went light kind off need house "
             "picture try us again animal point mother world near build self earth father").split()
    extra = ["caf\u00e9", "na\u00efve", "\u00fcber", "\u0441\u043b\u043e\u0432\u043e", "\u03bb\u03cc\u03b3\u03bf\u03c2",
             "\u4f60\u597d", "\u4e16\u754c", "\u3053\u3093\u306b\u3061\u306f", "def", "return", "self", "import",
             "==", "->", "()", "{}", "[]", "//", "#", "'s", "'t", "'re", "'ll", "...", "!!", "??"]
    lines = []
    for _ in range(3000):
        n = rnd.randint(3, 14)
        parts = []
        for _ in range(n):
            r = rnd.random()
            if r < 0.75:
                w = rnd.choice(words)
                if rnd.random() < 0.15:
                    w = w.capitalize()
                if rnd.random() < 0.03:
                    w = w.upper()
            elif r < 0.88:
                w = rnd.choice(extra)
            else:
                w = str(rnd.randint(0, 10 ** rnd.randint(1, 6)))
            parts.append(w)
        sep = rnd.choice([" ", " ", " ", ", ", ". ", "  ", "\n", "\t", " - "])
        lines.append(sep.join(parts))
    return lines


def train_byte_level(lines):
    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=True)
    trainer = trainers.BpeTrainer(vocab_size=1200, initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
                                  show_progress=False)
    tok.train_from_iterator(lines, trainer)
    return json.loads(tok.to_str())["model"]


def train_metaspace(lines):
    tok = Tokenizer(models.BPE(byte_fallback=True))
    tok.normalizer = normalizers.Replace(" ", MS)
    tok.pre_tokenizer = pre_tokenizers.Metaspace(prepend_scheme="always", split=True)
    trainer = trainers.BpeTrainer(vocab_size=1200, show_progress=False,
                                  special_tokens=["<unk>"] + [f"<0x{b:02X}>" for b in range(256)])
    tok.train_from_iterator(lines, trainer)
    model = json.loads(tok.to_str())["model"]
    model["unk_token"] = "<unk>"
    return model


def S(regex, behavior="isolated", invert=False):
    return pre_tokenizers.Split(Regex(regex), behavior, invert=invert)


LLAMA3 = r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+"
QWEN35 = r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?[\p{L}\p{M}]+|\p{N}| ?[^\s\p{L}\p{M}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+"
CJK = "[\u4e00-\u9fa5\u0800-\u4e00\uac00-\ud7ff]+"


def configs():
    bl = pre_tokenizers.ByteLevel
    return {
        # name: (vocabulary, normalizer, pre-tokenizer, model options)
        "gpt2": ("byte", None, bl(add_prefix_space=False, use_regex=True), {}),
        "roberta_prefix_space": ("byte", None, bl(add_prefix_space=True, use_regex=True), {}),
        "llama3": ("byte", None, pre_tokenizers.Sequence([S(LLAMA3), bl(add_prefix_space=False, use_regex=False)]),
                   {"ignore_merges": True}),
        "starcoder": ("byte", None, pre_tokenizers.Sequence([pre_tokenizers.Digits(individual_digits=True),
                                                              bl(add_prefix_space=False, use_regex=True)]), {}),
        "deepseek_coder": ("byte", None, pre_tokenizers.Sequence([
            S("[\r\n]"), S(r"\s?\p{L}+"), S(r"\s?\p{P}+"), S(CJK), pre_tokenizers.Digits(individual_digits=True),
            bl(add_prefix_space=False, use_regex=False)]), {}),
        "qwen35_nfc": ("byte", normalizers.NFC(),
                       pre_tokenizers.Sequence([S(QWEN35), bl(add_prefix_space=False, use_regex=False)]), {}),
        "falcon": ("byte", None, pre_tokenizers.Sequence([
            pre_tokenizers.Punctuation("contiguous"), bl(add_prefix_space=False, use_regex=True),
            pre_tokenizers.Digits(individual_digits=False), S("[0-9][0-9][0-9]")]), {}),
        "split_behaviours": ("byte", None, pre_tokenizers.Sequence([
            S(r"\s+", "removed"), S("-", "merged_with_previous"), S(r"\p{N}+", "merged_with_next"),
            S("[aeiou]+", "contiguous", invert=True), S("(?=(\\d{3})+(?!\\d))"),
            bl(add_prefix_space=False, use_regex=False)]), {}),
        "split_string_removed_inverted": ("byte", None, pre_tokenizers.Sequence([
            pre_tokenizers.Split("e", "removed", invert=True), bl(add_prefix_space=False, use_regex=False)]), {}),
        "whitespace_punct_nfkc_lower_strip": ("byte", normalizers.Sequence([
            normalizers.NFKC(), normalizers.Lowercase(), normalizers.Strip()]), pre_tokenizers.Sequence([
                pre_tokenizers.WhitespaceSplit(), pre_tokenizers.Punctuation(),
                bl(add_prefix_space=False, use_regex=False)]), {}),
        "bert_pre_nfd_strip_accents": ("byte", normalizers.Sequence([
            normalizers.NFD(), normalizers.StripAccents(), normalizers.Strip(left=True, right=False)]),
            pre_tokenizers.Sequence([pre_tokenizers.BertPreTokenizer(),
                                     bl(add_prefix_space=False, use_regex=False)]), {}),
        "whitespace_regex_replace": ("byte", normalizers.Replace(Regex(r"\s+"), " "), pre_tokenizers.Sequence([
            pre_tokenizers.Whitespace(), bl(add_prefix_space=False, use_regex=False)]), {}),
        "char_delimiter_after_bytelevel": ("byte", None, pre_tokenizers.Sequence([
            bl(add_prefix_space=False, use_regex=True), pre_tokenizers.CharDelimiterSplit("o")]), {}),
        "gemma_replace": ("metaspace", normalizers.Replace(" ", MS), None, {}),
        "llama2_prepend_replace": ("metaspace", normalizers.Sequence([
            normalizers.Prepend(MS), normalizers.Replace(" ", MS)]), None, {}),
        "metaspace_first_split": ("metaspace", None, pre_tokenizers.Metaspace(prepend_scheme="first", split=True), {}),
        "metaspace_always_nosplit": ("metaspace", normalizers.NFKC(),
                                     pre_tokenizers.Metaspace(prepend_scheme="always", split=False), {}),
    }


def component_json(obj):
    """The JSON HuggingFace writes for a normalizer or pre-tokenizer."""
    if obj is None:
        return None
    holder = Tokenizer(models.BPE())
    if isinstance(obj, normalizers.Normalizer):
        holder.normalizer = obj
        return json.loads(holder.to_str())["normalizer"]
    holder.pre_tokenizer = obj
    return json.loads(holder.to_str())["pre_tokenizer"]


def build(model, normalizer, pre_tokenizer, options, byte_level):
    model = dict(model)
    model.update(options)
    j = {"version": "1.0", "added_tokens": [], "normalizer": normalizer, "pre_tokenizer": pre_tokenizer,
         "post_processor": None, "model": model}
    if byte_level:
        j["decoder"] = {"type": "ByteLevel", "add_prefix_space": True, "trim_offsets": True, "use_regex": True}
    else:
        j["decoder"] = {"type": "Sequence", "decoders": [
            {"type": "Replace", "pattern": {"String": MS}, "content": " "},
            {"type": "ByteFallback"}, {"type": "Fuse"}]}
    return j


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--vectors", default=VECTORS)
    args = ap.parse_args()
    with open(args.vectors, encoding="utf-8") as f:
        raw = f.read()
    vector_texts = raw.split(SEP)
    if vector_texts and vector_texts[-1] == "":
        vector_texts.pop()

    lines = corpus()
    vocabs = {"byte": train_byte_level(lines), "metaspace": train_metaspace(lines)}
    os.makedirs(OUT_DIR, exist_ok=True)
    for name, model in vocabs.items():
        model = dict(model)
        with open(os.path.join(OUT_DIR, f"vocab_{name}.json"), "w", encoding="utf-8") as f:
            json.dump({"vocab": model.pop("vocab"), "merges": model.pop("merges"), "options": model}, f,
                      ensure_ascii=False, separators=(",", ":"))
            f.write("\n")

    cases = {"vector_texts_file": "ggml-vocab-gpt-2.gguf.inp", "vector_count": len(vector_texts),
             "extra_texts": EXTRA_TEXTS, "configs": []}
    for name, (vocab, norm, pre, options) in configs().items():
        j = build(vocabs[vocab], component_json(norm), component_json(pre), options, vocab == "byte")
        tok = Tokenizer.from_str(json.dumps(j))
        ids_vectors = [tok.encode(t, add_special_tokens=False).ids for t in vector_texts]
        ids_extra = [tok.encode(t, add_special_tokens=False).ids for t in EXTRA_TEXTS]
        round_trip = vocab == "byte" and all(
            tok.decode(ids, skip_special_tokens=False) == t
            for ids, t in zip(ids_vectors + ids_extra, vector_texts + EXTRA_TEXTS))
        cases["configs"].append({"name": name, "vocab": f"vocab_{vocab}.json", "normalizer": j["normalizer"],
                                 "pre_tokenizer": j["pre_tokenizer"], "model_options": options,
                                 "decoder": j["decoder"], "round_trip": round_trip,
                                 "ids_vectors": ids_vectors, "ids_extra": ids_extra})
        print(f"{name}: round_trip={round_trip}")
    with open(os.path.join(OUT_DIR, "cases.json"), "w", encoding="utf-8") as f:
        json.dump(cases, f, ensure_ascii=False, separators=(",", ":"))
        f.write("\n")


if __name__ == "__main__":
    main()
