/* parse.c -- the chat-template engine's parser (jinja_int.h): tokens -> the AST by recursive
 * descent, with the parse nesting limits; zt_jinja_parse, zt_jinja_free (jinja.h). */
#include <limits.h>
#include <setjmp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "jinja_int.h"

/* ---------------------------------------------------------------- AST */


/* jinja2's filters and tests (a name outside these fails when the template is compiled, or when
 * reached inside an if) */
const char *const zj_jinja_filters[] = {
    "abs", "attr", "batch", "capitalize", "center", "count", "d", "default", "dictsort", "e", "escape",
    "filesizeformat", "first", "float", "forceescape", "format", "groupby", "indent", "int", "items", "join",
    "last", "length", "list", "lower", "map", "max", "min", "pprint", "random", "reject", "rejectattr",
    "replace", "reverse", "round", "safe", "select", "selectattr", "slice", "sort", "string", "striptags", "sum",
    "title", "tojson", "trim", "truncate", "unique", "upper", "urlencode", "urlize", "wordcount", "wordwrap",
    "xmlattr", NULL};
const char *const zj_jinja_tests[] = {
    "!=", "<", "<=", "==", ">", ">=", "boolean", "callable", "defined", "divisibleby", "eq", "equalto",
    "escaped", "even", "false", "filter", "float", "ge", "greaterthan", "gt", "in", "integer", "iterable", "le",
    "lessthan", "lower", "lt", "mapping", "ne", "none", "number", "odd", "sameas", "sequence", "string", "test",
    "true", "undefined", "upper", NULL};


/* nest: expression nesting; blocks, loops: statement nesting; inloop:
 * break/continue allowed; soft: inside an if or an inline if (a filter or
 * test jinja2 lacks fails there only when reached) */
/* a filter or test name jinja2 lacks, outside an if: an error once the expression is complete
 * and not inside an inline if (which jinja2 compiles as a whole in a soft frame) */
typedef struct pending { int line, test; const char *name; } pending;
typedef struct parser {
    jctx *c;
    tok *t;
    int i, nest, blocks, loops, inloop, soft;
    pending *pend;
    int npend, cappend;
} parser;

static void pend_add(parser *P, int line, int test, const char *name) {
    if (P->npend == P->cappend) {
        int cap = P->cappend ? P->cappend * 2 : 8;
        pending *np = zj_aalloc(P->c, (size_t)cap * sizeof *np);
        if (P->npend) memcpy(np, P->pend, (size_t)P->npend * sizeof *np);
        P->pend = np;
        P->cappend = cap;
    }
    P->pend[P->npend++] = (pending){line, test, name};
}
/* a statement's expressions are complete */
static void pend_flush(parser *P) {
    if (!P->npend) return;
    P->c->line = P->pend[0].line;
    zj_jfail(P->c, ZT_EDATA, "no %s named '%s'", P->pend[0].test ? "test" : "filter", P->pend[0].name);
}

static tok *cur(parser *P) { return &P->t[P->i]; }
static int is_op(parser *P, const char *op) {
    tok *t = cur(P);
    return t->k == T_OP && t->n == strlen(op) && memcmp(t->p, op, t->n) == 0;
}
static int is_name(parser *P, const char *nm) {
    tok *t = cur(P);
    return t->k == T_NAME && t->n == strlen(nm) && memcmp(t->p, nm, t->n) == 0;
}
static int is_name_at(parser *P, int i, const char *nm) {
    tok *t = &P->t[P->i + i];
    return t->k == T_NAME && t->n == strlen(nm) && memcmp(t->p, nm, t->n) == 0;
}
static const char *tokdesc(parser *P) {
    tok *t = cur(P);
    static __thread char buf[64];
    if (t->k == T_EOF) return "end of template";
    if (t->k == T_BEND || t->k == T_VEND) return "end of tag";
    snprintf(buf, sizeof buf, "'%.*s'", (int)(t->n < 40 ? t->n : 40), t->p);
    return buf;
}
static void expect_op(parser *P, const char *op) {
    P->c->line = cur(P)->line;
    if (!is_op(P, op)) zj_jfail(P->c, ZT_EDATA, "expected '%s', found %s", op, tokdesc(P));
    P->i++;
}
static void enter(parser *P) {
    if (++P->nest > ZT_JINJA_MAX_NEST) {
        P->c->line = cur(P)->line;
        zj_jfail(P->c, ZT_EDATA, "an expression nested deeper than %d levels (parentheses, brackets, calls, signs, "
                 "not) " BUDGET, ZT_JINJA_MAX_NEST);
    }
}
static void leave(parser *P) { P->nest--; }

static const char *take_name(parser *P) {
    P->c->line = cur(P)->line;
    if (cur(P)->k != T_NAME) zj_jfail(P->c, ZT_EDATA, "expected a name, found %s", tokdesc(P));
    tok *t = &P->t[P->i++];
    return zj_adup(P->c, t->p, t->n);
}
/* an assignment target (set, for): a name that is not a constant */
static const char *take_target(parser *P) {
    const char *nm = take_name(P);
    static const char *const consts[] = {"true", "false", "none", "True", "False", "None", NULL};
    if (zj_in_names(consts, nm)) zj_jfail(P->c, ZT_EDATA, "can't assign to the constant '%s'", nm);
    return nm;
}
static node *mknode(parser *P, int k) {
    node *n = zj_aalloc(P->c, sizeof *n);
    n->k = k;
    n->line = cur(P)->line;
    n->h = 1;
    return n;
}
/* an expression node complete: its height, bounded */
static node *fin(parser *P, node *n) {
    int h = 0;
    node *ch[4] = {n->a, n->b, n->c, n->d};
    for (int i = 0; i < 4; ++i) if (ch[i] && ch[i]->h > h) h = ch[i]->h;
    for (int i = 0; i < n->nv; ++i) if (n->v[i]->h > h) h = n->v[i]->h;
    n->h = h + 1;
    if (n->h > ZT_JINJA_MAX_EXPR) {
        P->c->line = n->line;
        zj_jfail(P->c, ZT_EDATA, "an expression deeper than %d levels (chained operators, filters, attributes) " BUDGET,
                 ZT_JINJA_MAX_EXPR);
    }
    return n;
}
static void addarg(parser *P, node *n, node *a, const char *kw) {
    if (n->nv == n->capv) {
        if (n->capv > INT_MAX / 2) zj_jfail(P->c, ZT_EDATA, "too many elements");
        int cap = n->capv ? n->capv * 2 : 4;
        node **v = zj_aalloc(P->c, (size_t)cap * sizeof *v);
        const char **k = zj_aalloc(P->c, (size_t)cap * sizeof *k);
        if (n->nv) { memcpy(v, n->v, (size_t)n->nv * sizeof *v); memcpy(k, n->kw, (size_t)n->nv * sizeof *k); }
        n->v = v;
        n->kw = k;
        n->capv = cap;
    }
    n->v[n->nv] = a;
    n->kw[n->nv] = kw;
    n->nv++;
}

static node *p_expr(parser *P);
static node *p_or(parser *P);

/* an expression of literals only (jinja2's optimizer may fold it); bounded by the parse limits */
static int literal(const node *n) {
    switch (n->k) {
    case E_CONST: return 1;
    case E_LIST: case E_TUPLE: case E_DICT: case E_BIN: case E_NEG: case E_POS: case E_NOT: case E_AND: case E_OR:
    case E_COND: case E_CMP: case E_CAT: case E_FILTER: case E_TEST: case E_ITEM: case E_SLICE: break;
    default: return 0;
    }
    const node *ch[4] = {n->a, n->b, n->c, n->d};
    for (int i = 0; i < 4; ++i) if (ch[i] && !literal(ch[i])) return 0;
    for (int i = 0; i < n->nv; ++i) if (!literal(n->v[i])) return 0;
    return 1;
}
static node *p_unary(parser *P);

static void p_args(parser *P, node *n) {   /* after '(' up to and including ')' */
    int kw_seen = 0;
    while (!is_op(P, ")")) {
        const char *kw = NULL;
        P->c->line = cur(P)->line;
        if (is_op(P, "*") || is_op(P, "**")) zj_jfail(P->c, ZT_EUNSUPPORTED, "calls with *args or **kwargs");
        if (cur(P)->k == T_NAME && P->t[P->i + 1].k == T_OP && P->t[P->i + 1].n == 1 && P->t[P->i + 1].p[0] == '=') {
            kw = take_name(P);
            P->i++;
            kw_seen = 1;
        } else if (kw_seen) {
            zj_jfail(P->c, ZT_EDATA, "invalid syntax for function call expression (a positional argument after a keyword argument)");
        }
        addarg(P, n, p_expr(P), kw);
        if (!is_op(P, ",")) break;
        P->i++;
    }
    expect_op(P, ")");
}

static node *p_primary(parser *P) {
    tok *t = cur(P);
    P->c->line = t->line;
    node *n;
    if (t->k == T_NAME) {
        n = mknode(P, E_CONST);
        if (is_name(P, "true") || is_name(P, "True")) n->cst = vbool(1);
        else if (is_name(P, "false") || is_name(P, "False")) n->cst = vbool(0);
        else if (is_name(P, "none") || is_name(P, "None")) n->cst = vnone();
        else { n->k = E_NAME; n->name = zj_adup(P->c, t->p, t->n); }
        P->i++;
    } else if (t->k == T_STR) {
        n = mknode(P, E_CONST);
        sbuf b = {0};
        while (cur(P)->k == T_STR) {     /* adjacent literals concatenate */
            P->c->line = cur(P)->line;
            zj_sb_put(P->c, &b, zj_unescape(P->c, cur(P)->p, cur(P)->n));
            P->i++;
        }
        n->cst = vstr(zj_sb_str(P->c, &b));
        zj_u8cache(n->cst.s);   /* counted now: a rendering never writes to the template (it may be shared) */
    } else if (t->k == T_INT) {
        n = mknode(P, E_CONST);
        n->cst = vint(t->i);
        P->i++;
    } else if (t->k == T_FLOAT) {
        n = mknode(P, E_CONST);
        n->cst = vfloat(t->f);
        P->i++;
    } else if (is_op(P, "(")) {   /* nesting counts the expressions inside (p_expr) */
        P->i++;
        if (is_op(P, ")")) {
            n = mknode(P, E_TUPLE);   /* () */
        } else {
            n = p_expr(P);
            if (is_op(P, ",")) {     /* a tuple */
                node *l = mknode(P, E_TUPLE);
                addarg(P, l, n, NULL);
                while (is_op(P, ",")) {
                    P->i++;
                    if (is_op(P, ")")) break;
                    addarg(P, l, p_expr(P), NULL);
                }
                n = fin(P, l);
            }
        }
        expect_op(P, ")");
    } else if (is_op(P, "[")) {
        P->i++;
        n = mknode(P, E_LIST);
        while (!is_op(P, "]")) {
            addarg(P, n, p_expr(P), NULL);
            if (!is_op(P, ",")) break;
            P->i++;
        }
        expect_op(P, "]");
        fin(P, n);
    } else if (is_op(P, "{")) {
        P->i++;
        n = mknode(P, E_DICT);
        while (!is_op(P, "}")) {
            addarg(P, n, p_expr(P), NULL);
            expect_op(P, ":");
            addarg(P, n, p_expr(P), NULL);
            if (!is_op(P, ",")) break;
            P->i++;
        }
        expect_op(P, "}");
        fin(P, n);
    } else {
        zj_jfail(P->c, ZT_EDATA, "unexpected %s in an expression", tokdesc(P));
    }
    /* postfix: .name, [index], [a:b:c], (args) */
    for (;;) {
        if (is_op(P, ".")) {
            P->i++;
            node *a = mknode(P, E_ATTR);
            a->a = n;
            if (cur(P)->k == T_INT) {   /* x.0 */
                a->k = E_ITEM;
                a->b = mknode(P, E_CONST);
                a->b->cst = vint(cur(P)->i);
                P->i++;
            } else {
                a->name = take_name(P);
            }
            n = fin(P, a);
        } else if (is_op(P, "[")) {
            P->i++;
            node *s = NULL, *parts[3] = {NULL, NULL, NULL};
            int ncolon = 0;
            for (;;) {
                P->c->line = cur(P)->line;
                if (is_op(P, ":")) { if (++ncolon > 2) zj_jfail(P->c, ZT_EDATA, "bad slice"); P->i++; continue; }
                if (is_op(P, "]")) break;
                if (is_op(P, ",")) zj_jfail(P->c, ZT_EUNSUPPORTED, "subscripts with a tuple (x[a, b])");
                if (parts[ncolon]) zj_jfail(P->c, ZT_EDATA, "expected ']' or ':', found %s", tokdesc(P));
                parts[ncolon] = p_expr(P);
            }
            P->i++;
            if (ncolon == 0) {
                if (!parts[0]) zj_jfail(P->c, ZT_EDATA, "empty subscript");
                s = mknode(P, E_ITEM);
                s->a = n;
                s->b = parts[0];
            } else {
                s = mknode(P, E_SLICE);
                s->a = n;
                s->b = parts[0];
                s->c = parts[1];
                s->d = parts[2];
                /* all literals: jinja2 folds the slice when it compiles the template (an error
                 * there is an undefined value, printed as ''), the engine refuses such a slice */
                s->op = literal(n) && (!s->b || literal(s->b)) && (!s->c || literal(s->c)) && (!s->d || literal(s->d));
            }
            n = fin(P, s);
        } else if (is_op(P, "(")) {
            P->i++;
            node *call = mknode(P, E_CALL);
            call->a = n;
            p_args(P, call);
            n = fin(P, call);
        } else {
            break;
        }
    }
    return n;
}

/* filters and tests after a unary operand */
static node *p_filtertest(parser *P, node *n) {
    for (;;) {
        if (is_op(P, "|")) {
            P->i++;
            node *f = mknode(P, E_FILTER);
            f->a = n;
            const char *nm = take_name(P);
            if (is_op(P, ".")) zj_jfail(P->c, ZT_EUNSUPPORTED, "dotted filter name '%s.'", nm);
            f->name = nm;
            if (!zj_in_names(zj_jinja_filters, nm)) {
                if (!P->soft) pend_add(P, f->line, 0, nm);
                f->op = 1;
            }
            if (is_op(P, "(")) { P->i++; p_args(P, f); }
            n = fin(P, f);
        } else if (is_name(P, "is")) {
            P->i++;
            node *t = mknode(P, E_TEST);
            t->a = n;
            int neg = 0;
            if (is_name(P, "not")) { neg = 1; P->i++; }
            t->name = take_name(P);
            if (is_op(P, ".")) zj_jfail(P->c, ZT_EUNSUPPORTED, "dotted test name '%s.'", t->name);
            t->op = neg;
            if (!zj_in_names(zj_jinja_tests, t->name)) {
                if (!P->soft) pend_add(P, t->line, 1, t->name);
                t->op |= 2;
            }
            if (is_op(P, "(")) { P->i++; p_args(P, t); }
            else {
                tok *k = cur(P);
                if ((k->k == T_NAME || k->k == T_STR || k->k == T_INT || k->k == T_FLOAT || is_op(P, "(") ||
                     is_op(P, "[") || is_op(P, "{")) && !is_name(P, "else") && !is_name(P, "or") && !is_name(P, "and")) {
                    if (is_name(P, "is")) zj_jfail(P->c, ZT_EDATA, "you cannot chain multiple tests with is");
                    addarg(P, t, p_primary(P), NULL);
                }
            }
            n = fin(P, t);
        } else {
            return n;
        }
    }
}

/* jinja2's parse_unary: a sign applies to the unfiltered operand, the
 * filters and tests that follow to the signed value */
static node *p_unary_(parser *P, int with_filter) {
    node *n;
    if (is_op(P, "-") || is_op(P, "+")) {
        n = mknode(P, is_op(P, "-") ? E_NEG : E_POS);
        P->i++;
        enter(P);
        n->a = p_unary_(P, 0);
        leave(P);
        fin(P, n);
    } else {
        n = p_primary(P);
    }
    return with_filter ? p_filtertest(P, n) : n;
}
static node *p_unary(parser *P) { return p_unary_(P, 1); }

static node *mkbin(parser *P, int op, node *a, node *b) {
    node *n = mknode(P, E_BIN);
    n->line = a->line;
    n->op = op;
    n->a = a;
    n->b = b;
    return fin(P, n);
}

static node *p_pow(parser *P) {
    node *n = p_unary(P);
    while (is_op(P, "**")) { P->i++; n = mkbin(P, OP_POW, n, p_unary(P)); }
    return n;
}
static node *p_math2(parser *P) {
    node *n = p_pow(P);
    for (;;) {
        int op = is_op(P, "*") ? OP_MUL : is_op(P, "/") ? OP_DIV : is_op(P, "//") ? OP_FDIV : is_op(P, "%") ? OP_MOD : -1;
        if (op < 0) return n;
        P->i++;
        n = mkbin(P, op, n, p_pow(P));
    }
}
static node *p_concat(parser *P) {   /* a ~ b ~ c: one node (jinja2's Concat) */
    node *n = p_math2(P);
    if (!is_op(P, "~")) return n;
    node *c = mknode(P, E_CAT);
    c->line = n->line;
    addarg(P, c, n, NULL);
    while (is_op(P, "~")) { P->i++; addarg(P, c, p_math2(P), NULL); }
    return fin(P, c);
}
static node *p_math1(parser *P) {
    node *n = p_concat(P);
    for (;;) {
        int op = is_op(P, "+") ? OP_ADD : is_op(P, "-") ? OP_SUB : -1;
        if (op < 0) return n;
        P->i++;
        n = mkbin(P, op, n, p_concat(P));
    }
}
static node *p_compare(parser *P) {   /* a < b < c: one node (Python's chained comparison) */
    node *n = p_math1(P), *cmp = NULL;
    int nops = 0, capops = 0;
    for (;;) {
        int op = is_op(P, "==") ? OP_EQ : is_op(P, "!=") ? OP_NE : is_op(P, "<") ? OP_LT : is_op(P, ">") ? OP_GT :
                 is_op(P, "<=") ? OP_LE : is_op(P, ">=") ? OP_GE : is_name(P, "in") ? OP_IN :
                 (is_name(P, "not") && is_name_at(P, 1, "in")) ? OP_NOTIN : -1;
        if (op < 0) break;
        P->i += op == OP_NOTIN ? 2 : 1;
        if (!cmp) { cmp = mknode(P, E_CMP); cmp->line = n->line; cmp->a = n; }
        node *rhs = p_math1(P);
        if (nops == capops) {
            int cap = capops ? capops * 2 : 4;
            int *o = zj_aalloc(P->c, (size_t)cap * sizeof(int));
            if (nops) memcpy(o, cmp->ops, (size_t)nops * sizeof(int));
            cmp->ops = o;
            capops = cap;
        }
        cmp->ops[nops++] = op;
        addarg(P, cmp, rhs, NULL);
    }
    return cmp ? fin(P, cmp) : n;
}
static node *p_not(parser *P) {
    if (is_name(P, "not")) {
        node *n = mknode(P, E_NOT);
        P->i++;
        enter(P);
        n->a = p_not(P);
        leave(P);
        return fin(P, n);
    }
    return p_compare(P);
}
static node *p_and(parser *P) {
    node *n = p_not(P);
    while (is_name(P, "and")) {
        node *a = mknode(P, E_AND);
        a->line = n->line;
        P->i++;
        a->a = n;
        a->b = p_not(P);
        n = fin(P, a);
    }
    return n;
}
static node *p_or(parser *P) {
    node *n = p_and(P);
    while (is_name(P, "or")) {
        node *a = mknode(P, E_OR);
        a->line = n->line;
        P->i++;
        a->a = n;
        a->b = p_and(P);
        n = fin(P, a);
    }
    return n;
}
static node *p_expr(parser *P) {
    enter(P);
    int npend = P->npend;
    node *n = p_or(P);
    if (is_name(P, "if")) {
        P->npend = npend;   /* an inline if is soft as a whole, its value too */
        P->soft++;
        while (is_name(P, "if")) {
            node *c = mknode(P, E_COND);
            c->line = n->line;
            P->i++;
            c->a = n;               /* value when true */
            c->b = p_or(P);         /* condition */
            if (is_name(P, "else")) { P->i++; c->c = p_expr(P); }
            n = fin(P, c);
        }
        P->soft--;
    }
    leave(P);
    return n;
}
/* an expression or a bare tuple (a, b): {{ }}, set, for ... in */
static node *p_tuple(parser *P, node *(*item)(parser *)) {
    node *n = item(P);
    if (!is_op(P, ",")) return n;
    node *l = mknode(P, E_TUPLE);
    l->line = n->line;
    addarg(P, l, n, NULL);
    while (is_op(P, ",")) {
        P->i++;
        if (cur(P)->k == T_BEND || cur(P)->k == T_VEND || is_name(P, "if") || is_name(P, "recursive")) break;
        addarg(P, l, item(P), NULL);
    }
    return fin(P, l);
}

static void end_block(parser *P) {
    P->c->line = cur(P)->line;
    if (cur(P)->k != T_BEND) zj_jfail(P->c, ZT_EDATA, "expected end of tag, found %s", tokdesc(P));
    P->i++;
}

static void enter_block(parser *P, int loop) {
    P->c->line = cur(P)->line;
    if (++P->blocks > ZT_JINJA_MAX_BLOCKS)
        zj_jfail(P->c, ZT_EDATA, "blocks (if, for, generation) nested deeper than %d levels " BUDGET, ZT_JINJA_MAX_BLOCKS);
    if (loop && ++P->loops > ZT_JINJA_MAX_LOOPS)
        zj_jfail(P->c, ZT_EDATA, "for loops nested deeper than %d levels " BUDGET, ZT_JINJA_MAX_LOOPS);
}

static node *p_body(parser *P, const char *const *ends, int *which);

/* the body of a macro, call block or block set: its own frame (jinja2 compiles it as a function), no
 * loop around it; up to and including {% END %}.  *uses: MF_* of the names the body mentions */
static node *frame_body(parser *P, const char *end, int *uses) {
    enter_block(P, 0);
    int soft = P->soft, inloop = P->inloop, i0 = P->i;
    P->soft = 0;
    P->inloop = 0;
    const char *ends[] = {end, NULL};
    int w;
    node *b = p_body(P, ends, &w);
    if (uses) {
        *uses = 0;
        for (int i = i0; i < P->i; ++i) {
            tok *t = &P->t[i];
            if (t->k != T_NAME) continue;
            if (t->n == 7 && !memcmp(t->p, "varargs", 7)) *uses |= MF_VARARGS;
            if (t->n == 6 && !memcmp(t->p, "kwargs", 6)) *uses |= MF_KWARGS;
            if (t->n == 6 && !memcmp(t->p, "caller", 6)) *uses |= MF_CALLER;
        }
    }
    P->soft = soft;
    P->inloop = inloop;
    P->blocks--;
    end_block(P);
    return b;
}

/* a macro's parameters: ( name [= default], ... ) */
static void p_params(parser *P, node *m) {
    expect_op(P, "(");
    int dflt = 0;
    while (!is_op(P, ")")) {
        const char *nm = take_target(P);
        for (int i = 0; i < m->nv; ++i)
            if (!strcmp(m->kw[i], nm)) zj_jfail(P->c, ZT_EDATA, "duplicate argument '%s' in the macro definition", nm);
        node *d = NULL;
        if (is_op(P, "=")) {
            P->i++;
            d = p_expr(P);
            dflt = 1;
        } else if (dflt) {
            zj_jfail(P->c, ZT_EDATA, "parameter without a default ('%s') after one with a default", nm);
        } else if (!strcmp(nm, "caller")) {
            zj_jfail(P->c, ZT_EDATA, "When defining macros or call blocks the special \"caller\" argument must be "
                     "omitted or be given a default.");
        }
        addarg(P, m, d, nm);
        if (!is_op(P, ",")) break;
        P->i++;
    }
    expect_op(P, ")");
    pend_flush(P);
}

/* statements until one of the block names in `ends` (NULL-terminated);
 * *which: its index (the name token is consumed, its arguments are not) */
static node *p_body(parser *P, const char *const *ends, int *which) {
    node head = {0}, *tail = &head;
    for (;;) {
        tok *t = cur(P);
        P->c->line = t->line;
        node *s = NULL;
        if (t->k == T_EOF) {
            if (!ends) { *which = -1; return head.next; }
            zj_jfail(P->c, ZT_EDATA, "unexpected end of template (missing {%% %s %%})", ends[0]);
        } else if (t->k == T_DATA) {
            s = mknode(P, S_DATA);
            s->cst = vstr(zj_mkstr(P->c, t->p, t->n));
            zj_u8cache(s->cst.s);
            P->i++;
        } else if (t->k == T_VBEGIN) {
            P->i++;
            s = mknode(P, S_OUT);
            s->a = p_tuple(P, p_expr);
            pend_flush(P);
            P->c->line = cur(P)->line;
            if (cur(P)->k != T_VEND) zj_jfail(P->c, ZT_EDATA, "expected '}}', found %s", tokdesc(P));
            P->i++;
        } else if (t->k == T_BBEGIN) {
            P->i++;
            P->c->line = cur(P)->line;
            for (int e = 0; ends && ends[e]; ++e)
                if (is_name(P, ends[e])) { P->i++; *which = e; return head.next; }
            if (is_name(P, "if")) {
                P->i++;
                s = mknode(P, S_IF);
                enter_block(P, 0);
                P->soft++;
                s->a = p_expr(P);
                end_block(P);
                static const char *const e_if[] = {"endif", "elif", "else", NULL};
                int w;
                s->b = p_body(P, e_if, &w);
                node *last = s;
                int nelif = 0;
                while (w == 1) {    /* elif: the next test of the same if (jinja2's If.elif_) */
                    if (++nelif > ZT_JINJA_MAX_ELIF)
                        zj_jfail(P->c, ZT_EDATA, "an if with more than %d elif branches " BUDGET, ZT_JINJA_MAX_ELIF);
                    node *el = mknode(P, S_IF);
                    el->a = p_expr(P);
                    end_block(P);
                    el->b = p_body(P, e_if, &w);
                    last->d = el;
                    last = el;
                }
                if (w == 2) {
                    end_block(P);
                    static const char *const e_endif[] = {"endif", NULL};
                    last->c = p_body(P, e_endif, &w);
                }
                P->soft--;
                P->blocks--;
                end_block(P);
            } else if (is_name(P, "for")) {
                P->i++;
                s = mknode(P, S_FOR);
                enter_block(P, 1);
                if (is_op(P, "(")) zj_jfail(P->c, ZT_EUNSUPPORTED, "parenthesized for loop targets");
                s->name = take_target(P);
                if (is_op(P, ",")) { P->i++; s->name2 = take_target(P); }
                if (is_op(P, ",")) zj_jfail(P->c, ZT_EUNSUPPORTED, "for loops unpacking more than two names");
                if (!is_name(P, "in")) zj_jfail(P->c, ZT_EDATA, "expected 'in', found %s", tokdesc(P));
                P->i++;
                s->a = p_tuple(P, p_or);     /* the iterable; a trailing 'if' filters */
                int soft = P->soft, inloop = P->inloop;
                P->soft = 0;                 /* the filter and the body: the loop's own frame */
                if (is_name(P, "if")) { P->i++; s->d = p_expr(P); }
                pend_flush(P);
                if (is_name(P, "recursive")) zj_jfail(P->c, ZT_EUNSUPPORTED, "recursive for loops");
                end_block(P);
                static const char *const e_for[] = {"endfor", "else", NULL};
                int w;
                P->inloop = 1;
                s->b = p_body(P, e_for, &w);
                P->inloop = inloop;
                P->soft = soft;
                if (w == 1) {
                    end_block(P);
                    static const char *const e_endfor[] = {"endfor", NULL};
                    s->c = p_body(P, e_endfor, &w);
                }
                P->blocks--;
                P->loops--;
                end_block(P);
            } else if (is_name(P, "set")) {
                P->i++;
                const char *nm = take_target(P);
                if (is_op(P, ".")) {
                    P->i++;
                    s = mknode(P, S_SETATTR);
                    s->name = nm;
                    s->name2 = take_name(P);
                } else {
                    s = mknode(P, S_SET);
                    s->name = nm;
                    if (is_op(P, ",")) { P->i++; s->name2 = take_target(P); }
                    if (is_op(P, ",")) zj_jfail(P->c, ZT_EUNSUPPORTED, "set unpacking more than two names");
                }
                if (s->k == S_SET && !s->name2 && cur(P)->k == T_BEND) {   /* {% set x %}...{% endset %} */
                    end_block(P);
                    s->k = S_SETBLK;
                    s->b = frame_body(P, "endset", NULL);
                } else {
                    if (!is_op(P, "="))
                        zj_jfail(P->c, ZT_EUNSUPPORTED, "block set with a filter ({%% set %s | ... %%})", nm);
                    P->i++;
                    s->a = p_tuple(P, p_expr);
                    pend_flush(P);
                    end_block(P);
                }
            } else if (is_name(P, "break") || is_name(P, "continue")) {
                int brk = is_name(P, "break");
                if (!P->inloop)
                    zj_jfail(P->c, ZT_EDATA, "'%s' outside a for loop (jinja2 refuses it)", brk ? "break" : "continue");
                s = mknode(P, brk ? S_BREAK : S_CONTINUE);
                P->i++;
                end_block(P);
            } else if (is_name(P, "generation")) {
                P->i++;
                end_block(P);
                s = mknode(P, S_GEN);
                enter_block(P, 0);
                /* the body is a macro's (jinja2's CallBlock): its own frame, no loop around it */
                int soft = P->soft, inloop = P->inloop;
                P->soft = 0;
                P->inloop = 0;
                static const char *const e_gen[] = {"endgeneration", NULL};
                int w;
                s->b = p_body(P, e_gen, &w);
                P->soft = soft;
                P->inloop = inloop;
                P->blocks--;
                end_block(P);
            } else if (is_name(P, "macro")) {
                P->i++;
                s = mknode(P, S_MACRO);
                s->name = take_target(P);
                p_params(P, s);
                end_block(P);
                s->b = frame_body(P, "endmacro", &s->op);
            } else if (is_name(P, "call")) {
                P->i++;
                s = mknode(P, S_CALLBLK);
                node *m = mknode(P, S_MACRO);   /* the caller */
                m->name = "caller";
                if (is_op(P, "(")) p_params(P, m);
                s->a = p_expr(P);
                pend_flush(P);
                if (s->a->k != E_CALL) {
                    P->c->line = s->line;
                    zj_jfail(P->c, ZT_EDATA, "expected a call after {%% call %%}");
                }
                end_block(P);
                m->b = frame_body(P, "endcall", &m->op);
                s->c = m;
            } else if (is_name(P, "filter")) {
                zj_jfail(P->c, ZT_EUNSUPPORTED, "statement '{%% filter %%}'");
            } else if (cur(P)->k == T_NAME) {
                zj_jfail(P->c, ZT_EUNSUPPORTED, "statement '{%% %.*s %%}'", (int)(cur(P)->n < 40 ? cur(P)->n : 40), cur(P)->p);
            } else {
                zj_jfail(P->c, ZT_EDATA, "expected a statement name, found %s", tokdesc(P));
            }
        } else {
            zj_jfail(P->c, ZT_EDATA, "unexpected %s", tokdesc(P));
        }
        tail->next = s;
        tail = s;
    }
}

int zt_jinja_parse(const char *src, size_t n, zt_jinja **out, zt_status *st) {
    *out = NULL;
    zt_jinja *j = calloc(1, sizeof *j);
    if (!j) return zt_fail(st, ZT_ENOMEM, "out of memory");
    jctx c = {.ar = &j->ar, .st = st, .line = 1};
    if (setjmp(c.jb)) {
        zj_arena_free(&j->ar);
        free(j);
        return st ? st->code : ZT_EDATA;
    }
    /* a template is text: invalid UTF-8 is the template's fault (Python cannot read it as str) */
    for (size_t i = 0, len; i < n; i += len) {
        if (!(len = zj_u8valid((const unsigned char *)src + i, n - i))) {
            for (size_t k = 0; k < i; ++k) c.line += src[k] == '\n';
            zj_jfail(&c, ZT_EDATA, "the template is not valid UTF-8 (byte 0x%02x at offset %zu)", (unsigned char)src[i], i);
        }
    }
    /* newlines normalized to \n, one trailing newline dropped (keep_trailing_newline false) */
    char *s = zj_aalloc(&c, n + 1);
    size_t k = 0;
    for (size_t i = 0; i < n; ++i) {
        if (src[i] == '\r') { s[k++] = '\n'; if (i + 1 < n && src[i + 1] == '\n') ++i; }
        else s[k++] = src[i];
    }
    if (k && s[k - 1] == '\n') --k;
    lexer L = {.c = &c};
    zj_lex(&L, s, k);
    parser P = {.c = &c, .t = L.t, .i = 0};
    int w;
    j->root = p_body(&P, NULL, &w);
    *out = j;
    return ZT_OK;
}

void zt_jinja_free(zt_jinja *j) {
    if (!j) return;
    zj_arena_free(&j->ar);
    free(j);
}
