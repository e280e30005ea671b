#!/usr/bin/env python3
"""fak serve through the official openai Python client: chat, streaming chat, completions, stop
strings, seeds, usage and logprobs. Starts the real server on a free 127.0.0.1 port.

  build/venv/bin/python tests/python/openai_client_test.py FAK_BINARY
"""
import atexit
import os
import shutil
import subprocess
import sys
import tempfile

import openai
from fak_server import start_server


def main():
    fak = sys.argv[1]
    tmp = tempfile.mkdtemp(prefix="fak-openai-test-")
    atexit.register(shutil.rmtree, tmp, True)
    model = os.path.join(tmp, "tiny.gguf")
    subprocess.run([fak, "synth", "-g", "tiny", "-t", "q8_0", "--threads", "2", "-o", model], check=True,
                   stdout=subprocess.DEVNULL)
    proc, port = start_server(fak, model, "-c", "512", "--api-key", "k1")
    try:
        client = openai.OpenAI(base_url="http://127.0.0.1:%d/v1" % port, api_key="k1", max_retries=0)
        assert [m.id for m in client.models.list().data] == ["tiny"]

        msgs = [{"role": "system", "content": "You are terse."}, {"role": "user", "content": "Name a color."}]
        r = client.chat.completions.create(model="tiny", messages=msgs, max_tokens=10, temperature=0,
                                           logprobs=True, top_logprobs=2, extra_body={"ignore_eos": True})
        c = r.choices[0]
        assert c.finish_reason == "length" and c.message.role == "assistant", r
        assert r.usage.completion_tokens == 10 and r.usage.total_tokens == r.usage.prompt_tokens + 10, r.usage
        assert len(c.logprobs.content) == 10 and all(len(t.top_logprobs) == 2 for t in c.logprobs.content)

        stream = client.chat.completions.create(model="tiny", messages=msgs, max_tokens=10, temperature=0,
                                                stream=True, stream_options={"include_usage": True},
                                                extra_body={"ignore_eos": True})
        text, usage, finish = "", None, None
        for chunk in stream:
            if chunk.usage:
                usage = chunk.usage
            for ch in chunk.choices:
                text += ch.delta.content or ""
                finish = ch.finish_reason or finish
        assert text == c.message.content, (text, c.message.content)
        assert finish == "length" and usage.completion_tokens == 10
        assert usage.prompt_tokens_details.cached_tokens > 0, usage  # the same prompt again

        comp = client.completions.create(model="tiny", prompt="The fleet", max_tokens=12, temperature=0,
                                         extra_body={"ignore_eos": True})
        full = comp.choices[0].text
        stop = full[len(full) // 2:len(full) // 2 + 2]
        cut = client.completions.create(model="tiny", prompt="The fleet", max_tokens=12, temperature=0, stop=[stop],
                                        extra_body={"ignore_eos": True})
        assert cut.choices[0].finish_reason == "stop" and cut.choices[0].text == full[:full.find(stop)], cut

        def sample(seed):
            return client.completions.create(model="tiny", prompt="Once", max_tokens=12, temperature=1.0,
                                             seed=seed, extra_body={"ignore_eos": True}).choices[0].text
        assert sample(5) == sample(5) and sample(5) != sample(6)

        try:
            client.chat.completions.create(model="gpt-nope", messages=msgs)
            raise AssertionError("an unknown model was accepted")
        except openai.NotFoundError:
            pass
        try:
            client.chat.completions.create(model="tiny", messages=msgs, n=2)
            raise AssertionError("n=2 was accepted")
        except openai.BadRequestError as e:
            assert "'n' is 2" in str(e)
        bad = openai.OpenAI(base_url="http://127.0.0.1:%d/v1" % port, api_key="wrong", max_retries=0)
        try:
            bad.models.list()
            raise AssertionError("a wrong key was accepted")
        except openai.AuthenticationError:
            pass
        print("openai client test: ok")
    finally:
        proc.terminate()
        proc.wait(timeout=30)


if __name__ == "__main__":
    main()
