/* SPDX-License-Identifier: Apache-2.0 */
/* yaml.c - the YAML subset reader of yaml.h: block mappings and sequences,
 * one-line scalars and flow collections into a cJSON tree.
 *
 * Lines are read one at a time; a "- key: value" item is the rest of its
 * line taken as a line of its own whose indentation is the key's column (a
 * pending piece), so a mapping inside a sequence item needs no special
 * case. Flow collections are read from the buffer across lines. */
#include "yaml.h"

#include <cjson/cJSON.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define YAML_MAX_DEPTH 64

typedef struct yline {
    size_t start; /* the content's first byte (after the indentation) */
    size_t end;   /* the line's end (before "\r\n" or "\n") */
    size_t next;  /* the next line's start */
    int indent;   /* the content's column */
    int line;     /* 1-based */
    int eof, pending;
} yline;

typedef struct yp {
    const char *s;
    size_t n;
    size_t pos; /* the next physical line */
    int line;   /* its number */
    int seen;   /* content has been read (a later "---" is a second document) */
    int ended;  /* "..." seen */
    int has_pend;
    yline pend;
    int depth;
    int failed;
    char *err;
    size_t errlen;
} yp;

__attribute__((format(printf, 3, 4))) static cJSON *fail(yp *p, int line, const char *fmt, ...)
{
    char msg[300];
    va_list ap;
    va_start(ap, fmt);
    if (p->failed) {
        va_end(ap);
        return NULL;
    }
    p->failed = 1;
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    /* one line of text: what the input put into it (a key, an escape) too */
    for (char *c = msg; *c; c++)
        if ((unsigned char)*c < 0x20 || *c == 0x7f)
            *c = '?';
    if (line > 0)
        snprintf(p->err, p->errlen, "line %d: %s", line, msg);
    else
        snprintf(p->err, p->errlen, "%s", msg);
    return NULL;
}

static cJSON *oom(yp *p)
{
    return fail(p, 0, "out of memory");
}

static int is_blank(char c)
{
    return c == ' ' || c == '\t';
}

/* The next line with content (blank and comment lines skipped), not
 * consumed; l->eof at the end. 0, or -1 with the error set. */
static int peek(yp *p, yline *l)
{
    memset(l, 0, sizeof *l);
    if (p->has_pend) {
        *l = p->pend;
        return 0;
    }
    while (p->pos < p->n && !p->ended) {
        const char *s = p->s;
        size_t e = p->pos;
        while (e < p->n && s[e] != '\n')
            e++;
        size_t next = e < p->n ? e + 1 : e;
        size_t end = e > p->pos && s[e - 1] == '\r' ? e - 1 : e;
        size_t c = p->pos;
        int tab = 0;
        while (c < end && is_blank(s[c])) {
            if (s[c] == '\t')
                tab = 1;
            c++;
        }
        if (c == end || s[c] == '#') {
            p->pos = next;
            p->line++;
            continue;
        }
        if (tab)
            return fail(p, p->line, "a tab in the indentation (YAML indents with spaces)"), -1;
        int indent = (int)(c - p->pos);
        if (indent == 0 && end - c >= 3 &&
            (end - c == 3 || is_blank(s[c + 3]) || s[c + 3] == '#')) {
            if (memcmp(s + c, "---", 3) == 0) {
                if (p->seen)
                    return fail(p, p->line, "a second document ('---'): one is expected"), -1;
                p->pos = next;
                p->line++;
                continue;
            }
            if (memcmp(s + c, "...", 3) == 0) {
                p->ended = 1;
                break;
            }
        }
        if (s[c] == '%')
            return fail(p, p->line, "YAML directives ('%%') are not supported"), -1;
        l->start = c;
        l->end = end;
        l->next = next;
        l->indent = indent;
        l->line = p->line;
        return 0;
    }
    l->eof = 1;
    l->line = p->line;
    return 0;
}

static void consume(yp *p, const yline *l)
{
    p->seen = 1;
    if (l->pending) {
        p->has_pend = 0;
        return;
    }
    p->pos = l->next;
    p->line = l->line + 1;
}

static int is_seq_item(const yp *p, const yline *l)
{
    return p->s[l->start] == '-' && (l->start + 1 == l->end || is_blank(p->s[l->start + 1]));
}

/* A plain scalar's node: true/false, null/~/"" or a string. */
static cJSON *plain_node(yp *p, const char *v, size_t n)
{
    static const char *const trues[] = {"true", "True", "TRUE"};
    static const char *const falses[] = {"false", "False", "FALSE"};
    static const char *const nulls[] = {"null", "Null", "NULL", "~"};
    for (size_t i = 0; i < 3; i++) {
        if (strlen(trues[i]) == n && memcmp(v, trues[i], n) == 0)
            return cJSON_CreateTrue();
        if (strlen(falses[i]) == n && memcmp(v, falses[i], n) == 0)
            return cJSON_CreateFalse();
    }
    if (n == 0)
        return cJSON_CreateNull();
    for (size_t i = 0; i < 4; i++)
        if (strlen(nulls[i]) == n && memcmp(v, nulls[i], n) == 0)
            return cJSON_CreateNull();
    char *t = malloc(n + 1);
    if (!t)
        return oom(p);
    memcpy(t, v, n);
    t[n] = '\0';
    cJSON *j = cJSON_CreateString(t);
    free(t);
    return j ? j : oom(p);
}

static void put_utf8(char *out, size_t *o, uint32_t cp)
{
    if (cp < 0x80) {
        out[(*o)++] = (char)cp;
    } else if (cp < 0x800) {
        out[(*o)++] = (char)(0xc0 | (cp >> 6));
        out[(*o)++] = (char)(0x80 | (cp & 0x3f));
    } else if (cp < 0x10000) {
        out[(*o)++] = (char)(0xe0 | (cp >> 12));
        out[(*o)++] = (char)(0x80 | ((cp >> 6) & 0x3f));
        out[(*o)++] = (char)(0x80 | (cp & 0x3f));
    } else {
        out[(*o)++] = (char)(0xf0 | (cp >> 18));
        out[(*o)++] = (char)(0x80 | ((cp >> 12) & 0x3f));
        out[(*o)++] = (char)(0x80 | ((cp >> 6) & 0x3f));
        out[(*o)++] = (char)(0x80 | (cp & 0x3f));
    }
}

static int hexv(char c)
{
    if (c >= '0' && c <= '9')
        return c - '0';
    if (c >= 'a' && c <= 'f')
        return c - 'a' + 10;
    if (c >= 'A' && c <= 'F')
        return c - 'A' + 10;
    return -1;
}

/* A quoted scalar starting at s[*i] (the quote) and closed before limit on
 * the same line: its decoded text (allocated) and *i after the closing
 * quote; NULL with the error set. */
static char *quoted(yp *p, size_t *i, size_t limit, int line)
{
    const char *s = p->s;
    char q = s[*i];
    size_t j = *i + 1;
    char *out = malloc(limit - *i + 1);
    size_t o = 0;
    if (!out)
        return oom(p), NULL;
    for (;;) {
        if (j >= limit || s[j] == '\n' || s[j] == '\r') {
            free(out);
            fail(p, line,
                 "a %s-quoted scalar is not closed on its line (multi-line scalars are not "
                 "supported)",
                 q == '"' ? "double" : "single");
            return NULL;
        }
        char c = s[j];
        if (q == '\'' && c == '\'') {
            if (j + 1 < limit && s[j + 1] == '\'') {
                out[o++] = '\'';
                j += 2;
                continue;
            }
            j++;
            break;
        }
        if (q == '"' && c == '"') {
            j++;
            break;
        }
        if (q == '"' && c == '\\') {
            if (j + 1 >= limit) {
                free(out);
                fail(p, line, "a backslash at the end of a double-quoted scalar");
                return NULL;
            }
            char e = s[j + 1];
            j += 2;
            int digits = 0;
            switch (e) {
            case '0':
                out[o++] = '\0';
                break;
            case 'a':
                out[o++] = '\a';
                break;
            case 'b':
                out[o++] = '\b';
                break;
            case 't':
            case '\t':
                out[o++] = '\t';
                break;
            case 'n':
                out[o++] = '\n';
                break;
            case 'v':
                out[o++] = '\v';
                break;
            case 'f':
                out[o++] = '\f';
                break;
            case 'r':
                out[o++] = '\r';
                break;
            case 'e':
                out[o++] = 0x1b;
                break;
            case ' ':
                out[o++] = ' ';
                break;
            case '"':
                out[o++] = '"';
                break;
            case '/':
                out[o++] = '/';
                break;
            case '\\':
                out[o++] = '\\';
                break;
            case 'x':
                digits = 2;
                break;
            case 'u':
                digits = 4;
                break;
            case 'U':
                digits = 8;
                break;
            default:
                free(out);
                fail(p, line, "an unknown escape '\\%c' in a double-quoted scalar", e);
                return NULL;
            }
            if (digits) {
                uint32_t cp = 0;
                for (int d = 0; d < digits; d++) {
                    int v = j < limit ? hexv(s[j]) : -1;
                    if (v < 0) {
                        free(out);
                        fail(p, line, "a malformed '\\%c' escape", e);
                        return NULL;
                    }
                    cp = cp * 16 + (uint32_t)v;
                    j++;
                }
                if (cp > 0x10ffff || (cp >= 0xd800 && cp <= 0xdfff)) {
                    free(out);
                    fail(p, line, "an escape names no Unicode character");
                    return NULL;
                }
                put_utf8(out, &o, cp); /* at most 4 bytes for 6 to 10 read */
            }
            continue;
        }
        out[o++] = c;
        j++;
    }
    out[o] = '\0';
    if (memchr(out, '\0', o)) {
        free(out);
        fail(p, line, "a quoted scalar holds a NUL character");
        return NULL;
    }
    *i = j;
    return out;
}

/* After a value: only blanks and a comment may follow on the line. */
static int rest_blank(yp *p, size_t i, size_t end, int line)
{
    while (i < end && is_blank(p->s[i]))
        i++;
    if (i < end && p->s[i] != '#') {
        int n = end - i > 30 ? 30 : (int)(end - i);
        fail(p, line, "unexpected text after a value: '%.*s'", n, p->s + i);
        return -1;
    }
    return 0;
}

/* ---- flow collections ---- */

typedef struct fpos {
    size_t i;
    int line;
} fpos;

static void flow_ws(yp *p, fpos *f)
{
    const char *s = p->s;
    while (f->i < p->n) {
        char c = s[f->i];
        if (c == '\n') {
            f->line++;
            f->i++;
        } else if (c == ' ' || c == '\t' || c == '\r') {
            f->i++;
        } else if (c == '#' && (f->i == 0 || strchr(" \t\r\n", s[f->i - 1]))) {
            while (f->i < p->n && s[f->i] != '\n')
                f->i++;
        } else {
            break;
        }
    }
}

static cJSON *flow_value(yp *p, fpos *f, int in_map_key);

/* A plain scalar inside a flow collection: up to , [ ] { } or ": ". */
static int flow_plain(yp *p, fpos *f, size_t *start, size_t *len)
{
    const char *s = p->s;
    size_t b = f->i, e = f->i;
    while (e < p->n) {
        char c = s[e];
        if (c == ',' || c == '[' || c == ']' || c == '{' || c == '}' || c == '\n' || c == '\r')
            break;
        if (c == ':' && (e + 1 >= p->n || strchr(" \t\r\n,[]{}", s[e + 1])))
            break;
        if (c == '#' && e > b && is_blank(s[e - 1]))
            break;
        e++;
    }
    size_t t = e;
    while (t > b && is_blank(s[t - 1]))
        t--;
    *start = b;
    *len = t - b;
    f->i = e;
    return 0;
}

static cJSON *flow_scalar(yp *p, fpos *f)
{
    const char *s = p->s;
    char c = s[f->i];
    if (c == '"' || c == '\'') {
        size_t j = f->i;
        char *t = quoted(p, &j, p->n, f->line);
        if (!t)
            return NULL;
        f->i = j;
        cJSON *n = cJSON_CreateString(t);
        free(t);
        return n ? n : oom(p);
    }
    if (strchr("&*!|>%@`", c))
        return fail(p, f->line, "'%c' is not supported in a flow collection", c);
    size_t b, l;
    flow_plain(p, f, &b, &l);
    return plain_node(p, s + b, l);
}

static cJSON *flow_coll(yp *p, fpos *f)
{
    const char *s = p->s;
    int map = s[f->i] == '{';
    char close = map ? '}' : ']';
    int open_line = f->line;
    if (++p->depth > YAML_MAX_DEPTH)
        return fail(p, f->line, "nested more than %d levels", YAML_MAX_DEPTH);
    f->i++;
    cJSON *c = map ? cJSON_CreateObject() : cJSON_CreateArray();
    if (!c)
        return oom(p);
    for (;;) {
        flow_ws(p, f);
        if (f->i >= p->n) {
            cJSON_Delete(c);
            return fail(p, open_line, "a flow %s is not closed", map ? "mapping" : "sequence");
        }
        if (s[f->i] == close) {
            f->i++;
            break;
        }
        if (map) {
            cJSON *k = flow_value(p, f, 1);
            if (!k) {
                cJSON_Delete(c);
                return NULL;
            }
            if (!cJSON_IsString(k)) {
                cJSON_Delete(k);
                cJSON_Delete(c);
                return fail(p, f->line, "a flow mapping key is not a string");
            }
            flow_ws(p, f);
            cJSON *v = NULL;
            if (f->i < p->n && s[f->i] == ':') {
                f->i++;
                flow_ws(p, f);
                if (f->i < p->n && (s[f->i] == ',' || s[f->i] == '}'))
                    v = cJSON_CreateNull();
                else
                    v = flow_value(p, f, 0);
            } else {
                v = cJSON_CreateNull();
            }
            if (!v) {
                cJSON_Delete(k);
                cJSON_Delete(c);
                return p->failed ? NULL : oom(p);
            }
            if (cJSON_GetObjectItemCaseSensitive(c, k->valuestring)) {
                int line = f->line;
                cJSON_Delete(v);
                cJSON_Delete(c);
                fail(p, line, "duplicate key '%.60s'", k->valuestring);
                cJSON_Delete(k);
                return NULL;
            }
            cJSON_AddItemToObject(c, k->valuestring, v);
            cJSON_Delete(k);
        } else {
            cJSON *v = flow_value(p, f, 0);
            if (!v) {
                cJSON_Delete(c);
                return NULL;
            }
            cJSON_AddItemToArray(c, v);
        }
        flow_ws(p, f);
        if (f->i < p->n && s[f->i] == ',') {
            f->i++;
            continue;
        }
        if (f->i < p->n && s[f->i] == close) {
            f->i++;
            break;
        }
        cJSON_Delete(c);
        if (f->i >= p->n)
            return fail(p, open_line, "a flow %s is not closed", map ? "mapping" : "sequence");
        return fail(p, f->line, "expected ',' or '%c' in a flow %s", close,
                    map ? "mapping" : "sequence");
    }
    p->depth--;
    return c;
}

static cJSON *flow_value(yp *p, fpos *f, int in_map_key)
{
    flow_ws(p, f);
    if (f->i >= p->n)
        return fail(p, f->line, "a flow collection ends early");
    char c = p->s[f->i];
    if (c == '[' || c == '{') {
        if (in_map_key)
            return fail(p, f->line, "a collection as a mapping key is not supported");
        return flow_coll(p, f);
    }
    if (c == ',' || c == ']' || c == '}')
        return fail(p, f->line, "an empty entry in a flow collection");
    return flow_scalar(p, f);
}

/* ---- block structure ---- */

static cJSON *parse_block(yp *p, int indent);

/* The value that starts at s[v] on line l (l not consumed yet); consumes
 * what it reads. */
static cJSON *inline_value(yp *p, const yline *l, size_t v)
{
    const char *s = p->s;
    char c = s[v];
    if (c == '[' || c == '{') {
        fpos f = {v, l->line};
        cJSON *n = flow_coll(p, &f);
        if (!n)
            return NULL;
        /* the rest of the line where the collection ends */
        size_t e = f.i;
        while (e < p->n && s[e] != '\n')
            e++;
        size_t end = e > f.i && s[e - 1] == '\r' ? e - 1 : e;
        if (rest_blank(p, f.i, end, f.line) != 0) {
            cJSON_Delete(n);
            return NULL;
        }
        p->has_pend = 0;
        p->seen = 1;
        size_t next = e < p->n ? e + 1 : e;
        if (next > p->pos) {
            p->pos = next;
            p->line = f.line + 1;
        }
        return n;
    }
    if (c == '"' || c == '\'') {
        size_t j = v;
        char *t = quoted(p, &j, l->end, l->line);
        if (!t)
            return NULL;
        if (rest_blank(p, j, l->end, l->line) != 0) {
            free(t);
            return NULL;
        }
        cJSON *n = cJSON_CreateString(t);
        free(t);
        if (!n)
            return oom(p);
        consume(p, l);
        return n;
    }
    if (c == '|' || c == '>')
        return fail(p, l->line,
                    "block scalars ('%c') are not supported: write the value on one line, quoted "
                    "if needed",
                    c);
    if (c == '&' || c == '*')
        return fail(p, l->line, "anchors and aliases ('&', '*') are not supported");
    if (c == '!')
        return fail(p, l->line, "tags ('!') are not supported");
    if (c == '@' || c == '`')
        return fail(p, l->line, "'%c' is reserved in YAML: quote the value", c);
    size_t e = v;
    while (e < l->end && !(s[e] == '#' && e > v && is_blank(s[e - 1])))
        e++;
    while (e > v && is_blank(s[e - 1]))
        e--;
    for (size_t i = v; i < e; i++)
        if (s[i] == ':' && (i + 1 == e || is_blank(s[i + 1])))
            return fail(p, l->line, "a ': ' inside a plain value: quote the value");
    cJSON *n = plain_node(p, s + v, e - v);
    if (n) {
        consume(p, l);
        /* A more indented line right after a plain value would be its
         * continuation (a multi-line plain scalar). */
        yline nx;
        if (!l->pending && peek(p, &nx) == 0 && !nx.eof && nx.indent > l->indent && !p->has_pend) {
            cJSON_Delete(n);
            return fail(p, nx.line,
                        "a more indented line after a value (multi-line plain scalars are not "
                        "supported)");
        }
    }
    return n;
}

/* Where the key of line l ends: *key (allocated), *after (the byte after
 * the ':'). 1 if the line is "key: ...", 0 if not, -1 on error. */
static int line_key(yp *p, const yline *l, char **key, size_t *after)
{
    const char *s = p->s;
    size_t i = l->start;
    *key = NULL;
    if (s[i] == '"' || s[i] == '\'') {
        size_t j = i;
        char *k = quoted(p, &j, l->end, l->line);
        if (!k)
            return -1;
        while (j < l->end && is_blank(s[j]))
            j++;
        if (j < l->end && s[j] == ':' && (j + 1 == l->end || is_blank(s[j + 1]))) {
            *key = k;
            *after = j + 1;
            return 1;
        }
        free(k);
        return 0;
    }
    if (s[i] == '[' || s[i] == '{' || s[i] == '?')
        return s[i] == '?' ? (fail(p, l->line, "complex keys ('?') are not supported"), -1) : 0;
    for (size_t j = i; j < l->end; j++) {
        if (s[j] == '#' && j > i && is_blank(s[j - 1]))
            return 0;
        if (s[j] == ':' && (j + 1 == l->end || is_blank(s[j + 1]))) {
            size_t e = j;
            while (e > i && is_blank(s[e - 1]))
                e--;
            if (e == i)
                return fail(p, l->line, "an empty key"), -1;
            if (s[i] == '&' || s[i] == '*' || s[i] == '!')
                return fail(p, l->line, "anchors, aliases and tags are not supported"), -1;
            *key = malloc(e - i + 1);
            if (!*key)
                return oom(p), -1;
            memcpy(*key, s + i, e - i);
            (*key)[e - i] = '\0';
            *after = j + 1;
            return 1;
        }
    }
    return 0;
}

static cJSON *parse_map(yp *p, int indent)
{
    cJSON *m = cJSON_CreateObject();
    if (!m)
        return oom(p);
    for (;;) {
        yline l;
        if (peek(p, &l) != 0)
            goto bad;
        if (l.eof || l.indent < indent)
            break;
        if (l.indent > indent) {
            fail(p, l.line, "unexpected indentation");
            goto bad;
        }
        if (is_seq_item(p, &l)) {
            fail(p, l.line, "a sequence item ('- ') where a 'key: value' was expected");
            goto bad;
        }
        char *key;
        size_t after;
        int k = line_key(p, &l, &key, &after);
        if (k < 0)
            goto bad;
        if (k == 0) {
            fail(p, l.line, "expected 'key: value'");
            goto bad;
        }
        if (cJSON_GetObjectItemCaseSensitive(m, key)) {
            fail(p, l.line, "duplicate key '%.60s'", key);
            free(key);
            goto bad;
        }
        size_t v = after;
        while (v < l.end && is_blank(p->s[v]))
            v++;
        cJSON *val;
        if (v == l.end || p->s[v] == '#') {
            consume(p, &l);
            yline nx;
            if (peek(p, &nx) != 0) {
                free(key);
                goto bad;
            }
            if (!nx.eof && nx.indent > indent)
                val = parse_block(p, nx.indent);
            else if (!nx.eof && nx.indent == indent && is_seq_item(p, &nx))
                val = parse_block(p, indent);
            else
                val = cJSON_CreateNull();
        } else {
            val = inline_value(p, &l, v);
        }
        if (!val) {
            free(key);
            if (!p->failed)
                oom(p);
            goto bad;
        }
        cJSON_AddItemToObject(m, key, val);
        free(key);
    }
    return m;
bad:
    cJSON_Delete(m);
    return NULL;
}

static cJSON *parse_seq(yp *p, int indent)
{
    cJSON *a = cJSON_CreateArray();
    if (!a)
        return oom(p);
    for (;;) {
        yline l;
        if (peek(p, &l) != 0)
            goto bad;
        if (l.eof || l.indent < indent || !is_seq_item(p, &l))
            break;
        if (l.indent > indent) {
            fail(p, l.line, "unexpected indentation");
            goto bad;
        }
        size_t v = l.start + 1;
        while (v < l.end && is_blank(p->s[v]))
            v++;
        cJSON *item;
        if (v == l.end || p->s[v] == '#') {
            consume(p, &l);
            yline nx;
            if (peek(p, &nx) != 0)
                goto bad;
            item = !nx.eof && nx.indent > indent ? parse_block(p, nx.indent) : cJSON_CreateNull();
        } else {
            /* The rest of the line is a line of its own at its column. */
            yline pl = l;
            pl.start = v;
            pl.indent = l.indent + (int)(v - l.start);
            pl.pending = 1;
            if (!l.pending) {
                p->pos = l.next;
                p->line = l.line + 1;
            }
            p->pend = pl;
            p->has_pend = 1;
            item = parse_block(p, pl.indent);
            if (item && p->has_pend) {
                cJSON_Delete(item);
                fail(p, l.line, "unexpected text in a sequence item");
                goto bad;
            }
        }
        if (!item) {
            if (!p->failed)
                oom(p);
            goto bad;
        }
        cJSON_AddItemToArray(a, item);
    }
    return a;
bad:
    cJSON_Delete(a);
    return NULL;
}

static cJSON *parse_block(yp *p, int indent)
{
    yline l;
    if (peek(p, &l) != 0)
        return NULL;
    if (l.eof)
        return cJSON_CreateNull();
    if (++p->depth > YAML_MAX_DEPTH)
        return fail(p, l.line, "nested more than %d levels", YAML_MAX_DEPTH);
    cJSON *r;
    if (is_seq_item(p, &l)) {
        r = parse_seq(p, indent);
    } else {
        char *key = NULL;
        size_t after;
        int k = line_key(p, &l, &key, &after);
        free(key);
        if (k < 0)
            r = NULL;
        else if (k > 0)
            r = parse_map(p, indent);
        else
            r = inline_value(p, &l, l.start);
    }
    p->depth--;
    return r;
}

cJSON *u_yaml_parse(const char *text, size_t len, char *err, size_t errlen)
{
    snprintf(err, errlen, "%s", "");
    size_t b = 0;
    if (len >= 3 && memcmp(text, "\xef\xbb\xbf", 3) == 0)
        b = 3; /* a byte order mark */
    if (memchr(text + b, '\0', len - b)) {
        snprintf(err, errlen, "the file holds a NUL byte: not YAML text");
        return NULL;
    }
    size_t i = b;
    while (i < len && strchr(" \t\r\n", text[i]))
        i++;
    if (i < len && (text[i] == '{' || text[i] == '[')) {
        /* JSON: cJSON's reader, stricter and faster; YAML flow style that
         * is not JSON falls through to the flow reader. */
        cJSON *j = cJSON_ParseWithLength(text + b, len - b);
        if (j)
            return j;
    }
    yp p = {.s = text + b, .n = len - b, .line = 1, .err = err, .errlen = errlen};
    yline l;
    if (peek(&p, &l) != 0)
        return NULL;
    if (l.eof)
        return cJSON_CreateNull();
    cJSON *r = parse_block(&p, l.indent);
    if (!r) {
        if (!p.failed)
            snprintf(err, errlen, "out of memory");
        return NULL;
    }
    if (peek(&p, &l) != 0 || !l.eof) {
        if (!p.failed)
            fail(&p, l.line, "unexpected text (check the indentation)");
        cJSON_Delete(r);
        return NULL;
    }
    if (!p.ended)
        return r;
    /* after "...": only blank lines and comments */
    for (size_t c = p.pos; c < p.n;) {
        const char *nl = memchr(p.s + c, '\n', p.n - c);
        size_t e = nl ? (size_t)(nl - p.s) : p.n;
        size_t t = c;
        while (t < e && strchr(" \t\r", p.s[t]))
            t++;
        if (t < e && p.s[t] != '#' && !(e - t >= 3 && memcmp(p.s + t, "...", 3) == 0)) {
            snprintf(err, errlen, "text after the end of the document ('...')");
            cJSON_Delete(r);
            return NULL;
        }
        c = e + 1;
    }
    return r;
}
