/* SPDX-License-Identifier: Apache-2.0 */
/* peer_view.c - the leadership endpoint's view of an elector, and its
 * registration on the process's shared peer endpoint (docs/peer.md). */
#include <cjson/cJSON.h>
#include <stdlib.h>
#include <string.h>

#include "runtime.h"

/* ---- peer endpoint view ---- */

/* Under e->mu: whether the endpoint answers "leading". While the release
 * write is in flight it answers what it last published: the runtime
 * publishes the end of leadership only once the released record is written
 * (events.c), and a follower told "not the leader" before that reads the old
 * record, finds it held and reads again only a frequent interval later (the
 * footprint bench's handovers: a few keys in 5 s instead of 0.1 s, whenever a
 * batch's re-check fell inside a release). Until the release lands the old
 * record is what the store shows too, and a follower never takes over on a
 * peer answer, so this can only delay a takeover, by the release's own
 * round trip. */
static int answers_leading(s3lect_elector *e)
{
    if (!e->eng.my_body)
        return 0;
    if (el_releasing(&e->eng))
        return e->peer_leading && e->peer_etag && e->peer_etag[0];
    return el_is_leader(&e->eng, u_mono_ms());
}

static int view_locked(s3lect_elector *e, peer_view *v)
{
    memset(v, 0, sizeof *v);
    v->version = e->peer_version;
    v->leading = answers_leading(e);
    v->etag = u_strdup(v->leading && e->eng.etag ? e->eng.etag : "");
    if (!v->etag)
        return S3LECT_ENOMEM;
    if (!v->leading) {
        /* The released record it wrote last, for the successor. */
        if (!e->peer_leading && e->eng.rel_body && e->eng.rel_etag) {
            cJSON *o = cJSON_Parse(e->eng.rel_body);
            const cJSON *tp = cJSON_GetObjectItemCaseSensitive(o, "toProc");
            if (cJSON_IsString(tp) && strlen(tp->valuestring) < sizeof v->to_proc)
                strcpy(v->to_proc, tp->valuestring);
            if (o && cJSON_AddStringToObject(o, "etag", e->eng.rel_etag))
                v->released = cJSON_PrintUnformatted(o);
            cJSON_Delete(o); /* out of memory: no record, the successor reads the store */
        }
        return 0;
    }
    cJSON *o = cJSON_Parse(e->eng.my_body);
    if (!o)
        return S3LECT_ENOMEM;
    cJSON_DeleteItemFromObjectCaseSensitive(o, "etag");
    /* Never shown: presenting it proves a store read (one successor). */
    cJSON_DeleteItemFromObjectCaseSensitive(o, "succKey");
    cJSON_AddStringToObject(o, "etag", v->etag);
    if (!cJSON_GetObjectItemCaseSensitive(o, "term"))
        cJSON_AddNumberToObject(o, "term", (double)e->eng.term);
    v->body = cJSON_PrintUnformatted(o);
    cJSON_Delete(o);
    return v->body ? 0 : S3LECT_ENOMEM;
}

static int peer_view_cb(void *ctx, peer_view *v)
{
    s3lect_elector *e = ctx;
    pthread_mutex_lock(&e->mu);
    int rc = view_locked(e, v);
    pthread_mutex_unlock(&e->mu);
    return rc;
}

static int peer_wait_cb(void *ctx, uint64_t version, int64_t deadline)
{
    s3lect_elector *e = ctx;
    pthread_mutex_lock(&e->mu);
    int rc = 0;
    for (;;) {
        if (e->peer_version != version) {
            rc = 1;
            break;
        }
        /* Not on stop_req: until the engine has stopped leading (which bumps
         * the version) a long poll would be answered 200 at once, again and
         * again. */
        if (e->stopped) {
            rc = -1;
            break;
        }
        if (u_mono_ms() >= deadline)
            break;
        struct timespec ts = u_cond_deadline(deadline, 0);
        pthread_cond_timedwait(&e->state_cv, &e->mu, &ts);
    }
    pthread_mutex_unlock(&e->mu);
    return rc;
}

/* What the server re-checks pending long polls and batches with: no
 * allocation. */
static void peer_state_cb(void *ctx, peer_state *st)
{
    s3lect_elector *e = ctx;
    pthread_mutex_lock(&e->mu);
    st->version = e->peer_version;
    st->leading = answers_leading(e);
    st->term = e->eng.term;
    st->etag_hash = peer_etag_hash(st->leading && e->eng.etag ? e->eng.etag : "");
    pthread_mutex_unlock(&e->mu);
}

/* s3lect transfer's hint: a request is in the record. */
static void peer_poke_cb(void *ctx)
{
    s3lect_elector *e = ctx;
    pthread_mutex_lock(&e->mu);
    if (el_poke(&e->eng, rt_now(e)))
        rt_kick_locked(e);
    pthread_mutex_unlock(&e->mu);
}

peer_source rt_peer_source(s3lect_elector *e)
{
    peer_source src = {peer_view_cb, peer_wait_cb, e, peer_state_cb, peer_poke_cb, ""};
    memcpy(src.succ_key, e->succ_key, sizeof src.succ_key);
    return src;
}

int rt_start_peer_server(s3lect_elector *e)
{
    pthread_mutex_lock(&e->mu);
    int running = e->ps != NULL;
    pthread_mutex_unlock(&e->mu);
    if (running)
        return 0;
    peer_source src = rt_peer_source(e);
    peer_server *ps = NULL;
    char err[400] = "";
    /* A copy: s3lect_enable_peer_mode may replace the CA bytes meanwhile. */
    pthread_mutex_lock(&e->mu);
    s3lect_config *cfg = s3lect_config_dup(e->cfg);
    pthread_mutex_unlock(&e->mu);
    if (!cfg)
        return rt_fail(e, S3LECT_ENOMEM, "peer mode: out of memory");
    /* mTLS when this node has a client certificate: the cluster uses client certs. */
    int mtls = cfg->peer_client_cert.data != NULL;
    /* Zero-config: neither a certificate nor a key. One key per process,
     * shared by every zero-config elector (they share one listener); its
     * fingerprint goes into every record this node writes. */
    int zero = !cfg->peer_cert.data && !cfg->peer_key.data;
    char pin[PEER_PIN_LEN + 1] = "";
    int rc = 0;
    pthread_mutex_lock(&e->mu);
    peer_identity *pid = e->pid;
    if (pid)
        memcpy(pin, e->peer_pin, sizeof pin);
    pthread_mutex_unlock(&e->mu);
    if (zero && !pid && (rc = peer_identity_shared(&pid, pin, err, sizeof err)) == 0) {
        pthread_mutex_lock(&e->mu);
        e->pid = pid;
        memcpy(e->peer_pin, pin, sizeof pin);
        pthread_mutex_unlock(&e->mu);
    }
    /* Without server_addr the endpoint listens on the interface that routes
     * to the store (or peer_listen), on an ephemeral port unless peer_listen
     * names one, and advertises that address. */
    int advertise = !cfg->server_addr || !cfg->server_addr[0];
    char route[64] = "", listen_host[256] = "";
    if (!rc && advertise) {
        int has_listen = cfg->peer_listen && cfg->peer_listen[0];
        if (has_listen && peer_split_host(cfg->peer_listen, listen_host, sizeof listen_host) != 0)
            listen_host[0] = '\0'; /* peer_server_start says what is wrong with it */
        int wildcard = !listen_host[0] || strcmp(listen_host, "0.0.0.0") == 0 ||
                       strcmp(listen_host, "::") == 0;
        if (!has_listen || wildcard) {
            const char *origin =
                e->store && e->store->vt->pool ? e->store->vt->pool(e->store) : NULL;
            if (peer_route_host(origin, route, sizeof route, err, sizeof err) != 0)
                rc = S3LECT_EINVAL;
        }
        if (!rc && !has_listen) {
            char l[300];
            peer_join_hostport(route, 0, l, sizeof l);
            if (s3lect_config_set_str(cfg, S3LECT_OPT_PEER_LISTEN, l) != 0)
                rc = S3LECT_ENOMEM;
        }
    }
    if (!rc)
        rc = peer_server_register(cfg, zero ? pid : NULL, e->incarnation, &src, mtls, &ps, err,
                                  sizeof err);
    s3lect_config_free(cfg);
    if (rc)
        return rt_fail(e, rc, "peer mode: %s", err[0] ? err : s3lect_strerror(rc));
    char adv[300] = "";
    if (advertise)
        peer_join_hostport(route[0] ? route : listen_host, peer_server_port(ps), adv, sizeof adv);
    pthread_mutex_lock(&e->mu);
    if (advertise && s3lect_config_set_str(e->cfg, S3LECT_OPT_SERVER_ADDR, adv) != 0) {
        pthread_mutex_unlock(&e->mu);
        peer_server_stop(ps);
        return rt_fail(e, S3LECT_ENOMEM, "peer mode: out of memory");
    }
    e->ps = ps;
    if (advertise || zero) { /* the engine takes server_addr and the pin before its next step */
        e->self_changed = 1;
        rt_kick_locked(e);
    }
    pthread_mutex_unlock(&e->mu);
    return 0;
}
