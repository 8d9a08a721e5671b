/*
 * jinja.h -- the Jinja subset that Hugging Face chat templates use, rendered
 * as transformers' apply_chat_template renders them (jinja2 3.1 with
 * trim_blocks, lstrip_blocks, loop controls, transformers' tojson,
 * raise_exception, strftime_now, namespace and dict).  What is implemented
 * and the masking rule are in docs/sft.md; any construct outside the subset
 * (a statement, filter, test, method or operand type) is an error naming it
 * when the template is parsed or when the construct is evaluated, never a
 * silently different rendering.
 */
#ifndef ZT_IO_JINJA_H
#define ZT_IO_JINJA_H
#include <jansson.h>
#include "sft.h"
#include "tokenizer.h"

typedef struct zt_jinja zt_jinja;

/* Budgets (docs/sft.md): a template beyond one of them is refused with a
 * ZT_EDATA error naming the limit and the line ("ztrain's template budget").
 * Real chat templates stay far below each. */
/* (the three sizes may be lowered at build time, as `make fuzz` does, so that
 * a fuzzer reaches them in milliseconds: docs/fuzzing.md) */
#ifndef ZT_JINJA_MAX_OUTPUT
#define ZT_JINJA_MAX_OUTPUT ((size_t)64 << 20)  /* bytes of the rendering, and of any one string */
#endif
#ifndef ZT_JINJA_MAX_MEMORY
#define ZT_JINJA_MAX_MEMORY ((size_t)1 << 30)   /* bytes one parse or one rendering allocates */
#endif
#ifndef ZT_JINJA_MAX_STEPS
#define ZT_JINJA_MAX_STEPS 10000000LL           /* evaluation steps of one rendering */
#endif
#define ZT_JINJA_MAX_VDEPTH 512                 /* nesting of a value printed, compared or serialized */
#define ZT_JINJA_MAX_BLOCKS 64                  /* nested if / for / generation blocks */
#define ZT_JINJA_MAX_LOOPS 16                   /* nested for loops */
#define ZT_JINJA_MAX_ELIF 1000                  /* elif branches of one if */
#define ZT_JINJA_MAX_NEST 32                    /* nested parentheses, brackets, calls, signs, not */
#define ZT_JINJA_MAX_EXPR 128                   /* depth of one expression (chained operators, filters, attributes) */
#define ZT_JINJA_MAX_RANGE 100000               /* range() items: jinja2's sandbox MAX_RANGE */
#define ZT_JINJA_MAX_CALLS 16                   /* nested macro calls (a macro calling itself included) */

/* Parse a template (UTF-8, n bytes).  Errors: ZT_EUNSUPPORTED naming the
 * construct, ZT_EDATA for a syntax error, each with the template line. */
int zt_jinja_parse(const char *src, size_t n, zt_jinja **out, zt_status *st);
void zt_jinja_free(zt_jinja *j);

/* Length of the added token starting at s[0, n) (0: none): the end-of-turn
 * token that follows an assistant turn's text. */
typedef size_t (*zt_jinja_token_at)(const void *ctx, const char *s, size_t n);

/* Render with add_generation_prompt false.  messages: a JSON array of
 * message objects (every key is visible to the template); vars: a JSON
 * object of further variables (bos_token, eos_token, date_string, ...;
 * NULL for none).  The strings "content" (also the "text" of its typed
 * parts) and "reasoning_content" of the messages whose role is "assistant",
 * and every string of their "tool_calls", are tracked through the rendering:
 * the span of such a message i runs from the first rendered byte that came
 * from them to the last one, plus the added token right after it (token_at;
 * NULL: none) -- for a message with tool calls, through the first eos_token
 * (vars) after it when one comes before the next traced message, and, with
 * no content (none, "", text parts all empty), from the end of the rendering
 * of messages[:i] with add_generation_prompt true when that is a byte prefix
 * ending at or before the first traced byte; out->span has one span per
 * assistant message that left a trace (an empty content leaves its
 * position), in message order.  The template's raise_exception and
 * evaluation errors are ZT_EDATA. */
int zt_jinja_render(const zt_jinja *j, const json_t *messages, const json_t *vars, zt_jinja_token_at token_at,
                    const void *ctx, zt_chat_text *out, zt_status *st);

/* ---------------------------------------------------------------- the tokenizer's own template */

/* A chat template with its variables: `--template auto` (the tokenizer
 * directory's template) or `--template FILE.jinja`. */
typedef struct zt_chat_auto zt_chat_auto;
/* The template of a tokenizer (path: a directory, or a tokenizer.json whose
 * directory is read) as transformers loads it: chat_template.jinja, else
 * tokenizer_config.json's "chat_template" (a string, or a list of
 * {"name", "template"}: the one named "default").  *out is NULL (ZT_OK)
 * when there is none.  The variables are the special tokens of
 * tokenizer_config.json (bos_token, eos_token, unk_token, pad_token,
 * sep_token, cls_token, mask_token), the names transformers passes. */
int zt_chat_auto_load(const char *tokenizer_path, zt_chat_auto **out, zt_status *st);
/* A template file with the tokenizer's variables (as zt_chat_auto_load). */
int zt_chat_auto_file(const char *template_path, const char *tokenizer_path, zt_chat_auto **out, zt_status *st);
/* Set (or replace) a string variable, e.g. date_string. */
int zt_chat_auto_set_var(zt_chat_auto *a, const char *name, const char *value, zt_status *st);
/* Set (or replace) a boolean variable, e.g. add_generation_prompt (a
 * variable set here wins over the renderer's own false). */
int zt_chat_auto_set_bool(zt_chat_auto *a, const char *name, int value, zt_status *st);
/* Where the template came from (a file name, for messages). */
const char *zt_chat_auto_origin(const zt_chat_auto *a);
void zt_chat_auto_free(zt_chat_auto *a);
/* Render messages (a JSON array of message objects), tokenize and mask
 * them as zt_sft_encode_chat does for a built-in template.  *nspan: the
 * assistant messages that left a span. */
int zt_sft_encode_auto(const zt_tokenizer *t, const zt_chat_auto *a, const json_t *messages, int mode,
                       int32_t **ids, uint8_t **mask, size_t *len, int *nspan, zt_status *st);
/* The rendering alone (spans against t's added tokens; t may be NULL). */
int zt_chat_auto_render(const zt_chat_auto *a, const zt_tokenizer *t, const json_t *messages, zt_chat_text *out,
                        zt_status *st);
/* The same with an example's "tools" and "documents" (NULL: none), the template variables
 * apply_chat_template(messages, tools=..., documents=...) sets. */
int zt_chat_auto_render_tools(const zt_chat_auto *a, const zt_tokenizer *t, const json_t *messages,
                              const json_t *tools, const json_t *documents, zt_chat_text *out, zt_status *st);
int zt_sft_encode_auto_tools(const zt_tokenizer *t, const zt_chat_auto *a, const json_t *messages,
                             const json_t *tools, const json_t *documents, int mode, int32_t **ids, uint8_t **mask,
                             size_t *len, int *nspan, zt_status *st);

#endif
