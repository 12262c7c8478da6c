/* SPDX-License-Identifier: Apache-2.0 */
/* peer_server.c - the leader's HTTPS leadership endpoint (DESIGN §6).
 *
 * DESIGN §2 routes crypto through crypto.h. A TLS server needs the whole SSL
 * API (contexts, certificates, non-blocking handshakes), which a hash-sized
 * interface cannot express without re-inventing it, so the TLS code lives
 * in the endpoint's files (peer_tls.c, peer_conn.c, this one), and only
 * there. It uses the OpenSSL API subset that BoringSSL also
 * provides (TLS_server_method, SSL_CTX_set_min_proto_version, PEM_read_bio_*,
 * X509_STORE_add_cert, SSL_accept/read/write on non-blocking sockets), so the
 * library builds with either (-DS3LECT_TLS=OpenSSL|BoringSSL).
 *
 * One listener per (listen address, TLS setup, health path) serves every
 * elector of the process registered on it (peer_server_register); requests
 * name the elector by ?incarnation= (docs/peer.md "One listener per
 * process"). ONE server thread drives every listener and connection of the
 * process: a poll() loop over the listening sockets, the connections and a
 * wake eventfd, with TLS non-blocking (SSL_accept/read/write and
 * SSL_get_error's WANT_READ/WANT_WRITE). A long poll (GET with wait/etag)
 * or a batch (POST) is state on its connection, re-checked when the runtime
 * signals a change (peer_server_notify), at its deadline, and every
 * PEER_SAFETY_RECHECK_MS. Each connection has a deadline for its state
 * (handshake and head, idle, body, write, linger), so slow clients are
 * dropped; at most PEER_MAX_CONNS connections per process, beyond that the
 * longest idle kept-alive one is closed (or the new one, when none is idle).
 *
 * The server thread runs with SIGPIPE blocked: a write to a closed
 * connection fails with EPIPE instead of killing the process.
 *
 * The endpoint is four files sharing peer_server_int.h: peer_tls.c (the
 * TLS material and the zero-config identity), peer_addr.c (addresses and
 * listening sockets), peer_conn.c (a connection, its request and answers)
 * and this one (the registry, the server thread, registration).
 */
#include "peer_server_int.h"

ps_global ps_g = {.life = PTHREAD_MUTEX_INITIALIZER,
                  .mu = PTHREAD_MUTEX_INITIALIZER,
                  .cv = PTHREAD_COND_INITIALIZER,
                  .wakefd = -1};

void ps_wake_server(void)
{
    int fd = __atomic_load_n(&ps_g.wakefd, __ATOMIC_ACQUIRE);
    if (fd < 0)
        return;
    uint64_t one = 1;
    ssize_t w;
    do
        w = write(fd, &one, sizeof one);
    while (w < 0 && errno == EINTR);
}

void peer_server_notify(peer_server *s)
{
    if (!s)
        return;
    __atomic_add_fetch(&s->gen, 1, __ATOMIC_RELEASE);
    ps_wake_server();
}

static void accept_on(listener *l, int64_t now)
{
    for (;;) {
        int fd = accept4(l->lfd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);
        if (fd < 0) {
            if (errno == EMFILE || errno == ENFILE || errno == ENOBUFS || errno == ENOMEM)
                ps_g.accept_paused_until = now + 100; /* back off instead of spinning */
            return;
        }
        if (ps_g.nconns >= PEER_MAX_CONNS) {
            /* Full: the longest idle kept-alive connection makes room, else the new one goes. */
            conn *old = NULL;
            for (conn *c = ps_g.conns; c; c = c->next)
                if (c->state == C_HEAD && !c->first && c->len == 0 && !c->head_started &&
                    (!old || c->idle_since <= old->idle_since))
                    old = c; /* newest first: on a tie the older one wins */
            if (!old) {
                close(fd);
                continue;
            }
            ps_conn_close(old);
        }
        conn *c = calloc(1, sizeof *c);
        SSL *ssl = c ? SSL_new(l->ctx) : NULL;
        if (!ssl || SSL_set_fd(ssl, fd) != 1) {
            SSL_free(ssl);
            free(c);
            close(fd);
            ERR_clear_error();
            continue;
        }
        int one = 1;
        setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
        c->l = l;
        c->fd = fd;
        c->ssl = ssl;
        c->first = 1;
        c->accepted_ms = now;
        c->state = C_HANDSHAKE;
        c->want = POLLIN;
        c->deadline = now + PEER_HEAD_TIMEOUT_MS;
        c->next = ps_g.conns;
        ps_g.conns = c;
        ps_g.nconns++;
        ps_run(c, now);
    }
}

static void free_conn(conn *c)
{
    ps_conn_close(c);
    ps_batch_clear(c);
    free(c->out);
    free(c);
}

static void free_listener(listener *l)
{
    if (l->lfd >= 0)
        close(l->lfd);
    SSL_CTX_free(l->ctx);
    free(l->addr);
    free(l->health_path);
    free(l);
}

/* Under ps_g.mu: drops closed connections, stopped registrations whose time
 * is up, and listeners left without registrations (with their connections). */
/* Takes r (already off l->regs) out of l's incarnation hash and off every
 * connection that waits on it, and uncounts it. */
static void forget_reg(listener *l, peer_server *r)
{
    for (peer_server **hp = &l->hash[ps_inc_hash(r->inc)]; *hp; hp = &(*hp)->hnext)
        if (*hp == r) {
            *hp = r->hnext;
            break;
        }
    for (conn *c = ps_g.conns; c; c = c->next)
        if (c->reg == r)
            c->reg = NULL;
    ps_g.reg_epoch++; /* batches resolve their entries again */
    l->nregs--;
}

/* Takes r off l's stopped registrations, if it is on them. */
static void untomb(listener *l, peer_server *r)
{
    if (!r->tprev && l->thead != r)
        return;
    if (r->tprev)
        r->tprev->tnext = r->tnext;
    else
        l->thead = r->tnext;
    if (r->tnext)
        r->tnext->tprev = r->tprev;
    else
        l->ttail = r->tprev;
    r->tnext = r->tprev = NULL;
}

/* Takes r off l->regs (and off the stopped ones). */
static void unlink_reg(listener *l, peer_server *r)
{
    if (r->prev)
        r->prev->next = r->next;
    else if (l->regs == r)
        l->regs = r->next;
    if (r->next)
        r->next->prev = r->prev;
    r->next = r->prev = NULL;
    untomb(l, r);
}

/* Drops the stopped registrations whose grace is over: the oldest first
 * (one whose shorter grace ends before an older one's waits for it, answering
 * "not the leader" a little longer, as it would after it). Without one due,
 * this costs nothing however many registrations there are. */
static void expire_tombs(listener *l, int64_t now)
{
    peer_server *r;
    while ((r = l->thead) != NULL && now >= r->tomb_until) {
        untomb(l, r);
        unlink_reg(l, r);
        forget_reg(l, r);
        free(r->tomb_released);
        free(r);
    }
    if (l->nregs == 0)
        l->closing = 1;
}

static void cleanup(int64_t now)
{
    for (listener *l = ps_g.ls; l; l = l->next)
        expire_tombs(l, now);
    for (conn **pp = &ps_g.conns; *pp;) {
        conn *c = *pp;
        if (c->l->closing)
            ps_conn_close(c);
        if (c->state == C_CLOSED) {
            *pp = c->next;
            ps_g.nconns--;
            free_conn(c);
        } else {
            pp = &c->next;
        }
    }
    for (listener **pp = &ps_g.ls; *pp;) {
        listener *l = *pp;
        if (l->closing) {
            *pp = l->next;
            free_listener(l);
        } else {
            pp = &l->next;
        }
    }
}

static int64_t min_deadline(int64_t a, int64_t b)
{
    return a < b ? a : b;
}

static void *server_main(void *arg)
{
    (void)arg;
    size_t cap = 0;
    struct pollfd *pf = NULL;
    void **who = NULL; /* per pollfd: a listener or a connection */
    int *is_l = NULL;
    int64_t last_full = u_mono_ms();
    pthread_mutex_lock(&ps_g.mu);
    for (;;) {
        int64_t now = u_mono_ms();
        cleanup(now);
        if (!ps_g.ls) {
            if (!ps_g.joiner)
                pthread_detach(pthread_self()); /* nobody waits for this exit */
            ps_g.running = 0;
            ps_g.iter++;
            pthread_cond_broadcast(&ps_g.cv);
            break;
        }
        /* Deadlines and pending re-checks. */
        int64_t recheck = ps_g.slow_sources ? PEER_RECHECK_MS : PEER_SAFETY_RECHECK_MS;
        int full = now - last_full >= recheck;
        if (full)
            last_full = now;
        int64_t next = now + PEER_IDLE_TIMEOUT_MS; /* nothing pending: sleep until woken */
        int pending = 0;
        size_t need = 1 + (size_t)ps_g.nconns;
        for (listener *l = ps_g.ls; l; l = l->next)
            need++;
        if (need > cap) {
            size_t nc = need * 2;
            struct pollfd *npf = realloc(pf, nc * sizeof *pf);
            if (npf)
                pf = npf;
            void **nw = npf ? realloc(who, nc * sizeof *who) : NULL;
            if (nw)
                who = nw;
            int *ni = nw ? realloc(is_l, nc * sizeof *is_l) : NULL;
            if (ni)
                is_l = ni;
            if (ni)
                cap = nc;
        }
        if (cap == 0 || !pf || !who || !is_l) { /* out of memory: try again in a moment */
            pthread_mutex_unlock(&ps_g.mu);
            poll(NULL, 0, 100);
            pthread_mutex_lock(&ps_g.mu);
            continue;
        }
        size_t n = 0;
        pf[n] = (struct pollfd){ps_g.wakefd, POLLIN, 0};
        who[n] = NULL;
        is_l[n++] = 0;
        if (now >= ps_g.accept_paused_until) {
            for (listener *l = ps_g.ls; l && n < cap; l = l->next) {
                pf[n] = (struct pollfd){l->lfd, POLLIN, 0};
                who[n] = l;
                is_l[n++] = 1;
            }
        } else {
            next = min_deadline(next, ps_g.accept_paused_until);
        }
        for (conn *c = ps_g.conns; c && n < cap; c = c->next) {
            if (c->state == C_GET || c->state == C_BATCH) {
                if (c->state == C_GET)
                    ps_check_get(c, now, full);
                else
                    ps_check_batch(c, now, full);
                if (c->state == C_WRITE)
                    ps_run(c, now);
            } else if (now >= c->deadline) {
                ps_conn_close(c); /* slow (slowloris), idle or stuck */
            }
            if (c->state == C_CLOSED)
                continue;
            short ev = c->state == C_GET || c->state == C_BATCH ? POLLRDHUP : c->want;
            pf[n] = (struct pollfd){c->fd, ev, 0};
            who[n] = c;
            is_l[n++] = 0;
            pending |= c->state == C_GET || c->state == C_BATCH;
            if (c->state == C_GET)
                next = min_deadline(next, c->wait_deadline);
            else if (c->state == C_BATCH)
                next = min_deadline(next, c->gather_at ? c->gather_at : c->wait_deadline);
            else
                next = min_deadline(next, c->deadline);
        }
        if (pending)
            next = min_deadline(next, now + recheck);
        for (listener *l = ps_g.ls; l; l = l->next)
            if (l->thead)
                next = min_deadline(next, l->thead->tomb_until);
        ps_g.iter++;
        pthread_cond_broadcast(&ps_g.cv);
        pthread_mutex_unlock(&ps_g.mu);

        int64_t left = next - now;
        if (left < 0)
            left = 0;
        int pr = poll(pf, (nfds_t)n, left > INT_MAX ? INT_MAX : (int)left);

        pthread_mutex_lock(&ps_g.mu);
        now = u_mono_ms();
        if (pr <= 0)
            continue;
        if (pf[0].revents) {
            uint64_t v;
            while (read(ps_g.wakefd, &v, sizeof v) > 0) {
            }
        }
        for (size_t i = 1; i < n; i++) {
            if (!pf[i].revents)
                continue;
            if (is_l[i]) {
                listener *l = who[i];
                if (!l->closing)
                    accept_on(l, now);
                continue;
            }
            conn *c = who[i];
            if (c->state == C_CLOSED || c->l->closing)
                continue;
            if (c->state == C_GET || c->state == C_BATCH) {
                if (ps_gone(pf[i].revents))
                    ps_conn_close(c); /* the follower went away: nothing to answer */
                continue;
            }
            if ((pf[i].revents & (POLLHUP | POLLERR | POLLNVAL)) && c->state != C_LINGER &&
                !(pf[i].revents & POLLIN)) {
                ps_conn_close(c);
                continue;
            }
            ps_run(c, now);
        }
    }
    pthread_mutex_unlock(&ps_g.mu);
    free(pf);
    free(who);
    free(is_l);
    return NULL;
}

/* ---- public ---------------------------------------------------------------------- */

/* The TLS setup and health path as a key: electors share a listener only
 * when theirs are byte-identical. */
static int setup_key(const struct s3lect_config *cfg, const peer_identity *id, int mtls,
                     const char *hp, uint8_t key[CR_SHA256_LEN])
{
    const cfg_blob none = {0};
    const cfg_blob *parts[3] = {id ? &none : &cfg->peer_cert, id ? &none : &cfg->peer_key,
                                mtls ? &cfg->peer_ca : &none};
    size_t len = 64 + strlen(hp) + (id ? PEER_PIN_LEN : 0);
    for (int i = 0; i < 3; i++)
        len += parts[i]->len + 24;
    char *buf = malloc(len);
    if (!buf)
        return -1;
    size_t o = (size_t)snprintf(buf, len, "%s|%d|%s|", id ? "zero" : "cert", mtls,
                                id ? peer_identity_pin(id) : "");
    o += (size_t)snprintf(buf + o, len - o, "%s|", hp);
    for (int i = 0; i < 3; i++) {
        o += (size_t)snprintf(buf + o, len - o, "%zu:", parts[i]->len);
        if (parts[i]->len)
            memcpy(buf + o, parts[i]->data, parts[i]->len);
        o += parts[i]->len;
    }
    cr_sha256(buf, o, key);
    free(buf);
    return 0;
}

static int port_is_zero(const char *addr)
{
    const char *colon = strrchr(addr, ':');
    return colon && strcmp(colon + 1, "0") == 0;
}

/* The server thread does not survive fork(): a child that starts electors
 * gets a registry and an identity of its own (the parent's memory and
 * listening sockets are left as they are; they close on exec). */
static void forget_in_child(void)
{
    pthread_mutex_init(&ps_g.life, NULL);
    pthread_mutex_init(&ps_g.mu, NULL);
    pthread_cond_init(&ps_g.cv, NULL);
    if (ps_g.wakefd >= 0)
        close(ps_g.wakefd); /* shared with the parent: its wake-ups are not ours */
    ps_g.wakefd = -1;
    ps_g.ls = NULL;
    ps_g.conns = NULL;
    ps_g.nconns = 0;
    ps_g.running = ps_g.joiner = 0;
    ps_g.slow_sources = 0;
    ps_identity_forget_in_child();
}

static pthread_once_t fork_once = PTHREAD_ONCE_INIT;

static void fork_init(void)
{
    pthread_atfork(NULL, NULL, forget_in_child);
}

int peer_server_register(const struct s3lect_config *cfg, const peer_identity *id,
                         const char *incarnation, const peer_source *src, int mtls,
                         peer_server **out, char *err, size_t errlen)
{
    pthread_once(&fork_once, fork_init);
    *out = NULL;
    if (!cfg || !src || !src->view || !src->wait) {
        snprintf(err, errlen, "peer server: invalid arguments");
        return S3LECT_EINVAL;
    }
    const char *addr = cfg->peer_listen && *cfg->peer_listen ? cfg->peer_listen : cfg->server_addr;
    if (!addr || !*addr) {
        snprintf(err, errlen,
                 "peer mode needs an address to listen on: set peer_listen or server_addr "
                 "(host:port)");
        return S3LECT_EINVAL;
    }
    const char *hp = cfg->peer_health_path && *cfg->peer_health_path ? cfg->peer_health_path
                                                                     : CFG_DEFAULT_PEER_HEALTH_PATH;
    if (hp[0] != '/' || strlen(hp) >= sizeof(((peer_request *)0)->path)) {
        snprintf(err, errlen, "peer_health_path must start with '/' and be shorter than %zu bytes",
                 sizeof(((peer_request *)0)->path));
        return S3LECT_EINVAL;
    }
    size_t il = incarnation ? strlen(incarnation) : 0;
    if (il > PEER_INC_MAX) {
        snprintf(err, errlen, "peer server: incarnation too long");
        return S3LECT_EINVAL;
    }
    uint8_t key[CR_SHA256_LEN];
    peer_server *r = calloc(1, sizeof *r);
    if (!r || setup_key(cfg, id, mtls, hp, key) != 0) {
        free(r);
        snprintf(err, errlen, "out of memory");
        return S3LECT_ENOMEM;
    }
    memcpy(r->inc, incarnation ? incarnation : "", il + 1);
    r->src = *src;

    pthread_mutex_lock(&ps_g.life);
    int rc = 0;
    listener *fresh = NULL;
    if (ps_g.wakefd < 0) {
        int fd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
        if (fd < 0) {
            snprintf(err, errlen, "peer server: eventfd: %s", strerror(errno));
            rc = S3LECT_EIO;
            goto out;
        }
        __atomic_store_n(&ps_g.wakefd, fd, __ATOMIC_RELEASE);
    }
    /* Only registrations change the set of listeners (ps_g.life), so what is
     * found here is still there below; the server thread only closes
     * listeners that have no registration, and a found one keeps its. */
    pthread_mutex_lock(&ps_g.mu);
    listener *l = NULL;
    for (listener *x = ps_g.ls; x; x = x->next) {
        if (x->closing || strcmp(x->addr, addr) != 0)
            continue;
        if (memcmp(x->key, key, sizeof key) == 0) {
            l = x;
            break;
        }
        if (x->explicit_port) {
            pthread_mutex_unlock(&ps_g.mu);
            snprintf(err, errlen,
                     "peer listen address %.200s is already used in this process by an elector "
                     "with another TLS setup or health path (peer_cert, peer_key, peer_ca, mTLS, "
                     "peer_health_path): give every elector on that address the same setup, or "
                     "this one another peer_listen address",
                     addr);
            rc = S3LECT_EINVAL;
            goto out;
        }
    }
    if (il && l && ps_lookup(l, r->inc)) {
        pthread_mutex_unlock(&ps_g.mu);
        snprintf(err, errlen, "peer server: incarnation %s is already registered", r->inc);
        rc = S3LECT_EINVAL;
        goto out;
    }
    if (l)
        r->l = l; /* registered below without letting go of ps_g.mu: it stays open */
    else
        pthread_mutex_unlock(&ps_g.mu);
    if (!l) {
        fresh = calloc(1, sizeof *fresh);
        if (!fresh || !(fresh->addr = u_strdup(addr)) || !(fresh->health_path = u_strdup(hp))) {
            if (fresh)
                free(fresh->addr);
            free(fresh);
            snprintf(err, errlen, "out of memory");
            rc = S3LECT_ENOMEM;
            goto out;
        }
        fresh->lfd = -1;
        memcpy(fresh->key, key, sizeof key);
        fresh->explicit_port = !port_is_zero(addr);
        if (!(fresh->ctx = ps_make_ctx(cfg, id, mtls, err, errlen))) {
            free_listener(fresh);
            rc = S3LECT_EINVAL;
            goto out;
        }
        if (ps_listen_on(addr, &fresh->lfd, &fresh->port, err, errlen) != 0) {
            free_listener(fresh);
            rc = S3LECT_EIO;
            goto out;
        }
        pthread_mutex_lock(&ps_g.mu);
        l = fresh;
    }
    if (!ps_g.running) {
        /* The server thread runs with SIGPIPE blocked: a write to a closed
         * connection fails with EPIPE instead of killing the process. */
        sigset_t block, old;
        sigemptyset(&block);
        sigaddset(&block, SIGPIPE);
        pthread_sigmask(SIG_BLOCK, &block, &old);
        int perr = u_thread_create(&ps_g.thread, NULL, server_main, NULL);
        pthread_sigmask(SIG_SETMASK, &old, NULL);
        if (perr != 0) {
            pthread_mutex_unlock(&ps_g.mu);
            snprintf(err, errlen, "peer server: cannot start a thread: %s", strerror(perr));
            if (fresh)
                free_listener(fresh);
            rc = S3LECT_EIO;
            goto out;
        }
        ps_g.running = 1;
        ps_g.joiner = 0;
    }
    if (fresh) {
        fresh->next = ps_g.ls;
        ps_g.ls = fresh;
    }
    r->l = l;
    r->port = l->port;
    r->next = l->regs;
    r->prev = NULL;
    if (l->regs)
        l->regs->prev = r;
    l->regs = r;
    uint32_t h = ps_inc_hash(r->inc);
    r->hnext = l->hash[h];
    l->hash[h] = r;
    l->nregs++;
    l->nlive++;
    if (!r->src.state)
        ps_g.slow_sources++;
    pthread_mutex_unlock(&ps_g.mu);
    ps_wake_server();
    *out = r;
    pthread_mutex_unlock(&ps_g.life);
    return 0;
out:
    free(r);
    pthread_mutex_unlock(&ps_g.life);
    return rc;
}

int peer_server_start(const struct s3lect_config *cfg, const peer_identity *id,
                      const peer_source *src, int mtls, peer_server **out, char *err, size_t errlen)
{
    return peer_server_register(cfg, id, NULL, src, mtls, out, err, errlen);
}

int peer_server_port(const peer_server *s)
{
    return s ? s->port : 0;
}

/* Under ps_g.mu: takes r off its listener now (no callback of its source
 * runs after this). */
static void remove_reg(peer_server *r)
{
    listener *l = r->l;
    unlink_reg(l, r);
    forget_reg(l, r);
    if (!r->tomb) {
        l->nlive--;
        if (!r->src.state)
            ps_g.slow_sources--;
    }
    if (l->nregs == 0)
        l->closing = 1;
}

void peer_server_stop_after(peer_server *s, int64_t grace_ms)
{
    if (!s)
        return;
    pthread_mutex_lock(&ps_g.mu);
    int last = s->l->nlive <= 1;
    if (grace_ms <= 0 || last) {
        pthread_mutex_unlock(&ps_g.mu);
        /* The listener's last elector waits out the grace itself (its
         * source still answers "not the leader"), so that the port is
         * closed when its stop returns, as with a listener of its own. */
        struct timespec ts = {(time_t)(grace_ms / 1000), (long)(grace_ms % 1000) * 1000000L};
        while (grace_ms > 0 && nanosleep(&ts, &ts) != 0 && errno == EINTR) {
        }
        peer_server_stop(s);
        return;
    }
    /* From now on it answers "not the leader" without its source (which
     * its owner may free), until the server thread drops it. */
    /* The released record outlives the source: the successor may ask after. */
    peer_view v;
    memset(&v, 0, sizeof v);
    if (s->src.view && s->src.view(s->src.ctx, &v) == 0 && !v.leading) {
        s->tomb_released = v.released;
        v.released = NULL;
    }
    peer_view_clear(&v);
    s->tomb = 1;
    s->tomb_until = u_mono_ms() + grace_ms;
    s->tprev = s->l->ttail;
    s->tnext = NULL;
    if (s->l->ttail)
        s->l->ttail->tnext = s;
    else
        s->l->thead = s;
    s->l->ttail = s;
    s->l->nlive--;
    if (!s->src.state)
        ps_g.slow_sources--;
    memset(&s->src, 0, sizeof s->src);
    pthread_mutex_unlock(&ps_g.mu);
    ps_wake_server();
}

void peer_server_stop(peer_server *s)
{
    if (!s)
        return;
    pthread_mutex_lock(&ps_g.life);
    pthread_mutex_lock(&ps_g.mu);
    expire_tombs(s->l, u_mono_ms()); /* those whose grace is over go now, with s */
    remove_reg(s);
    int closing = s->l->closing;
    free(s->tomb_released);
    free(s);
    int last = 1;
    for (listener *l = ps_g.ls; l; l = l->next)
        if (!l->closing)
            last = 0;
    int join = 0;
    if (closing && !ps_g.running)
        cleanup(u_mono_ms()); /* no server thread (it could not start): close it here */
    if (closing && ps_g.running) {
        /* Wait until the server thread has closed the listener (its port
         * is free again), or has exited when it was the last one. */
        if (last)
            ps_g.joiner = 1;
        join = last;
        uint64_t target = ps_g.iter + 1;
        ps_wake_server();
        while (ps_g.running && ps_g.iter < target)
            pthread_cond_wait(&ps_g.cv, &ps_g.mu);
        if (last)
            while (ps_g.running)
                pthread_cond_wait(&ps_g.cv, &ps_g.mu);
    }
    pthread_t t = ps_g.thread;
    pthread_mutex_unlock(&ps_g.mu);
    if (join) {
        pthread_join(t, NULL);
        pthread_mutex_lock(&ps_g.mu);
        ps_g.joiner = 0;
        pthread_mutex_unlock(&ps_g.mu);
    }
    pthread_mutex_unlock(&ps_g.life);
}
