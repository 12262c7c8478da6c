/* SPDX-License-Identifier: Apache-2.0 */
/* peer_conn.c - one connection to the leadership endpoint: registrations
 * looked up by incarnation, TLS I/O, the request, the answers (a single
 * check, a long poll, a batch) and the connection's state machine. */
#include "peer_server_int.h"

uint32_t ps_inc_hash(const char *s)
{
    uint32_t h = 2166136261u;
    for (; *s; s++)
        h = (h ^ (unsigned char)*s) * 16777619u;
    return h % PEER_HASH;
}

/* The registration for an incarnation (live or stopped), or NULL. */
peer_server *ps_lookup(listener *l, const char *inc)
{
    for (peer_server *r = l->hash[ps_inc_hash(inc)]; r; r = r->hnext)
        if (strcmp(r->inc, inc) == 0)
            return r;
    return NULL;
}

/* The state of a registration (a stopped one never leads). */
void ps_reg_state(peer_server *r, peer_state *st)
{
    memset(st, 0, sizeof *st);
    if (r->tomb)
        return;
    if (r->src.state) {
        r->src.state(r->src.ctx, st);
        return;
    }
    peer_view v = {0};
    if (r->src.view(r->src.ctx, &v) == 0) {
        st->version = v.version;
        st->leading = v.leading && v.body;
        cJSON *o = st->leading ? cJSON_Parse(v.body) : NULL;
        cJSON *t = cJSON_GetObjectItemCaseSensitive(o, "term");
        st->term = cJSON_IsNumber(t) ? (int64_t)t->valuedouble : 0;
        st->etag_hash = peer_etag_hash(st->leading && v.etag ? v.etag : "");
        cJSON_Delete(o);
    }
    peer_view_clear(&v);
}

int ps_reg_view(peer_server *r, peer_view *v)
{
    memset(v, 0, sizeof *v);
    if (r->tomb) {
        v->etag = u_strdup("");
        v->released = r->tomb_released ? u_strdup(r->tomb_released) : NULL;
        return v->etag && (v->released || !r->tomb_released) ? 0 : S3LECT_ENOMEM;
    }
    return r->src.view(r->src.ctx, v);
}

/* ---- connection I/O ------------------------------------------------------- */

void ps_conn_close(conn *c)
{
    if (c->state == C_CLOSED)
        return;
    ERR_clear_error();
    SSL_free(c->ssl);
    c->ssl = NULL;
    close(c->fd);
    c->fd = -1;
    c->state = C_CLOSED;
}

/* Maps an SSL result to the poll events to wait for, or 0 for a hard error. */
static short ssl_wants(conn *c, int r)
{
    switch (SSL_get_error(c->ssl, r)) {
    case SSL_ERROR_WANT_READ:
        return POLLIN;
    case SSL_ERROR_WANT_WRITE:
        return POLLOUT;
    default:
        return 0;
    }
}

/* Reads into dst. Returns the count, 0 when it would block (c->want set), -1 on close or error. */
static long tls_read(conn *c, char *dst, size_t cap)
{
    ERR_clear_error();
    int r = SSL_read(c->ssl, dst, cap > INT_MAX ? INT_MAX : (int)cap);
    if (r > 0)
        return r;
    c->want = ssl_wants(c, r);
    return c->want ? 0 : -1;
}

static const char *reason_phrase(int status)
{
    switch (status) {
    case 200:
        return "OK";
    case 400:
        return "Bad Request";
    case 404:
        return "Not Found";
    case 405:
        return "Method Not Allowed";
    case 413:
        return "Content Too Large";
    case 431:
        return "Request Header Fields Too Large";
    case 503:
        return "Service Unavailable";
    case 505:
        return "HTTP Version Not Supported";
    default:
        return "Internal Server Error";
    }
}

static void step(conn *c, int64_t now);

/* Queues the answer and starts writing it. */
static void respond(conn *c, int status, const char *body, int head_only, int keep, int linger)
{
    size_t blen = body ? strlen(body) : 0;
    char hdr[256];
    int hl =
        snprintf(hdr, sizeof hdr,
                 "HTTP/1.1 %d %s\r\n"
                 "Content-Type: application/json\r\n"
                 "Content-Length: %zu\r\n"
                 "Cache-Control: no-store\r\n"
                 "%s"
                 "Connection: %s\r\n\r\n",
                 status, reason_phrase(status), blen,
                 status == 405 ? "Allow: GET, HEAD, POST\r\n" : "", keep ? "keep-alive" : "close");
    size_t total = (size_t)hl + (head_only ? 0 : blen);
    free(c->out);
    c->out = hl > 0 && (size_t)hl < sizeof hdr ? malloc(total) : NULL;
    if (!c->out) {
        ps_conn_close(c);
        return;
    }
    memcpy(c->out, hdr, (size_t)hl);
    if (!head_only && blen)
        memcpy(c->out + hl, body, blen);
    c->out_len = total;
    c->out_off = 0;
    c->keep = keep;
    c->linger_after = linger;
    c->state = C_WRITE;
    c->want = POLLOUT;
    c->deadline = u_mono_ms() + PEER_WRITE_TIMEOUT_MS;
}

static void respond_error(conn *c, int status)
{
    const char *body = status == 431   ? "{\"error\":\"request head too large\"}"
                       : status == 505 ? "{\"error\":\"only HTTP/1.0 and HTTP/1.1 are supported\"}"
                       : status == 413 ? "{\"error\":\"request body too large (at most 1 MiB)\"}"
                                       : "{\"error\":\"malformed request\"}";
    respond(c, status, body, 0, 0, 1);
}

void ps_batch_clear(conn *c)
{
    peer_batch_free(&c->batch);
    free(c->gens);
    c->gens = NULL;
    free(c->regs);
    c->regs = NULL;
    free(c->body);
    c->body = NULL;
}

/* ---- answering ---------------------------------------------------------------- */

static const char NOT_LEADER[] = "{\"error\":\"this node is not the leader\"}";
static const char NOT_LEADER_YIELD[] = "{\"error\":\"this node is not the leader\",\"yield\":true}";

/* 1 when x is a pending long poll or batch on r. */
static int waits_on(const conn *x, const peer_server *r)
{
    if (x->state == C_GET)
        return x->reg == r;
    if (x->state == C_BATCH)
        for (size_t i = 0; i < x->batch.n; i++)
            if (strcmp(x->batch.e[i].incarnation, r->inc) == 0)
                return 1;
    return 0;
}

/* One successor (docs/peer.md): whether c's "not the leader" answer about r
 * (at view version ver) tells its follower to yield. The first s3lect
 * follower told of a version of r that does not lead takes over at once; the
 * others are told to yield: they read the store a moment later, and find the
 * new leader there rather than all racing to write the released record.
 * Followers of this process's own electors yield while one of another
 * process waits (this process may be stopping them all: SIGTERM). Only
 * ordering: every write stays conditional, and a successor that does not
 * take over leaves the lock to the others' next read. */
static int answer_yields(conn *c, peer_server *r, uint64_t ver, const char *proof,
                         const char *to_proc)
{
    if (!r || !c->req.process[0])
        return 0;              /* a health probe, an older s3lect: neither named nor told */
    if (to_proc && to_proc[0]) /* a transfer's release: its target's, and no one else's */
        return strcmp(c->req.process, to_proc) != 0 ||
               (r->src.succ_key[0] && strcmp(proof ? proof : "", r->src.succ_key) != 0);
    /* Only a follower that read the lock from the store (it presents the
     * record's succKey, which this endpoint never shows) can be named: any
     * client can send a process token and the etag it read here, and one
     * named in place of the real followers made them all wait (issue 38). */
    if (r->src.succ_key[0] && strcmp(proof ? proof : "", r->src.succ_key) != 0)
        return 1;
    if (r->nom_set && (r->tomb || r->nom_ver == ver))
        return 1;
    if (c->local)
        for (conn *x = ps_g.conns; x; x = x->next)
            if (x != c && !x->local && x->req.process[0] && waits_on(x, r))
                return 1;
    r->nom_set = 1;
    r->nom_ver = ver;
    return 0;
}
static const char SEVERAL[] =
    "{\"error\":\"this endpoint serves several locks: name one with ?incarnation=\"}";

/* Answers c's GET from the view of r now (NULL: not the leader). */
static void answer_get(conn *c, peer_server *r)
{
    int head = strcmp(c->req.method, "HEAD") == 0;
    peer_view v;
    int status = 404;
    char *body = NULL;
    /* s3lect transfer wrote a request into the record: with the record's
     * succKey (only a store reader has it), the leader reads it at once. */
    if (r && c->req.xfer && r->src.poke && r->src.succ_key[0] &&
        strcmp(c->req.proof, r->src.succ_key) == 0)
        r->src.poke(r->src.ctx);
    int rc = r ? ps_reg_view(r, &v) : (memset(&v, 0, sizeof v), 0);
    if (rc == 0 && r)
        rc = peer_answer_view(&v, &status, &body);
    if (rc == 0 && status == 404) {
        /* "Not the leader": to the successor with the released record, to
         * the others with "yield" (answer_yields). */
        free(body);
        body = NULL;
        if (answer_yields(c, r, v.version, c->req.proof, v.to_proc))
            body = u_strdup(NOT_LEADER_YIELD);
        else if (v.released)
            body = u_asprintf("{\"error\":\"this node is not the leader\",\"released\":%s}",
                              v.released);
        else
            body = u_strdup(NOT_LEADER);
        if (!body)
            rc = S3LECT_ENOMEM;
    }
    peer_view_clear(&v);
    if (rc != 0)
        respond(c, 503, "{\"error\":\"temporarily unavailable\"}", head, c->req.keep_alive, 0);
    else
        respond(c, status, body ? body : NOT_LEADER, head, c->req.keep_alive, 0);
    free(body);
}

/* Re-checks a pending GET. full: ignore the registration's gen. */
/* A long poll's view of r: answers 503 when it cannot be built (-1), else
 * notes its version and says whether the poll is held (1) or is to be
 * answered now (0). */
static int poll_view(conn *c, peer_server *r)
{
    peer_view v;
    if (ps_reg_view(r, &v) != 0) {
        peer_view_clear(&v);
        respond(c, 503, "{\"error\":\"temporarily unavailable\"}", 0, c->req.keep_alive, 0);
        return -1;
    }
    int hold = peer_should_hold(&c->req, &v);
    c->ver = v.version;
    peer_view_clear(&v);
    return hold;
}

void ps_check_get(conn *c, int64_t now, int full)
{
    peer_server *r = c->reg;
    if (!r || r->tomb || now >= c->wait_deadline) {
        answer_get(c, r);
        return;
    }
    uint64_t gen = __atomic_load_n(&r->gen, __ATOMIC_ACQUIRE);
    if (!full && gen == c->gen)
        return;
    c->gen = gen;
    if (r->src.state) {
        peer_state st;
        ps_reg_state(r, &st);
        if (st.version == c->ver && st.leading)
            return;
    }
    int hold = poll_view(c, r);
    if (hold == 0)
        answer_get(c, r);
}

static void start_get(conn *c, int64_t now)
{
    listener *l = c->l;
    peer_server *r = NULL;
    if (c->req.incarnation[0]) {
        r = ps_lookup(l, c->req.incarnation);
    } else if (l->nlive > 1) {
        respond(c, 404, SEVERAL, strcmp(c->req.method, "HEAD") == 0, c->req.keep_alive, 0);
        return;
    } else {
        for (peer_server *x = l->regs; x; x = x->next)
            if (!x->tomb || !r)
                r = x; /* the live one, else a stopped one */
    }
    if (!r || r->tomb || c->req.wait_ms <= 0 || !c->req.etag[0]) {
        answer_get(c, r);
        return;
    }
    c->reg = r;
    c->gen = __atomic_load_n(&r->gen, __ATOMIC_ACQUIRE);
    c->wait_deadline = now + c->req.wait_ms;
    int hold = poll_view(c, r);
    if (hold <= 0) {
        if (hold == 0)
            answer_get(c, r);
        return;
    }
    c->state = C_GET;
    c->want = 0;
    c->checked_at = now;
}

/* How the entry's lock has changed for the follower that sent it: 0 not at
 * all, CH_RENEWED a renewal (same leader and term, another etag: the
 * follower's lease clock restarts from its receipt), CH_LEADERSHIP the end
 * of this leadership or another term (a release: answered at once). */
enum { CH_NONE = 0, CH_RENEWED = 1, CH_LEADERSHIP = 2 };
static int entry_changed(listener *l, const peer_batch_entry *e)
{
    peer_server *r = ps_lookup(l, e->incarnation);
    if (!r || r->tomb)
        return CH_LEADERSHIP;
    peer_state st;
    ps_reg_state(r, &st);
    if (!st.leading || st.term != e->term)
        return CH_LEADERSHIP;
    /* An entry without an etag asks about leadership alone. */
    return e->etag[0] && st.etag_hash != peer_etag_hash(e->etag) ? CH_RENEWED : CH_NONE;
}

static void answer_batch(conn *c, int changed_only)
{
    listener *l = c->l;
    size_t n = c->batch.n, k = 0;
    peer_batch_item *items = calloc(n ? n : 1, sizeof *items);
    char **bodies = calloc(n ? n : 1, sizeof *bodies);
    if (!items || !bodies) {
        free(items);
        free(bodies);
        respond(c, 503, "{\"error\":\"temporarily unavailable\"}", 0, c->req.keep_alive, 0);
        ps_batch_clear(c);
        return;
    }
    for (size_t i = 0; i < n; i++) {
        const peer_batch_entry *e = &c->batch.e[i];
        if (changed_only && !entry_changed(l, e))
            continue;
        peer_server *r = ps_lookup(l, e->incarnation);
        peer_view v;
        int status = 404;
        uint64_t ver = 0;
        char *released = NULL, to_proc[sizeof v.to_proc] = "";
        if (r && ps_reg_view(r, &v) == 0) {
            memcpy(to_proc, v.to_proc, sizeof to_proc);
            if (!r->tomb && v.leading && v.body) {
                status = 200;
                bodies[k] = v.body;
                v.body = NULL;
            }
            ver = v.version;
            released = v.released;
            v.released = NULL;
        }
        if (r)
            peer_view_clear(&v);
        items[k].incarnation = e->incarnation;
        items[k].status = status;
        items[k].yield = status == 404 && answer_yields(c, r, ver, e->proof, to_proc);
        if (status == 404 && !items[k].yield && released) {
            bodies[k] = released; /* the successor's: freed with the bodies */
            released = NULL;
            items[k].released = bodies[k];
        }
        free(released);
        items[k].record = status == 200 ? bodies[k] : NULL;
        k++;
    }
    if (changed_only && k == 0 && n > 0) {
        /* What changed changed back while the answer was made (a leader
         * that stepped down and took its record back): an answer naming no
         * lock reads as malformed to a follower; answer every entry with its
         * state instead (issue 38). */
        for (size_t i = 0; i < n; i++)
            free(bodies[i]);
        free(items);
        free(bodies);
        answer_batch(c, 0);
        return;
    }
    char *out = peer_batch_answer(items, k);
    for (size_t i = 0; i < k; i++)
        free(bodies[i]);
    free(items);
    free(bodies);
    ps_batch_clear(c);
    if (!out) {
        respond(c, 503, "{\"error\":\"temporarily unavailable\"}", 0, c->req.keep_alive, 0);
        return;
    }
    respond(c, 200, out, 0, c->req.keep_alive, 0);
    free(out);
}

/* Re-checks a pending batch. full: every entry, else those whose
 * registration was notified since the last check. A release or a change of
 * leader or term is answered at once (a successor is waiting for it); a
 * renewal waits PEER_BATCH_GATHER_MS for others to answer with it, which at
 * scale (thousands of locks renewed every few seconds on one connection)
 * turns one answer per renewal into one per gathering, and costs a
 * follower's lease clock at most that much. */
void ps_check_batch(conn *c, int64_t now, int full)
{
    listener *l = c->l;
    int changed = c->gather_at != 0 ? CH_RENEWED : CH_NONE;
    if (c->regs_epoch != ps_g.reg_epoch) {
        /* Resolved once per change of the registrations, not per check:
         * thousands of entries are re-checked at every notification. */
        for (size_t i = 0; i < c->batch.n; i++)
            c->regs[i] = ps_lookup(l, c->batch.e[i].incarnation);
        c->regs_epoch = ps_g.reg_epoch;
    }
    for (size_t i = 0; i < c->batch.n && changed != CH_LEADERSHIP; i++) {
        peer_batch_entry *e = &c->batch.e[i];
        peer_server *r = c->regs[i];
        if (!r || r->tomb) {
            changed = CH_LEADERSHIP;
            break;
        }
        uint64_t gen = __atomic_load_n(&r->gen, __ATOMIC_ACQUIRE);
        if (!full && gen == c->gens[i])
            continue;
        c->gens[i] = gen;
        int ch = entry_changed(l, e);
        if (ch > changed)
            changed = ch;
    }
    if (changed == CH_RENEWED && !c->gather_at)
        c->gather_at = now + PEER_BATCH_GATHER_MS;
    if (changed == CH_LEADERSHIP || (changed == CH_RENEWED && now >= c->gather_at))
        answer_batch(c, 1);
    else if (changed == CH_NONE && now >= c->wait_deadline)
        answer_batch(c, 0);
}

static void start_batch(conn *c, int64_t now)
{
    int rc = peer_parse_batch(c->body, c->body_len, &c->batch);
    free(c->body);
    c->body = NULL;
    if (rc != 0) {
        respond(c,
                rc == -413   ? 413
                : rc == -500 ? 503
                             : 400,
                rc == -500
                    ? "{\"error\":\"temporarily unavailable\"}"
                    : "{\"error\":\"malformed batch: expected {\\\"wait\\\":ms,\\\"locks\\\":"
                      "[{\\\"incarnation\\\":hex,\\\"term\\\":n,\\\"etag\\\":s},...]} "
                      "with 1 to 4096 locks\"}",
                0, c->req.keep_alive, 0);
        return;
    }
    c->gens = calloc(c->batch.n, sizeof *c->gens);
    c->regs = calloc(c->batch.n, sizeof *c->regs);
    c->regs_epoch = ps_g.reg_epoch - 1; /* resolved at the first check */
    if (!c->gens || !c->regs) {
        ps_batch_clear(c);
        respond(c, 503, "{\"error\":\"temporarily unavailable\"}", 0, c->req.keep_alive, 0);
        return;
    }
    c->state = C_BATCH;
    c->want = 0;
    c->gather_at = 0;
    c->wait_deadline = now + c->batch.wait_ms;
    c->checked_at = now;
    ps_check_batch(c, now, 1);
}

/* A complete request (and body): answer it or park it. */
static void dispatch(conn *c, int64_t now)
{
    int status;
    char *body = NULL;
    int early = peer_answer_early(c->l->health_path, &c->req, 1, &status, &body);
    if (early) {
        if (early < 0)
            ps_conn_close(c);
        else
            respond(c, status, body, strcmp(c->req.method, "HEAD") == 0, c->req.keep_alive, 0);
        free(body);
        return;
    }
    c->local = c->req.process[0] && strcmp(c->req.process, peer_process_token()) == 0;
    if (strcmp(c->req.method, "POST") == 0)
        start_batch(c, now);
    else
        start_get(c, now);
}

/* ---- the connection's state machine -------------------------------------------- */

static void start_head(conn *c, int64_t now)
{
    c->state = C_HEAD;
    c->want = POLLIN;
    c->idle_since = now;
    c->head_started = 0;
    c->reg = NULL;
}

static void after_head(conn *c, int64_t now)
{
    size_t head = c->req.header_len;
    size_t cl = c->req.content_length;
    int post = strcmp(c->req.method, "POST") == 0;
    size_t inbuf = c->len - head < cl ? c->len - head : cl;
    c->body = NULL;
    c->body_len = 0;
    c->body_need = cl;
    if (post) {
        c->body = malloc(cl ? cl : 1);
        if (!c->body) {
            ps_conn_close(c);
            return;
        }
        memcpy(c->body, c->buf + head, inbuf);
    }
    c->body_len = inbuf;
    memmove(c->buf, c->buf + head + inbuf, c->len - head - inbuf);
    c->len -= head + inbuf;
    c->state = C_BODY;
    c->want = POLLIN;
    c->deadline = (c->head_started ? c->head_started : now) + PEER_HEAD_TIMEOUT_MS;
    if (c->first)
        c->deadline = c->accepted_ms + PEER_HEAD_TIMEOUT_MS;
    if (c->body_len < c->body_need && c->deadline < now + PEER_HEAD_TIMEOUT_MS)
        c->deadline = now + PEER_HEAD_TIMEOUT_MS; /* a body of up to 1 MiB */
}

static void do_head(conn *c, int64_t now)
{
    for (;;) {
        if (c->len > 0) {
            int rc = peer_parse_request(c->buf, c->len, &c->req);
            if (rc < 0) {
                respond_error(c, -rc);
                return;
            }
            if (rc == 1) {
                after_head(c, now);
                return;
            }
            if (!c->head_started)
                c->head_started = now;
        }
        long n = tls_read(c, c->buf + c->len, sizeof c->buf - c->len);
        if (n < 0) {
            ps_conn_close(c);
            return;
        }
        if (n == 0)
            break;
        c->len += (size_t)n;
    }
    c->deadline = c->first          ? c->accepted_ms + PEER_HEAD_TIMEOUT_MS
                  : c->head_started ? c->head_started + PEER_HEAD_TIMEOUT_MS
                                    : c->idle_since + PEER_IDLE_TIMEOUT_MS;
}

static void do_body(conn *c, int64_t now)
{
    char scratch[4096];
    while (c->body_len < c->body_need) {
        size_t want = c->body_need - c->body_len;
        char *dst = c->body ? c->body + c->body_len : scratch;
        if (!c->body && want > sizeof scratch)
            want = sizeof scratch;
        long n = tls_read(c, dst, want);
        if (n < 0) {
            ps_conn_close(c);
            return;
        }
        if (n == 0)
            return;
        c->body_len += (size_t)n;
    }
    dispatch(c, now);
}

static void do_write(conn *c, int64_t now)
{
    while (c->out_off < c->out_len) {
        ERR_clear_error();
        size_t n = c->out_len - c->out_off;
        int r = SSL_write(c->ssl, c->out + c->out_off, n > INT_MAX ? INT_MAX : (int)n);
        if (r <= 0) {
            c->want = ssl_wants(c, r);
            if (!c->want)
                ps_conn_close(c);
            return;
        }
        c->out_off += (size_t)r;
    }
    free(c->out);
    c->out = NULL;
    c->first = 0;
    if (c->linger_after) {
        /* close_notify, half-close, and drop what the client still sends
         * (bounded), so the answer to a bad request is not lost to a reset. */
        ERR_clear_error();
        SSL_shutdown(c->ssl);
        shutdown(c->fd, SHUT_WR);
        c->state = C_LINGER;
        c->want = POLLIN;
        c->lingered = 0;
        c->deadline = now + PEER_LINGER_MS;
        return;
    }
    if (!c->keep) {
        ERR_clear_error();
        SSL_shutdown(c->ssl); /* one non-blocking close_notify; no wait for the reply */
        ps_conn_close(c);
        return;
    }
    start_head(c, now);
    do_head(c, now); /* a pipelined request may be in buf already */
}

static void do_linger(conn *c)
{
    char scratch[4096];
    while (c->lingered < PEER_LINGER_BYTES) {
        ssize_t n = recv(c->fd, scratch, sizeof scratch, MSG_DONTWAIT);
        if (n > 0) {
            c->lingered += (size_t)n;
            continue;
        }
        if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR))
            return;
        break;
    }
    ps_conn_close(c);
}

/* Runs c's state machine as far as it goes without blocking. */
static void step(conn *c, int64_t now)
{
    switch (c->state) {
    case C_HANDSHAKE: {
        ERR_clear_error();
        int r = SSL_accept(c->ssl);
        if (r == 1) {
            start_head(c, now);
            do_head(c, now);
            return;
        }
        c->want = ssl_wants(c, r);
        if (!c->want)
            ps_conn_close(c);
        return;
    }
    case C_HEAD:
        do_head(c, now);
        return;
    case C_BODY:
        do_body(c, now);
        return;
    case C_WRITE:
        do_write(c, now);
        return;
    case C_LINGER:
        do_linger(c);
        return;
    default:
        return;
    }
}

/* Drives c until it waits for its socket, a change or a deadline. Every
 * step either changes the state or leaves it waiting (want set), so this
 * ends; it must not stop early: pipelined requests already read into
 * c->buf would wait for a POLLIN that never comes. */
void ps_run(conn *c, int64_t now)
{
    for (;;) {
        int before = c->state;
        step(c, now);
        /* A state that finished without waiting (answered at once) goes on. */
        if (c->state == C_CLOSED || c->state == C_GET || c->state == C_BATCH ||
            (c->state == before && c->want))
            return;
    }
}

/* 1 when the client closed or reset a parked connection. */
int ps_gone(short revents)
{
    return (revents & (POLLRDHUP | POLLHUP | POLLERR | POLLNVAL)) != 0;
}

/* ---- the server thread ----------------------------------------------------------- */
