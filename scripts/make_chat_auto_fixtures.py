#!/usr/bin/env python3
"""make_chat_auto_fixtures.py -- expected renderings, ids and masks of real
chat templates for `--template auto` (io/jinja/, tests/test_chat_auto).

For each template in tests/data/sft/templates (verbatim copies of the
models' chat templates; sources in its README.md) and 30 generated
conversations -- plus N_TOOL_CHATS function-calling ones, with `tools`,
assistant `tool_calls` and `tool` results, for each template of
TOOL_TEMPLATES (issue 44) -- records:
  - the text transformers' apply_chat_template renders (tokenize=False,
    add_generation_prompt=False), or the error it raises;
  - the bytes each assistant message trains on, by ztrain's rule
    (docs/sft.md): from the first to the last rendered character that came
    from the message's content / reasoning / tool calls, plus the added
    token right after it (a message with tool calls: through the first
    eos_token after it; with no content, from the end of transformers'
    rendering of the messages before it with add_generation_prompt=True
    when that is a prefix ending at or before the first traced character).  The characters are traced here by rendering the same
    compiled template with str subclasses that carry per-character marks
    (an independent implementation of the rule), checked to render exactly
    transformers' text;
  - the token ids (tokenizer(text, add_special_tokens=False)) and the mask
    derived from the spans as transformers' return_assistant_tokens_mask
    does (char_to_token of each span's first and last character), on the
    tokenizer fixture tests/data/sft/auto (GPT-2-style byte-level BPE with
    every template's special tokens added; written by this script).
Templates that call strftime_now render at SOURCE_DATE_EPOCH (below; transformers' datetime patched),
as ztrain renders them with that environment variable set (tests/test_chat_auto sets it from auto.json).
Run once from the source tree; the output (OUT/auto.json, OUT/auto/tokenizer.json)
is committed so that `make check` needs no Python (tests/chat_auto_hf.sh re-runs
it into a temporary directory and compares, when transformers is installed):

    /opt/hfref/bin/python scripts/make_chat_auto_fixtures.py tests/data/sft
"""
import json
import os
import random
import sys

from datetime import datetime, timezone

from transformers import PreTrainedTokenizerFast
from transformers.utils import chat_template_utils as ctu

# name -> (file, bos, eos, extra template variables)
TEMPLATES = {
    "llama3.1": ("llama3.1.jinja", "<|begin_of_text|>", "<|eot_id|>", {}),
    "llama3.2": ("llama3.2.jinja", "<|begin_of_text|>", "<|eot_id|>", {"date_string": "26 Nov 2026"}),
    "qwen2.5": ("qwen2.5.jinja", None, "<|im_end|>", {}),
    "qwen3": ("qwen3.jinja", None, "<|im_end|>", {}),
    "mistral-nemo": ("mistral-nemo.jinja", "<s>", "</s>", {}),
    "deepseek-v3.1": ("deepseek-v3.1.jinja", "<｜begin▁of▁sentence｜>", "<｜end▁of▁sentence｜>", {}),
    "deepseek-r1-distill-qwen": ("deepseek-r1-distill-qwen.jinja", "<｜begin▁of▁sentence｜>",
                                 "<｜end▁of▁sentence｜>", {}),
    "gemma2": ("gemma2.jinja", "<bos>", "<eos>", {}),
    "gemma3": ("gemma3.jinja", "<bos>", "<eos>", {}),
    "deepseek-v3": ("deepseek-v3.jinja", "<｜begin▁of▁sentence｜>", "<｜end▁of▁sentence｜>", {}),
    "mistral-v0.3": ("mistral-v0.3.jinja", "<s>", "</s>", {}),
    "glm-4.6": ("glm-4.6.jinja", None, "<|endoftext|>", {}),
    "hermes": ("hermes.jinja", "<|begin_of_text|>", "<|im_end|>", {}),
    # strftime_now (gpt-oss, Mistral Small 3.2) at SOURCE_DATE_EPOCH; models/templates of llama.cpp
    "gpt-oss": ("gpt-oss.jinja", "<|startoftext|>", "<|return|>", {}),
    "smollm3": ("smollm3.jinja", None, "<|im_end|>", {}),
    "mistral-small-3.2": ("mistral-small-3.2.jinja", "<s>", "</s>", {}),
    "qwen3.5": ("qwen3.5.jinja", None, "<|im_end|>", {}),
    "minimax-m2": ("minimax-m2.jinja", "]~!b[", "[e~[", {}),
    "llama4": ("llama4.jinja", "<|begin_of_text|>", "<|eot|>", {}),   # transformers' Llama 4 processor's
}
# strftime_now formats this time (UTC) in the references, as ztrain with SOURCE_DATE_EPOCH set to it
SOURCE_DATE_EPOCH = 1764288000   # 2025-11-28 00:00:00 UTC
# templates with a tools branch: N_TOOL_CHATS more conversations each, with tools, tool calls and results
TOOL_TEMPLATES = ["llama3.1", "llama3.2", "qwen2.5", "qwen3", "mistral-nemo", "mistral-v0.3", "glm-4.6", "hermes",
                  "gpt-oss", "mistral-small-3.2", "qwen3.5", "minimax-m2", "llama4"]
N_TOOL_CHATS = 12
SPECIAL = ["<|begin_of_text|>", "<|eot_id|>", "<|start_header_id|>", "<|end_header_id|>", "<|im_start|>",
           "<|im_end|>", "<s>", "</s>", "[INST]", "[/INST]", "<｜begin▁of▁sentence｜>", "<｜end▁of▁sentence｜>",
           "<｜User｜>", "<｜Assistant｜>", "<bos>", "<eos>", "<start_of_turn>", "<end_of_turn>"]
ADDED = ["<think>", "</think>"]   # added, not special (as in Qwen3 / DeepSeek)
# issue 44: GLM's and the tool-calling tokens, after the others (the ids above stay)
EXTRA_SPECIAL = ["[gMASK]", "<sop>", "<|system|>", "<|user|>", "<|assistant|>", "<|observation|>", "<|endoftext|>",
                 "<|eom_id|>", "<|python_tag|>", "[TOOL_CALLS]", "[AVAILABLE_TOOLS]", "[/AVAILABLE_TOOLS]",
                 "[TOOL_RESULTS]", "[/TOOL_RESULTS]"]
EXTRA_ADDED = ["<tool_call>", "</tool_call>", "<tool_response>", "</tool_response>", "<arg_key>", "</arg_key>",
               "<arg_value>", "</arg_value>"]
# gpt-oss's, Mistral Small 3.2's, MiniMax-M2's, Llama 4's tokens (after the others: the ids above stay)
MORE_SPECIAL = ["<|startoftext|>", "<|start|>", "<|message|>", "<|end|>", "<|channel|>", "<|call|>", "<|return|>",
                "<|constrain|>", "[SYSTEM_PROMPT]", "[/SYSTEM_PROMPT]", "[CALL_ID]", "[ARGS]", "[TOOL_CONTENT]",
                "]~!b[", "]~b]", "[e~[", "<|header_start|>", "<|header_end|>", "<|eot|>", "<|python_start|>",
                "<|python_end|>"]
MORE_ADDED = ["<minimax:tool_call>", "</minimax:tool_call>"]

N_CHATS = 30


# ---------------------------------------------------------------- marked strings

class M(str):
    """a str whose characters carry marks: mk[i] = assistant message + 1 (0: none),
    an[i] = a message whose empty text sat right before character i, tail: at the end"""

    def __new__(cls, s, mk=None, an=None, tail=0):
        o = str.__new__(cls, s)
        o.mk = list(mk) if mk is not None else [0] * len(s)
        o.an = list(an) if an is not None else [0] * len(s)
        o.tail = tail
        return o

    def __str__(self):
        return self

    @staticmethod
    def of(x):
        return x if isinstance(x, M) else M(str.__str__(x) if isinstance(x, str) else str(x))

    def _cat(a, b):
        a, b = M.of(a), M.of(b)
        mk, an = a.mk + b.mk, a.an + b.an
        tail = a.tail
        if len(b):
            if tail and not an[len(a)]:
                an[len(a)] = tail
            tail = b.tail
        elif b.tail:
            tail = b.tail
        return M(str.__add__(str.__str__(a), str.__str__(b)), mk, an, tail)

    def __add__(self, o):
        if not isinstance(o, str):
            return NotImplemented
        return M._cat(self, o)

    def __radd__(self, o):
        if not isinstance(o, str):
            return NotImplemented
        return M._cat(o, self)

    def _sub(self, b, e):
        s = str.__str__(self)
        if e > b:
            return M(s[b:e], self.mk[b:e], self.an[b:e], self.tail if e == len(s) else 0)
        if b < len(s):
            m = self.mk[b] or self.an[b]
        elif b > 0:
            m = self.mk[b - 1] or self.an[b - 1]
        else:
            m = self.tail
        if not m and b == len(s):
            m = self.tail
        return M("", tail=m)

    def __getitem__(self, k):
        if isinstance(k, slice):
            idx = range(*k.indices(len(self)))
            if k.step in (None, 1):
                return self._sub(idx.start, max(idx.stop, idx.start))
            out = M("")
            for i in idx:
                out = out + self._sub(i, i + 1)
            return out
        n = len(self)
        if k < 0:
            k += n
        if not 0 <= k < n:
            raise IndexError(k)
        return self._sub(k, k + 1)

    def _strip(self, chars, left, right):
        s = str.__str__(self)
        b, e = 0, len(s)
        isw = (lambda c: c in chars) if chars is not None else (lambda c: c.isspace())
        if left:
            while b < e and isw(s[b]):
                b += 1
        if right:
            while e > b and isw(s[e - 1]):
                e -= 1
        return self._sub(b, e)

    def strip(self, chars=None):
        return self._strip(chars, True, True)

    def lstrip(self, chars=None):
        return self._strip(chars, True, False)

    def rstrip(self, chars=None):
        return self._strip(chars, False, True)

    def split(self, sep=None, maxsplit=-1):
        assert sep is not None, "split() without a separator is not traced"
        s, out, b, i = str.__str__(self), [], 0, 0
        while i + len(sep) <= len(s):
            if (maxsplit < 0 or len(out) < maxsplit) and s.startswith(sep, i):
                out.append(self._sub(b, i))
                i += len(sep)
                b = i
            else:
                i += 1
        out.append(self._sub(b, len(s)))
        return out

    def upper(self):
        return M(str.upper(self), self.mk, self.an, self.tail)

    def lower(self):
        return M(str.lower(self), self.mk, self.an, self.tail)


def mconcat(pieces):
    out = M("")
    for p in pieces:
        out = out + p
    return out


def has_marks(x):
    if isinstance(x, M):
        return any(x.mk) or any(x.an) or bool(x.tail)
    if isinstance(x, dict):
        return any(has_marks(k) or has_marks(v) for k, v in x.items())
    if isinstance(x, (list, tuple)):
        return any(has_marks(v) for v in x)
    return False


def mdumps(x, ensure_ascii=False, indent=None, separators=None, sort_keys=False):
    """transformers' tojson (json.dumps) whose output keeps the marks of the traced strings in x: each
    escape carries the mark of the character it stands for"""
    if not has_marks(x):
        return json.dumps(x, ensure_ascii=ensure_ascii, indent=indent, separators=separators, sort_keys=sort_keys)
    if isinstance(indent, int):
        indent = " " * indent
    isep, ksep = separators if separators is not None else ((", ", ": ") if indent is None else (",", ": "))

    def s(v):
        if not isinstance(v, M):
            return json.dumps(v, ensure_ascii=ensure_ascii)
        out = M('"')
        if not len(v) and v.tail:
            out = out + M("", tail=v.tail)
        for i, ch in enumerate(str.__str__(v)):
            e = json.dumps(ch, ensure_ascii=ensure_ascii)[1:-1]
            out = out + M(e, [v.mk[i]] * len(e), [v.an[i]] + [0] * (len(e) - 1))
        return out + '"'

    def enc(v, level):
        if isinstance(v, str):
            return s(v)
        if isinstance(v, dict) or isinstance(v, (list, tuple)):
            isd = isinstance(v, dict)
            items = list(v.items()) if isd else list(v)
            if isd and sort_keys:
                items.sort(key=lambda kv: str.__str__(kv[0]))
            if not items:
                return "{}" if isd else "[]"
            parts = [(s(k) + ksep + enc(w, level + 1)) if isd else enc(it, level + 1)
                     for it in items for (k, w) in ([it] if isd else [(None, None)])]
            o, c = ("{", "}") if isd else ("[", "]")
            if indent is None:
                return mconcat([o] + [p if j == 0 else isep + p for j, p in enumerate(parts)] + [c])
            nl = "\n" + indent * (level + 1)
            return mconcat([o] + [nl + p if j == 0 else isep + nl + p for j, p in enumerate(parts)]
                           + ["\n" + indent * level, c])
        return json.dumps(v, ensure_ascii=ensure_ascii)

    return enc(x, 0)


def mark_deep(x, i):
    """every string of x (keys too) traced to message i"""
    if isinstance(x, str):
        return M(x, [i] * len(x), None, 0 if x else i)
    if isinstance(x, dict):
        return {mark_deep(k, i): mark_deep(v, i) for k, v in x.items()}
    if isinstance(x, list):
        return [mark_deep(v, i) for v in x]
    return x


def compile_marked(template):
    env_t = ctu._cached_compile_jinja_template(template)
    env_t.environment.concat = mconcat
    env_t.environment.filters["tojson"] = mdumps
    return env_t


def no_text(content):
    """a content that renders no text: absent, None, "", or a list of text parts all empty"""
    if content is None or content == "":
        return True
    return isinstance(content, list) and all(isinstance(p, dict) and p.get("text") == "" for p in content)


def traced_spans(template, chat, bos, eos, extra, added, tools=None, prefix=None):
    """(text, [[begin_char, end_char, message], ...]) by the marking rule; prefix(i): transformers'
    rendering of chat[:i] with add_generation_prompt=True (None: it fails)"""
    orig = chat
    chat = [{k: v for k, v in m.items() if v is not None} for m in chat]
    chat = ctu._alias_reasoning_fields(chat)
    marked = []
    for i, m in enumerate(chat):
        m = dict(m)
        if m.get("role") == "assistant":
            for k in ("content", "reasoning_content", "thinking", "reasoning"):
                if isinstance(m.get(k), str):
                    v = m[k]
                    m[k] = M(v, [i + 1] * len(v), None, 0 if v else i + 1)
            if isinstance(m.get("content"), list):   # typed parts: their texts
                m["content"] = [dict(p, text=mark_deep(p["text"], i + 1)) for p in m["content"]]
            if "tool_calls" in m:
                m["tool_calls"] = mark_deep(m["tool_calls"], i + 1)
        marked.append(m)
    t = compile_marked(template)
    kw = dict(extra)
    if bos is not None:
        kw["bos_token"] = bos
    if eos is not None:
        kw["eos_token"] = eos
    out = t.render(messages=marked, tools=tools, documents=None, add_generation_prompt=False, **kw)
    text = str.__str__(out)
    lo, hi = {}, {}
    for i in range(len(text)):
        for m in (out.mk[i], out.an[i]):
            if m:
                lo.setdefault(m, i)
                lo[m] = min(lo[m], i)
                hi[m] = max(hi.get(m, 0), i + 1 if m == out.mk[i] else i)
    if out.tail:
        lo.setdefault(out.tail, len(text))
        hi[out.tail] = len(text)
    spans = []
    for m in sorted(lo):
        e = hi[m]
        b = lo[m]
        # a message with tool calls and no content: from the end of the generation prompt that
        # precedes it (the rendering of the messages before it with add_generation_prompt), when that
        # rendering is a prefix of this one ending at or before the first traced character
        if orig[m - 1].get("tool_calls") and no_text(orig[m - 1].get("content")) and prefix is not None:
            p = prefix(m - 1)
            if p is not None and text.startswith(p) and len(p) <= b:
                b = len(p)
        # a message with tool calls: up to the end of the first eos_token before the next traced message
        stop = min([lo[k] for k in lo if k > m and lo[k] >= e] + [len(text)])
        at = text.find(eos, e, stop) if eos and chat[m - 1].get("tool_calls") else -1
        if at >= 0 and at + len(eos) <= stop:
            spans.append([b, at + len(eos), m - 1])
            continue
        best = 0
        for a in added:
            if text.startswith(a, e) and len(a) > best:
                best = len(a)
        spans.append([b, e + best, m - 1])
    return text, spans


# ---------------------------------------------------------------- conversations

TEXTS = ["What is 2 + 2?", "4", "", "  padded both sides  ", "\n\nleading newlines", "trailing newlines\n\n",
         "multi\nline\n\nanswer", "Übersetze: naïve café — 東京\n\tok?", "\u00a0naïve café, Tōkyō 🙂\u3000",
         "tabs\tand  spaces", "quotes ' \" and \\ backslash", "{{ not a template }} {% neither %}",
         "emoji 👩‍💻 and math ∑ x²", "Русский текст.", "العربية", "mixed <b>html</b> &amp; text",
         "a very long answer " * 5, "   ", "Done.", "日本語の文章です。"]
THINK = ["<think>\nreasoning step one\n</think>\n\nThe answer is 7.", "<think></think>Short.",
         "<think>\n\nonly thinking\n\n</think>", "pre <think>inner</think>\n\nafter", "no think at all"]


def gen_chats(name, rng):
    strict = name in ("gemma2", "mistral-nemo")
    chats = []
    for k in range(N_CHATS):
        msgs = []
        if name != "gemma2" and rng.random() < 0.4:
            msgs.append({"role": "system", "content": rng.choice(TEXTS[:12])})
        turns = 1 + rng.randrange(4)
        for t in range(turns):
            msgs.append({"role": "user", "content": rng.choice(TEXTS)})
            if t < turns - 1 or rng.random() < 0.9:
                if name in ("qwen3", "deepseek-v3.1", "deepseek-r1-distill-qwen") and rng.random() < 0.5:
                    c = rng.choice(THINK)
                else:
                    c = rng.choice(TEXTS)
                m = {"role": "assistant", "content": c}
                if name == "qwen3" and rng.random() < 0.2:
                    m["reasoning_content"] = rng.choice(["explicit reasoning", "", "\nwith newlines\n"])
                msgs.append(m)
        if not strict and rng.random() < 0.1:
            # a system message in the middle, or two user messages in a row
            msgs.insert(1 + rng.randrange(len(msgs)), {"role": rng.choice(["system", "user"]),
                                                        "content": rng.choice(TEXTS)})
        if k == N_CHATS - 1:   # a conversation the template refuses (or accepts) without alternation
            msgs = [{"role": "system", "content": "sys"}, {"role": "assistant", "content": "first"},
                    {"role": "user", "content": "u"}]
        chats.append(msgs)
    return chats


TOOLS = [{"type": "function", "function": {
              "name": "get_weather", "description": "Current weather of a city.",
              "parameters": {"type": "object", "properties": {
                  "city": {"type": "string", "description": "City name, e.g. Paris"},
                  "unit": {"type": "string", "enum": ["celsius", "fahrenheit"]}}, "required": ["city"]}}},
         {"type": "function", "function": {
             "name": "add", "description": "Add two integers.",
             "parameters": {"type": "object", "properties": {"a": {"type": "integer"}, "b": {"type": "integer"}},
                            "required": ["a", "b"]}}}]
CALLS = [("get_weather", {"city": "Paris"}), ("get_weather", {"city": "São Paulo", "unit": "celsius"}),
         ("add", {"a": 2, "b": 40}), ("get_weather", {"city": "Zürich \"old town\"\n", "unit": "fahrenheit"})]
RESULTS = ['{"temp": 21}', "42", "sunny, 25 °C", "error: unknown city"]


def gen_tool_chats(name, rng):
    """conversations with tools: a user question, an assistant message with tool calls (content empty,
    absent or text), the tool results, the answer; sometimes a second round"""
    single = name.startswith("llama") or name == "gpt-oss"     # Llama 3.x, gpt-oss: one call per message
    out = []
    for k in range(N_TOOL_CHATS):
        tools = TOOLS if k % 3 else TOOLS[:1]
        msgs = []
        if rng.random() < 0.3:
            msgs.append({"role": "system", "content": rng.choice(TEXTS[:12])})
        for r in range(1 + (rng.random() < 0.3)):
            msgs.append({"role": "user", "content": rng.choice(TEXTS[:8] + ["Weather in Paris?", "2 + 40?"])})
            ncalls = 1 if single else 1 + rng.randrange(2)
            calls = []
            for c in range(ncalls):
                fn, args = rng.choice(CALLS if tools is TOOLS else CALLS[:2] + CALLS[3:])
                calls.append({"id": "call%05d" % (100 * k + 10 * r + c), "type": "function",
                              "function": {"name": fn, "arguments": dict(args)}})
            a = {"role": "assistant", "tool_calls": calls}
            pick = rng.random()
            if pick < 0.4:
                a["content"] = ""
            elif pick < 0.7:
                a["content"] = rng.choice(["Let me check.", "I'll call a tool.\n"])
            msgs.append(a)
            for c in calls:
                msgs.append({"role": "tool", "tool_call_id": c["id"], "name": c["function"]["name"],
                             "content": rng.choice(RESULTS)})
            msgs.append({"role": "assistant", "content": rng.choice(TEXTS[:8] + ["It is 21 degrees."])})
        out.append((msgs, tools))
    return out


# Small templates covering the subset's semantics (whitespace control, scoping,
# filters, tests, methods, slicing, loop variables, errors), rendered by
# transformers' own environment with messages MSGS.
MSGS = [{"role": "system", "content": "  Sys\n"}, {"role": "user", "content": "Héllo, wörld 🙂"},
        {"role": "assistant", "content": "<think>t</think>\n\nans", "extra": None}]
SNIPPETS = [
    "a\n  {% if true %}\n    b\n  {% endif %}\nc\n",
    "a  {%- if true -%}  b  {%- endif -%}  c",
    "u\u3000\u00a0{%- if true -%}\u2003\n v {{- ' w ' -}}\u3000x\n\u00a0 {% if true %}y{% endif %}\u00a0{%- endif %}",
    "{# comment #}\n  {#- c2 -#}  x {{- ' y ' -}} z",
    "{%+ if true %}k{% endif %}\n{{ 'v' }}\n",
    "{% for m in messages %}{{ loop.index0 }}{{ loop.index }}{{ loop.first }}{{ loop.last }}{{ loop.length }}"
    "{{ loop.revindex }}{% endfor %}",
    "{% set x = 1 %}{% for m in messages %}{% set x = x + 1 %}{{ x }}{% endfor %}{{ x }}",
    "{% set ns = namespace(n=0, s='') %}{% for m in messages %}{% set ns.n = ns.n + 1 %}"
    "{% set ns.s = ns.s ~ m.role[0] %}{% endfor %}{{ ns.n }}{{ ns.s }}",
    "{{ messages[::-1] | map(attribute='role') | join(',') }}|{{ messages[1:] | length }}|{{ messages[-1].role }}",
    "{{ messages[1].content[::-1] }}|{{ messages[1].content[2:5] }}|{{ messages[1].content | length }}",
    "{{ messages[0].content | trim }}|{{ messages[0].content.strip() }}|{{ messages[0].content.lstrip() }}|"
    "{{ messages[0].content.rstrip() }}|{{ 'xxaxx'.strip('x') }}",
    "{{ 'a,b,,c'.split(',') }}|{{ ' a  b '.split() }}|{{ 'a-b-c'.split('-', 1) }}|{{ 'abcabc'.replace('b', 'X') }}",
    "{{ 'Abc'.upper() }}{{ 'Abc'.lower() }}{{ 'hello world'.title() }}{{ 'hello'.capitalize() }}"
    "{{ 'ab'.startswith('a') }}{{ 'ab'.endswith(('x', 'b')) }}",
    "{{ messages[2] | tojson }}|{{ {'b': [1, 2.5, none, true], 'a': 'é\"\\n'} | tojson }}|"
    "{{ {'k': [1, {'x': 2}]} | tojson(indent=2) }}|{{ {'b': 1, 'a': 2} | tojson(sort_keys=true) }}",
    "{{ x is defined }}{{ none is none }}{{ 'a' is string }}{{ 1 is number }}{{ {} is mapping }}{{ [] is iterable }}"
    "{{ 3 is odd }}{{ 4 is even }}{{ 1 is integer }}{{ 1.5 is float }}{{ false is false }}{{ x is not defined }}",
    "{{ 7 // 2 }} {{ -7 // 2 }} {{ 7 % 3 }} {{ -7 % 3 }} {{ 7 / 2 }} {{ 2 ** 10 }} {{ 1.5 + 1 }} {{ 0.1 + 0.2 }}"
    " {{ 'ab' * 3 }} {{ [1] + [2] }} {{ 10.0 if false else 10 }}",
    "{{ 'a' ~ 1 ~ none ~ true }}|{{ undefined_var }}|{{ none }}|{{ [1, 'a', none] }}|{{ {'a': 1} }}",
    "{{ 'x' if messages | length > 2 else 'y' }}{{ 'z' if false }}|{{ 1 and 2 }}{{ 0 or 'd' }}{{ not 0 }}",
    "{{ 'ell' in 'hello' }}{{ 'role' in messages[0] }}{{ 2 in [1, 2] }}{{ 'q' not in 'abc' }}",
    "{% for k, v in {'a': 1, 'b': 2}.items() %}{{ k }}={{ v }};{% endfor %}{% for k, v in {'c': 3} | items %}"
    "{{ k }}{{ v }}{% endfor %}",
    "{% for m in messages if m.role != 'system' %}{{ m.role }}{{ loop.index }}{% else %}none{% endfor %}"
    "{% for x in [] %}x{% else %}empty{% endfor %}",
    "{% for i in range(5) %}{% if i == 1 %}{% continue %}{% endif %}{% if i == 3 %}{% break %}{% endif %}"
    "{{ i }}{% endfor %}",
    "{{ messages | selectattr('role', 'equalto', 'user') | list | length }}"
    "{{ messages | rejectattr('role', 'equalto', 'user') | map(attribute='role') | join }}"
    "{{ [1, 2, 3] | select('odd') | list }}{{ [1, 2, 3] | reject('equalto', 2) | list }}",
    "{{ x | default('dflt') }}{{ '' | default('e', true) }}{{ [3, 4] | first }}{{ [3, 4] | last }}"
    "{{ 'abc' | reverse }}{{ [1, 2] | reverse | list }}{{ ' 42 ' | int + 1 }}{{ '3.7' | int }}{{ 'x' | int }}{{ [1 / 100000, 10.0 ** 16, 100.0, 0.5, 2 / 3] | tojson }}{{ 3 | string + 'x' }}",
    "{{ messages[2].extra is defined }}{{ messages[2].get('role') }}{{ messages[2].get('nope', 'dflt') }}"
    "{{ messages[0]['role'] }}{{ messages[0].keys() | list }}",
    "{{ dict(a=1, b='x') | tojson }}{{ messages[1]['content'].split('ö')[0] }}{{ '%' }}",
    "{% if messages[0]['role'] == 'system' %}{% set sys = messages[0]['content'] %}{% set rest = messages[1:] %}"
    "{% else %}{% set rest = messages %}{% endif %}{{ sys | trim }}/{{ rest | length }}",
    "{% generation %}gen{{ 1 }}{% endgeneration %}",
    "{{ raise_exception('custom failure ' ~ messages | length) }}",
    "{{ undefined_var.attr }}",
    "{{ 1 + 'a' }}",
    "{{ 'x' | wordcount }}",
    "{% filter upper %}m{% endfilter %}",
    "{% for x in [1] recursive %}{{ x }}{% endfor %}",
    "{{ 'É'.upper() }}",
]


# Snippets outside the subset: ztrain must refuse them, naming the construct.
UNSUPPORTED = {"{{ 'x' | wordcount }}": "wordcount", "{% filter upper %}m{% endfilter %}": "filter",
               "{% for x in [1] recursive %}{{ x }}{% endfor %}": "recursive", "{{ 'É'.upper() }}": "non-ASCII"}


def snippet_cases():
    out = []
    for src in SNIPPETS:
        case = {"template": src}
        if src in UNSUPPORTED:
            case["unsupported"] = UNSUPPORTED[src]
        try:
            t = ctu._cached_compile_jinja_template(src)
            case["text"] = t.render(messages=ctu._alias_reasoning_fields(
                [{k: v for k, v in m.items() if v is not None} for m in MSGS]), tools=None, documents=None,
                add_generation_prompt=False)
        except Exception as e:
            case["error"] = "%s: %s" % (type(e).__name__, e)
        # only the three snippets written to fail may fail (a typo must not turn a check into "both fail")
        assert ("error" in case) == any(k in src for k in ("raise_exception", "undefined_var.attr", "1 + 'a'")), case
        out.append(case)
    return out


def byte_off(text):
    out, b = [], 0
    for ch in text:
        out.append(b)
        b += len(ch.encode("utf-8"))
    out.append(b)
    return out


def make_tokenizer(out):
    tj = json.load(open("tests/fixtures/tok/gpt2/tokenizer.json", encoding="utf-8"))
    n = 1 + max(max(tj["model"]["vocab"].values()), max(a["id"] for a in tj["added_tokens"]))
    for k, name in enumerate(SPECIAL + ADDED + EXTRA_SPECIAL + EXTRA_ADDED + MORE_SPECIAL + MORE_ADDED):
        tj["added_tokens"].append({"id": n + k, "content": name, "single_word": False, "lstrip": False,
                                   "rstrip": False, "normalized": False,
                                   "special": name in SPECIAL or name in EXTRA_SPECIAL or name in MORE_SPECIAL})
    d = os.path.join(out, "auto")
    os.makedirs(d, exist_ok=True)
    with open(os.path.join(d, "tokenizer.json"), "w", encoding="utf-8") as f:
        json.dump(tj, f, ensure_ascii=False)
    return d


class FixedDatetime(datetime):
    """datetime whose now() is SOURCE_DATE_EPOCH in UTC (naive, as datetime.now() is)"""

    @classmethod
    def now(cls, tz=None):
        t = datetime.fromtimestamp(SOURCE_DATE_EPOCH, timezone.utc)
        return t if tz is not None else t.replace(tzinfo=None)


def main():
    out = sys.argv[1] if len(sys.argv) > 1 else "tests/data/sft"
    ctu.datetime = FixedDatetime   # transformers' strftime_now is datetime.now().strftime(format)
    tdir = "tests/data/sft/templates"
    d = make_tokenizer(out)
    tok = PreTrainedTokenizerFast(tokenizer_file=os.path.join(d, "tokenizer.json"))
    added = SPECIAL + ADDED + EXTRA_SPECIAL + EXTRA_ADDED + MORE_SPECIAL + MORE_ADDED
    rng = random.Random(30)
    cases = []
    for name, (fn, bos, eos, extra) in TEMPLATES.items():
        template = open(os.path.join(tdir, fn), encoding="utf-8").read()
        tok.bos_token, tok.eos_token = bos, eos
        chats = [(c, None) for c in gen_chats(name, rng)]
        if name in TOOL_TEMPLATES:
            chats += gen_tool_chats(name, random.Random("tools-" + name))
        for chat, tools in chats:
            case = {"template": name, "messages": chat}
            if tools is not None:
                case["tools"] = tools
            try:
                text = tok.apply_chat_template(chat, chat_template=template, tokenize=False, tools=tools,
                                               add_generation_prompt=False, **extra)
            except Exception as e:   # the template's raise_exception
                case["error"] = str(e)
                cases.append(case)
                continue
            def prefix(i, chat=chat, tools=tools, template=template, extra=extra):
                try:
                    return tok.apply_chat_template(chat[:i], chat_template=template, tokenize=False, tools=tools,
                                                   add_generation_prompt=True, **extra)
                except Exception:
                    return None
            ttext, spans = traced_spans(template, chat, bos, eos, extra, added, tools, prefix)
            assert ttext == text, (name, chat, ttext, text)
            enc = tok(text, add_special_tokens=False)
            ids = enc["input_ids"]
            mask = [0] * len(ids)
            for a, b, _ in spans:
                if b <= a:
                    continue
                s, e = enc.char_to_token(a), enc.char_to_token(b - 1)
                # a last character split over several tokens (an emoji at the end of a GLM turn): all of
                # them (transformers' char_to_token names the first one only)
                while e + 1 < len(ids) and enc.token_to_chars(e + 1) is not None and enc.token_to_chars(e + 1).start < b:
                    e += 1
                for i in range(s, e + 1):
                    mask[i] = 1
            off = byte_off(text)
            case.update({"text": text, "spans": [[off[a], off[b], m] for a, b, m in spans], "ids": ids,
                         "mask": mask})
            cases.append(case)
    templates = {n: {"file": v[0], "bos": v[1], "eos": v[2], "vars": v[3],
                     "conversations": N_CHATS + (N_TOOL_CHATS if n in TOOL_TEMPLATES else 0),
                     "with_tools": N_TOOL_CHATS if n in TOOL_TEMPLATES else 0} for n, v in TEMPLATES.items()}
    body = ('{"generator": %s,\n "source_date_epoch": %d,\n "templates": %s,\n "snippet_messages": %s,\n'
            ' "snippets": [\n%s\n],\n "cases": [\n%s\n]}\n') % (
        json.dumps("scripts/make_chat_auto_fixtures.py"), SOURCE_DATE_EPOCH, json.dumps(templates, ensure_ascii=False),
        json.dumps(MSGS, ensure_ascii=False),
        ",\n".join(json.dumps(c, ensure_ascii=False) for c in snippet_cases()),
        ",\n".join(json.dumps(c, ensure_ascii=False) for c in cases))
    path = os.path.join(out, "auto.json")
    with open(path, "w", encoding="utf-8") as f:
        f.write(body)
    nerr = sum("error" in c for c in cases)
    print("wrote %d cases (%d template errors) and %d snippets to %s" % (len(cases), nerr, len(SNIPPETS), path))


if __name__ == "__main__":
    main()
