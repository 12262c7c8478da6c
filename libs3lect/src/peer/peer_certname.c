/* SPDX-License-Identifier: Apache-2.0 */
/* peer_certname.c - whose certificate a peer answer came over (CA mode,
 * docs/peer.md "Whose answer counts"): the names a leader's certificate
 * presents, and the leaf certificate of a libcurl transfer. */
#include <curl/curl.h>
#include <openssl/bio.h>
#include <openssl/pem.h>
#include <openssl/x509.h>
#include <openssl/x509v3.h>
#include <stdio.h>
#include <string.h>

#include "peer.h"

/* Appends "tag:value" (printable ASCII, shortened) to the list of names a
 * certificate presents, for the message. */
static void seen_add(char *seen, size_t cap, const char *tag, const unsigned char *v, int n)
{
    size_t o = strlen(seen);
    if (o + 8 >= cap)
        return;
    o += (size_t)snprintf(seen + o, cap - o, "%s%s", o ? ", " : "", tag);
    for (int i = 0; i < n && i < 64 && o + 5 < cap; i++)
        seen[o++] = (v[i] >= 0x20 && v[i] < 0x7f && v[i] != '\'') ? (char)v[i] : '?';
    if (n > 64 && o + 4 < cap) {
        memcpy(seen + o, "...", 3);
        o += 3;
    }
    seen[o] = '\0';
}

static int names_id(const ASN1_STRING *s, const char *id)
{
    size_t n = strlen(id);
    return s && (size_t)ASN1_STRING_length(s) == n && memcmp(ASN1_STRING_get0_data(s), id, n) == 0;
}

/* 1 when the certificate names server id `id`: a subject common name, or a
 * DNS or URI subjectAltName, equal to it byte for byte. Fills seen with the
 * names it presents. */
int peer_cert_names_id(X509 *x, const char *id, char *seen, size_t cap)
{
    seen[0] = '\0';
    int found = 0;
    const X509_NAME *subj = X509_get_subject_name(x);
    for (int i = -1; subj && (i = X509_NAME_get_index_by_NID(subj, NID_commonName, i)) >= 0;) {
        const ASN1_STRING *d = X509_NAME_ENTRY_get_data(X509_NAME_get_entry(subj, i));
        if (names_id(d, id))
            found = 1;
        if (d)
            seen_add(seen, cap, "CN=", ASN1_STRING_get0_data(d), ASN1_STRING_length(d));
    }
    GENERAL_NAMES *alt = X509_get_ext_d2i(x, NID_subject_alt_name, NULL, NULL);
    /* (the count is an int in OpenSSL, a size_t in BoringSSL) */
    int nalt = alt ? (int)sk_GENERAL_NAME_num(alt) : 0;
    for (int i = 0; i < nalt; i++) {
        const GENERAL_NAME *g = sk_GENERAL_NAME_value(alt, i);
        const ASN1_STRING *d = g->type == GEN_DNS   ? g->d.dNSName
                               : g->type == GEN_URI ? g->d.uniformResourceIdentifier
                                                    : NULL;
        if (!d)
            continue;
        if (names_id(d, id))
            found = 1;
        seen_add(seen, cap, g->type == GEN_DNS ? "DNS:" : "URI:", ASN1_STRING_get0_data(d),
                 ASN1_STRING_length(d));
    }
    GENERAL_NAMES_free(alt);
    if (!seen[0])
        snprintf(seen, cap, "no common name and no DNS or URI name");
    return found;
}

/* The leaf certificate of the connection made in this transfer, from
 * libcurl's certificate information (PEM: independent of the TLS library
 * libcurl uses). NULL when there is none. */
X509 *peer_leaf_of_transfer(void *curl)
{
    struct curl_certinfo *ci = NULL;
    if (curl_easy_getinfo((CURL *)curl, CURLINFO_CERTINFO, &ci) != CURLE_OK || !ci ||
        ci->num_of_certs < 1)
        return NULL;
    for (const struct curl_slist *l = ci->certinfo[0]; l; l = l->next) {
        if (strncmp(l->data, "Cert:", 5) != 0)
            continue;
        BIO *b = BIO_new_mem_buf(l->data + 5, -1);
        X509 *x = b ? PEM_read_bio_X509(b, NULL, NULL, NULL) : NULL;
        BIO_free(b);
        return x;
    }
    return NULL;
}
