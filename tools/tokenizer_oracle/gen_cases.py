#!/usr/bin/env python3
"""Generates the differential tokenizer cases in tests/fixtures/tokenizer/.

Random strings (fixed seed) mixing scripts, emoji, whitespace runs, digits, code and special-token
look-alikes are encoded by the reference implementations:

  qwen3:  HuggingFace `tokenizers` with ../shared/fixtures/tokenizers/qwen3/tokenizer.json
  llama2: `sentencepiece` with ../shared/fixtures/tokenizers/llama2/tokenizer.model, cross-checked
          against a HuggingFace `tokenizers` BPE built from the same model (the standard Llama
          conversion: vocabulary with scores, merges ordered by the merged piece's score, byte fallback,
          "▁" prepended and spaces replaced by "▁").

Each output line is a JSON object: "text" (or "hex" for byte strings that are not valid UTF-8; the
reference encodes bytes.decode("utf-8", "replace")), "ids" (special tokens matched in the text, no
BOS/EOS), for qwen3 also "ids_nosplit" (control tokens left as text, as llama.cpp's parse_special =
false), and "decoded" when decoding the ids does not give the text back.

Run from the repository root:
  python3 -m venv .venv && .venv/bin/pip install tokenizers sentencepiece protobuf
  .venv/bin/python tools/tokenizer_oracle/gen_cases.py
"""

import argparse
import json
import os
import random

import sentencepiece
from tokenizers import Tokenizer, decoders, models, normalizers

FIXTURES = "../shared/fixtures/tokenizers"
OUT_DIR = "tests/fixtures/tokenizer"

SCRIPTS = {
    "latin": "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ",
    "accented": "àáâãäåæçèéêëìíîïñòóôõöøùúûüýÿßÀÉÎÕÜŒœŠšŽžĞğİıŞş",
    "cyrillic": "абвгдеёжзийклмнопрстуфхцчшщъыьэюяАБВГДЕЖЗИЙКЛМНОПРСТУФХЦЧШЩЭЮЯ",
    "greek": "αβγδεζηθικλμνξοπρστυφχψωΑΒΓΔΕΖΗΘΙΚΛΜΝΞΟΠΡΣΤΥΦΧΨΩάέήί",
    "cjk": "的一是不了人我在有他这中大来上国个到说们为子和你地出道也时年得就那要下以生会自着去之过家学对可她里后小么心多天而能好都然没日于起还发成事只作当想看文无开手十用主行方又如前所本见经头面公同三已老从动两长知民样现分将外但身些与高意进把法此实回二理美点月明其种声全工己话儿者向情部正名定女问力机给等几很业最间新什打便位因重被走电四第门相次东政海口使教西再平真听世气信北少关并内加化由却代军产入先山五太水万市眼体别处总才场师书比住员九笑性通目华报立马命张活难神数件安表原车白应路期叫死常提感金何更反合放做系计或司利受光王果亲界及今京务制解各任至清物台象记边共风战干接它许八特觉望直服毛林题建南度统色字请交爱让认算论百吃义科怎元社术结六功指思非流每青管夫连远资队跟带花快条院变联言权往展该领传近留红治决周保达办运武半候七必城父强步完革深区即求品士转量空甚众技轻程告江语英基派满式李息写呢识极令黄德收脸钱党倒未持取设始版双历越史商千片容研像找友孩站广改议形委早房音火际则首单据导影失拿网香似斯专石若兵弟谁校读志飞观争究包组造落视济喜离虽坏兴",
    "kana": "あいうえおかきくけこさしすせそたちつてとなにぬねのはひふへほまみむめもやゆよらりるれろわをんアイウエオカキクケコサシスセソタチツテトナニヌネノハヒフヘホマミムメモヤユヨラリルレロワヲンー",
    "hangul": "가나다라마바사아자차카타파하각난닫랄맘밥삿앙잦찿캌탙팦핳한국어안녕하세요감사합니다",
    "arabic": "ابتثجحخدذرزسشصضطظعغفقكلمنهوي",
    "hebrew": "אבגדהוזחטיכלמנסעפצקרשת",
    "devanagari": "अआइईउऊएऐओऔकखगघचछजझटठडढणतथदधनपफबभमयरलवशषसहािीुूेैोौंः्",
    "thai": "กขคฆงจฉชซญดตถทธนบปผฝพฟภมยรลวศษสหอฮะาิีึืุูเแโใไ่้๊๋",
    "khmer": "កខគឃងចឆជឈញដឋឌឍណតថទធនបផពភមយរលវសហឡអាិីឹឺុូួើឿៀេែៃោៅំះ់្",
    "digits": "0123456789",
    "other_digits": "٠١٢٣٤٥٦٧٨٩０１２３４５６７８９¹²³½¼",
    "punct": "!\"#$%&'()*+,-./:;<=>?@[\\]^_`{|}~«»¿¡“”‘’—–…·•€£¥©®°±×÷§¶",
    "emoji": ["😀", "😁", "🚀", "🦙", "✅", "❤️", "👍🏽", "👨‍👩‍👧‍👦", "😶‍🌫️", "🇫🇷", "🇯🇵", "🤖", "🔥", "✨", "🙏", "💯"],
    "combining": ["e\u0301", "a\u0308", "n\u0303", "o\u0302\u0323", "\u1e9b\u0323", "\u212b", "\u2126", "ﬁ", "Å"],
}
WHITESPACE = [" ", "  ", "   ", "    ", "\t", "\n", "\n\n", "\r\n", " \n", "\t\t", "\u00a0", "\u3000",
              "\u2009", "\u200b", "\n \n", "      "]
WORDS = ["the", "The", "hello", "world", "don't", "I'm", "we'll", "they've", "she'd", "it's", "IT'S",
         "You'RE", "café", "naïve", "Straße", "東京", "中文", "Привет", "мир", "über", "rétablir",
         "tokenizer", "function", "return", "printf", "std::vector", "http://example.com/a?b=c",
         "user@example.org", "C++20", "x86_64", "3.14159", "1,000,000", "2024-06-01", "$100", "50%"]
CODE = ["def f(x):\n    return x + 1\n", "for (int i = 0; i < n; ++i) {\n\tsum += a[i];\n}",
        "if a == b and not c:\n        pass", "<div class=\"x\">&nbsp;</div>", "SELECT * FROM t WHERE id = 42;",
        "#include <stdio.h>\nint main() { return 0; }", "fn main() { println!(\"{}\", 1); }",
        "x = [1, 2, 3]  # comment", "{\"key\": [true, null, 1.5e-3]}", "a->b->c", "i++; j--; k **= 2"]
LOOKALIKES = ["<|im_start|>", "<|im_end|>", "<|endoftext|>", "<|im_start", "im_end|>", "<|im_start|>user\n",
              "<think>", "</think>", "<tool_call>", "<s>", "</s>", "<unk>", "<0x41>", "<0x0A>", "▁", "▁▁hi",
              "<|", "|>", "<<|im_end|>>", "<|box_start|>", "<pad>", "[INST]", "[/INST]", "<<SYS>>", "Ġ", "Ċ"]


def random_chunk(rng):
    kind = rng.random()
    if kind < 0.22:
        return rng.choice(WORDS)
    if kind < 0.32:
        return rng.choice(WHITESPACE)
    if kind < 0.40:
        return rng.choice(LOOKALIKES)
    if kind < 0.46:
        return rng.choice(CODE)
    if kind < 0.52:
        return "".join(rng.choice(SCRIPTS["digits"]) for _ in range(rng.randint(1, 12)))
    if kind < 0.56:
        return chr(rng.choice([rng.randint(0x20, 0x7E), rng.randint(0xA0, 0x2FFF), rng.randint(0x3000, 0x9FFF),
                               rng.randint(0xAC00, 0xD7A3), rng.randint(0x1F300, 0x1FAFF)]))
    script = rng.choice(list(SCRIPTS))
    alphabet = SCRIPTS[script]
    n = rng.randint(1, 10)
    return "".join(rng.choice(alphabet) for _ in range(n))


def random_text(rng):
    n = rng.choice([1, 1, 2, 3, 4, 6, 8, 12, 20])
    parts = []
    for _ in range(n):
        parts.append(random_chunk(rng))
        if rng.random() < 0.5:
            parts.append(" ")
    text = "".join(parts)
    if rng.random() < 0.1:
        text = " " + text
    if rng.random() < 0.05:
        text = text + rng.choice(WHITESPACE)
    return text


def random_bytes(rng):
    good = random_text(rng).encode("utf-8")
    bad = [b"\x80", b"\xff", b"\xc3", b"\xe2\x82", b"\xf0\x9f\x98", b"\xed\xa0\x80", b"\xc0\xaf", b"\xf5\x80"]
    out = bytearray()
    for _ in range(rng.randint(1, 3)):
        cut = rng.randint(0, len(good))
        out += good[:cut] + rng.choice(bad)
        good = good[cut:]
    out += good
    return bytes(out)


def llama2_hf_tokenizer(sp):
    """HF tokenizers BPE built from a SentencePiece BPE model (the standard Llama conversion)."""
    vocab = {sp.id_to_piece(i): i for i in range(sp.get_piece_size())}
    merges = []
    for pid in range(sp.get_piece_size()):
        piece = sp.id_to_piece(pid)
        local = []
        for k in range(1, len(piece)):
            left, right = piece[:k], piece[k:]
            if left in vocab and right in vocab:
                local.append((vocab[left], vocab[right], left, right))
        local.sort()
        merges.extend((sp.get_score(pid), m[2], m[3]) for m in local)
    merges.sort(key=lambda m: -m[0])  # stable: ties keep id order
    bpe = models.BPE(vocab=vocab, merges=[(m[1], m[2]) for m in merges], unk_token="<unk>", fuse_unk=True,
                     byte_fallback=True)
    tok = Tokenizer(bpe)
    tok.normalizer = normalizers.Sequence([normalizers.Prepend("▁"), normalizers.Replace(" ", "▁")])
    tok.decoder = decoders.Sequence([decoders.Replace("▁", " "), decoders.ByteFallback(), decoders.Fuse(),
                                     decoders.Strip(" ", 1, 0)])
    return tok


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--count", type=int, default=2000)
    ap.add_argument("--bad-utf8", type=int, default=100)
    ap.add_argument("--seed", type=int, default=20261201)
    args = ap.parse_args()
    os.makedirs(OUT_DIR, exist_ok=True)

    rng = random.Random(args.seed)
    inputs = [random_text(rng) for _ in range(args.count)]
    raw = [random_bytes(rng) for _ in range(args.bad_utf8)]

    def record(text_or_bytes):
        if isinstance(text_or_bytes, bytes):
            return {"hex": text_or_bytes.hex()}, text_or_bytes.decode("utf-8", "replace")
        return {"text": text_or_bytes}, text_or_bytes

    # Qwen3 through HuggingFace tokenizers.
    qwen = Tokenizer.from_file(os.path.join(FIXTURES, "qwen3/tokenizer.json"))
    qwen_nosplit = Tokenizer.from_file(os.path.join(FIXTURES, "qwen3/tokenizer.json"))
    qwen_nosplit.encode_special_tokens = True
    with open(os.path.join(OUT_DIR, "qwen3_cases.jsonl"), "w", encoding="utf-8") as f:
        for item in inputs + raw:
            rec, text = record(item)
            rec["ids"] = qwen.encode(text, add_special_tokens=False).ids
            rec["ids_nosplit"] = qwen_nosplit.encode(text, add_special_tokens=False).ids
            decoded = qwen.decode(rec["ids"], skip_special_tokens=False)
            if decoded != text:
                rec["decoded"] = decoded
            f.write(json.dumps(rec, ensure_ascii=False) + "\n")

    # Llama 2 through sentencepiece, cross-checked with HF tokenizers.
    sp = sentencepiece.SentencePieceProcessor(model_file=os.path.join(FIXTURES, "llama2/tokenizer.model"))
    hf = llama2_hf_tokenizer(sp)
    disagree = 0
    with open(os.path.join(OUT_DIR, "llama2_cases.jsonl"), "w", encoding="utf-8") as f:
        for item in inputs + raw:
            rec, text = record(item)
            rec["ids"] = sp.encode(text)
            hf_ids = hf.encode(text, add_special_tokens=False).ids
            if hf_ids != rec["ids"]:
                disagree += 1
                rec["hf_ids"] = hf_ids
            decoded = sp.decode(rec["ids"])
            if decoded != text:
                rec["decoded"] = decoded
            f.write(json.dumps(rec, ensure_ascii=False) + "\n")
    print(f"{len(inputs)} strings + {len(raw)} byte strings; llama2: HF tokenizers and sentencepiece disagree on "
          f"{disagree}")


if __name__ == "__main__":
    main()
