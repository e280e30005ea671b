#!/usr/bin/env python3
"""Tests for compare.py and for the internal consistency of the committed fixtures. Needs numpy only.

  .venv-oracle/bin/python tools/oracle/compare_test.py    (from the repository root)
"""

import hashlib
import json
import os
import subprocess
import sys
import tempfile
import unittest

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import compare  # noqa: E402

FIXTURES = os.path.join(HERE, "..", "..", "tests", "fixtures", "hf")
NAMES = ["llama3-tiny", "qwen2-tiny", "qwen3-tiny", "qwen2-256"]


def load_oracle(name):
  with open(os.path.join(FIXTURES, name, "oracle.json"), encoding="utf-8") as f:
    return json.load(f)


def rebuilt_logits(name, prompt):
  """Every position's logits as hidden . W_out^T, float32 like an engine would dump them."""
  d = os.path.join(FIXTURES, name)
  hidden = np.load(os.path.join(d, prompt["hidden_file"]))
  return hidden @ compare.output_matrix(d).T


def run_compare(*args):
  proc = subprocess.run([sys.executable, os.path.join(HERE, "compare.py"), *args], capture_output=True, text=True)
  return proc.returncode, proc.stdout, proc.stderr


class FixtureConsistencyTest(unittest.TestCase):

  def test_checkpoint_digests_match(self):
    for name in NAMES:
      oracle = load_oracle(name)
      for fname, digest in oracle["checkpoint"]["files"].items():
        with open(os.path.join(FIXTURES, name, fname), "rb") as f:
          self.assertEqual(hashlib.sha256(f.read()).hexdigest(), digest, f"{name}/{fname}")

  def test_stored_rows_match_hidden_and_argmax(self):
    for name in NAMES:
      oracle = load_oracle(name)
      for p in oracle["prompts"]:
        rows = np.load(os.path.join(FIXTURES, name, p["logits_file"]))
        self.assertEqual(rows.dtype, np.dtype("<f4"))
        self.assertEqual(rows.shape, (len(p["logits_positions"]), oracle["vocab_size"]))
        full = rebuilt_logits(name, p)
        self.assertEqual(full.shape[0], p["n_tokens"])
        self.assertEqual(full.argmax(-1).tolist(), p["argmax"], f"{name} p{p['index']}")
        for row, pos in zip(rows, p["logits_positions"]):
          self.assertEqual(int(row.argmax()), p["argmax"][pos])
          self.assertLess(float(np.abs(row - full[pos]).max()), 1e-4)
          top = np.sort(row)[::-1]
          self.assertAlmostEqual(float(top[0] - top[1]), p["top2_margin"][pos], places=5)

  def test_residuals_shape(self):
    for name in NAMES:
      oracle = load_oracle(name)
      for p in oracle["prompts"]:
        if "residual_file" not in p:  # qwen2-256 stores none
          continue
        r = np.load(os.path.join(FIXTURES, name, p["residual_file"]))
        self.assertEqual(r.shape, (oracle["num_hidden_layers"] + 1, p["n_tokens"], oracle["hidden_size"]))

  def test_argmax_is_not_constant(self):
    for name in NAMES:
      oracle = load_oracle(name)
      tokens = set()
      for p in oracle["prompts"]:
        tokens.update(p["argmax"])
        self.assertEqual(len(p["greedy"]["tokens"]), p["greedy"]["max_new_tokens"])
      self.assertGreater(len(tokens), 50, name)


class CompareTest(unittest.TestCase):

  def setUp(self):
    self.tmp = tempfile.TemporaryDirectory()
    self.name = "qwen3-tiny"
    self.fixture = os.path.join(FIXTURES, self.name)
    self.oracle = load_oracle(self.name)

  def tearDown(self):
    self.tmp.cleanup()

  def dump(self, index, logits):
    path = os.path.join(self.tmp.name, f"logits_p{index}.npy")
    np.save(path, logits)
    return path

  def test_exact_dump_passes(self):
    for p in self.oracle["prompts"]:
      self.dump(p["index"], rebuilt_logits(self.name, p))
    rc, out, err = run_compare(self.fixture, "--dump-dir", self.tmp.name, "--json")
    self.assertEqual(rc, 0, out + err)
    report = json.loads(out)
    self.assertTrue(report["ok"])
    self.assertEqual(len(report["prompts"]), len(self.oracle["prompts"]))
    for r in report["prompts"]:
      self.assertGreater(r["all_positions"]["min_cosine"], 0.999999)
      self.assertLess(r["all_positions"]["max_kl"], 1e-9)
      self.assertEqual(r["argmax_agree"], r["n_tokens"])

  def test_last_row_only(self):
    p = self.oracle["prompts"][1]
    path = self.dump(1, rebuilt_logits(self.name, p)[-1])
    rc, out, err = run_compare(self.fixture, "--logits", f"1={path}", "--json")
    self.assertEqual(rc, 0, out + err)
    r = json.loads(out)["prompts"][0]
    self.assertEqual(r["positions"], 1)
    self.assertGreater(r["stored_rows"]["min_cosine"], 0.999999)

  def test_noise_lowers_cosine_and_fails(self):
    p = self.oracle["prompts"][0]
    logits = rebuilt_logits(self.name, p)
    rng = np.random.default_rng(1)
    noisy = logits + rng.normal(0, 0.05 * logits.std(), size=logits.shape).astype(np.float32)
    self.dump(0, noisy)
    rc, out, _ = run_compare(self.fixture, "--dump-dir", self.tmp.name, "--json", "--allow-argmax-mismatch")
    self.assertEqual(rc, 1)
    r = json.loads(out)["prompts"][0]
    self.assertLess(r["all_positions"]["min_cosine"], 0.9999)
    self.assertGreater(r["all_positions"]["mean_kl"], 0)

  def test_swapped_argmax_is_reported(self):
    p = self.oracle["prompts"][0]
    logits = rebuilt_logits(self.name, p)
    pos = 3
    top2 = np.argsort(logits[pos])[-2:]
    logits[pos, top2[0]], logits[pos, top2[1]] = logits[pos, top2[1]], logits[pos, top2[0]]
    self.dump(0, logits)
    rc, out, _ = run_compare(self.fixture, "--dump-dir", self.tmp.name, "--json")
    self.assertEqual(rc, 1)
    r = json.loads(out)["prompts"][0]
    self.assertEqual(r["argmax_mismatch_positions"], [pos])
    self.assertGreater(r["all_positions"]["min_cosine"], 0.9999)  # a close swap passes cosine, not argmax

  def test_bad_shape_is_an_input_error(self):
    path = self.dump(0, np.zeros((3, 7), dtype=np.float32))
    rc, _, err = run_compare(self.fixture, "--logits", f"0={path}")
    self.assertEqual(rc, 2)
    self.assertIn("rows for a prompt of", err)

  def test_missing_dump_is_an_input_error(self):
    rc, _, err = run_compare(self.fixture, "--dump-dir", self.tmp.name)
    self.assertEqual(rc, 2)
    self.assertIn("no dumped logits", err)


if __name__ == "__main__":
  unittest.main()
