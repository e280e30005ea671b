#!/usr/bin/env python3
"""Expected chat-template renderings for fak's tests, produced by Python's jinja2.

The environment is the one HF transformers builds for apply_chat_template: an
ImmutableSandboxedEnvironment with trim_blocks and lstrip_blocks, the loopcontrols
extension, a `generation` block tag, transformers' `tojson` (json.dumps with
ensure_ascii=False), `raise_exception` and `strftime_now` (pinned to a fixed time here so
the outputs are reproducible).

    python3 tools/chat_oracle/render.py            # rewrite tests/fixtures/chat/*.json
    python3 tools/chat_oracle/render.py --check    # exit 1 when a fixture is stale

Each fixture file holds {"cases": [...]}; a case has a name, the template (or a
template_file and the JSON key holding it), either a raw `context` or a chat request
(messages, tools, add_generation_prompt, bos_token, eos_token, extra), and the expected
text, or `error` ("syntax" or "render") with the line jinja2 reports for syntax errors.
"""
import argparse
import datetime
import json
import os
import sys

try:
    import jinja2
    import jinja2.ext
    from jinja2.sandbox import ImmutableSandboxedEnvironment
except ImportError:
    print("skipped: python3-jinja2 is not installed")
    sys.exit(77)  # ctest's SKIP_RETURN_CODE

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import cases  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
OUT_DIR = os.path.join(ROOT, "tests", "fixtures", "chat")
FIXED_NOW = 1721995200  # 2024-07-26 12:00:00 UTC; fak's test pins the same instant


class GenerationTag(jinja2.ext.Extension):
    """transformers' {% generation %} block: renders its body unchanged."""
    tags = {"generation"}

    def parse(self, parser):
        lineno = next(parser.stream).lineno
        body = parser.parse_statements(["name:endgeneration"], drop_needle=True)
        return jinja2.nodes.CallBlock(self.call_method("_render", []), [], [], body).set_lineno(lineno)

    def _render(self, caller):
        return caller()


def make_env():
    def raise_exception(message):
        raise jinja2.exceptions.TemplateError(message)

    def tojson(x, ensure_ascii=False, indent=None, separators=None, sort_keys=False):
        return json.dumps(x, ensure_ascii=ensure_ascii, indent=indent, separators=separators,
                          sort_keys=sort_keys)

    def strftime_now(fmt):
        return datetime.datetime.fromtimestamp(FIXED_NOW).strftime(fmt)

    env = ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True,
                                        extensions=[GenerationTag, jinja2.ext.loopcontrols])
    env.filters["tojson"] = tojson
    env.globals["raise_exception"] = raise_exception
    env.globals["strftime_now"] = strftime_now
    return env


def template_source(case):
    if "template" in case:
        return case["template"]
    with open(os.path.join(ROOT, case["template_file"]), encoding="utf-8") as f:
        return json.load(f)[case["template_key"]]


def context_of(case):
    if "context" in case:
        return case["context"]
    ctx = {
        "messages": case["messages"],
        "tools": case.get("tools"),
        "documents": None,
        "add_generation_prompt": case.get("add_generation_prompt", False),
        "bos_token": case.get("bos_token", ""),
        "eos_token": case.get("eos_token", ""),
    }
    ctx.update(case.get("extra", {}))
    return ctx


def render_case(env, case):
    out = dict(case)
    src = template_source(case)
    try:
        tmpl = env.from_string(src)
    except jinja2.exceptions.TemplateSyntaxError as e:
        out["error"] = "syntax"
        out["error_line"] = e.lineno
        return out
    try:
        out["expected"] = tmpl.render(**context_of(case))
    except Exception as e:  # noqa: BLE001 - any render failure is an expected error
        out["error"] = "render"
        out["error_message"] = f"{type(e).__name__}: {e}"
    if case.get("expect_error") and "error" not in out:
        raise SystemExit(f"{case['name']}: expected an error, jinja2 rendered it")
    return out


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--check", action="store_true", help="compare instead of writing")
    ap.add_argument("--out", default=OUT_DIR)
    args = ap.parse_args()
    env = make_env()
    stale = []
    for group, group_cases in cases.GROUPS.items():
        names = [c["name"] for c in group_cases]
        if len(names) != len(set(names)):
            raise SystemExit(f"{group}: duplicate case names")
        data = {"generator": "tools/chat_oracle/render.py", "jinja2": jinja2.__version__,
                "cases": [render_case(env, c) for c in group_cases]}
        text = json.dumps(data, ensure_ascii=False, indent=1) + "\n"
        path = os.path.join(args.out, f"{group}.json")
        if args.check:
            old = open(path, encoding="utf-8").read() if os.path.exists(path) else None
            # The jinja2 version may differ between machines; compare the cases only.
            if old is None or json.loads(old)["cases"] != data["cases"]:
                stale.append(path)
            continue
        os.makedirs(args.out, exist_ok=True)
        with open(path, "w", encoding="utf-8") as f:
            f.write(text)
        print(f"wrote {path}: {len(group_cases)} cases")
    if stale:
        print("stale fixtures: " + ", ".join(stale))
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
