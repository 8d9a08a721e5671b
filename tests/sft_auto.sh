#!/bin/bash
# sft_auto.sh -- `ztrain prep --sft` with the tokenizer's own chat template:
# --template auto (the default) from chat_template.jinja or
# tokenizer_config.json, --template FILE.jinja, --template-var, roles the
# template knows (tool), and the errors: no template, the template's own
# raise_exception (naming the template file), a template that is not UTF-8,
# a construct outside the subset (named).
. "$(dirname "$0")/lib.sh"
T=$(mktemp -d); trap 'rm -rf "$T"' EXIT
cd "$T" || exit 1
CH="$ZT_SRCDIR/tests/data/sft/chats.jsonl"
TP="$ZT_SRCDIR/tests/data/sft/templates"
prep() { "$ZTRAIN" prep --sft "$@"; }
tokdir() {  # tokdir DIR [TEMPLATE.jinja]: the auto tokenizer fixture, EOS <|im_end|>
    mkdir -p "$1" && cp "$ZT_SRCDIR/tests/data/sft/auto/tokenizer.json" "$1/"
    printf '{"bos_token": null, "eos_token": "<|im_end|>"}\n' > "$1/tokenizer_config.json"
    [ -z "$2" ] || cp "$2" "$1/chat_template.jinja"
}
tokens() { sed -n 's/.*; \([0-9]*\) example tokens.*/\1/p' "$1"; }

tokdir q25 "$TP/qwen2.5.jinja"
tokdir plain
prep --input "$CH" --tokenizer q25 --seq-len 256 --output a > a.out 2>&1
ok $? "no --template: the directory's chat_template.jinja (Qwen2.5)"
prep --input "$CH" --tokenizer q25 --template auto --seq-len 256 --output b > b.out 2>&1
ok $? "--template auto"
prep --input "$CH" --tokenizer plain --template "$TP/qwen2.5.jinja" --seq-len 256 --output c > c.out 2>&1
ok $? "--template FILE.jinja"
check "  ... the three write the same windows and masks" cmp -s a_train.sft b_train.sft
check "  ... (FILE.jinja too)" cmp -s a_train.sft c_train.sft
prep --input "$CH" --tokenizer plain --template qwen2 --seq-len 256 --output q2 > q2.out 2>&1
ok $? "--template qwen2 (Qwen2's template) on the same chats"
diag <<< "example tokens: auto (Qwen2.5) $(tokens a.out), qwen2 $(tokens q2.out)"
check "  ... Qwen2.5's own template writes its own default system prompt (more tokens than Qwen2's)" \
    test -n "$(tokens a.out)" -a "$(tokens a.out)" -gt "$(tokens q2.out)"

# tokenizer_config.json's chat_template (a string, and the list form's "default")
mkdir cfg && cp "$ZT_SRCDIR/tests/data/sft/auto/tokenizer.json" cfg/
printf '%s\n' '{"eos_token": "<|im_end|>", "chat_template": "{% for m in messages %}{{ '"'"'<|im_start|>'"'"' + m.role + '"'"'\n'"'"' + m.content + '"'"'<|im_end|>\n'"'"' }}{% endfor %}"}' > cfg/tokenizer_config.json
prep --input "$CH" --tokenizer cfg --seq-len 256 --output d > d.out 2>&1
ok $? "tokenizer_config.json's chat_template"
prep --input "$CH" --tokenizer plain --template chatml --seq-len 256 --output e > e.out 2>&1
check "  ... (ChatML) == --template chatml, windows and masks" cmp -s d_train.sft e_train.sft
mkdir cfgl && cp cfg/tokenizer.json cfgl/
sed 's/"chat_template": \(".*"\)}$/"chat_template": [{"name": "tool_use", "template": "x"}, {"name": "default", "template": \1}]}/' \
    cfg/tokenizer_config.json > cfgl/tokenizer_config.json
prep --input "$CH" --tokenizer cfgl --seq-len 256 --output f > f.out 2>&1
ok $? "a list of named templates: the default one"
check "  ... == the string form" cmp -s d_train.sft f_train.sft

# roles the template knows
printf '%s\n' '{"messages": [{"role": "user", "content": "weather?"}, {"role": "assistant", "content": "calling"}, {"role": "tool", "content": "sunny"}, {"role": "assistant", "content": "It is sunny."}]}' > tool.jsonl
prep --input tool.jsonl --tokenizer q25 --seq-len 256 --output t > t.out 2>&1
ok $? "a tool message with Qwen2.5's template"
prep --input tool.jsonl --tokenizer plain --template chatml --seq-len 256 --output t2 > t2.out 2> t2.err
check "  ... which a built-in template refuses" test $? -eq 1

# issue 44: an example's tools, tool calls and results (apply_chat_template(messages, tools=tools))
TOOLS='[{"type": "function", "function": {"name": "get_weather", "description": "Weather of a city.", "parameters": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}}}]'
FC='"messages": [{"role": "user", "content": "Weather in Paris?"}, {"role": "assistant", "content": "", "tool_calls": [{"type": "function", "function": {"name": "get_weather", "arguments": {"city": "Paris"}}}]}, {"role": "tool", "content": "{\"temp\": 21}"}, {"role": "assistant", "content": "It is 21 degrees."}]'
printf '{%s, "tools": %s}\n' "$FC" "$TOOLS" > fc.jsonl
printf '{%s}\n' "$FC" > fc0.jsonl
prep --input fc.jsonl --tokenizer q25 --seq-len 512 --output fc > fc.out 2> fc.err
ok $? "a function-calling example (tools, tool_calls, a tool message) with Qwen2.5's template"
diag fc.err
prep --input fc0.jsonl --tokenizer q25 --seq-len 512 --output fc0 > fc0.out 2>&1
check "  ... its tools reach the template (more tokens than without them)" \
    test -n "$(tokens fc.out)" -a "$(tokens fc.out)" -gt "$(tokens fc0.out)"
printf '{%s, "tools": {"a": 1}}\n' "$FC" > fcbad.jsonl
prep --input fcbad.jsonl --tokenizer q25 --seq-len 512 --output fcb > fcb.out 2> fcb.err
check "  ... \"tools\" that is not a list: exit 1 naming it" test $? -eq 1 -a -n "$(grep 'fcbad.jsonl:1: "tools" must be a list' fcb.err)"
printf '{"messages": [{"role": "user", "content": "u"}, {"role": "assistant", "content": "a"}], "tools": []}\n' > fcbi.jsonl
prep --input fcbi.jsonl --tokenizer plain --template chatml --seq-len 256 --output fbi > fbi.out 2> fbi.err
check "  ... \"tools\" with a built-in template: exit 1 naming it" test $? -eq 1 -a -n "$(grep '"tools" needs the model' fbi.err)"
diag fbi.err

# ... and its documents
printf '%s\n' '{% for d in documents %}{{ d.title }}: {{ d.text }}|{% endfor %}{% for m in messages %}<|im_start|>{{ m.role }}\n{{ m.content }}<|im_end|>{% endfor %}' > docs.jinja
printf '%s\n' '{"documents": [{"title": "A", "text": "alpha"}, {"title": "B", "text": "beta"}], "messages": [{"role": "user", "content": "q"}, {"role": "assistant", "content": "a"}]}' > doc1.jsonl
printf '%s\n' '{"documents": [], "messages": [{"role": "user", "content": "q"}, {"role": "assistant", "content": "a"}]}' > doc0.jsonl
prep --input doc1.jsonl --tokenizer plain --template ./docs.jinja --seq-len 256 --output dc1 > dc1.out 2> dc1.err
ok $? "an example's documents reach the template"
diag dc1.err
prep --input doc0.jsonl --tokenizer plain --template ./docs.jinja --seq-len 256 --output dc0 > dc0.out 2>&1
check "  ... (more tokens than with no documents)" test -n "$(tokens dc1.out)" -a "$(tokens dc1.out)" -gt "$(tokens dc0.out)"

# issue 44: contents as lists of typed parts train as string contents; other parts are refused
printf '%s\n' '{"messages": [{"role": "user", "content": "hi"}, {"role": "assistant", "content": "hello there"}]}' > s1.jsonl
printf '%s\n' '{"messages": [{"role": "user", "content": [{"type": "text", "text": "hi"}]}, {"role": "assistant", "content": [{"type": "text", "text": "hello"}, {"type": "text", "text": " there"}]}]}' > l1.jsonl
mkdir glm && cp "$ZT_SRCDIR/tests/data/sft/auto/tokenizer.json" glm/ && cp "$TP/glm-4.6.jinja" glm/chat_template.jinja
printf '{"eos_token": "<|endoftext|>"}\n' > glm/tokenizer_config.json
prep --input s1.jsonl --tokenizer glm --seq-len 256 --output ls > ls.out 2>&1
prep --input l1.jsonl --tokenizer glm --seq-len 256 --output ll > ll.out 2> ll.err
ok $? "list contents with GLM-4.6's template (a macro reads them) and --mask assistant"
diag ll.err
check "  ... the same windows and masks as the string contents" cmp -s ls_train.sft ll_train.sft
prep --input s1.jsonl --tokenizer plain --template chatml --seq-len 256 --output bs > bs.out 2>&1
prep --input l1.jsonl --tokenizer plain --template chatml --seq-len 256 --output bl > bl.out 2> bl.err
ok $? "list contents with a built-in template (chatml)"
check "  ... the same windows and masks as the string contents" cmp -s bs_train.sft bl_train.sft
printf '%s\n' '{"messages": [{"role": "user", "content": [{"type": "image", "url": "x.png"}]}, {"role": "assistant", "content": "a cat"}]}' > img.jsonl
prep --input img.jsonl --tokenizer glm --seq-len 256 --output im > im.out 2> im.err
check "  ... an image part: exit 1 naming it" test $? -eq 1 -a -n "$(grep "img.jsonl:1: .*content part 0 of type 'image'" im.err)"
diag im.err
prep --input img.jsonl --tokenizer plain --template chatml --seq-len 256 --output imb > imb.out 2> imb.err
check "  ... (with a built-in template too)" test $? -eq 1 -a -n "$(grep "img.jsonl:1: message 0: content part 0 of type 'image'" imb.err)"
diag imb.err

# --template-var
tokdir l32 "$TP/llama3.2.jinja"
printf '{"bos_token": "<|begin_of_text|>", "eos_token": "<|eot_id|>"}\n' > l32/tokenizer_config.json
prep --input "$CH" --tokenizer l32 --seq-len 256 --output v1 --template-var "date_string=26 Jul 2024" > v1.out 2>&1
ok $? "--template-var date_string=... (Llama 3.2)"
prep --input "$CH" --tokenizer l32 --seq-len 256 --output v2 --template-var "date_string=01 Jan 2030" > v2.out 2>&1
check "  ... another date, other windows" test $? -eq 0 -a -s v2_train.sft -a -n "$(cmp v1_train.sft v2_train.sft)"
prep --input "$CH" --tokenizer plain --template chatml --template-var x=1 --seq-len 256 --output w > w.out 2> w.err
check "--template-var with a built-in template: exit 2 (a bad option)" test $? -eq 2
diag w.err

# errors
prep --input "$CH" --tokenizer plain --seq-len 256 --output n > n.out 2> n.err
check "no template in the directory and no --template: exit 2 (a missing option)" test $? -eq 2
check "  ... saying so" grep -q "no chat template" n.err
printf '%s\n' '{"messages": [{"role": "system", "content": "s"}, {"role": "user", "content": "u"}, {"role": "assistant", "content": "a"}]}' > sys.jsonl
prep --input sys.jsonl --tokenizer plain --template "$TP/gemma2.jinja" --seq-len 256 --output g > g.out 2> g.err
check "Gemma 2's template on a system message: exit 1" test $? -eq 1
check "  ... with the line and the template's own message" grep -q "sys.jsonl:1: .*the template raised: System role not supported" g.err
check "  ... naming the template file" grep -q "sys.jsonl:1: $TP/gemma2.jinja: chat template line [0-9]*: the template raised" g.err
diag g.err
printf 'ok \377 {{ messages|length }}' > bad.jinja
prep --input "$CH" --tokenizer plain --template ./bad.jinja --seq-len 256 --output u > u.out 2> u.err
check "a template that is not UTF-8: exit 1" test $? -eq 1
check "  ... blamed on the template (its file and line), not on a data line" \
    grep -q "^.*bad.jinja: chat template line 1: the template is not valid UTF-8 (byte 0xff at offset 3)" u.err
check "  ... (no data line named)" sh -c "! grep -q 'chats.jsonl' u.err"
diag u.err
printf '{%% filter upper %%}x{%% endfilter %%}' > filter.jinja
prep --input "$CH" --tokenizer plain --template ./filter.jinja --seq-len 256 --output m > m.out 2> m.err
check "a template with a construct outside the subset: exit 1" test $? -ne 0
check "  ... naming it" grep -q "filter.jinja: chat template line 1: statement '{% filter %}'" m.err
diag m.err
check "nothing left behind by the failed runs" test ! -e n_train.sft -a ! -e g_train.sft -a ! -e m_train.sft -a ! -e w_train.sft -a ! -e u_train.sft
done_testing
