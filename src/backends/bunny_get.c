// SPDX-License-Identifier: MIT
/*
 * bunny_get.c - the bunny backend's get: DESCRIBE, then GET (whole and
 * hashed as it passes, or a Range checked against DESCRIBE's size and cut
 * short when the server ignores Range).
 */
#include <errno.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include <openssl/evp.h>

#include "backends/bunny_internal.h"
#include "backends/http_client.h"

/* ---- get ---- */

/* The caller's sink behind the range and version checks. */
struct get_state {
	struct smux_sink *out;
	struct smux__http_resp *resp;
	uint64_t off, len;	       /* the range asked for */
	struct smux__http_range range; /* what of the body is asked for */
	uint64_t size;		       /* the size DESCRIBE gave */
	bool checked, stale;	       /* the answer's total was compared */
	bool done; /* the range is in: the rest was refused */
	/* a whole-object get: the answer is taken as it comes and hashed,
	 * so its version token is the SHA-256 of the bytes delivered */
	bool whole;
	EVP_MD_CTX *md;
};

static int get_sink_write(void *arg, const void *data, size_t len)
{
	struct get_state *g = arg;
	uint64_t total;
	int rc;

	if (g->whole) {
		EVP_DigestUpdate(g->md, data, len);
		return smux_sink_write(g->out, data, len);
	}
	if (!g->checked) {
		g->checked = true;
		/* another size than DESCRIBE saw: a put came in between */
		if (smux__http_answer_size(g->resp, &total) && total != g->size)
			g->stale = true;
		smux__http_range_start(&g->range, g->resp, g->off, g->len);
	}
	if (g->stale || g->done)
		return -ECANCELED;
	rc = smux__http_range_write(&g->range, data, len, g->out);
	if (rc < 0)
		return rc;
	if (g->range.room == 0 && g->resp->status == 200 && !g->range.skip) {
		/* a server ignoring Range: what was asked for is in, the
		 * rest of the object is not worth reading */
		g->done = true;
		return -ECANCELED;
	}
	return 0;
}

static int get_sink_rewind(void *arg)
{
	struct get_state *g = arg;

	g->checked = g->stale = g->done = false;
	if (g->whole && !EVP_DigestInit_ex(g->md, EVP_sha256(), NULL))
		return -ENOMEM;
	return smux_sink_rewind(g->out);
}

/*
 * The end of a whole-object GET: the bytes delivered are the object, and
 * their SHA-256 its version, whatever DESCRIBE saw before (a put may have
 * come in between: then the info is of what was read, and a pinned
 * version that it is not fails).
 */
static int get_whole_end(struct bunnyb *z, const char *key, struct get_state *g,
			 const struct smux_info *oinfo, const char *if_match,
			 int rc, struct smux_info *info, struct smux_error *err)
{
	unsigned char md[EVP_MAX_MD_SIZE];
	unsigned int mdlen = 0;
	char hex[65];
	int64_t lm;

	if (rc < 0 && g->out->error)
		return smux_error_make_local(err, g->out->error);
	if (rc < 0)
		return rc;
	if (strlen(oinfo->etag) != 64) {
		/* the server gave no Checksum: the version token is size and
		 * LastChanged, which only DESCRIBE knows; an answer of
		 * another size is another version, read again */
		if (g->resp->body_bytes == oinfo->size)
			return 0;
		if (if_match && if_match[0])
			return smux_error_set(err, SMUX_E_PRECONDITION_FAILED,
					      smux__bunny_name(z),
					      "get \"%s\": version changed",
					      key);
		if (smux_sink_rewind(g->out) == 0)
			return -EAGAIN;
		return smux_error_set(err, SMUX_E_PRECONDITION_FAILED,
				      smux__bunny_name(z),
				      "get \"%s\": changed while read", key);
	}
	EVP_DigestFinal_ex(g->md, md, &mdlen);
	smux__bunny_hex(md, mdlen, hex);
	if (strcmp(hex, oinfo->etag) == 0)
		return 0; /* what DESCRIBE described (info is set) */
	if (if_match && if_match[0] && strcmp(if_match, hex) != 0)
		return smux_error_set(err, SMUX_E_PRECONDITION_FAILED,
				      smux__bunny_name(z),
				      "get \"%s\": version changed", key);
	if (info) {
		smux_info_clear(info);
		info->mode = S_IFREG | BUNNY_FILE_MODE;
		info->size = g->resp->body_bytes;
		lm = smux__http_parse_date(g->resp->last_modified);
		info->mtime_ns = lm > 0 ? lm : oinfo->mtime_ns;
		info->nlink = 1;
		snprintf(info->etag, sizeof(info->etag), "%s", hex);
	}
	return 0;
}

/*
 * The end of a whole-object GET sent on a listing's note @seen instead of
 * a DESCRIBE: the bytes are that version only when their SHA-256 is its
 * Checksum and their count its Length; anything else (another version, a
 * directory's answer, an error) is rewound and -EAGAIN (err cleared): the
 * caller asks again with the DESCRIBE. A full local disk stays an error.
 */
static int get_seen_end(struct get_state *g, const struct smux__bunny_obj *seen,
			int rc, struct smux_error *err)
{
	unsigned char md[EVP_MAX_MD_SIZE];
	unsigned int mdlen = 0;
	char hex[65];

	if (rc < 0 && g->out->error)
		return smux_error_make_local(err, g->out->error);
	if (rc == 0 && g->resp->body_bytes == seen->length) {
		EVP_DigestFinal_ex(g->md, md, &mdlen);
		smux__bunny_hex(md, mdlen, hex);
		if (strcmp(hex, seen->checksum) == 0)
			return 0;
	}
	smux_error_clear(err);
	rc = smux_sink_rewind(g->out);
	return rc < 0 ? smux_error_make_local(err, -rc) : -EAGAIN;
}

/* A follow-up of a ranged GET (smux__http_range_rest). */
struct get_more {
	struct bunnyb *z;
	const struct smux_ctx *ctx;
	const char *key;
	struct smux__http_resp resp;
};

static int get_more_fetch(void *arg, const char *range, const char *if_match,
			  struct smux_sink *sink, struct smux_error *err)
{
	struct get_more *m = arg;
	struct smux__http_range_hdrs h;
	char what[256];
	struct smux__http_req req = {
		.method = "GET", .headers = h.list, .sink = sink};
	char *url = smux__bunny_url(m->z, m->key, false);
	int rc;

	if (!url)
		return smux__bunny_nomem(m->z, err);
	smux__http_range_hdrs(&h, range, if_match);
	req.url = url;
	req.what = smux__bunny_what(what, sizeof(what), "GET", m->key);
	rc = smux__bunny_do(m->z, m->ctx, &req, &m->resp, err);
	free(url);
	return rc;
}

/* One DESCRIBE + GET round, or a GET alone on a listing's note @seen (may
 * be NULL); -EAGAIN (err untouched) when the object changed between the
 * two and no version was pinned, or the note was not the object's. */
static int get_once(struct bunnyb *z, const struct smux_ctx *ctx,
		    const char *key, const struct smux_get_opts *opts,
		    struct smux_sink *sink, struct smux_info *info,
		    const struct smux__bunny_obj *seen, struct smux_error *err)
{
	struct smux__http_req req = {.method = "GET"};
	struct smux__http_resp resp;
	struct get_state g = {.out = sink, .resp = &resp};
	const char *hdrs[2] = {NULL, NULL};
	uint64_t off = opts ? opts->offset : 0;
	uint64_t len = opts ? opts->length : SMUX_LEN_ALL;
	const char *if_match = opts ? opts->if_match : NULL;
	struct smux__bunny_obj o;
	struct smux_info oinfo;
	struct smux_sink wrap;
	char range[64], what[256];
	char *url;
	int rc;

	if (seen) {
		o = *seen;
	} else {
		rc = smux__bunny_describe(z, ctx, key, &o, err);
		if (rc < 0)
			return rc;
	}
	smux__bunny_fill_obj(&oinfo, &o);
	free(o.name);
	if (o.is_dir)
		return smux_error_set(err, SMUX_E_IS_DIRECTORY,
				      smux__bunny_name(z),
				      "get \"%s\": is a directory", key);
	if (if_match && if_match[0] && strcmp(if_match, oinfo.etag) != 0)
		return smux_error_set(err, SMUX_E_PRECONDITION_FAILED,
				      smux__bunny_name(z),
				      "get \"%s\": version changed", key);
	if (info)
		*info = oinfo;
	if (len == 0 || off >= oinfo.size)
		return 0; /* nothing to fetch */
	g.whole = off == 0 && len >= oinfo.size;
	if (len > oinfo.size - off)
		len = oinfo.size - off;
	g.off = off;
	g.len = len;
	g.size = oinfo.size;
	if (g.whole) {
		g.md = EVP_MD_CTX_new();
		if (!g.md || !EVP_DigestInit_ex(g.md, EVP_sha256(), NULL)) {
			EVP_MD_CTX_free(g.md);
			return smux__bunny_nomem(z, err);
		}
	}
	if (!g.whole && !atomic_load(&z->no_range)) {
		snprintf(range, sizeof(range), "Range: bytes=%llu-%llu",
			 (unsigned long long)off,
			 (unsigned long long)(off + len - 1));
		hdrs[0] = range;
	}
	url = smux__bunny_url(z, key, false);
	if (!url)
		return smux__bunny_nomem(z, err);
	smux_sink_cb(&wrap, get_sink_write,
		     smux_sink_can_rewind(sink) ? get_sink_rewind : NULL, &g);
	req.url = url;
	req.headers = hdrs;
	req.sink = &wrap;
	req.what = smux__bunny_what(what, sizeof(what), "GET", key);
	rc = smux__bunny_do(z, ctx, &req, &resp, err);
	free(url);
	if (hdrs[0] && resp.status == 200)
		atomic_store(&z->no_range, true);
	if (g.whole) {
		rc = seen ? get_seen_end(&g, seen, rc, err)
			  : get_whole_end(z, key, &g, &oinfo, if_match, rc,
					  info, err);
		EVP_MD_CTX_free(g.md);
		return rc;
	}
	if (g.done && !g.stale) {
		smux_error_clear(err);
		return 0;
	}
	if (g.stale) {
		if (if_match && if_match[0])
			return smux_error_set(err, SMUX_E_PRECONDITION_FAILED,
					      smux__bunny_name(z),
					      "get \"%s\": version changed",
					      key);
		smux_error_clear(err);
		return smux_sink_rewind(sink) == 0
			       ? -EAGAIN
			       : smux_error_set(err, SMUX_E_PRECONDITION_FAILED,
						smux__bunny_name(z),
						"get \"%s\": "
						"changed while "
						"read",
						key);
	}
	if (g.range.bad) /* not the range asked for: refused */
		return smux__http_range_check(&g.range, true, &resp, g.off,
					      g.len, smux__bunny_name(z), key,
					      err);
	if (rc < 0 && sink->error)
		return smux_error_make_local(err, sink->error);
	if (rc == 0 && g.range.next < g.range.end) {
		/* a 206 that covered less than asked: the rest */
		struct get_more more = {.z = z, .ctx = ctx, .key = key};

		rc = smux__http_range_rest(&g.range, get_more_fetch, &more,
					   &more.resp, sink,
					   smux__bunny_name(z), key, err);
	}
	/* every byte DESCRIBE promised (none came: 0 delivered) */
	if (rc == 0 && g.range.delivered < len)
		return smux_error_set(err, SMUX_E_BAD_RESPONSE,
				      smux__bunny_name(z),
				      "get \"%s\": %llu of %llu bytes", key,
				      (unsigned long long)g.range.delivered,
				      (unsigned long long)len);
	return rc;
}

int smux__bunny_get(struct smux_backend *b, const struct smux_ctx *ctx,
		    const char *key, const struct smux_get_opts *opts,
		    struct smux_sink *sink, struct smux_info *info,
		    struct smux_error *err)
{
	struct bunnyb *z = smux__bunny_from(b);
	struct smux__bunny_obj seen;
	struct smux_info hinfo;
	int rc = -EAGAIN;

	if (smux__bunny_key_is_dir(key)) {
		rc = smux__bunny_head(b, ctx, key, &hinfo, err);
		if (rc < 0)
			return rc;
		return smux_error_set(err, SMUX_E_IS_DIRECTORY,
				      smux__bunny_name(z),
				      "get \"%s\": is a directory", key);
	}
	/* a whole file a listing just showed: no DESCRIBE first, when the
	 * sink can start again should the bytes not be that version */
	if (smux__bunny_seen_get(z, key, &seen) && seen.length > 0 &&
	    smux_sink_can_rewind(sink) && (!opts || opts->offset == 0) &&
	    (!opts || opts->length >= seen.length) &&
	    (!opts || !opts->if_match || !opts->if_match[0] ||
	     strcmp(opts->if_match, seen.checksum) == 0)) {
		rc = get_once(z, ctx, key, opts, sink, info, &seen, err);
		if (rc == -EAGAIN)
			smux__bunny_seen_note(z, key, NULL);
	}
	/* a put between DESCRIBE and GET: read the new version, a few times
	 * at most */
	for (int i = 0; i < 3 && rc == -EAGAIN; i++)
		rc = get_once(z, ctx, key, opts, sink, info, NULL, err);
	if (rc == -EAGAIN)
		return smux_error_set(err, SMUX_E_PRECONDITION_FAILED,
				      smux__bunny_name(z),
				      "get \"%s\": changed while read", key);
	return rc;
}
