/* eval.c -- the chat-template engine's evaluator (jinja_int.h): names, expressions, statements,
 * the messages as transformers hands them to a template; zt_jinja_render (jinja.h). */
#include <limits.h>
#include <setjmp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "jinja_int.h"

static jv eval(rctx *r, node *n, scope *sc);
static jv call_macro(rctx *r, const jmacro *m, args *a, jv caller);

static jv lookup(rctx *r, scope *sc, const char *name) {
    size_t n = strlen(name);
    for (; sc; sc = sc->up) {
        int i = zj_dfind(sc->vars, name, n);
        if (i >= 0 && sc->vars->v[i].t != V_UNSET) return sc->vars->v[i];
    }
    if (!strcmp(name, "cycler") || !strcmp(name, "joiner") || !strcmp(name, "lipsum"))
        zj_jfail(&r->c, ZT_EUNSUPPORTED, "function '%s'", name);
    return vundefh(zj_afmt(&r->c, "'%.200s' is undefined", name));
}

static void eval_args(rctx *r, node *n, scope *sc, args *a) {
    a->n = 0;
    if (n->nv > 8) zj_jfail(&r->c, ZT_EUNSUPPORTED, "calls with more than 8 arguments");
    for (int i = 0; i < n->nv; ++i) {
        a->v[a->n] = eval(r, n->v[i], sc);
        a->kw[a->n++] = n->kw[i];
    }
}

static jv eval(rctx *r, node *n, scope *sc) {
    jctx *c = &r->c;
    c->line = n->line;
    zj_tick(c, 1);
    switch (n->k) {
    case E_CONST: return n->cst;
    case E_NAME: return lookup(r, sc, n->name);
    case E_ATTR: {
        jv x = eval(r, n->a, sc);
        c->line = n->line;
        return zj_getattr_(r, x, n->name);
    }
    case E_ITEM: {
        jv x = eval(r, n->a, sc), k = eval(r, n->b, sc);
        c->line = n->line;
        return zj_getitem(r, x, k);
    }
    case E_SLICE: {
        jv x = eval(r, n->a, sc);
        jv b = n->b ? eval(r, n->b, sc) : vnone(), e = n->c ? eval(r, n->c, sc) : vnone(),
           s = n->d ? eval(r, n->d, sc) : vnone();
        c->line = n->line;
        return zj_do_slice(r, x, b, e, s, n->op);
    }
    case E_CALL: {
        jv f;
        if (n->a->k == E_ATTR) {
            jv x = eval(r, n->a->a, sc);
            c->line = n->line;
            f = zj_getattr_(r, x, n->a->name);
        } else {
            f = eval(r, n->a, sc);
        }
        args a;
        eval_args(r, n, sc, &a);
        c->line = n->line;
        if (f.t == V_MACRO) return call_macro(r, f.mc, &a, (jv){.t = V_UNSET});
        return zj_call_value(r, f, &a);
    }
    case E_FILTER: {
        jv x = eval(r, n->a, sc);
        args a;
        eval_args(r, n, sc, &a);
        c->line = n->line;
        return zj_apply_filter(r, n->name, n->op & 1, x, &a);
    }
    case E_TEST: {
        jv x = eval(r, n->a, sc);
        args a;
        eval_args(r, n, sc, &a);
        c->line = n->line;
        int t = zj_apply_test(r, n->name, (n->op & 2) != 0, x, &a);
        return vbool((n->op & 1) ? !t : t);
    }
    case E_BIN: {
        jv a = eval(r, n->a, sc), b = eval(r, n->b, sc);
        c->line = n->line;
        return zj_arith(r, n->op, a, b);
    }
    case E_CMP: {
        jv a = eval(r, n->a, sc);
        for (int i = 0; i < n->nv; ++i) {
            jv b = eval(r, n->v[i], sc);
            c->line = n->line;
            if (!zj_compare(r, n->ops[i], a, b)) return vbool(0);
            a = b;
        }
        return vbool(1);
    }
    case E_CAT: {   /* str() of each */
        sbuf b = {0};
        for (int i = 0; i < n->nv; ++i) {
            jv v = eval(r, n->v[i], sc);
            c->line = n->line;
            zj_sb_put(c, &b, zj_to_str(r, v));
        }
        return vstr(zj_sb_str(c, &b));
    }
    case E_NOT: return vbool(!zj_truthy(eval(r, n->a, sc)));
    case E_NEG: case E_POS: {
        jv x = eval(r, n->a, sc);
        c->line = n->line;
        if (x.t == V_INT) return n->k == E_NEG ? vint(zj_ineg(r, x.i)) : x;
        if (x.t == V_FLOAT) { if (n->k == E_NEG) x.f = -x.f; return x; }
        if (x.t == V_BOOL) return vint(n->k == E_NEG ? -x.b : x.b);
        if (x.t == V_UNDEF) zj_undef_fail(r, x, n->k == E_NEG ? "unary -" : "unary +");
        zj_jfail(c, ZT_EDATA, "bad operand type for unary %c: '%s'", n->k == E_NEG ? '-' : '+', zj_pyname(x));
    }
    case E_AND: { jv a = eval(r, n->a, sc); return zj_truthy(a) ? eval(r, n->b, sc) : a; }
    case E_OR: { jv a = eval(r, n->a, sc); return zj_truthy(a) ? a : eval(r, n->b, sc); }
    case E_COND:
        if (zj_truthy(eval(r, n->b, sc))) return eval(r, n->a, sc);
        return n->c ? eval(r, n->c, sc) : vundefh("the inline if-expression evaluated to false and no else section was defined");
    case E_LIST: case E_TUPLE: {
        jlist *l = zj_mklist(c, n->nv);
        for (int i = 0; i < n->nv; ++i) zj_lpush(c, l, eval(r, n->v[i], sc));
        return vlistk(l, n->k == E_TUPLE ? K_TUPLE : K_LIST);
    }
    case E_DICT: {
        jv d = {.t = V_DICT};
        d.d = zj_mkdict(c);
        for (int i = 0; i + 1 < n->nv; i += 2) {
            jv k = eval(r, n->v[i], sc);
            jv v = eval(r, n->v[i + 1], sc);
            c->line = n->line;
            if (k.t != V_STR) {
                if (k.t == V_UNDEF) zj_undef_fail(r, k, "a dict key");
                zj_jfail(c, ZT_EUNSUPPORTED, "dict literal with a %s key", zj_tname(k.t));
            }
            zj_dset(c, d.d, k.s, v);
        }
        return d;
    }
    default: zj_jfail(c, ZT_EINTERNAL, "bad expression node %d", n->k);
    }
}

/* ---- statements */

static void emit(rctx *r, jstr *s) { zj_sb_put(&r->c, &r->out, s); }

static void setvar(rctx *r, scope *sc, const char *name, jv v) {
    size_t n = strlen(name);
    int i = zj_dfind(sc->vars, name, n);
    if (i >= 0) sc->vars->v[i] = v;   /* no new key (a loop's scope is reused) */
    else zj_dset(&r->c, sc->vars, zj_mkstr(&r->c, name, n), v);
}
/* a loop iteration's scope, emptied: its names unset (lookup passes them by) */
static void unset_all(jdict *d) {
    for (int i = 0; i < d->n; ++i) d->v[i].t = V_UNSET;
}

static void assign(rctx *r, scope *sc, node *n, jv v) {
    if (!n->name2) { setvar(r, sc, n->name, v); return; }
    jlist *l = zj_items_of(r, v, "unpacking");
    if (l->n != 2)
        zj_jfail(&r->c, ZT_EDATA, "%s values to unpack (expected 2, got %d)", l->n > 2 ? "too many" : "not enough", l->n);
    setvar(r, sc, n->name, l->v[0]);
    setvar(r, sc, n->name2, l->v[1]);
}

static void exec_body(rctx *r, node *s, scope *sc);

/* the output of a body in scope sc, as a string (a macro's value, a block set's) */
static jstr *render_to_str(rctx *r, node *body, scope *sc) {
    sbuf saved = r->out;
    int brk = r->brk, cont = r->cont;
    memset(&r->out, 0, sizeof r->out);
    exec_body(r, body, sc);
    jstr *s = zj_sb_str(&r->c, &r->out);
    r->out = saved;
    r->brk = brk;
    r->cont = cont;
    return s;
}

/* a macro keeps the scope it was defined in: the chain copied to the arena (the scopes themselves live
 * on the C stack of the statements that made them; their variables are shared) */
static scope *keep_scope(rctx *r, scope *sc) {
    if (!sc) return NULL;
    scope *k = zj_aalloc(&r->c, sizeof *k);
    k->vars = sc->vars;
    k->up = keep_scope(r, sc->up);
    return k;
}
static jv macro_value(rctx *r, node *def, scope *sc) {
    jmacro *m = zj_aalloc(&r->c, sizeof *m);
    m->def = def;
    m->sc = keep_scope(r, sc);
    jv v = {.t = V_MACRO};
    v.mc = m;
    return v;
}

/* a call of macro m as jinja2's Macro.__call__: positional arguments, then keywords, then the defaults
 * (evaluated in the macro's scope, after the arguments before them); the extra ones go to varargs /
 * kwargs when the body uses them, else are errors; caller: the call block's (V_UNSET: none) */
static jv call_macro(rctx *r, const jmacro *m, args *a, jv caller) {
    jctx *c = &r->c;
    const node *d = m->def;
    int line = c->line;
    if (r->calls >= ZT_JINJA_MAX_CALLS)
        zj_jfail(c, ZT_EDATA, "macro calls nested deeper than %d levels " BUDGET, ZT_JINJA_MAX_CALLS);
    zj_tick(c, 1);
    scope ms = {m->sc, zj_mkdict(c)};
    jlist *va = zj_mklist(c, 0);
    jv kwd = {.t = V_DICT};
    kwd.d = zj_mkdict(c);
    int np = d->nv, npos = 0;
    char *given = zj_aalloc(c, (size_t)np + 1);
    memset(given, 0, (size_t)np + 1);
    for (int i = 0; i < a->n; ++i) {
        if (!a->kw[i]) {
            if (npos < np) { setvar(r, &ms, d->kw[npos], a->v[i]); given[npos] = 1; }
            else if (d->op & MF_VARARGS) zj_lpush(c, va, a->v[i]);
            else zj_jfail(c, ZT_EDATA, "macro '%s' takes not more than %d argument(s)", d->name, np);
            npos++;
            continue;
        }
        int k = -1;
        for (int p = 0; p < np; ++p) if (!strcmp(d->kw[p], a->kw[i])) k = p;
        if (k >= 0) {
            if (given[k]) zj_jfail(c, ZT_EDATA, "macro '%s' got multiple values for argument '%s'", d->name, a->kw[i]);
            setvar(r, &ms, d->kw[k], a->v[i]);
            given[k] = 1;
        } else if (!strcmp(a->kw[i], "caller") && (d->op & MF_CALLER)) {
            caller = a->v[i];
        } else if (d->op & MF_KWARGS) {
            zj_dset(c, kwd.d, zj_mkstr(c, a->kw[i], strlen(a->kw[i])), a->v[i]);
        } else {
            zj_jfail(c, ZT_EDATA, "macro '%s' takes no keyword argument '%s'", d->name, a->kw[i]);
        }
    }
    r->calls++;
    for (int p = 0; p < np; ++p) {
        if (given[p]) continue;
        jv v = d->v[p] ? eval(r, d->v[p], &ms)
                       : vundefh(zj_afmt(c, "parameter '%.200s' was not provided", d->kw[p]));
        setvar(r, &ms, d->kw[p], v);
    }
    if (d->op & MF_VARARGS) setvar(r, &ms, "varargs", vlistk(va, K_TUPLE));
    if (d->op & MF_KWARGS) setvar(r, &ms, "kwargs", kwd);
    if (d->op & MF_CALLER) setvar(r, &ms, "caller", caller.t == V_UNSET ? vundefh("No caller defined") : caller);
    jstr *s = render_to_str(r, d->b, &ms);
    r->calls--;
    c->line = line;
    return vstr(s);
}

static void exec_for(rctx *r, node *s, scope *sc) {
    jctx *c = &r->c;
    jv it = eval(r, s->a, sc);
    c->line = s->line;
    /* a range is walked, not made into a list (unless filtered) */
    const jrange *rg = it.t == V_RANGE && !s->d ? it.rg : NULL;
    jlist *l = rg ? NULL : zj_items_of(r, it, "for");
    /* the loop filter runs first (loop.length counts the kept items) */
    jlist *items = l;
    if (s->d) {
        items = zj_mklist(c, l->n);
        scope fs = {sc, zj_mkdict(c)};
        for (int i = 0; i < l->n; ++i) {
            zj_tick(c, 1);
            unset_all(fs.vars);
            assign(r, &fs, s, l->v[i]);
            if (zj_truthy(eval(r, s->d, &fs))) zj_lpush(c, items, l->v[i]);
        }
    }
    int n = rg ? (int)rg->n : items->n;
    jloop *lp = zj_aalloc(c, sizeof *lp);
    lp->items = items;
    lp->rg = rg;
    lp->n = n;
    jv loop = {.t = V_LOOP};
    loop.lp = lp;
    scope is = {sc, zj_mkdict(c)};   /* one scope, emptied for each iteration */
    int completed = 0;            /* an iteration reached the end of the body (jinja2's else test) */
    for (int i = 0; i < n; ++i) {
        c->line = s->line;
        zj_tick(c, 1);
        unset_all(is.vars);
        lp->i = i;
        setvar(r, &is, "loop", loop);
        assign(r, &is, s, zj_loop_item(lp, i));
        exec_body(r, s->b, &is);
        if (!r->cont && !r->brk) completed = 1;
        r->cont = 0;
        if (r->brk) { r->brk = 0; break; }
    }
    /* jinja2 runs the else block unless an iteration got to the end of the body: when the loop had
     * no items, or each iteration ended in break or continue */
    if (!completed && s->c) {
        scope es = {sc, zj_mkdict(c)};
        exec_body(r, s->c, &es);
    }
}

static void exec_body(rctx *r, node *s, scope *sc) {
    jctx *c = &r->c;
    for (; s && !r->brk && !r->cont; s = s->next) {
        c->line = s->line;
        zj_tick(c, 1);
        switch (s->k) {
        case S_DATA: emit(r, s->cst.s); break;
        case S_OUT: {
            jv v = eval(r, s->a, sc);
            c->line = s->line;
            emit(r, zj_to_str(r, v));
            break;
        }
        case S_IF: {   /* if, its elifs (->d), the last one's else (->c) */
            node *x = s;
            for (;;) {
                c->line = x->line;
                if (zj_truthy(eval(r, x->a, sc))) { exec_body(r, x->b, sc); break; }
                if (!x->d) { exec_body(r, x->c, sc); break; }
                x = x->d;
            }
            break;
        }
        case S_FOR: exec_for(r, s, sc); break;
        case S_SET: {
            jv v = eval(r, s->a, sc);
            c->line = s->line;
            assign(r, sc, s, v);
            break;
        }
        case S_SETATTR: {
            jv ns = lookup(r, sc, s->name);
            c->line = s->line;
            if (ns.t != V_NS)
                zj_jfail(c, ZT_EDATA, "set %s.%s: cannot assign attribute on non-namespace object (a %s)", s->name, s->name2,
                         zj_tname(ns.t));
            if (s->name2[0] == '_')
                zj_jfail(c, ZT_EDATA, "chat templates cannot store underscore-prefixed attributes on a namespace, "
                         "but got '%s' (transformers' SecurityError)", s->name2);
            jv v = eval(r, s->a, sc);
            c->line = s->line;
            zj_dset(c, ns.d, zj_mkstr(c, s->name2, strlen(s->name2)), v);
            break;
        }
        case S_BREAK: r->brk = 1; break;
        case S_CONTINUE: r->cont = 1; break;
        case S_MACRO: setvar(r, sc, s->name, macro_value(r, s, sc)); break;
        case S_CALLBLK: {   /* the call, with caller= the block as a macro */
            node *call = s->a;
            jv f;
            if (call->a->k == E_ATTR) {
                jv x = eval(r, call->a->a, sc);
                c->line = s->line;
                f = zj_getattr_(r, x, call->a->name);
            } else {
                f = eval(r, call->a, sc);
            }
            args a;
            eval_args(r, call, sc, &a);
            c->line = s->line;
            if (f.t != V_MACRO) {
                if (f.t == V_UNDEF) zj_undef_fail(r, f, "a call");
                zj_jfail(c, ZT_EUNSUPPORTED, "{%% call %%} of a %s (only macros take a caller)", zj_tname(f.t));
            }
            emit(r, call_macro(r, f.mc, &a, macro_value(r, s->c, sc)).s);
            break;
        }
        case S_SETBLK: {
            scope bs = {sc, zj_mkdict(c)};
            jstr *v = render_to_str(r, s->b, &bs);
            c->line = s->line;
            setvar(r, sc, s->name, vstr(v));
            break;
        }
        case S_GEN: {   /* a call block: its own scope */
            scope gs = {sc, zj_mkdict(c)};
            exec_body(r, s->b, &gs);
            break;
        }
        default: zj_jfail(c, ZT_EINTERNAL, "bad statement node %d", s->k);
        }
    }
}

/* mark: of the strings (deep: also those inside lists and dicts, and the keys) */
static jv from_json_(rctx *r, const json_t *j, uint32_t mark, int depth, int deep);
static jv from_json(rctx *r, const json_t *j, uint32_t mark, int depth) { return from_json_(r, j, mark, depth, 0); }
static jstr *marked_str(rctx *r, const char *p, size_t n, uint32_t mark) {
    jctx *c = &r->c;
    jstr *s = zj_mkstr(c, p, n);
    if (mark) {
        s->mk = zj_aalloc(c, (s->n ? s->n : 1) * sizeof(uint32_t));
        for (size_t i = 0; i < s->n; ++i) s->mk[i] = mark;
        if (!s->n) s->mk = NULL;
        s->tail = s->n ? 0 : mark;
    }
    return s;
}
static jv from_json_(rctx *r, const json_t *j, uint32_t mark, int depth, int deep) {
    jctx *c = &r->c;
    if (depth > 4096) zj_jfail(c, ZT_EDATA, "a message nested deeper than 4096 levels");
    switch (json_typeof(j)) {
    case JSON_NULL: return vnone();
    case JSON_TRUE: return vbool(1);
    case JSON_FALSE: return vbool(0);
    case JSON_INTEGER: return vint((long long)json_integer_value(j));
    case JSON_REAL: return vfloat(json_real_value(j));
    case JSON_STRING: return vstr(marked_str(r, json_string_value(j), json_string_length(j), mark));
    case JSON_ARRAY: {
        if (json_array_size(j) > (size_t)INT_MAX / 2) zj_jfail(c, ZT_EDATA, "a message list too long");
        jlist *l = zj_mklist(c, (int)json_array_size(j));
        size_t i;
        const json_t *e;
        json_array_foreach((json_t *)j, i, e) zj_lpush(c, l, from_json_(r, e, deep ? mark : 0, depth + 1, deep));
        return vlist(l);
    }
    default: {
        jv d = {.t = V_DICT};
        d.d = zj_mkdict(c);
        const char *k;
        const json_t *e;
        json_object_foreach((json_t *)j, k, e) {
            zj_dset(c, d.d, marked_str(r, k, strlen(k), deep ? mark : 0), from_json_(r, e, deep ? mark : 0, depth + 1, deep));
        }
        return d;
    }
    }
}

/* A message as transformers hands it to the template: keys whose value is
 * null dropped, and a reasoning (reasoning_content, thinking or reasoning,
 * the first present) copied to "thinking" (first) and "reasoning_content"
 * (chat_template_utils: _normalize_chat_messages, _alias_reasoning_fields).
 * mark: the content and reasoning strings of an assistant message. */
static int marked_key(const char *k) {
    return !strcmp(k, "content") || !strcmp(k, "reasoning_content") || !strcmp(k, "thinking") || !strcmp(k, "reasoning");
}
/* a content given as a list of typed parts ([{"type": "text", "text": ...}]): the text of each part
 * traced as a string content is; a part of another type (image, audio, ...) is refused by name */
static jv content_value(rctx *r, const json_t *v, uint32_t mark, size_t im) {
    jctx *c = &r->c;
    if (!json_is_array(v)) return from_json(r, v, mark, 1);
    jlist *l = zj_mklist(c, (int)json_array_size(v));
    size_t i;
    const json_t *p;
    json_array_foreach((json_t *)v, i, p) {
        const json_t *ty = json_object_get(p, "type");
        if (!json_is_object(p) || !json_is_string(ty))
            zj_jfail(c, ZT_EDATA, "message %zu: content part %zu is not an object with a string \"type\"", im, i);
        if (strcmp(json_string_value(ty), "text") != 0)
            zj_jfail(c, ZT_EDATA, "message %zu: content part %zu of type '%.60s' (only \"text\" parts are "
                     "rendered)", im, i, json_string_value(ty));
        if (!json_is_string(json_object_get(p, "text")))
            zj_jfail(c, ZT_EDATA, "message %zu: content part %zu (type text) has no string \"text\"", im, i);
        jv d = {.t = V_DICT};
        d.d = zj_mkdict(c);
        const char *k;
        const json_t *e;
        json_object_foreach((json_t *)p, k, e)
            zj_dset(c, d.d, zj_mkstr(c, k, strlen(k)), from_json(r, e, strcmp(k, "text") ? 0 : mark, 2));
        zj_lpush(c, l, d);
    }
    return vlist(l);
}

static jv message_value(rctx *r, const json_t *m, uint32_t mark, size_t im) {
    jctx *c = &r->c;
    static const char *const rnames[] = {"reasoning_content", "thinking", "reasoning"};
    const json_t *reason = NULL;
    for (int i = 0; i < 3 && !reason; ++i) {
        const json_t *v = json_object_get(m, rnames[i]);
        if (v && !json_is_null(v)) reason = v;
    }
    jv d = {.t = V_DICT};
    d.d = zj_mkdict(c);
    if (reason) zj_dset(c, d.d, zj_mkstr(c, "thinking", 8), from_json(r, reason, mark, 1));
    const char *k;
    const json_t *e;
    json_object_foreach((json_t *)m, k, e) {
        if (json_is_null(e)) continue;
        jv v = !strcmp(k, "content")      ? content_value(r, e, mark, im)
               : !strcmp(k, "tool_calls") ? from_json_(r, e, mark, 1, 1)   /* every string, keys too */
                                          : from_json(r, e, marked_key(k) ? mark : 0, 1);
        zj_dset(c, d.d, zj_mkstr(c, k, strlen(k)), v);
    }
    if (reason) zj_dset(c, d.d, zj_mkstr(c, "reasoning_content", 17), from_json(r, reason, mark, 1));
    return d;
}

/* the rendering of messages[:lim] (all when lim is (size_t)-1); gen: add_generation_prompt forced true (the
 * prefix a tool-call turn's span starts after), the spans then not computed */
static int render_core(const zt_jinja *j, const json_t *messages, size_t lim, int gen, const json_t *vars,
                       zt_jinja_token_at token_at, const void *tctx, zt_chat_text *out, zt_status *st) {
    memset(out, 0, sizeof *out);
    arena ar = {0};
    rctx *r = calloc(1, sizeof *r);
    if (!r) return zt_fail(st, ZT_ENOMEM, "out of memory");
    r->c.ar = &ar;
    r->c.st = st;
    r->c.line = 0;
    r->out.out = 1;
    if (setjmp(r->c.jb)) {
        zj_arena_free(&ar);
        free(r);
        zt_chat_text_free(out);
        return st && st->code ? st->code : ZT_EDATA;
    }
    jctx *c = &r->c;
    if (!json_is_array(messages)) zj_jfail(c, ZT_EINVAL, "messages must be a list");
    size_t nm = json_array_size(messages);
    if (lim < nm) nm = lim;
    if (nm >= 0xffff) zj_jfail(c, ZT_EUNSUPPORTED, "conversations of %zu messages (at most 65534)", nm);
    scope glob = {NULL, zj_mkdict(c)};
    jlist *ml = zj_mklist(c, (int)nm);
    for (size_t i = 0; i < nm; ++i) {
        const json_t *m = json_array_get(messages, i);
        if (!json_is_object(m)) zj_jfail(c, ZT_EDATA, "message %zu is not an object", i);
        const json_t *role = json_object_get(m, "role");
        uint32_t mark = json_is_string(role) && !strcmp(json_string_value(role), "assistant") ? (uint32_t)(i + 1) : 0;
        zj_lpush(c, ml, message_value(r, m, mark, i));
    }
    jv fn = {.t = V_FUNC};
    setvar(r, &glob, "messages", vlist(ml));
    setvar(r, &glob, "add_generation_prompt", vbool(0));
    setvar(r, &glob, "tools", vnone());
    setvar(r, &glob, "documents", vnone());
    fn.fn = F_RAISE; setvar(r, &glob, "raise_exception", fn);
    fn.fn = F_STRFTIME; setvar(r, &glob, "strftime_now", fn);
    fn.fn = F_NAMESPACE; setvar(r, &glob, "namespace", fn);
    fn.fn = F_DICT; setvar(r, &glob, "dict", fn);
    fn.fn = F_RANGE; setvar(r, &glob, "range", fn);
    if (vars) {
        const char *k;
        const json_t *e;
        json_object_foreach((json_t *)vars, k, e) setvar(r, &glob, k, from_json(r, e, 0, 1));
    }
    if (gen) setvar(r, &glob, "add_generation_prompt", vbool(1));
    scope top = {&glob, zj_mkdict(c)};
    exec_body(r, j->root, &top);
    /* the text */
    sbuf *o = &r->out;
    out->text = malloc(o->n + 1);
    if (!out->text) zj_jfail(c, ZT_ENOMEM, "out of memory");
    memcpy(out->text, o->p ? o->p : "", o->n);
    out->text[o->n] = 0;
    out->len = out->cap = o->n;
    if (gen) {
        zj_arena_free(&ar);
        free(r);
        return ZT_OK;
    }
    /* the spans: per assistant message, its first to last traced byte */
    size_t *lo = calloc(nm + 1, sizeof *lo), *hi = calloc(nm + 1, sizeof *hi);
    if (!lo || !hi) { free(lo); free(hi); zj_jfail(c, ZT_ENOMEM, "out of memory"); }
    for (size_t i = 0; i <= nm; ++i) lo[i] = (size_t)-1;
    for (size_t i = 0; o->marked && o->mk && i < o->n; ++i) {
        uint32_t m = o->mk[i] & 0xffff, a = o->mk[i] >> 16;
        if (m && m <= nm) { if (lo[m] == (size_t)-1) lo[m] = i; hi[m] = i + 1; }
        if (a && a <= nm) { if (lo[a] == (size_t)-1 || i < lo[a]) lo[a] = i; if (i > hi[a]) hi[a] = i; }
    }
    if (o->tail && o->tail <= nm) { if (lo[o->tail] == (size_t)-1) lo[o->tail] = o->n; hi[o->tail] = o->n; }
    int nspan = 0;
    for (size_t i = 1; i <= nm; ++i) nspan += lo[i] != (size_t)-1;
    out->span = calloc((size_t)(nspan ? nspan : 1), sizeof *out->span);
    if (!out->span) { free(lo); free(hi); zj_jfail(c, ZT_ENOMEM, "out of memory"); }
    /* the eos_token ends the turn of an assistant message with tool calls (the template's markup
     * after the calls, e.g. "}\n</tool_call>", is trained up to it) */
    const json_t *eosv = vars ? json_object_get(vars, "eos_token") : NULL;
    const char *eos = json_is_string(eosv) ? json_string_value(eosv) : NULL;
    size_t neos = eos ? json_string_length(eosv) : 0;
    for (size_t i = 1; i <= nm; ++i) {
        if (lo[i] == (size_t)-1) continue;
        size_t e = hi[i];
        const json_t *m = json_array_get(messages, i - 1), *tc = json_object_get(m, "tool_calls");
        size_t stop = o->n;   /* the next traced message's first byte */
        for (size_t k = i + 1; k <= nm; ++k)
            if (lo[k] != (size_t)-1 && lo[k] >= e && lo[k] < stop) stop = lo[k];
        const char *at = NULL;
        if (neos && json_is_array(tc) && json_array_size(tc) > 0 && e <= stop)
            for (size_t q = e; q + neos <= stop && !at; ++q)
                if (!memcmp(o->p + q, eos, neos)) at = o->p + q;
        if (at) e = (size_t)(at - o->p) + neos;
        else if (token_at && e < o->n) e += token_at(tctx, o->p + e, o->n - e);
        out->span[out->nspan].begin = lo[i];
        out->span[out->nspan].end = e;
        out->span[out->nspan].turn = (int)(i - 1);
        out->nspan++;
    }
    out->capspan = nspan;
    free(lo);
    free(hi);
    zj_arena_free(&ar);
    free(r);
    return ZT_OK;
}

/* a content that renders no text: absent, null, "", or a list of text parts all empty */
static int content_empty(const json_t *c) {
    if (!c || json_is_null(c)) return 1;
    if (json_is_string(c)) return json_string_length(c) == 0;
    if (!json_is_array(c)) return 0;
    size_t i;
    const json_t *p;
    json_array_foreach((json_t *)c, i, p) {
        const json_t *t = json_object_get(p, "text");
        if (!json_is_string(t) || json_string_length(t) > 0) return 0;
    }
    return 1;
}

int zt_jinja_render(const zt_jinja *j, const json_t *messages, const json_t *vars, zt_jinja_token_at token_at,
                    const void *tctx, zt_chat_text *out, zt_status *st) {
    int rc = render_core(j, messages, (size_t)-1, 0, vars, token_at, tctx, out, st);
    if (rc != ZT_OK) return rc;
    /* an assistant message with tool calls and no content: its span starts where the rendering of the
     * messages before it with add_generation_prompt ends (the template's markup before the first call,
     * e.g. "<tool_call>\n{\"name\": \"", is the model's to write), when that rendering is a byte prefix of
     * this one ending at or before the first traced byte */
    for (int s = 0; s < out->nspan; ++s) {
        size_t i = (size_t)out->span[s].turn;
        const json_t *m = json_array_get(messages, i), *tc = json_object_get(m, "tool_calls");
        if (!json_is_array(tc) || json_array_size(tc) == 0 || !content_empty(json_object_get(m, "content")))
            continue;
        zt_chat_text p;
        zt_status ps;
        memset(&ps, 0, sizeof ps);
        if (render_core(j, messages, i, 1, vars, NULL, NULL, &p, &ps) != ZT_OK) continue;
        if (p.len <= out->span[s].begin && memcmp(p.text, out->text, p.len) == 0) out->span[s].begin = p.len;
        zt_chat_text_free(&p);
    }
    return ZT_OK;
}
