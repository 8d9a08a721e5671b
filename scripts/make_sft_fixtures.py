#!/usr/bin/env python3
"""make_sft_fixtures.py -- expected chat renderings for tests/test_sft.

Renders a set of conversations with the Jinja chat templates of the model
families ztrain prep --sft implements (io/chat.c), through transformers'
apply_chat_template (tokenize=False, add_generation_prompt=False), and the
bytes each assistant turn trains on from a copy of the template with
{% generation %} markers (transformers' assistant-mask mechanism).  With a
tokenizer fixture it also records the token ids of the rendering
(tokenizer(text, add_special_tokens=False)) and transformers' assistant
token mask (return_assistant_tokens_mask).  Run once; the output is
committed so that `make check` needs no Python:

    /opt/hfref/bin/python scripts/make_sft_fixtures.py tests/data/sft
"""
import json
import os
import sys

from transformers import PreTrainedTokenizerFast
from transformers.utils.chat_template_utils import render_jinja_template

# The templates, verbatim from the models' tokenizer_config.json.
TEMPLATES = {
    # meta-llama/Meta-Llama-3-8B-Instruct
    "llama3": (
        "{% set loop_messages = messages %}{% for message in loop_messages %}"
        "{% set content = '<|start_header_id|>' + message['role'] + '<|end_header_id|>\n\n'+ "
        "message['content'] | trim + '<|eot_id|>' %}{% if loop.index0 == 0 %}"
        "{% set content = bos_token + content %}{% endif %}{{ content }}{% endfor %}"
        "{% if add_generation_prompt %}{{ '<|start_header_id|>assistant<|end_header_id|>\n\n' }}{% endif %}"
    ),
    # the generic ChatML template
    "chatml": (
        "{% for message in messages %}{{'<|im_start|>' + message['role'] + '\n' + message['content'] + "
        "'<|im_end|>' + '\n'}}{% endfor %}{% if add_generation_prompt %}{{ '<|im_start|>assistant\n' }}{% endif %}"
    ),
    # Qwen/Qwen2-7B-Instruct
    "qwen2": (
        "{% for message in messages %}{% if loop.first and messages[0]['role'] != 'system' %}"
        "{{ '<|im_start|>system\nYou are a helpful assistant.<|im_end|>\n' }}{% endif %}"
        "{{'<|im_start|>' + message['role'] + '\n' + message['content'] + '<|im_end|>' + '\n'}}"
        "{% endfor %}{% if add_generation_prompt %}{{ '<|im_start|>assistant\n' }}{% endif %}"
    ),
    # mistralai/Mistral-7B-Instruct-v0.2 (and v0.1 after its system-message update)
    "mistral": """{%- if messages[0]['role'] == 'system' %}
    {%- set system_message = messages[0]['content'] %}
    {%- set loop_messages = messages[1:] %}
{%- else %}
    {%- set loop_messages = messages %}
{%- endif %}

{{- bos_token }}
{%- for message in loop_messages %}
    {%- if (message['role'] == 'user') != (loop.index0 % 2 == 0) %}
        {{- raise_exception('After the optional system message, conversation roles must alternate user/assistant/user/assistant/...') }}
    {%- endif %}
    {%- if message['role'] == 'user' %}
        {%- if loop.first and system_message is defined %}
            {{- ' [INST] ' + system_message + '\\n\\n' + message['content'] + ' [/INST]' }}
        {%- else %}
            {{- ' [INST] ' + message['content'] + ' [/INST]' }}
        {%- endif %}
    {%- elif message['role'] == 'assistant' %}
        {{- ' ' + message['content'] + eos_token}}
    {%- else %}
        {{- raise_exception('Only user and assistant roles are supported, with the exception of an initial optional system message!') }}
    {%- endif %}
{%- endfor %}
""",
}

# The same templates with {% generation %} around what an assistant turn
# trains on: its content and its end-of-turn token (checked below to render
# exactly what the original renders).
MARKED = {
    "llama3": (
        "{% for message in messages %}{% if loop.index0 == 0 %}{{ bos_token }}{% endif %}"
        "{{ '<|start_header_id|>' + message['role'] + '<|end_header_id|>\n\n' }}"
        "{% if message['role'] == 'assistant' %}{% generation %}{{ message['content'] | trim + '<|eot_id|>' }}"
        "{% endgeneration %}{% else %}{{ message['content'] | trim + '<|eot_id|>' }}{% endif %}{% endfor %}"
    ),
    "chatml": (
        "{% for message in messages %}{{'<|im_start|>' + message['role'] + '\n'}}"
        "{% if message['role'] == 'assistant' %}{% generation %}{{ message['content'] + '<|im_end|>' }}"
        "{% endgeneration %}{% else %}{{ message['content'] + '<|im_end|>' }}{% endif %}{{ '\n' }}{% endfor %}"
    ),
    "qwen2": (
        "{% for message in messages %}{% if loop.first and messages[0]['role'] != 'system' %}"
        "{{ '<|im_start|>system\nYou are a helpful assistant.<|im_end|>\n' }}{% endif %}"
        "{{'<|im_start|>' + message['role'] + '\n'}}"
        "{% if message['role'] == 'assistant' %}{% generation %}{{ message['content'] + '<|im_end|>' }}"
        "{% endgeneration %}{% else %}{{ message['content'] + '<|im_end|>' }}{% endif %}{{ '\n' }}{% endfor %}"
    ),
    "mistral": """{%- if messages[0]['role'] == 'system' %}
    {%- set system_message = messages[0]['content'] %}
    {%- set loop_messages = messages[1:] %}
{%- else %}
    {%- set loop_messages = messages %}
{%- endif %}
{{- bos_token }}
{%- for message in loop_messages %}
    {%- if message['role'] == 'user' %}
        {%- if loop.first and system_message is defined %}
            {{- ' [INST] ' + system_message + '\\n\\n' + message['content'] + ' [/INST]' }}
        {%- else %}
            {{- ' [INST] ' + message['content'] + ' [/INST]' }}
        {%- endif %}
    {%- elif message['role'] == 'assistant' %}
        {{- ' ' }}{%- generation %}{{- message['content'] + eos_token }}{%- endgeneration %}
    {%- endif %}
{%- endfor %}
""",
}

CHATS = [
    [{"role": "user", "content": "What is 2 + 2?"}, {"role": "assistant", "content": "4"}],
    [{"role": "system", "content": "You are terse."},
     {"role": "user", "content": "  Hello there!  "},
     {"role": "assistant", "content": " Hi.\n"},
     {"role": "user", "content": "Name a prime."},
     {"role": "assistant", "content": "Seven, or 7."}],
    [{"role": "user", "content": "Übersetze: naïve café — 東京\n\tok?"},
     {"role": "assistant", "content": "\u00a0naïve café, Tōkyō 🙂\u3000"}],
    [{"role": "user", "content": ""}, {"role": "assistant", "content": "empty prompt, multi\nline\n\nanswer"}],
    [{"role": "system", "content": "Sys only before a user turn."},
     {"role": "user", "content": "Q"}],
]
BOS_EOS = {"llama3": ("<|begin_of_text|>", "<|eot_id|>"), "chatml": (None, "<|im_end|>"),
           "qwen2": (None, "<|im_end|>"), "mistral": ("<s>", "</s>")}


def byte_offsets(text):
    """char index -> byte offset in UTF-8"""
    out, b = [], 0
    for ch in text:
        out.append(b)
        b += len(ch.encode("utf-8"))
    out.append(b)
    return out


def render(name, chat, tok=None):
    bos, eos = BOS_EOS[name]
    if tok is None:
        tok = PreTrainedTokenizerFast(tokenizer_object=_dummy_tokenizer())
    tok.bos_token, tok.eos_token = bos, eos
    text = tok.apply_chat_template(chat, chat_template=TEMPLATES[name], tokenize=False,
                                   add_generation_prompt=False)
    marked, gen = render_jinja_template([chat], chat_template=MARKED[name], return_assistant_tokens_mask=True,
                                        bos_token=bos, eos_token=eos, add_generation_prompt=False)
    assert marked[0] == text, (name, marked[0], text)
    off = byte_offsets(text)
    spans = [[off[a], off[b]] for a, b in gen[0]]
    return text, spans


def _dummy_tokenizer():
    from tokenizers import Tokenizer, models
    return Tokenizer(models.WordLevel({"[UNK]": 0}, unk_token="[UNK]"))


# Tokenizers for the token-level fixtures: the tokenizer helper's fixtures
# (tests/fixtures/tok) and, for ChatML, its GPT-2-style one with the two
# ChatML special tokens added (written to OUT/chatml by this script).
TOKENIZERS = {"llama3": "tests/fixtures/tok/llama3", "chatml": "tests/data/sft/chatml",
              "qwen2": "tests/data/sft/chatml", "mistral": "tests/fixtures/tok/llama2"}


def make_chatml_tokenizer(out):
    tj = json.load(open("tests/fixtures/tok/gpt2/tokenizer.json", encoding="utf-8"))
    n = 1 + max(max(tj["model"]["vocab"].values()), max(a["id"] for a in tj["added_tokens"]))
    for k, name in enumerate(["<|im_start|>", "<|im_end|>"]):
        tj["added_tokens"].append({"id": n + k, "content": name, "single_word": False, "lstrip": False,
                                   "rstrip": False, "normalized": False, "special": True})
    d = os.path.join(out, "chatml")
    os.makedirs(d, exist_ok=True)
    with open(os.path.join(d, "tokenizer.json"), "w", encoding="utf-8") as f:
        json.dump(tj, f, ensure_ascii=False)
    with open(os.path.join(d, "tokenizer_config.json"), "w", encoding="utf-8") as f:
        json.dump({"bos_token": None, "eos_token": "<|im_end|>"}, f, indent=1)
        f.write("\n")


def token_case(name, chat):
    """ids of the official rendering and transformers' assistant mask"""
    d = TOKENIZERS[name]
    cfg = json.load(open(os.path.join(d, "tokenizer_config.json")))
    bos, eos = BOS_EOS[name]
    tok = PreTrainedTokenizerFast(tokenizer_file=os.path.join(d, "tokenizer.json"),
                                  bos_token=cfg.get("bos_token"), eos_token=cfg.get("eos_token"))
    assert (tok.bos_token if bos else None) == bos or name == "chatml" or name == "qwen2", (name, tok.bos_token)
    text = tok.apply_chat_template(chat, chat_template=TEMPLATES[name], tokenize=False)
    ids = tok(text, add_special_tokens=False)["input_ids"]
    out = tok.apply_chat_template(chat, chat_template=MARKED[name], tokenize=True, return_dict=True,
                                  return_assistant_tokens_mask=True)
    assert list(out["input_ids"]) == ids, name
    return {"template": name, "tokenizer": d, "messages": chat, "ids": ids,
            "mask": list(out["assistant_masks"])}


def main():
    out = sys.argv[1] if len(sys.argv) > 1 else "tests/data/sft"
    make_chatml_tokenizer(out)
    tcases = [token_case(name, chat) for name in TEMPLATES for chat in CHATS]
    with open(os.path.join(out, "tokens.json"), "w", encoding="utf-8") as f:
        f.write('{"generator": "scripts/make_sft_fixtures.py", "cases": [\n')
        f.write(",\n".join(json.dumps(c, ensure_ascii=False) for c in tcases))
        f.write("\n]}\n")
    cases = []
    for name in TEMPLATES:
        for chat in CHATS:
            text, spans = render(name, chat)
            bos, eos = BOS_EOS[name]
            cases.append({"template": name, "bos": bos, "eos": eos, "messages": chat, "text": text,
                          "spans": spans})
    with open(os.path.join(out, "render.json"), "w", encoding="utf-8") as f:
        json.dump({"generator": "scripts/make_sft_fixtures.py", "cases": cases}, f, ensure_ascii=False, indent=1)
        f.write("\n")
    print("wrote %d renderings to %s and %d token cases to %s" % (len(cases), os.path.join(out, "render.json"),
                                                                    len(tcases), os.path.join(out, "tokens.json")))


if __name__ == "__main__":
    main()
