#!/usr/bin/env python3
"""make_jinja_cases.py -- small templates for io/jinja/ (tests/test_jinja) with
what transformers' chat-template environment does with them.

transformers renders chat templates with jinja2's ImmutableSandboxedEnvironment
(trim_blocks, lstrip_blocks, loop controls, its own tojson, raise_exception,
strftime_now, dict, namespace); the environment is rebuilt here as
transformers.utils.chat_template_utils builds it, so that only jinja2 is needed.
Each case is rendered with messages=[{"role": "user", "content": "hi"}]:
  "same":   jinja2 renders it; the expected text is jinja2's;
  "error":  jinja2 raises; ztrain must fail with ZT_EDATA and the given words;
  "refuse": ztrain refuses it (code and words given) by design: a 64-bit
            integer result out of range, a budget, a construct outside the
            subset (jinja2 renders it, or runs out of time or memory).
Written once into tests/data/sft/jinja_cases.json (committed, so that
`make check` needs no Python); tests/jinja_cases_hf.sh re-runs it when jinja2
is installed and checks that the committed file is current:

    python3 scripts/make_jinja_cases.py tests/data/sft/jinja_cases.json
"""
import json
import sys
from datetime import datetime

import jinja2
import jinja2.ext
from jinja2.sandbox import ImmutableSandboxedEnvironment

EDATA, EUNSUPPORTED = 3, 6
INT64 = "(the template engine's integers are 64-bit)"


def make_env():
    """transformers' _cached_compile_jinja_template, its environment part"""

    class AssistantTracker(jinja2.ext.Extension):
        tags = {"generation"}

        def parse(self, parser):
            lineno = next(parser.stream).lineno
            body = parser.parse_statements(["name:endgeneration"], drop_needle=True)
            return jinja2.nodes.CallBlock(self.call_method("_generation_support"), [], [], body).set_lineno(lineno)

        @jinja2.pass_eval_context
        def _generation_support(self, context, caller):
            return caller()

    def raise_exception(message):
        raise jinja2.exceptions.TemplateError(message)

    def tojson(x, ensure_ascii=False, indent=None, separators=None, sort_keys=False):
        return json.dumps(x, ensure_ascii=ensure_ascii, indent=indent, separators=separators, sort_keys=sort_keys)

    def strftime_now(format):
        return datetime.now().strftime(format)

    class TemplateDict:
        def __call__(self, *args, **kwargs):
            return dict(*args, **kwargs)

        def fromkeys(self, *args, **kwargs):
            return dict.fromkeys(*args, **kwargs)

    class TemplateNamespace(jinja2.utils.Namespace):
        def __init__(*args, **kwargs):
            self, args = args[0], args[1:]
            attrs = dict(*args, **kwargs)
            for name in attrs:
                TemplateNamespace._check_name(name)
            jinja2.utils.Namespace.__init__(self, attrs)

        def __setitem__(self, name, value):
            TemplateNamespace._check_name(name)
            jinja2.utils.Namespace.__setitem__(self, name, value)

        @staticmethod
        def _check_name(name):
            if isinstance(name, str) and name.startswith("_"):
                raise jinja2.exceptions.SecurityError("underscore-prefixed attribute %r" % name)

    env = ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True,
                                        extensions=[AssistantTracker, jinja2.ext.loopcontrols])
    env.filters["tojson"] = tojson
    env.globals["raise_exception"] = raise_exception
    env.globals["strftime_now"] = strftime_now
    env.globals["dict"] = TemplateDict()
    env.globals["namespace"] = TemplateNamespace
    return env


# (template, "same") | (template, "error", words) | (template, "refuse", code, words)
CASES = [
    # indices and slices: Python's semantics for any 64-bit start / stop / step
    ("{{ [1,2,3][1::9223372036854775807] }}", "same"),
    ("{{ [1,2,3][::-9223372036854775807] }}", "same"),
    ("{{ [1,2,3][9223372036854775807::-2] }}", "same"),
    ("{{ [1,2,3][-9223372036854775807 - 1:] }}", "same"),
    ("{{ [1,2,3][:-9223372036854775807 - 1:-1] }}", "same"),
    ("{{ [1,2,3][::-9223372036854775807 - 1] }}", "same"),
    ("{{ 'abcdef'[1::9223372036854775807] }}", "same"),
    ("{{ 'h\u00e9llo w\u00f6rld'[::-3] }}", "same"),
    ("{{ 'h\u00e9llo'[-9223372036854775807:2] }}", "same"),
    ("{{ 'h\u00e9llo'[True:] }}{{ [1,2,3][False] }}", "same"),
    ("{{ [1,2,3][-4] is defined }}{{ 'abc'[-9223372036854775807] is defined }}", "same"),
    ("{{ [1,2,3][::0] }}", "error", "slice step cannot be zero"),
    ("{% set l = [1,2,3] %}{{ l[1.5:] }}", "error", "slice indices must be integers"),
    ("{% set n = none %}{{ n[1:] }}", "error", "not subscriptable"),
    ("{{ [1,2,3][1.5:] }}", "refuse", EUNSUPPORTED, "a slice of literals that fails"),
    # integers: 64-bit, a result outside is refused, never wrapped
    ("{{ 2 ** 62 }} {{ (-2) ** 63 }} {{ 3 ** 39 }} {{ -9223372036854775807 - 1 }}", "same"),
    ("{{ 2 ** 64 }}", "refuse", EUNSUPPORTED, "integer result of 2 ** 64 out of range " + INT64),
    ("{{ 9223372036854775807 + 1 }}", "refuse", EUNSUPPORTED, "integer result of 9223372036854775807 + 1 out of range"),
    ("{{ -9223372036854775807 - 2 }}", "refuse", EUNSUPPORTED, "out of range " + INT64),
    ("{{ 3037000500 * 3037000500 }}", "refuse", EUNSUPPORTED, "out of range " + INT64),
    ("{{ -(-9223372036854775807 - 1) }}", "refuse", EUNSUPPORTED, "out of range " + INT64),
    ("{{ (-9223372036854775807 - 1)|abs }}", "refuse", EUNSUPPORTED, "out of range " + INT64),
    ("{{ 2 ** 9223372036854775807 }}", "refuse", EUNSUPPORTED, "out of range " + INT64),
    ("{{ 1 ** 9223372036854775807 }} {{ (-1) ** 9223372036854775807 }} {{ 0 ** 9223372036854775807 }}", "same"),
    ("{{ 9223372036854775808 }}", "refuse", EUNSUPPORTED, "integer literal 9223372036854775808 out of range"),
    # division: no signal from a template, Python's floor semantics and errors
    ("{{ (-9223372036854775807 - 1) // -1 }}", "refuse", EUNSUPPORTED, "out of range " + INT64),
    ("{{ (-9223372036854775807 - 1) % -1 }}", "same"),
    ("{{ -7 // 2 }} {{ 7 // -2 }} {{ -7 % 2 }} {{ 7 % -2 }} {{ -7.5 // 2 }} {{ -7.5 % 2 }} {{ -0.0 % 5 }} {{ 0.0 // -5 }}", "same"),
    ("{{ 1 // 0 }}", "error", "integer division or modulo by zero"),
    ("{{ 1 % 0 }}", "error", "integer modulo by zero"),
    ("{{ 1.5 // 0 }}", "error", "float floor division by zero"),
    ("{{ 1 / 0 }}", "error", "division by zero"),
    ("{{ 0 ** -1 }}", "error", "cannot be raised to a negative power"),
    ("{{ 10.0 ** 400 }}", "error", "out of range"),
    ("{{ 2 ** -2 }} {{ 7 / 2 }} {{ 5258986265376043509 / 888601 }} {{ 9223372036854775807 / 3 }}", "same"),
    ("{{ 9007199254740993 == 9007199254740992.0 }} {{ 9007199254740993 > 9007199254740992.0 }}"
     " {{ 9223372036854775807 < 9223372036854775808.0 }} {{ 1 == 1.0 }} {{ true == 1 }}", "same"),
    ("{{ 3 > 2 > 1 }} {{ 1 < 3 > 2 }} {{ 1 == 1 != 2 }} {{ 'a' in 'abc' in 'xabcx' }}", "same"),
    # range: jinja2's sandbox MAX_RANGE, Python's printing
    ("{{ range(3) }} {{ range(1, 10, 2) }} {{ range(10, 1, -3) }} {{ range(0) }} {{ range(3)|list }}", "same"),
    ("{{ range(3)[1:] }} {{ range(0, 10, 3)[::-1] }} {{ range(3) == [0, 1, 2] }} {{ range(3) ~ '!' }}", "same"),
    ("{{ range(3)|length }} {{ range(3)|join(',') }} {{ range(3)|last }} {{ 2 in range(3) }} {{ range(5).stop }}", "same"),
    ("{{ range(3)|tojson }}", "error", "Object of type range is not JSON serializable"),
    ("{{ range(100000)|length }} {{ range(0, 200000, 2)|length }}", "same"),
    ("{{ range(100001) }}", "error", "MAX_RANGE (100000)"),
    ("{{ range(0, 200001, 2) }}", "error", "MAX_RANGE (100000)"),
    ("{{ range(0, 9223372036854775807, 4611686018427387904)|list }}", "same"),
    ("{{ range(-9223372036854775807, 9223372036854775807, 9223372036854775807)|list }}", "same"),
    ("{{ range(True)|list }} {{ range(10)[::-9223372036854775807 - 1] }} {{ range(3)[::-1][1] }}", "same"),
    ("{{ range(0, 5, 0) }}", "error", "must not be zero"),
    ("{{ range() }}", "error", "range expected at least 1 argument"),
    # tuples, dict views, iterators
    ("{{ (1, 2) }} {{ (1,) }} {{ () }} {{ (1, 2) == [1, 2] }} {{ (1, 2) + (3,) }} {{ 1, 2 }}", "same"),
    ("{{ {'a': 1}.items() }} {{ {'a': 1}.keys() }} {{ {'a': 1}.values() }} {{ {'a': 1}.items()|list }}", "same"),
    ("{% set a, b = 1, 2 %}{{ a }}{{ b }}{% for x in 1, 2 %}{{ x }}{% endfor %}", "same"),
    ("{% if []|select %}T{% else %}F{% endif %}{% if []|reverse %}T{% endif %}", "same"),
    ("{{ [1, 2]|select|length }}", "error", "has no len()"),
    ("{{ [1, 2]|map('string') }}", "refuse", EUNSUPPORTED, "printing a generator"),
    ("{% set g = [1, 2, 3]|select %}{{ g|first }}{{ g|list }}", "refuse", EUNSUPPORTED, "a generator used a second time"),
    ("{{ [1, 2]|select|tojson }}", "error", "not JSON serializable"),
    ("{{ [1, 2]|reverse|list }} {{ (1, 2)|reverse|join }} {{ 'ab'|reverse }} {{ [1, 2]|select|first }}", "same"),
    ("{{ 0|select|list }} {{ none|map('nosuch')|list }} {{ x|selectattr(1)|list }}", "same"),
    ("{{ 5|select('odd')|list }}", "error", "'int' object is not iterable"),
    ("{{ [1] + (2,) }}", "error", "unsupported operand"),
    ("{{ 'ab' * True }} {{ [1] * 3 }} {{ (1, 2) * 2 }} {{ 'ab' * -1 }}", "same"),
    ("{{ 'a' * 10**10 }}", "refuse", EDATA, "a string passed the limit of"),
    # break / continue only in a loop
    ("{% break %}after", "error", "'break' outside a for loop"),
    ("{% if true %}{% continue %}{% endif %}after", "error", "'continue' outside a for loop"),
    ("{% for x in [1] %}{% else %}{% break %}{% endfor %}", "error", "'break' outside a for loop"),
    ("{% for x in [1] %}{% generation %}{% break %}{% endgeneration %}{% endfor %}", "error", "'break' outside"),
    ("{% for x in [1, 2, 3] %}{% if x == 2 %}{% break %}{% endif %}{{ x }}{% endfor %}.", "same"),
    # for ... else: jinja2 runs the else block unless an iteration reached the end of the body
    ("{% for i in [1] %}{% break %}{% else %}E{% endfor %}|{% for i in [1, 2] %}{% continue %}{% else %}E{% endfor %}"
     "|{% for i in [1, 2] %}{% if i == 2 %}{% break %}{% endif %}{% else %}E{% endfor %}|{% for i in [] %}{% else %}E"
     "{% endfor %}|{% for i in [1, 2] if i > 5 %}{% else %}E{% endfor %}", "same"),
    # filters and methods
    ("{{ \"foo's bar\"|title }} {{ \"foo's bar\".title() }} {{ 'a1b c-d(e[f{g<h\\ti'|title }}", "same"),
    ("{{ 'hello world'|capitalize }} {{ 'HeLLo'|lower }} {{ 'HeLLo'.upper() }}", "same"),
    ("{{ x|int }}", "error", "'x' is undefined"),
    ("{{ 'a'|trim(x) }}", "error", "'x' is undefined"),
    ("{{ 'aXb'|replace('X', '-', x) }}", "error", "'x' is undefined"),
    ("{{ 'a b'.split(x) }}", "error", "'x' is undefined"),
    ("{{ 'abc'.strip(x) }}", "error", "'x' is undefined"),
    ("{{ '12'|int }} {{ ' 12 '|int }} {{ '1_000'|int }} {{ '1e3'|int }} {{ '-1.9'|int }} {{ 'inf'|int }}"
     " {{ 'abc'|int }} {{ 'abc'|int(7) }} {{ 'a'|int(x) }} {{ '1A'|int(base=16) }} {{ '0b101'|int(base=0) }}"
     " {{ none|int }} {{ 2.7|int }} {{ true|int }}", "same"),
    ("{{ '99999999999999999999'|int }}", "refuse", EUNSUPPORTED, "out of range " + INT64),
    ("{{ 'xax'|trim('x') }} {{ 'xax'|trim(none) }} {{ ' a '|trim }} {{ 'aXbX'|replace('X', '-', 1) }}"
     " {{ 'ab'|replace(x, '-') }} {{ 'abc'.replace('', '-', 2) }}", "same"),
    ("{{ ' a b '.split(None, 0) }} {{ 'a b '.split(none, 1) }} {{ 'a,b,,c'.split(',', 1) }}"
     " {{ 'aaa'.count('aa') }} {{ 'h\u00e9llo'.find('l') }} {{ 'abc'.startswith(('x', 'a')) }}", "same"),
    ("{{ 'abc'.startswith(['a']) }}", "error", "must be str or a tuple of str"),
    ("{{ {'a': 1}|tojson(indent=-1) }} {{ {'a': 1, 'b': [1, 2]}|tojson(separators=(',', ':')) }}"
     " {{ {'\u00e9': '\U0001f600'}|tojson(ensure_ascii=true) }} {{ [1, [2, {}]]|tojson(indent='\\t') }}", "same"),
    ("{{ [1]|tojson(indent=x) }}", "error", "'x' is undefined"),
    ("{{ ('<'|safe) + '<' }} {{ '<' + ('<'|safe) }} {{ ('a'|safe) ~ '<' }} {{ ('a'|safe) is escaped }}", "same"),
    ("{{ [x] }} {{ [none, true, 1.5, 'it\\'s'] }} {{ x is sameas x }} {{ none is sameas none }}", "same"),
    # attributes and methods as jinja2's sandbox resolves them
    ("{{ {}.cycle() }}", "error", "'dict object' has no attribute 'cycle'"),
    ("{{ 'a'.foo() }}", "error", "'str object' has no attribute 'foo'"),
    ("{{ 'a'.zfill(3) }}", "refuse", EUNSUPPORTED, "method str.zfill()"),
    ("{{ [1].append(2) }}", "error", "access to attribute 'append' of 'list' object is unsafe"),
    ("{% set d = {'items': 5} %}{{ d.items()|list }} {{ d['items'] }} {{ d.get('items') }}", "same"),
    ("{{ none.x }}|{{ none['x'] }}|{{ (1).real }}|{{ messages[0].nosuch is defined }}", "same"),
    ("{% for i in [1, 2, 3] %}{{ loop.cycle('a', 'b') }}{{ loop.changed(i % 2) }}{% endfor %}", "same"),
    ("{% for i in [1, 2] %}{{ loop }}{% endfor %} {% set ns = namespace(a=1) %}{{ ns }}", "same"),
    ("{% set ns = namespace(l=none) %}{% for i in [1, 2] %}{% set ns.l = loop %}{% endfor %}{{ ns.l.index }}", "same"),
    ("{% set ns = namespace() %}{% set ns._a = 1 %}", "error", "underscore-prefixed"),
    ("{% generation %}{% set x = 1 %}{% endgeneration %}[{{ x }}]", "same"),
    ("{% set true = 1 %}", "error", "can't assign"),
    # the lexer reads numbers as jinja2's does
    ("{{ 0x1F }} {{ 0o17 }} {{ 0b1_01 }} {{ 1_000 }} {{ 00 }} {{ 1e3 }} {{ 1.5E-1 }} {{ 1_0.5_0 }}", "same"),
    ("{{ 012 }}", "error", "expected '}}'"),
    ("{{ 1__0 }}", "error", "expected '}}'"),
    # names jinja2 does not know fail when the template is read, but in an if
    ("{% for x in [] %}{{ x|nosuch }}{% endfor %}", "error", "no filter named 'nosuch'"),
    ("{{ x is nosuch }}", "error", "no test named 'nosuch'"),
    ("{% if false %}{{ x|nosuch }}{% endif %}ok", "same"),
    ("{{ x|nosuch if false }}{{ (x is nosuch) if false else 1 }}{% set a = [x|nosuch] if false %}ok", "same"),
    ("{{ x|nosuch or 1 }}", "error", "no filter named 'nosuch'"),
    ("{% for i in [1] if i|nosuch %}{% endfor %}", "error", "no filter named 'nosuch'"),
    ("{% if true %}{{ x|nosuch }}{% endif %}", "error", "no filter named 'nosuch'"),
    ("{% if false %}{{ x|wordcount }}{% endif %}ok", "same"),
    ("{{ x|wordcount }}", "refuse", EUNSUPPORTED, "filter 'wordcount'"),
    # macros, call blocks, block set (issue 44: Qwen 3.5, GLM-4.5V, GLM-4.7, MiniMax, gpt-oss use them)
    ("{% macro f(a, b=2, c='x' ~ a) %}[{{ a }}|{{ b }}|{{ c }}]{% endmacro %}{{ f(1) }}{{ f(1, 3) }}{{ f(c=5, a=0) }}",
     "same"),
    ("{%- macro f(x) -%}\n  <{{ x }}>\n{%- endmacro -%}\n{{ f('a') ~ f('b') }}{{ f('c')|length }}{{ f is callable }}",
     "same"),
    ("{% macro f(a) %}{{ a }}{{ b }}{% endmacro %}{% set b = 'B' %}{{ f() }}|{{ f(a=none) }}", "same"),
    ("{% macro f(a) %}{{ a + 1 }}{% endmacro %}{{ f() }}", "error", "parameter 'a' was not provided"),
    ("{% macro f(a) %}{{ a }}{% endmacro %}{{ f(1, 2) }}", "error", "takes not more than 1 argument"),
    ("{% macro f(a) %}{{ a }}{% endmacro %}{{ f(b=1) }}", "error", "takes no keyword argument 'b'"),
    ("{% macro f(a) %}{{ a }}{% endmacro %}{{ f(1, a=2) }}", "error", "multiple values for argument 'a'"),
    ("{% macro f() %}{{ varargs }}{{ kwargs }}{% endmacro %}{{ f(1, 2, k=3) }}{{ f() }}", "same"),
    ("{% macro f(n) %}{% if n > 0 %}{{ n }}{{ f(n - 1) }}{% endif %}{% endmacro %}{{ f(5) }}", "same"),
    ("{% macro f(n) %}{{ f(n + 1) }}{% endmacro %}{{ f(0) }}", "refuse", EDATA,
     "macro calls nested deeper than 16 levels (ztrain's template budget)"),
    ("{% macro w(t) %}<{{ t }}>{{ caller() }}</{{ t }}>{% endmacro %}{% call w('b') %}in{{ 1 + 1 }}{% endcall %}", "same"),
    ("{% macro l(xs) %}{% for x in xs %}{{ caller(x, loop.index) }}{% endfor %}{% endmacro %}"
     "{% call(x, i) l(['a', 'b']) %}{{ i }}={{ x }};{% endcall %}", "same"),
    ("{% macro w() %}{{ caller() }}{% endmacro %}{{ w() }}", "error", "No caller defined"),
    ("{% set ns = namespace(n=0) %}{% macro inc() %}{% set ns.n = ns.n + 1 %}{% endmacro %}{{ inc() }}{{ inc() }}{{ ns.n }}"
     "{% macro s() %}{% set q = 1 %}{% endmacro %}{{ s() }}{{ q is defined }}", "same"),
    ("{% for m in messages %}{% macro r(x) %}{{ m.role }}:{{ x }}{% endmacro %}{{ r(m.content) }}{% endfor %}", "same"),
    ("{% macro t(v) %}{% if v is mapping %}{% for k, x in v|items %}{{ k }}({{ t(x) }}){% endfor %}{% else %}{{ v }}"
     "{% endif %}{% endmacro %}{{ t({'a': {'b': 1, 'c': {'d': [1, 2]}}}) }}", "same"),
    ("{% set x %}a{{ 1 + 1 }}\n{% if true %}b{% endif %}{% endset %}[{{ x }}]{{ x|length }}", "same"),
    ("{% macro f() %}{% break %}{% endmacro %}", "error", "'break' outside a for loop"),
    ("{% for i in [1] %}{% macro f() %}{% continue %}{% endmacro %}{% endfor %}", "error", "'continue' outside a for loop"),
    ("{% filter upper %}a{% endfilter %}", "refuse", EUNSUPPORTED, "statement '{% filter %}'"),
    ("{% set x | upper %}a{% endset %}", "refuse", EUNSUPPORTED, "block set with a filter"),
    ("{% call range(3) %}x{% endcall %}", "refuse", EUNSUPPORTED, "{% call %} of a function"),
]


def render(env, template):
    try:
        return "ok", env.from_string(template).render(messages=[{"role": "user", "content": "hi"}],
                                                      add_generation_prompt=False, tools=None, documents=None)
    except Exception as e:  # noqa: BLE001 -- any error of the reference is an error
        return "err", "%s: %s" % (type(e).__name__, e)


def main():
    out = sys.argv[1]
    env = make_env()
    cases = []
    for c in CASES:
        t, kind = c[0], c[1]
        if kind == "refuse":
            cases.append({"template": t, "code": c[2], "error": c[3]})
            continue
        k, v = render(env, t)
        if kind == "same":
            if k != "ok":
                sys.exit("jinja2 fails on %r: %s" % (t, v))
            cases.append({"template": t, "text": v})
        else:
            if k != "err":
                sys.exit("jinja2 renders %r: %r" % (t, v))
            cases.append({"template": t, "code": EDATA, "error": c[2]})
    with open(out, "w", encoding="utf-8") as f:
        f.write('{"generator": "scripts/make_jinja_cases.py",\n "cases": [\n')
        f.write(",\n".join("  " + json.dumps(c, ensure_ascii=False) for c in cases))
        f.write("\n]}\n")
    print("wrote %d cases to %s" % (len(cases), out))


if __name__ == "__main__":
    main()
