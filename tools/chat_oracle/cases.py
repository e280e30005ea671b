"""Test cases for the chat-template oracle: small templates per feature, the model templates
(Qwen3 from the shared fixtures; ChatML, Llama 3, Llama 3.1-style tools, Mistral, Mistral with
tools, Phi-3 written out from their model cards), and templates that must fail."""

QWEN3 = {"template_file": "../shared/fixtures/tokenizers/qwen3/tokenizer_config.json",
         "template_key": "chat_template"}


def u(name, template, **context):
    return {"name": name, "template": template, "context": context}


def err(name, template, **context):
    return {"name": name, "template": template, "context": context, "expect_error": True}


MSGS = [{"role": "user", "content": "Hi"}, {"role": "assistant", "content": "Hello!"}]

SYNTAX = [
    u("text_only", "hello\nworld\n"),
    u("text_two_trailing_newlines", "hello\n\n"),
    u("crlf_newlines", "a\r\nb\rc {{ 1 }}\r\n"),
    u("print_values", "{{ 1 }}|{{ 1.5 }}|{{ -2 }}|{{ 'x' }}|{{ true }}|{{ none }}|{{ missing }}|{{ [1, 'a', none, true, 2.5] }}|{{ {'k': 'v', 'n': [1]} }}"),
    u("print_tuple", "{{ (1, 2) }} {{ (1,) }} {{ () }} {{ 1, 2 }}"),
    u("string_escapes", r"""{{ 'a\nb\tc\\d\'e' }}|{{ "q\"q" }}|{{ '\x41\u00e9\U0001F600' }}|{{ '\d' }}|{{ 'a' 'b' "c" }}"""),
    u("string_repr_quotes", """{{ ["it's", 'say "hi"', 'both \\' "', 'tab\\t', 'é'] }}"""),
    u("comments", "a{# comment #}b\n{# line comment #}\nc{#- strip -#}   d"),
    u("whitespace_control", "a  {{- 'b' -}}  c\n  {%- if true -%}  d  {%- endif -%}  \ne"),
    u("trim_blocks", "{% if true %}\nyes\n{% endif %}\nafter"),
    u("lstrip_blocks", "  {% if true %}\n    x\n  {% endif %}\n  y"),
    u("lstrip_plus_disables", "  {%+ if true %}x{% endif %}"),
    u("lstrip_not_for_variables", "  {{ 'v' }}\n  {% if true %}k{% endif %}"),
    u("lstrip_after_expression_same_line", "{{ 'a' }}  {% if true %}b{% endif %}"),
    u("raw_block", "{% raw %}{{ not parsed }} {% if %}{% endraw %}!"),
    u("numbers_literals", "{{ 1_000 }} {{ 0x1f }} {{ 0b101 }} {{ 0o17 }} {{ 1e3 }} {{ 2.5e-3 }} {{ 1E2 }}"),
    u("float_repr", "{{ 0.1 + 0.2 }} {{ 1e16 }} {{ 1e15 }} {{ 0.0001 }} {{ 0.00001 }} {{ 1/3 }} {{ 2.0 }} {{ -0.0 }} {{ 123456789.125 }}"),
    u("nested_brackets_in_print", "{{ {'a': {'b': [1, {'c': 2}]}} }}"),
    u("adjacent_tags", "{{ 'a' }}{{ 'b' }}{% if true %}{{ 'c' }}{% endif %}"),
]

OPERATORS = [
    u("arithmetic", "{{ 1 + 2 }} {{ 7 - 10 }} {{ 3 * 4 }} {{ 7 / 2 }} {{ 8 / 2 }} {{ 7 // 2 }} {{ -7 // 2 }} {{ 7 % 3 }} {{ -7 % 3 }} {{ 7 % -3 }} {{ 2 ** 10 }} {{ 2 ** -1 }} {{ 7.5 // 2 }} {{ -7.5 % 2 }}"),
    u("precedence", "{{ 1 + 2 * 3 }} {{ (1 + 2) * 3 }} {{ 2 ** 3 ** 2 }} {{ -2 ** 2 }} {{ 10 - 2 - 3 }} {{ 'a' ~ (1 + 2) }} {{ 2 * 3 ~ 'x' }}"),
    err("concat_binds_tighter_than_plus", "{{ 'a' ~ 1 + 2 }}"),
    u("concat_tilde", "{{ 'a' ~ 1 ~ none ~ true ~ missing ~ [1] }}"),
    u("string_ops", "{{ 'ab' + 'cd' }} {{ 'ab' * 3 }} {{ 3 * 'x' }} {{ [1] + [2, 3] }} {{ [0] * 3 }}"),
    u("comparisons", "{{ 1 < 2 }} {{ 2 <= 2 }} {{ 3 > 4 }} {{ 'a' < 'b' }} {{ 1 == 1.0 }} {{ true == 1 }} {{ 'a' != 'b' }} {{ 1 < 2 < 3 }} {{ 3 > 2 > 2 }} {{ [1, 2] < [1, 3] }} {{ none == none }} {{ missing == 'x' }}"),
    u("in_operator", "{{ 'b' in 'abc' }} {{ 2 in [1, 2] }} {{ 'k' in {'k': 1} }} {{ 'z' not in 'abc' }} {{ 3 not in [1] }} {{ 'x' in missing }}"),
    u("logic", "{{ true and false }} {{ true or false }} {{ not true }} {{ not 0 }} {{ 0 or 'x' }} {{ 'a' and 'b' }} {{ '' and 'b' }} {{ none or [] }} {{ not a == b }}", a=1, b=2),
    u("ternary", "{{ 'y' if true else 'n' }} {{ 'y' if false else 'n' }} {{ 'y' if false }}| {{ 1 if x else 2 if y else 3 }}", x=False, y=False),
    u("unary", "{{ -x }} {{ +x }} {{ -(1 + 2) }} {{ - 1.5 }} {{ -x|abs }}", x=5),
    u("truthiness", "{% for v in [0, 1, '', 'a', [], [0], {}, {'a': 1}, none, 0.0, 0.5] %}{{ 'T' if v else 'F' }}{% endfor %}"),
]

ACCESS = [
    u("attr_and_item", "{{ m.role }} {{ m['role'] }} {{ m.missing }}| {{ l[0] }} {{ l[-1] }} {{ l.1 }} {{ l[5] }}|", m={"role": "user"}, l=[1, 2, 3]),
    u("slices", "{{ l[1:] }} {{ l[:2] }} {{ l[::-1] }} {{ l[::2] }} {{ l[-2:] }} {{ l[1:-1] }} {{ l[5:] }} {{ s[::-1] }} {{ s[1:3] }} {{ s[-1] }}", l=[1, 2, 3, 4], s="héllo"),
    u("nested_access", "{{ d.a.b[1].c }}", d={"a": {"b": [0, {"c": "deep"}]}}),
    u("dict_methods", "{% for k, v in d.items() %}{{ k }}={{ v }};{% endfor %} {{ d.keys() | list }} {{ d.values() | list }} {{ d.get('a') }} {{ d.get('z') }} {{ d.get('z', 'dflt') }}", d={"b": 2, "a": 1}),
    u("dict_key_shadowed_by_method", "{{ d.items is defined }} {{ d['items'] }}", d={"items": "field"}),
    u("none_attribute_is_undefined", "{{ n.x is defined }}", n=None),
    u("list_methods", "{{ l.index(2) }} {{ l.count(1) }}", l=[1, 2, 1]),
    u("loop_over_dict", "{% for k in d %}{{ k }}{% endfor %}", d={"z": 1, "a": 2}),
    u("loop_over_string", "{% for c in 'héj' %}[{{ c }}]{% endfor %}"),
]

STRING_METHODS = [
    u("startswith_endswith", "{{ s.startswith('<tool') }} {{ s.endswith('>') }} {{ s.startswith(('x', '<')) }} {{ s.endswith('nope') }}", s="<tool_response>"),
    u("split_variants", "{{ s.split('</think>') }} {{ s.split('</think>')[-1] }} {{ ' a  b \n c '.split() }} {{ 'a,b,c'.split(',', 1) }} {{ 'a,b,c'.rsplit(',', 1) }} {{ ' a b '.rsplit() }} {{ ''.split(',') }}", s="<think>x</think>\n\nanswer"),
    u("strip_variants", "[{{ '  x \n'.strip() }}] [{{ '\nx\n'.lstrip('\n') }}] [{{ '\nx\n'.rstrip('\n') }}] [{{ 'xxaxx'.strip('x') }}] [{{ ' \u3000x\u00a0'.strip() }}]"),
    u("case_methods", "{{ 'hello world'.title() }} {{ 'ABC'.lower() }} {{ 'abc'.upper() }} {{ 'hELLO'.capitalize() }} {{ 'émile'.upper() }} {{ \"they're bill's\".title() }}"),
    u("replace_find_count", "{{ 'aaa'.replace('a', 'b') }} {{ 'aaa'.replace('a', 'b', 2) }} {{ 'héllo'.find('l') }} {{ 'hello'.find('z') }} {{ 'hello'.rfind('l') }} {{ 'banana'.count('an') }}"),
    u("join_and_predicates", "{{ ', '.join(['a', 'b']) }} {{ '12'.isdigit() }} {{ 'ab'.isalpha() }} {{ ' '.isspace() }} {{ 'ab'.islower() }} {{ 'AB'.isupper() }}"),
    u("splitlines_method", "{{ 'a\nb\r\nc\n'.splitlines() }}"),
]

FILTERS = [
    u("trim_filter", "[{{ '  x  ' | trim }}] [{{ 'xxyxx' | trim('x') }}] [{{ 5 | trim }}]"),
    u("length_filter", "{{ l | length }} {{ 'héllo' | length }} {{ d | length }} {{ missing | length }} {{ l | count }}", l=[1, 2], d={"a": 1}),
    u("case_filters", "{{ 'abc' | upper }} {{ 'ABC' | lower }} {{ 'hello WORLD' | capitalize }} {{ 'hello-world foo(bar)' | title }}"),
    u("default_filter", "{{ missing | default('d') }} {{ none | default('d') }} {{ '' | default('d', true) }} {{ 'x' | d('d') }} {{ missing | default }}|"),
    u("join_filter", "{{ [1, 2, 3] | join(', ') }} {{ ['a', 'b'] | join }} {{ users | join(', ', attribute='name') }}", users=[{"name": "a"}, {"name": "b"}]),
    u("first_last_list", "{{ [1, 2, 3] | first }} {{ [1, 2, 3] | last }} {{ 'abc' | first }} {{ 'abc' | list }} {{ {'a': 1} | list }} {{ [] | first }}|"),
    u("replace_string_filters", "{{ 'aXbX' | replace('X', '-') }} {{ 'aXbX' | replace('X', '-', 1) }} {{ 42 | string }} {{ [1] | string }} {{ 'x' | safe }}"),
    u("int_float_filters", "{{ '42' | int }} {{ '3.7' | int }} {{ 'abc' | int }} {{ 'abc' | int(7) }} {{ 3.9 | int }} {{ '2.5' | float }} {{ 3 | float }} {{ 'x' | float }}"),
    u("items_filter", "{% for k, v in d | items %}{{ k }}:{{ v }} {% endfor %}", d={"b": 1, "a": 2}),
    u("tojson_basic", "{{ v | tojson }}", v={"name": "get_weather", "args": {"city": "Zürich", "n": 3, "f": 1.5, "ok": True, "none": None, "list": [1, "two", []], "empty": {}}}),
    u("tojson_escapes", "{{ v | tojson }}", v={"s": "quote\" backslash\\ newline\n tab\t ctrl\u0001 <html>&'"}),
    u("tojson_indent", "{{ v | tojson(indent=2) }}|{{ v | tojson(indent=0) }}|{{ [] | tojson(indent=2) }}", v={"a": [1, {"b": None}], "c": {}}),
    u("tojson_options", "{{ v | tojson(sort_keys=true) }} {{ v | tojson(separators=(',', ':')) }} {{ v | tojson(ensure_ascii=true) }}", v={"z": 1, "a": "é😀"}),
    u("tojson_scalars", "{{ 'str' | tojson }} {{ 1 | tojson }} {{ 0.1 | tojson }} {{ none | tojson }} {{ true | tojson }} {{ (1, 2) | tojson }} {{ 1e20 | tojson }}"),
    u("map_filter", "{{ users | map(attribute='name') | list }} {{ ['a', 'b'] | map('upper') | join }} {{ users | map(attribute='age', default=0) | list }}", users=[{"name": "x", "age": 3}, {"name": "y"}]),
    u("select_reject", "{{ [1, 2, 3, 4] | select('even') | list }} {{ [1, 2, 3, 4] | reject('odd') | list }} {{ [0, 1, '', 'a'] | select | list }} {{ [1, 5, 10] | select('gt', 4) | list }}"),
    u("selectattr_rejectattr", "{{ msgs | selectattr('role', 'equalto', 'user') | list | length }} {{ msgs | rejectattr('role', 'eq', 'user') | map(attribute='content') | list }} {{ msgs | selectattr('flag') | list | length }}", msgs=[{"role": "user", "content": "a", "flag": True}, {"role": "assistant", "content": "b"}]),
    u("sort_unique_reverse", "{{ [3, 1, 2] | sort }} {{ [3, 1, 2] | sort(reverse=true) }} {{ ['b', 'A', 'c'] | sort }} {{ users | sort(attribute='n') | map(attribute='n') | list }} {{ [1, 2, 1, 3] | unique | list }} {{ [1, 2] | reverse | list }} {{ 'abc' | reverse }}", users=[{"n": 2}, {"n": 1}]),
    u("min_max_sum", "{{ [3, 1, 2] | min }} {{ [3, 1, 2] | max }} {{ [1, 2, 3] | sum }} {{ [1.5, 2] | sum }} {{ users | sum(attribute='n') }}", users=[{"n": 2}, {"n": 5}]),
    u("dictsort_filter", "{{ d | dictsort }} {{ d | dictsort(by='value') }} {{ d | dictsort(reverse=true) }}", d={"b": 1, "a": 3, "C": 2}),
    u("abs_round", "{{ -3 | abs }} {{ -2.5 | abs }} {{ 2.5 | round }} {{ 3.5 | round }} {{ 2.675 | round(2) }} {{ 2.1 | round(method='ceil') }} {{ 2.9 | round(method='floor') }} {{ 5 | round }}"),
    u("indent_filter", "{{ 'a\nb\n\nc' | indent }}|{{ 'a\nb' | indent(2, true) }}|{{ 'a\n\nb' | indent(2, blank=true) }}|{{ 'x\ny' | indent('> ') }}"),
    u("escape_batch_center", "{{ '<a href=\"x\">&' | e }} {{ [1, 2, 3] | batch(2) | list }} [{{ 'ab' | center(7) }}] {{ 'one two, three' | wordcount }}"),
    u("filter_chain_on_expression", "{{ ('  A b  ' | trim | lower).split(' ') }}"),
    u("filter_binds_tighter_than_plus", "{{ 'x' + '  y  ' | trim + 'z' }}"),
]

TESTS = [
    u("defined_none", "{{ x is defined }} {{ y is defined }} {{ x is none }} {{ y is undefined }} {{ x is not none }}", x=None),
    u("type_tests", "{% for v in [1, 1.5, 'a', [1], {'a': 1}, none, true] %}{{ v is number }}/{{ v is integer }}/{{ v is float }}/{{ v is string }}/{{ v is mapping }}/{{ v is sequence }}/{{ v is iterable }}/{{ v is boolean }};{% endfor %}"),
    u("undefined_type_tests", "{{ x is iterable }} {{ x is sequence }} {{ x is mapping }} {{ x is string }}"),
    u("true_false_tests", "{{ true is true }} {{ 1 is true }} {{ false is false }} {{ 0 is false }} {{ none is false }}"),
    u("value_tests", "{{ 4 is even }} {{ 3 is odd }} {{ 9 is divisibleby 3 }} {{ 9 is divisibleby(2) }} {{ 'a' is eq 'a' }} {{ 1 is ne 2 }} {{ 2 is gt 1 }} {{ 2 is lt 1 }} {{ 2 is ge 2 }} {{ 1 is le 0 }} {{ 'b' is in 'abc' }} {{ 'abc' is lower }} {{ 'ABC' is upper }}"),
    u("callable_sameas", "{{ range is callable }} {{ 'x' is callable }} {{ none is sameas none }} {{ true is sameas true }}"),
    u("test_inside_condition", "{% if x is defined and x is string and not x is none %}yes{% endif %}", x="s"),
]

CONTROL = [
    u("if_elif_else", "{% for i in range(4) %}{% if i == 0 %}zero{% elif i == 1 %}one{% elif i == 2 %}two{% else %}many{% endif %} {% endfor %}"),
    u("for_loop_vars", "{% for x in ['a', 'b', 'c'] %}{{ loop.index }}{{ loop.index0 }}{{ loop.revindex }}{{ loop.revindex0 }}{{ loop.first }}{{ loop.last }}{{ loop.length }} {% endfor %}"),
    u("for_prev_next_cycle", "{% for x in [1, 2, 3] %}{{ loop.previtem is defined }}{{ loop.nextitem | default('-') }}{{ loop.cycle('a', 'b') }} {% endfor %}"),
    u("for_else", "{% for x in [] %}item{% else %}empty{% endfor %} {% for x in [1] %}item{% else %}empty{% endfor %} {% for x in missing %}i{% else %}none{% endfor %}"),
    u("for_unpack", "{% for a, b in [[1, 2], [3, 4]] %}{{ a }}{{ b }} {% endfor %}{% for (k, v) in d.items() %}{{ k }}{{ v }}{% endfor %}", d={"x": 1}),
    u("for_with_filter", "{% for x in range(10) if x is odd %}{{ x }}{{ '' if loop.last else ',' }}{% endfor %} {% for x in [1, 2] if x > 5 %}{% else %}none{% endfor %}"),
    u("nested_loops", "{% for i in range(2) %}{% for j in range(2) %}{{ i }}{{ j }}{{ loop.index }} {% endfor %}{{ loop.index }}|{% endfor %}"),
    u("break_continue", "{% for i in range(10) %}{% if i == 2 %}{% continue %}{% endif %}{% if i == 5 %}{% break %}{% endif %}{{ i }}{% endfor %}"),
    u("loop_scope_resets", "{% set x = 0 %}{% for i in range(3) %}[{{ x }}]{% set x = i + 10 %}({{ x }}){% endfor %}{{ x }}"),
    u("if_does_not_scope", "{% if true %}{% set y = 5 %}{% endif %}{{ y }}"),
    u("set_in_loop_invisible_after", "{% for i in range(2) %}{% set inner = i %}{% endfor %}{{ inner is defined }}"),
    u("namespace_carries_state", "{% set ns = namespace(count=0, found=false) %}{% for i in range(5) %}{% set ns.count = ns.count + i %}{% if i == 3 %}{% set ns.found = true %}{% endif %}{% endfor %}{{ ns.count }} {{ ns.found }} {{ ns.missing is defined }}"),
    u("set_tuple_and_block", "{% set a, b = 1, 2 %}{{ a }}{{ b }} {% set block %}  inner {{ a }}  {% endset %}[{{ block }}] {% set t | trim | upper %}  x  {% endset %}[{{ t }}]"),
    u("reassign_context_var", "{% set messages = messages[1:] %}{{ messages | length }}", messages=[1, 2, 3]),
    u("range_forms", "{{ range(3) | list }} {{ range(1, 4) | list }} {{ range(10, 0, -3) | list }} {{ range(0) | list }}"),
    u("macro_basic", "{% macro greet(name, punct='!') %}Hi {{ name }}{{ punct }}{% endmacro %}{{ greet('a') }} {{ greet('b', '?') }} {{ greet(name='c', punct='.') }} {{ greet() }}"),
    u("macro_recursion", "{% macro fact(n) %}{% if n <= 1 %}1{% else %}{{ n * fact(n - 1) | int }}{% endif %}{% endmacro %}{{ fact(5) }}"),
    u("macro_render_json_schema", "{% macro render(props) %}{% for k, v in props.items() %}{{ k }}: {{ v.type }}{% if v.description is defined %} ({{ v.description }}){% endif %}\n{% endfor %}{% endmacro %}{{ render(tool.parameters.properties) }}", tool={"parameters": {"properties": {"city": {"type": "string", "description": "City"}, "days": {"type": "integer"}}}}),
    u("macro_sees_globals", "{% set g = 'G' %}{% macro m() %}{{ g }}{{ top }}{% endmacro %}{{ m() }}", top="T"),
    u("call_block", "{% macro wrap(tag) %}<{{ tag }}>{{ caller() }}</{{ tag }}>{% endmacro %}{% call wrap('b') %}body {{ 1 + 1 }}{% endcall %}"),
    u("call_block_args", "{% macro each(items) %}{% for i in items %}{{ caller(i) }}{% endfor %}{% endmacro %}{% call(x) each([1, 2]) %}[{{ x }}]{% endcall %}"),
    u("filter_block", "{% filter upper %}hello {{ 'world' }}{% endfilter %}"),
    u("generation_block", "{% for m in messages %}{% if m.role == 'assistant' %}{% generation %}{{ m.content }}{% endgeneration %}{% else %}{{ m.content }}{% endif %}|{% endfor %}", messages=MSGS),
    u("dict_and_namespace_globals", "{{ dict(a=1, b=2) }} {% set ns = namespace({'x': 1}) %}{{ ns.x }}"),
    u("joiner_global", "{% set j = joiner(', ') %}{% for x in [1, 2, 3] %}{{ j() }}{{ x }}{% endfor %}"),
    u("strftime_now_global", "{{ strftime_now('%d %b %Y') }} {{ strftime_now('%Y-%m-%d') }}"),
    u("multiline_indented_template", """{%- for message in messages %}
    {%- if message.role == 'user' %}
        {{- 'U: ' + message.content }}
    {%- else %}
        {{- 'A: ' + message.content }}
    {%- endif %}
    {{- '\\n' }}
{%- endfor %}
""", messages=MSGS),
    u("mixed_whitespace_no_dashes", """{% for m in messages %}
  {% if m.role == 'user' %}
    [{{ m.content }}]
  {% endif %}
{% endfor %}
done
""", messages=MSGS),
]

ERRORS = [
    err("syntax_unclosed_if", "{% if true %}\nabc\n"),
    err("syntax_unclosed_for", "line1\n{% for x in y %}\n{{ x }}"),
    err("syntax_bad_expression", "ok\n{{ 1 + }}"),
    err("syntax_unclosed_print", "a\nb {{ x"),
    err("syntax_unknown_tag", "\n\n{% frobnicate %}"),
    err("syntax_stray_endif", "x\n{% endif %}"),
    err("syntax_unclosed_string", "{{ 'abc }}"),
    err("syntax_unclosed_comment", "a\n{# never closed"),
    err("syntax_bad_paren", "{{ (1, 2 }}"),
    err("syntax_elif_after_else", "{% if a %}{% else %}{% elif b %}{% endif %}"),
    err("render_raise_exception", "{{ raise_exception('Conversation roles must alternate') }}"),
    err("render_undefined_attribute", "{{ missing.attr }}"),
    err("render_undefined_call", "{{ nothing() }}"),
    err("render_add_str_int", "{{ 'a' + 1 }}"),
    err("render_list_append_unsafe", "{{ l.append(1) }}", l=[1]),
    err("render_division_by_zero", "{{ 1 / 0 }}"),
    err("render_unknown_method", "{{ 'x'.nosuchmethod() }}"),
    err("render_set_attr_non_namespace", "{% set d = {} %}{% set d.x = 1 %}"),
]

CHATML = ("{% for message in messages %}{{'<|im_start|>' + message['role'] + '\\n' + message['content'] + "
          "'<|im_end|>' + '\\n'}}{% endfor %}{% if add_generation_prompt %}{{ '<|im_start|>assistant\\n' }}{% endif %}")

LLAMA3 = ("{% set loop_messages = messages %}{% for message in loop_messages %}{% set content = "
          "'<|start_header_id|>' + message['role'] + '<|end_header_id|>\\n\\n'+ message['content'] | trim + "
          "'<|eot_id|>' %}{% if loop.index0 == 0 %}{% set content = bos_token + content %}{% endif %}{{ content }}"
          "{% endfor %}{% if add_generation_prompt %}{{ '<|start_header_id|>assistant<|end_header_id|>\\n\\n' }}{% endif %}")

MISTRAL = ("{{ bos_token }}{% for message in messages %}{% if (message['role'] == 'user') != (loop.index0 % 2 == 0) %}"
           "{{ raise_exception('Conversation roles must alternate user/assistant/user/assistant/...') }}{% endif %}"
           "{% if message['role'] == 'user' %}{{ '[INST] ' + message['content'] + ' [/INST]' }}"
           "{% elif message['role'] == 'assistant' %}{{ message['content'] + eos_token}}"
           "{% else %}{{ raise_exception('Only user and assistant roles are supported!') }}{% endif %}{% endfor %}")

PHI3 = ("{% for message in messages %}{% if message['role'] == 'system' %}{{'<|system|>\\n' + message['content'] + "
        "'<|end|>\\n'}}{% elif message['role'] == 'user' %}{{'<|user|>\\n' + message['content'] + '<|end|>\\n'}}"
        "{% elif message['role'] == 'assistant' %}{{'<|assistant|>\\n' + message['content'] + '<|end|>\\n'}}{% endif %}"
        "{% endfor %}{% if add_generation_prompt %}{{ '<|assistant|>\\n' }}{% else %}{{ eos_token }}{% endif %}")

LLAMA31_TOOLS = r"""{{- bos_token }}
{%- if custom_tools is defined %}
    {%- set tools = custom_tools %}
{%- endif %}
{%- if not tools_in_user_message is defined %}
    {%- set tools_in_user_message = true %}
{%- endif %}
{%- if not date_string is defined %}
    {%- set date_string = strftime_now("%d %b %Y") %}
{%- endif %}
{%- if not tools is defined %}
    {%- set tools = none %}
{%- endif %}

{#- Pull the system message out so it can go in the right place. #}
{%- if messages[0]['role'] == 'system' %}
    {%- set system_message = messages[0]['content']|trim %}
    {%- set messages = messages[1:] %}
{%- else %}
    {%- set system_message = "" %}
{%- endif %}

{{- "<|start_header_id|>system<|end_header_id|>\n\n" }}
{%- if builtin_tools is defined or tools is not none %}
    {{- "Environment: ipython\n" }}
{%- endif %}
{%- if builtin_tools is defined %}
    {{- "Tools: " + builtin_tools | reject('equalto', 'code_interpreter') | join(", ") + "\n\n"}}
{%- endif %}
{{- "Cutting Knowledge Date: December 2023\n" }}
{{- "Today Date: " + date_string + "\n\n" }}
{%- if tools is not none and not tools_in_user_message %}
    {{- "You have access to the following functions. To call a function, please respond with JSON for a function call." }}
    {{- 'Respond in the format {"name": function name, "parameters": dictionary of argument name and its value}.' }}
    {{- "Do not use variables.\n\n" }}
    {%- for t in tools %}
        {{- t | tojson(indent=4) }}
        {{- "\n\n" }}
    {%- endfor %}
{%- endif %}
{{- system_message }}
{{- "<|eot_id|>" }}

{%- if tools_in_user_message and not tools is none %}
    {%- if messages | length != 0 %}
        {%- set first_user_message = messages[0]['content']|trim %}
        {%- set messages = messages[1:] %}
    {%- else %}
        {{- raise_exception("Cannot put tools in the first user message when there's no first user message!") }}
{%- endif %}
    {{- '<|start_header_id|>user<|end_header_id|>\n\n' -}}
    {{- "Given the following functions, please respond with a JSON for a function call " }}
    {{- "with its proper arguments that best answers the given prompt.\n\n" }}
    {{- 'Respond in the format {"name": function name, "parameters": dictionary of argument name and its value}.' }}
    {{- "Do not use variables.\n\n" }}
    {%- for t in tools %}
        {{- t | tojson(indent=4) }}
        {{- "\n\n" }}
    {%- endfor %}
    {{- first_user_message + "<|eot_id|>"}}
{%- endif %}

{%- for message in messages %}
    {%- if not (message.role == 'ipython' or message.role == 'tool' or 'tool_calls' in message) %}
        {{- '<|start_header_id|>' + message['role'] + '<|end_header_id|>\n\n'+ message['content'] | trim + '<|eot_id|>' }}
    {%- elif 'tool_calls' in message %}
        {%- if not message.tool_calls|length == 1 %}
            {{- raise_exception("This model only supports single tool-calls at once!") }}
        {%- endif %}
        {%- set tool_call = message.tool_calls[0].function %}
        {%- if builtin_tools is defined and tool_call.name in builtin_tools %}
            {{- '<|start_header_id|>assistant<|end_header_id|>\n\n' -}}
            {{- "<|python_tag|>" + tool_call.name + ".call(" }}
            {%- for arg_name, arg_val in tool_call.arguments | items %}
                {{- arg_name + '="' + arg_val + '"' }}
                {%- if not loop.last %}
                    {{- ", " }}
                {%- endif %}
                {%- endfor %}
            {{- ")" }}
        {%- else  %}
            {{- '<|start_header_id|>assistant<|end_header_id|>\n\n' -}}
            {{- '{"name": "' + tool_call.name + '", ' }}
            {{- '"parameters": ' }}
            {{- tool_call.arguments | tojson }}
            {{- "}" }}
        {%- endif %}
        {%- if builtin_tools is defined %}
            {{- "<|eom_id|>" }}
        {%- else %}
            {{- "<|eot_id|>" }}
        {%- endif %}
    {%- elif message.role == "tool" or message.role == "ipython" %}
        {{- "<|start_header_id|>ipython<|end_header_id|>\n\n" }}
        {%- if message.content is mapping or message.content is iterable %}
            {{- message.content | tojson }}
        {%- else %}
            {{- message.content }}
        {%- endif %}
        {{- "<|eot_id|>" }}
    {%- endif %}
{%- endfor %}
{%- if add_generation_prompt %}
    {{- '<|start_header_id|>assistant<|end_header_id|>\n\n' }}
{%- endif %}
"""

MISTRAL_TOOLS = r"""{%- if messages[0]["role"] == "system" %}
    {%- set system_message = messages[0]["content"] %}
    {%- set loop_messages = messages[1:] %}
{%- else %}
    {%- set loop_messages = messages %}
{%- endif %}
{%- if not tools is defined %}
    {%- set tools = none %}
{%- endif %}
{%- set user_messages = loop_messages | selectattr("role", "equalto", "user") | list %}

{#- Check that user and assistant messages alternate, skipping tool messages. #}
{%- set ns = namespace() %}
{%- set ns.index = 0 %}
{%- for message in loop_messages %}
    {%- if not (message.role == "tool" or message.role == "tool_results" or (message.tool_calls is defined and message.tool_calls is not none)) %}
        {%- if (message["role"] == "user") != (ns.index % 2 == 0) %}
            {{- raise_exception("After the optional system message, conversation roles must alternate user/assistant/user/assistant/...") }}
        {%- endif %}
        {%- set ns.index = ns.index + 1 %}
    {%- endif %}
{%- endfor %}

{{- bos_token }}
{%- for message in loop_messages %}
    {%- if message["role"] == "user" %}
        {%- if tools is not none and (message == user_messages[-1]) %}
            {{- "[AVAILABLE_TOOLS] [" }}
            {%- for tool in tools %}
                {%- set tool = tool.function %}
                {{- '{"type": "function", "function": {' }}
                {%- for key, val in tool.items() if key != "return" %}
                    {%- if val is string %}
                        {{- '"' + key + '": "' + val + '"' }}
                    {%- else %}
                        {{- '"' + key + '": ' + val|tojson }}
                    {%- endif %}
                    {%- if not loop.last %}
                        {{- ", " }}
                    {%- endif %}
                {%- endfor %}
                {{- "}}" }}
                {%- if not loop.last %}
                    {{- ", " }}
                {%- else %}
                    {{- "]" }}
                {%- endif %}
            {%- endfor %}
            {{- "[/AVAILABLE_TOOLS]" }}
            {%- endif %}
        {%- if loop.last and system_message is defined %}
            {{- "[INST] " + system_message + "\n\n" + message["content"] + "[/INST]" }}
        {%- else %}
            {{- "[INST] " + message["content"] + "[/INST]" }}
        {%- endif %}
    {%- elif message.tool_calls is defined and message.tool_calls is not none %}
        {{- "[TOOL_CALLS] [" }}
        {%- for tool_call in message.tool_calls %}
            {%- set out = tool_call.function|tojson %}
            {{- out[:-1] }}
            {%- if not tool_call.id is defined or tool_call.id|length != 9 %}
                {{- raise_exception("Tool call IDs should be alphanumeric strings with length 9!") }}
            {%- endif %}
            {{- ', "id": "' + tool_call.id + '"}' }}
            {%- if not loop.last %}
                {{- ", " }}
            {%- else %}
                {{- "]" + eos_token }}
            {%- endif %}
        {%- endfor %}
    {%- elif message["role"] == "assistant" %}
        {{- " " + message["content"]|trim + eos_token}}
    {%- elif message["role"] == "tool_results" or message["role"] == "tool" %}
        {%- if message.content is defined and message.content.content is defined %}
            {%- set content = message.content.content %}
        {%- else %}
            {%- set content = message.content %}
        {%- endif %}
        {{- '[TOOL_RESULTS] {"content": ' + content|string + ", " }}
        {%- if not message.tool_call_id is defined or message.tool_call_id|length != 9 %}
            {{- raise_exception("Tool call IDs should be alphanumeric strings with length 9!") }}
        {%- endif %}
        {{- '"call_id": "' + message.tool_call_id + '"}[/TOOL_RESULTS]' }}
    {%- else %}
        {{- raise_exception("Only user and assistant roles are supported, with the exception of an initial optional system message!") }}
    {%- endif %}
{%- endfor %}
"""

WEATHER_TOOL = {
    "type": "function",
    "function": {
        "name": "get_weather",
        "description": "Get the current weather in a city.",
        "parameters": {
            "type": "object",
            "properties": {
                "city": {"type": "string", "description": "City name, e.g. Zürich"},
                "unit": {"type": "string", "enum": ["celsius", "fahrenheit"]},
                "days": {"type": "integer", "minimum": 1, "maximum": 7.5},
            },
            "required": ["city"],
        },
    },
}
TIME_TOOL = {"type": "function", "function": {"name": "get_time", "description": "Current time.",
                                              "parameters": {"type": "object", "properties": {}}}}


def chat(name, template, messages, **kw):
    c = {"name": name, "messages": messages}
    if isinstance(template, dict):
        c.update(template)
    else:
        c["template"] = template
    c.update(kw)
    return c


SYS = {"role": "system", "content": "You are a helpful assistant."}
USER = {"role": "user", "content": "What's the weather in Zürich?"}
ASSIST = {"role": "assistant", "content": "It is sunny."}
CALL_DICT = {"role": "assistant", "content": "",
             "tool_calls": [{"type": "function", "function": {"name": "get_weather",
                                                              "arguments": {"city": "Zürich", "days": 2, "unit": "celsius"}}}]}
CALL_STR = {"role": "assistant", "content": "Let me check.",
            "tool_calls": [{"type": "function", "function": {"name": "get_weather",
                                                             "arguments": "{\"city\": \"Zürich\"}"}},
                           {"name": "get_time", "arguments": {}}]}
TOOL_RESP = {"role": "tool", "content": "{\"temperature\": 21, \"sky\": \"clear\"}"}
TOOL_RESP2 = {"role": "tool", "content": "12:00"}

QWEN = [
    chat("qwen3_user_only", QWEN3, [USER], add_generation_prompt=True, eos_token="<|im_end|>"),
    chat("qwen3_system_user", QWEN3, [SYS, USER], add_generation_prompt=True),
    chat("qwen3_no_generation_prompt", QWEN3, [SYS, USER, ASSIST]),
    chat("qwen3_multi_turn", QWEN3, [SYS, USER, ASSIST, {"role": "user", "content": "And tomorrow?"},
                                     {"role": "assistant", "content": "Rain."}, {"role": "user", "content": "Thanks"}],
         add_generation_prompt=True),
    chat("qwen3_enable_thinking_false", QWEN3, [USER], add_generation_prompt=True, extra={"enable_thinking": False}),
    chat("qwen3_enable_thinking_true", QWEN3, [USER], add_generation_prompt=True, extra={"enable_thinking": True}),
    chat("qwen3_think_in_content_last", QWEN3,
         [USER, {"role": "assistant", "content": "<think>\nThe user asks about weather.\n</think>\n\nIt is sunny."}]),
    chat("qwen3_think_in_content_history", QWEN3,
         [USER, {"role": "assistant", "content": "<think>\nreasoning one\n</think>\n\nSunny."},
          {"role": "user", "content": "Sure?"}], add_generation_prompt=True),
    chat("qwen3_reasoning_content_field", QWEN3,
         [USER, {"role": "assistant", "content": "Sunny.", "reasoning_content": "\nLook outside.\n"}]),
    chat("qwen3_reasoning_content_none", QWEN3,
         [USER, {"role": "assistant", "content": "Sunny.", "reasoning_content": None}]),
    chat("qwen3_tools_system", QWEN3, [SYS, USER], tools=[WEATHER_TOOL, TIME_TOOL], add_generation_prompt=True),
    chat("qwen3_tools_no_system", QWEN3, [USER], tools=[WEATHER_TOOL], add_generation_prompt=True),
    chat("qwen3_tool_call_dict_args", QWEN3, [SYS, USER, CALL_DICT, TOOL_RESP], tools=[WEATHER_TOOL],
         add_generation_prompt=True),
    chat("qwen3_tool_call_string_args_and_bare", QWEN3, [USER, CALL_STR, TOOL_RESP, TOOL_RESP2,
                                                         {"role": "assistant", "content": "It is 21°C and 12:00."}],
         tools=[WEATHER_TOOL, TIME_TOOL]),
    chat("qwen3_multi_step_tools", QWEN3,
         [USER, CALL_DICT, TOOL_RESP, {"role": "assistant", "content": "<think>\nnow time\n</think>\n\n",
                                      "tool_calls": [{"function": {"name": "get_time", "arguments": {}}}]},
          TOOL_RESP2], tools=[WEATHER_TOOL, TIME_TOOL], add_generation_prompt=True),
    chat("qwen3_user_tool_response_text", QWEN3,
         [{"role": "user", "content": "<tool_response>\nx\n</tool_response>"}, {"role": "assistant", "content": "ok"}]),
    chat("qwen3_system_later", QWEN3, [USER, {"role": "system", "content": "Late system."}, ASSIST]),
    chat("qwen3_unicode_and_newlines", QWEN3,
         [{"role": "user", "content": "多语言 テスト 😀\n\n  indented\ttab"}], add_generation_prompt=True),
]

MODELS = [
    chat("chatml_basic", CHATML, [SYS, USER, ASSIST], add_generation_prompt=False),
    chat("chatml_generation_prompt", CHATML, [USER], add_generation_prompt=True),
    chat("llama3_basic", LLAMA3, [SYS, USER, ASSIST, {"role": "user", "content": "  padded  "}],
         add_generation_prompt=True, bos_token="<|begin_of_text|>", eos_token="<|eot_id|>"),
    chat("llama31_tools_in_user_message", LLAMA31_TOOLS, [SYS, USER, CALL_DICT,
                                                        {"role": "tool", "content": {"temperature": 21}},
                                                        {"role": "tool", "content": "plain"}],
         tools=[WEATHER_TOOL], add_generation_prompt=True, bos_token="<|begin_of_text|>"),
    chat("llama31_tools_in_system", LLAMA31_TOOLS, [USER], tools=[WEATHER_TOOL], add_generation_prompt=True,
         bos_token="<|begin_of_text|>", extra={"tools_in_user_message": False, "date_string": "01 Jan 2025"}),
    chat("llama31_builtin_tools", LLAMA31_TOOLS, [USER, {"role": "assistant", "tool_calls": [
        {"function": {"name": "brave_search", "arguments": {"query": "weather"}}}]}],
         bos_token="<|begin_of_text|>", extra={"builtin_tools": ["brave_search", "code_interpreter"]}),
    chat("llama31_no_tools", LLAMA31_TOOLS, [USER, ASSIST], bos_token="<|begin_of_text|>"),
    chat("mistral_basic", MISTRAL, [USER, ASSIST, {"role": "user", "content": "More?"}], bos_token="<s>", eos_token="</s>"),
    chat("mistral_alternation_error", MISTRAL, [USER, USER], bos_token="<s>", eos_token="</s>", expect_error=True),
    chat("mistral_tools", MISTRAL_TOOLS, [SYS, USER, {"role": "assistant", "tool_calls": [
        {"id": "abc123def", "function": {"name": "get_weather", "arguments": {"city": "Zürich"}}}]},
        {"role": "tool", "tool_call_id": "abc123def", "content": "21 C"}, ASSIST, {"role": "user", "content": "Thanks"}],
         tools=[WEATHER_TOOL], bos_token="<s>", eos_token="</s>"),
    chat("mistral_tools_bad_id", MISTRAL_TOOLS, [USER, {"role": "assistant", "tool_calls": [
        {"id": "short", "function": {"name": "f", "arguments": {}}}]}], bos_token="<s>", eos_token="</s>",
         expect_error=True),
    chat("phi3_generation_prompt", PHI3, [SYS, USER, ASSIST, {"role": "user", "content": "Again"}],
         add_generation_prompt=True, eos_token="<|endoftext|>"),
    chat("phi3_eos_when_no_prompt", PHI3, [USER, ASSIST], eos_token="<|endoftext|>"),
]

def random_conversations(n, seed=20240726):
    """Deterministic random Qwen3 conversations: roles, tool calls, think blocks and odd text mixed."""
    import random
    rng = random.Random(seed)
    texts = ["Hi", "", "  spaced  ", "line1\nline2", "<think>\nr\n</think>\n\nans", "</think>only",
             "多语言 😀", "<tool_response>\nx\n</tool_response>", "quote \" and \\ backslash", "\n\nlead"]
    out = []
    for i in range(n):
        msgs = []
        if rng.random() < 0.5:
            msgs.append({"role": "system", "content": rng.choice(texts)})
        for _ in range(rng.randint(1, 6)):
            r = rng.random()
            if r < 0.35:
                msgs.append({"role": "user", "content": rng.choice(texts)})
            elif r < 0.6:
                m = {"role": "assistant", "content": rng.choice(texts)}
                if rng.random() < 0.3:
                    m["reasoning_content"] = rng.choice(texts + [None])
                msgs.append(m)
            elif r < 0.8:
                args = rng.choice([{"city": rng.choice(texts)}, "{\"raw\": 1}", {}, {"n": rng.randint(-5, 5), "f": 0.25}])
                call = {"name": rng.choice(["get_weather", "get_time"]), "arguments": args}
                msgs.append({"role": "assistant", "content": rng.choice(["", "Calling."]),
                             "tool_calls": [rng.choice([{"type": "function", "function": call}, call])
                                            for _ in range(rng.randint(1, 2))]})
            else:
                msgs.append({"role": "tool", "content": rng.choice(texts)})
        if msgs[-1]["role"] == "system" or msgs[0]["role"] != "user" and msgs[0]["role"] != "system":
            msgs.insert(0, {"role": "user", "content": "start"})
        case = chat(f"qwen3_random_{i:02d}", QWEN3, msgs, add_generation_prompt=rng.random() < 0.5)
        if rng.random() < 0.4:
            case["tools"] = [WEATHER_TOOL, TIME_TOOL][: rng.randint(1, 2)]
        if rng.random() < 0.3:
            case["extra"] = {"enable_thinking": rng.random() < 0.5}
        out.append(case)
    return out


GROUPS = {
    "syntax": SYNTAX,
    "operators": OPERATORS,
    "access": ACCESS,
    "string_methods": STRING_METHODS,
    "filters": FILTERS,
    "tests": TESTS,
    "control": CONTROL,
    "errors": ERRORS,
    "qwen3": QWEN,
    "models": MODELS,
    "qwen3_random": random_conversations(40),
}
