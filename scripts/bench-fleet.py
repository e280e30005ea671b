#!/usr/bin/env python3
"""Agent-fleet benchmark: N agents share a system preamble and each asks its own short task, through
the real servers over HTTP (streaming chat), fak serve and llama-server in the same run.

Scenarios, each on a freshly started server (so the first agent finds nothing cached):
  sequential: agents one after another;
  burst:      one agent, then the other N-1 at once.
TTFT is the time from sending the request to the first chunk with content. Aggregate decode tok/s
of a burst is its generated tokens over the time from its first first-token to its last token.

  scripts/bench-fleet.py --model M.gguf --fak build/apps/fak/fak --llama-server PATH [--agents 16]

Standard library only; prints a JSON document and a markdown table.
"""
import argparse
import http.client
import json
import random
import statistics
import subprocess
import sys
import threading
import time

WORDS = ("agent repository module function test build cache request token server kernel thread "
         "memory page prefix batch decode prefill review commit branch merge issue report metric "
         "latency throughput schema file folder parser error status config option flag value").split()


def text(rng, n_words):
    return " ".join(rng.choice(WORDS) for _ in range(n_words))


def wait_health(port, proc, timeout=300):
    t0 = time.time()
    while time.time() - t0 < timeout:
        if proc.poll() is not None:
            raise RuntimeError("server exited with %s" % proc.returncode)
        try:
            c = http.client.HTTPConnection("127.0.0.1", port, timeout=2)
            c.request("GET", "/health")
            if c.getresponse().status == 200:
                return
        except OSError:
            pass
        time.sleep(0.2)
    raise RuntimeError("server not healthy after %s s" % timeout)


def agent(port, model, preamble, task, gen, out):
    body = json.dumps({"model": model, "messages": [{"role": "system", "content": preamble},
                                                     {"role": "user", "content": task}],
                       "max_tokens": gen, "temperature": 0, "stream": True, "ignore_eos": True,
                       "stream_options": {"include_usage": True}})
    t0 = time.perf_counter()
    c = http.client.HTTPConnection("127.0.0.1", port, timeout=600)
    c.request("POST", "/v1/chat/completions", body, {"Content-Type": "application/json"})
    r = c.getresponse()
    times, usage, buf = [], None, b""
    while True:
        line = r.readline()
        if not line:
            break
        line = line.strip()
        if not line.startswith(b"data: "):
            continue
        payload = line[6:]
        if payload == b"[DONE]":
            break
        ev = json.loads(payload)
        if ev.get("usage"):
            usage = ev["usage"]
        for ch in ev.get("choices", []):
            if ch.get("delta", {}).get("content"):
                times.append(time.perf_counter() - t0)
    out.update({"status": r.status, "ttft_s": times[0] if times else None, "token_times_s": times,
                "start_s": t0, "usage": usage})


def run_scenario(kind, port, model, preamble, tasks, gen):
    results = [dict() for _ in tasks]
    wall0 = time.perf_counter()
    if kind == "sequential":
        for i, t in enumerate(tasks):
            agent(port, model, preamble, t, gen, results[i])
    else:
        agent(port, model, preamble, tasks[0], gen, results[0])
        ths = [threading.Thread(target=agent, args=(port, model, preamble, t, gen, results[i + 1]))
               for i, t in enumerate(tasks[1:])]
        for th in ths:
            th.start()
        for th in ths:
            th.join()
    wall = time.perf_counter() - wall0
    rest = results[1:]
    ttft_rest = sorted(r["ttft_s"] for r in rest if r.get("ttft_s") is not None)
    first_tok = min(r["start_s"] + r["ttft_s"] for r in rest)
    last_tok = max(r["start_s"] + r["token_times_s"][-1] for r in rest)
    chunks = sum(len(r["token_times_s"]) for r in rest)
    gen_tokens = sum((r["usage"] or {}).get("completion_tokens", 0) for r in rest) or chunks
    cached = [((r["usage"] or {}).get("prompt_tokens_details") or {}).get("cached_tokens") for r in results]
    return {
        "scenario": kind, "agents": len(tasks), "wall_s": wall,
        "first_ttft_ms": results[0]["ttft_s"] * 1e3,
        "rest_ttft_ms_p50": statistics.median(ttft_rest) * 1e3,
        "rest_ttft_ms_p95": ttft_rest[min(len(ttft_rest) - 1, int(0.95 * len(ttft_rest)))] * 1e3,
        "rest_ttft_ms_max": ttft_rest[-1] * 1e3,
        "aggregate_decode_tps": gen_tokens / (last_tok - first_tok) if last_tok > first_tok else None,
        "prompt_tokens": [(r["usage"] or {}).get("prompt_tokens") for r in results],
        "cached_tokens": cached,
        "statuses": sorted(set(r["status"] for r in results)),
        "ttft_ms": [r["ttft_s"] * 1e3 if r.get("ttft_s") is not None else None for r in results],
    }


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--model", required=True)
    ap.add_argument("--fak", default="build/apps/fak/fak")
    ap.add_argument("--llama-server", default="")
    ap.add_argument("--agents", type=int, default=16)
    ap.add_argument("--preamble-words", type=int, default=1150)  # about 1,300 Qwen tokens
    ap.add_argument("--task-words", type=int, default=26)        # about 30 tokens
    ap.add_argument("--gen", type=int, default=32)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--scenarios", default="sequential,burst")
    ap.add_argument("--rounds", type=int, default=1)
    ap.add_argument("--port", type=int, default=18181)
    a = ap.parse_args()
    rng = random.Random(20261202)
    preamble = text(rng, a.preamble_words)
    tasks = ["Task %d: %s" % (i, text(rng, a.task_words)) for i in range(a.agents)]
    arms = [("fak", [a.fak, "serve", "-m", a.model, "--port", str(a.port), "-t", str(a.threads),
                     "--parallel", str(a.agents), "-c", "2048", "--alias", "m"])]
    if a.llama_server:
        arms.append(("llama-server", [a.llama_server, "-m", a.model, "--port", str(a.port), "-t", str(a.threads),
                                      "-np", str(a.agents), "-c", str(2048 * a.agents), "--alias", "m"]))
    results = []
    for rnd in range(a.rounds):
        for scen in a.scenarios.split(","):
            for name, argv in arms:  # alternating arms within each scenario
                proc = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
                try:
                    wait_health(a.port, proc)
                    r = run_scenario(scen, a.port, "m", preamble, tasks, a.gen)
                finally:
                    proc.terminate()
                    proc.wait(timeout=30)
                r.update({"arm": name, "round": rnd})
                results.append(r)
                print("%-12s %-10s round %d: first TTFT %8.1f ms, rest TTFT p50 %8.1f ms p95 %8.1f ms, "
                      "decode %6.1f tok/s, wall %5.1f s, cached %s" %
                      (name, scen, rnd, r["first_ttft_ms"], r["rest_ttft_ms_p50"], r["rest_ttft_ms_p95"],
                       r["aggregate_decode_tps"] or 0, r["wall_s"], r["cached_tokens"][:3]), file=sys.stderr)
                time.sleep(1)
    print(json.dumps({"schema": "fak.bench.fleet.v0", "args": vars(a), "results": results}, indent=1))


if __name__ == "__main__":
    main()
