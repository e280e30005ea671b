#!/usr/bin/env python3
"""Constrained output through fak serve and the official openai client.

1. Random JSON schemas (nested objects, arrays with bounds, enums, const, anyOf/oneOf, integer and
   number bounds, string lengths, patterns and formats): every reply that ends with finish_reason
   "stop" parses and validates against its schema (jsonschema, Draft 2020-12 with format checks), on
   greedy and on sampled decoding; replies cut by max_tokens say "length" and claim nothing.
2. Tool calls: tool_choice required / named / auto / none, parallel_tool_calls, streaming deltas, and
   the round trip call -> tool result -> answer; arguments always validate against the tool's schema.
3. Refusals: unsupported schema keywords and bad tool_choice values get a 400 that names them.

The model has random weights: the constraint must hold whatever the weights are.

  build/venv/bin/python tests/python/constrained_test.py FAK_BINARY [--schemas N] [--model GGUF]

Without --model the model is a random-weight one made with `fak synth`; scripts/test.sh also runs it on
the trained models/qwen3-20m.
"""
import argparse
import atexit
import concurrent.futures
import json
import os
import random
import shutil
import string
import subprocess
import tempfile

import jsonschema
import openai
from fak_server import start_server

WORDS = ["id", "name", "count", "price", "tags", "owner", "kind", "é_key", "with space", 'q"uote', "nested",
         "items", "flag", "level", "note"]


class Gen:
    """Random JSON schemas whose outputs a random-weight model finishes in a few hundred tokens."""

    def __init__(self, rng):
        self.r = rng

    def string_value(self):
        return "".join(self.r.choice(string.ascii_letters + " é\"\\/\n") for _ in range(self.r.randint(0, 6)))

    def scalar_value(self):
        c = self.r.randint(0, 4)
        return [self.string_value(), self.r.randint(-1000, 1000), self.r.choice([True, False]), None,
                round(self.r.uniform(-100, 100), 2)][c]

    def schema(self, depth=0, kind=None):
        r = self.r
        kinds = ["string", "integer", "number", "boolean", "null", "enum", "const", "pattern", "format"]
        if depth < 3:
            kinds += ["object", "object", "array", "anyOf", "oneOf", "types"]
        kind = kind or r.choice(kinds)
        if kind == "string":
            lo = r.randint(0, 3)
            s = {"type": "string", "maxLength": lo + r.randint(0, 8)}
            if lo:
                s["minLength"] = lo
            return s
        if kind == "integer":
            s = {"type": "integer"}
            a, b = sorted([r.randint(-5000, 5000), r.randint(-5000, 5000)])
            c = r.randint(0, 4)
            if c in (0, 1):
                s["minimum"] = a
            if c in (0, 2):
                s["maximum"] = b
            if c == 3:
                s["exclusiveMinimum"] = a
                s["exclusiveMaximum"] = b + 2
            return s
        if kind == "number":
            s = {"type": "number"}
            if r.random() < 0.6:
                a, b = sorted([r.randint(-50, 50), r.randint(-50, 50)])
                s["minimum"] = a
                s["maximum"] = b + 1
            return s
        if kind == "boolean":
            return {"type": "boolean"}
        if kind == "null":
            return {"type": "null"}
        if kind == "enum":
            vals = []
            for _ in range(r.randint(1, 4)):
                v = self.scalar_value()
                if v not in vals:
                    vals.append(v)
            return {"enum": vals}
        if kind == "const":
            return {"const": self.scalar_value()}
        if kind == "pattern":
            return {"type": "string",
                    "pattern": r.choice(["^[a-z]{2,5}$", "^\\d{3}-\\d{2}$", "^(foo|bar)+$", "^[A-Z][a-z]?\\.$",
                                         "^x[^\"]{0,3}y$", "^(ab|c)?\\d$"])}
        if kind == "format":
            return {"type": "string", "format": r.choice(["date", "time", "date-time", "uuid"])}
        if kind == "object":
            names = r.sample(WORDS, r.randint(1, 4))
            props = {n: self.schema(depth + 1) for n in names}
            s = {"type": "object", "properties": props,
                 "required": [n for n in names if r.random() < 0.6]}
            if r.random() < 0.7:
                s["additionalProperties"] = False
            return s
        if kind == "array":
            lo = r.randint(0, 2)
            s = {"type": "array", "items": self.schema(depth + 1), "maxItems": lo + r.randint(0, 2)}
            if lo:
                s["minItems"] = lo
            return s
        if kind in ("anyOf", "oneOf"):
            # Branches of different types, so oneOf's "exactly one" holds too.
            ks = r.sample(["string", "integer", "boolean", "null", "object", "array"], r.randint(2, 3))
            return {kind: [self.schema(depth + 1, k) for k in ks]}
        if kind == "types":
            return {"type": r.sample(["string", "integer", "boolean", "null"], 2)}
        raise AssertionError(kind)


def check_schemas(client, n, seed):
    rng = random.Random(seed)
    gen = Gen(rng)
    schemas = [gen.schema(0, rng.choice(["object", "object", "array", None])) for _ in range(n)]
    jobs = []
    for i, s in enumerate(schemas):
        jobs.append((i, s, 0.0, None, 400))
        jobs.append((i, s, 1.0, 1000 + i, 400))
        if i % 10 == 0:
            jobs.append((i, s, 1.0, 2000 + i, 3))  # cut short on purpose

    def run(job):
        i, s, temp, seed, max_tokens = job
        r = client.chat.completions.create(
            model="tiny", messages=[{"role": "user", "content": "Reply in JSON."}], max_tokens=max_tokens,
            temperature=temp, seed=seed,
            response_format={"type": "json_schema", "json_schema": {"name": "s%d" % i, "schema": s}})
        return job, r.choices[0]

    stats = {"stop": 0, "length": 0}
    with concurrent.futures.ThreadPoolExecutor(8) as pool:
        for (i, s, temp, seed, max_tokens), choice in pool.map(run, jobs):
            stats[choice.finish_reason] += 1
            text = choice.message.content
            if choice.finish_reason == "length":
                continue
            assert choice.finish_reason == "stop", choice
            try:
                value = json.loads(text)
            except json.JSONDecodeError as e:
                raise AssertionError("schema %d (T=%s): not JSON: %s\n%r\nschema: %s" % (i, temp, e, text, json.dumps(s)))
            v = jsonschema.Draft202012Validator(s, format_checker=jsonschema.Draft202012Validator.FORMAT_CHECKER)
            errors = list(v.iter_errors(value))
            assert not errors, "schema %d (T=%s): %s\noutput: %r\nschema: %s" % (i, temp, errors[0].message, text,
                                                                             json.dumps(s))
    print("random schemas: %d schemas, %d replies: %d complete and valid, %d cut by max_tokens"
          % (len(schemas), len(jobs), stats["stop"], stats["length"]))
    assert stats["stop"] >= 0.8 * 2 * len(schemas), stats  # most replies complete: the check means something


WEATHER = {"type": "function", "function": {
    "name": "get_weather", "description": "Current weather in a city",
    "parameters": {"type": "object", "properties": {"city": {"type": "string", "maxLength": 16},
                                                    "unit": {"enum": ["celsius", "fahrenheit"]}},
                   "required": ["city", "unit"], "additionalProperties": False}}}
TIME = {"type": "function", "function": {
    "name": "get_time", "description": "Local time in a time zone",
    "parameters": {"type": "object", "properties": {"tz": {"type": "string", "maxLength": 8}},
                   "required": ["tz"]}}}
SCHEMAS = {"get_weather": WEATHER["function"]["parameters"], "get_time": TIME["function"]["parameters"]}


def check_call(call):
    assert call.type == "function" and call.id.startswith("call_") and call.function.name in SCHEMAS, call
    jsonschema.validate(json.loads(call.function.arguments), SCHEMAS[call.function.name])


def check_tools(client):
    msgs = [{"role": "user", "content": "What is the weather in Paris, and the time in Tokyo?"}]
    tools = [WEATHER, TIME]
    for parallel in (True, False):
        r = client.chat.completions.create(model="tiny", messages=msgs, tools=tools, tool_choice="required",
                                           parallel_tool_calls=parallel, max_tokens=300, temperature=0)
        c = r.choices[0]
        # With parallel calls a model may keep calling until max_tokens ("length"): the complete calls
        # still come back. One call ends the reply.
        assert c.finish_reason in (("tool_calls", "length") if parallel else ("tool_calls",)), c
        assert c.message.tool_calls, c
        for call in c.message.tool_calls:
            check_call(call)
        if not parallel:
            assert len(c.message.tool_calls) == 1, c.message.tool_calls

    named = client.chat.completions.create(
        model="tiny", messages=msgs, tools=tools, tool_choice={"type": "function", "function": {"name": "get_time"}},
        parallel_tool_calls=False, max_tokens=300, temperature=0.8, seed=3)
    calls = named.choices[0].message.tool_calls
    assert calls and all(c.function.name == "get_time" for c in calls), named
    for call in calls:
        check_call(call)

    # Streaming: deltas accumulate to the same calls as the whole reply.
    whole = client.chat.completions.create(model="tiny", messages=msgs, tools=tools, tool_choice="required",
                                           parallel_tool_calls=False, max_tokens=300, temperature=0)
    stream = client.chat.completions.create(model="tiny", messages=msgs, tools=tools, tool_choice="required",
                                            parallel_tool_calls=False, max_tokens=300, temperature=0, stream=True)
    acc, finish = {}, None
    for chunk in stream:
        for ch in chunk.choices:
            finish = ch.finish_reason or finish
            for d in ch.delta.tool_calls or []:
                slot = acc.setdefault(d.index, {"name": "", "arguments": "", "id": None})
                slot["id"] = d.id or slot["id"]
                if d.function and d.function.name:
                    slot["name"] += d.function.name
                if d.function and d.function.arguments:
                    slot["arguments"] += d.function.arguments
    assert finish == "tool_calls", finish
    got = [(acc[k]["name"], acc[k]["arguments"]) for k in sorted(acc)]
    want = [(c.function.name, c.function.arguments) for c in whole.choices[0].message.tool_calls]
    assert got == want, (got, want)

    # The round trip: the call, the tool's result, then an answer in text.
    first = whole.choices[0].message
    history = msgs + [first.model_dump(exclude_none=True)]
    for call in first.tool_calls:
        history.append({"role": "tool", "tool_call_id": call.id, "content": json.dumps({"result": "sunny, 21 C"})})
    final = client.chat.completions.create(model="tiny", messages=history, tools=tools, tool_choice="none",
                                           max_tokens=20, temperature=0)
    fc = final.choices[0]
    assert fc.message.tool_calls is None and isinstance(fc.message.content, str), fc
    assert fc.finish_reason in ("stop", "length"), fc
    assert final.usage.prompt_tokens > whole.usage.prompt_tokens  # the call and its result were rendered

    # auto: whatever the model does, a call it makes is well formed.
    for seed in range(4):
        r = client.chat.completions.create(model="tiny", messages=msgs, tools=tools, max_tokens=60, temperature=1.0,
                                           seed=seed)
        c = r.choices[0]
        for call in c.message.tool_calls or []:
            check_call(call)
        if c.finish_reason != "length":
            assert (c.finish_reason == "tool_calls") == bool(c.message.tool_calls), c
    print("tool calls: required, named, parallel, streaming, round trip and auto: ok")


def check_refusals(client):
    cases = [
        (dict(response_format={"type": "json_schema", "json_schema": {"name": "x", "schema": {
            "type": "array", "uniqueItems": True}}}), "'uniqueItems' is not supported"),
        (dict(response_format={"type": "json_schema", "json_schema": {"name": "x", "schema": {
            "type": "string", "format": "email"}}}), "format 'email' is not supported"),
        (dict(response_format={"type": "xml"}), "'response_format.type' is 'xml'"),
        (dict(tools=[WEATHER], tool_choice={"type": "function", "function": {"name": "nope"}}),
         "names the function 'nope'"),
        (dict(tool_choice="required"), "'tool_choice' needs 'tools'"),
        (dict(tools=[{"type": "function", "function": {"name": "f", "parameters": {
            "type": "object", "properties": {"a": {"type": "string", "pattern": "(a)\\1"}}}}}], tool_choice="required"),
         "backreferences"),
        (dict(tools=[WEATHER], response_format={"type": "json_object"}), "together with tool calls"),
    ]
    for kwargs, needle in cases:
        try:
            client.chat.completions.create(model="tiny", messages=[{"role": "user", "content": "x"}], max_tokens=4,
                                           **kwargs)
            raise AssertionError("accepted: %r" % kwargs)
        except openai.BadRequestError as e:
            assert needle in str(e), (needle, str(e))
    # json_object mode: an object.
    r = client.chat.completions.create(model="tiny", messages=[{"role": "user", "content": "x"}], max_tokens=200,
                                       temperature=0, response_format={"type": "json_object"})
    if r.choices[0].finish_reason == "stop":
        assert isinstance(json.loads(r.choices[0].message.content), dict)
    print("refusals and json_object: ok")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("fak")
    ap.add_argument("--schemas", type=int, default=int(os.environ.get("FAK_SCHEMA_COUNT", "200")))
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--model", default="")
    args = ap.parse_args()
    tmp = tempfile.mkdtemp(prefix="fak-constrained-test-")
    atexit.register(shutil.rmtree, tmp, True)
    model = args.model
    if not model:
        model = os.path.join(tmp, "tiny.gguf")
        subprocess.run([args.fak, "synth", "-g", "tiny", "-t", "q8_0", "--threads", "2", "-o", model], check=True,
                       stdout=subprocess.DEVNULL)
    proc, port = start_server(args.fak, model, "-c", "1024", "--parallel", "8")
    try:
        client = openai.OpenAI(base_url="http://127.0.0.1:%d/v1" % port, api_key="none", max_retries=0, timeout=120)
        check_refusals(client)
        check_tools(client)
        check_schemas(client, args.schemas, args.seed)
        print("constrained output test on %s: ok" % (args.model or "a random-weight model"))
    finally:
        proc.terminate()
        proc.wait(timeout=30)


if __name__ == "__main__":
    main()
