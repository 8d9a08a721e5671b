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

typedef struct zt_jinja zt_jinja;

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
 * NULL for none).  The strings "content" and "reasoning_content" of the
 * messages whose role is "assistant" are tracked through the rendering: the
 * span of such a message i runs from the first rendered byte that came from
 * them to the last one, plus the added token right after it (token_at; NULL:
 * none); out->span has one span per assistant message that left a trace
 * (an empty content leaves its position), in message order.  The template's
 * raise_exception and evaluation errors are ZT_EDATA. */
int zt_jinja_render(const zt_jinja *j, const json_t *messages, const json_t *vars, zt_jinja_token_at token_at,
                    const void *ctx, zt_chat_text *out, zt_status *st);

#endif
