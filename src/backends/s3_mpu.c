// SPDX-License-Identifier: MIT
/*
 * s3_mpu.c - multipart uploads for the s3 backend: initiate, upload parts
 * in parallel (bounded by part_parallel threads), complete, and abort on
 * any failure or cancellation so that no upload is left behind.
 *
 * A put larger than part_size goes this way; the part size grows when the
 * object would need more than SMUX_S3_PARTS_MAX parts. Parts are read from
 * the put's source at their offsets (a buffer or an fd read with pread, so
 * several threads read it at once; a callback source is read by one
 * thread). One part's failure fires a token every other part's request
 * watches, so the upload stops at once and is aborted. One part's request
 * (smux__s3_mpu_part) is shared with the writer (s3_writer.c), which
 * sends parts of its temp file while the file is written.
 */
#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backends/s3_internal.h"

/* Most worker threads of one upload. */
#define S3M_THREADS_MAX 16
/* How long an abort may take when the caller's deadline has passed. */
#define S3M_ABORT_NS (10ll * 1000000000)

/* Sends @c expecting a small XML document of @kind; an <Error> root (even
 * with a 200) is the error. On 0, *@out is the parser (free it). */
static int call_xml(struct s3b_call *c, const struct smux_ctx *ctx,
		    enum smux_s3_doc kind, struct smux_s3_xml **out,
		    struct smux_error *err)
{
	struct smux_sink sink;
	unsigned char *body;
	size_t len;
	int rc;

	*out = NULL;
	smux_sink_dyn(&sink);
	c->sink = &sink;
	c->max_body = S3B_SMALL_BODY_MAX;
	rc = smux__s3_call(c, ctx, err);
	c->sink = NULL; /* the sink is this function's */
	body = smux_sink_dyn_take(&sink, &len);
	smux_sink_release(&sink);
	if (rc == 0) {
		rc = smux__s3_xml_parse(kind, body ? body : (void *)"", len,
					out, err);
		if (rc < 0)
			snprintf(err->e.backend, sizeof(err->e.backend), "%s",
				 c->s->base.name);
	}
	if (rc == 0 && smux__s3_xml_result(*out)->is_error) {
		rc = smux__s3_error_fill(err, 500, smux__s3_xml_result(*out),
					 c->s->base.name, c->what);
		smux__s3_xml_free(*out);
		*out = NULL;
	}
	free(body);
	return rc;
}

int smux__s3_mpu_initiate(struct s3b *s, const struct smux_ctx *ctx,
			  const char *key, struct s3b_call *meta_from,
			  char **upload_id, struct smux_error *err)
{
	struct smux_s3_kv q[1] = {{"uploads", NULL}};
	struct smux_s3_xml *x;
	struct s3b_call c;
	int rc;

	*upload_id = NULL;
	rc = smux__s3_call_init(&c, s, "POST", key, err);
	if (rc < 0)
		return rc;
	snprintf(c.what, sizeof(c.what), "INITIATE UPLOAD \"%.200s\"", key);
	c.query = q;
	c.nquery = 1;
	c.no_retry = true; /* a retry could leave a second upload behind */
	for (size_t i = 0; meta_from && i < meta_from->nhdr; i++)
		smux__s3_call_header(&c, meta_from->hdr[i].name,
				     meta_from->hdr[i].value);
	rc = call_xml(&c, ctx, SMUX_S3_DOC_INITIATE, &x, err);
	if (rc == 0) {
		*upload_id = strdup(smux__s3_xml_result(x)->upload_id);
		smux__s3_xml_free(x);
		if (!*upload_id)
			rc = smux_error_set(err, SMUX_E_NO_MEMORY, s->base.name,
					    NULL);
		else /* a crash from here on leaves it: the next run aborts */
			smux__s3_orphans_add(s, key, *upload_id);
	}
	smux__s3_call_release(&c);
	return rc;
}

/* Appends @s to the growing buffer; false when out of memory. */
static bool buf_add(char **buf, size_t *len, size_t *cap, const char *s)
{
	size_t n = strlen(s);
	char *nb;

	if (*len + n + 1 > *cap) {
		*cap = (*len + n + 1) * 2;
		nb = realloc(*buf, *cap);
		if (!nb)
			return false;
		*buf = nb;
	}
	memcpy(*buf + *len, s, n + 1);
	*len += n;
	return true;
}

/* An ETag for the Complete document: XML-escaped, quoted. */
static void etag_xml(char *out, size_t cap, const char *etag)
{
	size_t o = 0;

	out[o++] = '"';
	for (; *etag && o + 8 < cap; etag++) {
		const char *e = *etag == '&'   ? "&amp;"
				: *etag == '<' ? "&lt;"
				: *etag == '>' ? "&gt;"
					       : NULL;

		if (e) {
			memcpy(out + o, e, strlen(e));
			o += strlen(e);
		} else {
			out[o++] = *etag;
		}
	}
	out[o++] = '"';
	out[o] = '\0';
}

int smux__s3_mpu_complete(struct s3b *s, const struct smux_ctx *ctx,
			  const char *key, const char *upload_id,
			  char *const *etags, unsigned n, char *etag_out,
			  size_t etag_cap, struct smux_error *err)
{
	struct smux_s3_kv q[1] = {{"uploadId", upload_id}};
	char hash[SMUX_S3_HEX256], part[SMUX_ETAG_MAX * 5 + 96];
	char et[SMUX_ETAG_MAX * 5 + 4];
	size_t len = 0, cap = 0;
	struct smux_source body;
	struct smux_s3_xml *x;
	struct s3b_call c;
	char *doc = NULL;
	bool ok;
	int rc;

	ok = buf_add(&doc, &len, &cap, "<CompleteMultipartUpload>");
	for (unsigned i = 0; ok && i < n; i++) {
		etag_xml(et, sizeof(et), etags[i]);
		snprintf(part, sizeof(part),
			 "<Part><PartNumber>%u</PartNumber><ETag>%s</ETag>"
			 "</Part>",
			 i + 1, et);
		ok = buf_add(&doc, &len, &cap, part);
	}
	ok = ok && buf_add(&doc, &len, &cap, "</CompleteMultipartUpload>");
	if (!ok) {
		free(doc);
		return smux_error_set(err, SMUX_E_NO_MEMORY, s->base.name,
				      NULL);
	}
	rc = smux__s3_call_init(&c, s, "POST", key, err);
	if (rc < 0) {
		free(doc);
		return rc;
	}
	snprintf(c.what, sizeof(c.what), "COMPLETE UPLOAD \"%.200s\"", key);
	c.query = q;
	c.nquery = 1;
	smux__s3_sha256_hex(doc, len, hash);
	c.payload_hash = hash;
	smux_source_buf(&body, doc, len);
	c.body = &body;
	rc = call_xml(&c, ctx, SMUX_S3_DOC_COMPLETE, &x, err);
	if (rc == 0) {
		smux__s3_orphans_done(s, upload_id);
		if (etag_out)
			smux__s3_etag_copy(
				etag_out, etag_cap,
				smux__s3_xml_result(x)->etag
					? smux__s3_xml_result(x)->etag
					: "");
		smux__s3_xml_free(x);
	}
	smux__s3_call_release(&c);
	free(doc);
	return rc;
}

int smux__s3_mpu_abort(struct s3b *s, const struct smux_ctx *ctx,
		       const char *key, const char *upload_id)
{
	struct smux_s3_kv q[1] = {{"uploadId", upload_id}};
	struct smux_error err = {0};
	struct smux_ctx fresh;
	struct s3b_call c;
	int rc;

	if (!upload_id)
		return 0;
	/* the caller gave up or ran out of time: the abort still goes out,
	 * under its own short deadline */
	(void)ctx;
	smux_ctx_init(&fresh);
	fresh.deadline_ns = smux_now_ns() + S3M_ABORT_NS;
	rc = smux__s3_call_init(&c, s, "DELETE", key, &err);
	if (rc < 0)
		return rc;
	snprintf(c.what, sizeof(c.what), "ABORT UPLOAD \"%.200s\"", key);
	c.query = q;
	c.nquery = 1;
	rc = smux__s3_call(&c, &fresh, &err);
	smux__s3_call_release(&c);
	if (rc == 0 || rc == -ENOENT) /* gone: nothing left to abort */
		smux__s3_orphans_done(s, upload_id);
	return rc;
}

/* ---- parallel parts ---- */

struct mpu {
	struct s3b *s;
	const struct smux_ctx *ctx; /* the caller's + stop */
	const char *key;
	const char *upload_id;
	const struct smux_source *src;
	uint64_t psize;
	unsigned n;
	char **etags;
	struct smux_cancel stop; /* fired by the first failure */
	pthread_mutex_t lock;
	unsigned next; /* protected by lock */
	int rc;	       /* protected by lock: the first failure */
	struct smux_error err;
};

struct part_src {
	const struct smux_source *src;
	uint64_t off;
};

static long part_read(void *arg, uint64_t pos, void *dst, size_t len)
{
	struct part_src *p = arg;

	return smux_source_read(p->src, p->off + pos, dst, len);
}

int smux__s3_mpu_part(struct s3b *s, const struct smux_ctx *ctx,
		      const char *key, const char *upload_id, unsigned number,
		      const struct smux_source *body, char **etag,
		      struct smux_error *err)
{
	char num[16];
	struct smux_s3_kv q[2] = {{"partNumber", num}, {"uploadId", upload_id}};
	unsigned char md5[16];
	bool have = false;
	char b64[25];
	struct s3b_call c;
	int rc;

	*etag = NULL;
	snprintf(num, sizeof(num), "%u", number);
	/* the server refuses a part that did not arrive whole, and its
	 * ETag says which one it stored (s3_md5.c) */
	rc = smux__s3_md5(s, body, md5, b64, &have, err);
	if (rc < 0)
		return rc;
	rc = smux__s3_call_init(&c, s, "PUT", key, err);
	if (rc < 0)
		return rc;
	if (have)
		smux__s3_call_header(&c, "Content-MD5", b64);
	snprintf(c.what, sizeof(c.what), "PUT PART %u of \"%.200s\"", number,
		 key);
	c.query = q;
	c.nquery = 2;
	c.body = body;
	c.payload_hash = SMUX_S3_UNSIGNED_PAYLOAD;
	rc = smux__s3_call(&c, ctx, err);
	if (rc == 0) {
		char *e = malloc(SMUX_ETAG_MAX);

		if (!e) {
			rc = smux_error_set(err, SMUX_E_NO_MEMORY, s->base.name,
					    NULL);
		} else {
			smux__s3_etag_copy(e, SMUX_ETAG_MAX, c.resp.etag);
			if (!e[0])
				rc = smux_error_set(
					err, SMUX_E_BAD_RESPONSE, s->base.name,
					"%s: no ETag in the answer", c.what);
			else if (have && !c.meta.etag_not_md5)
				rc = smux__s3_md5_etag(s, c.what, e, md5, err);
			if (rc < 0) {
				free(e);
				e = NULL;
			}
		}
		*etag = e;
	}
	smux__s3_call_release(&c);
	return rc;
}

static int put_part(struct mpu *m, unsigned i, struct smux_error *err)
{
	uint64_t off = (uint64_t)i * m->psize;
	uint64_t len = off + m->psize < m->src->length ? m->psize
						       : m->src->length - off;
	struct part_src ps = {.src = m->src, .off = off};
	struct smux_source body;

	smux_source_cb(&body, part_read, &ps, len);
	return smux__s3_mpu_part(m->s, m->ctx, m->key, m->upload_id, i + 1,
				 &body, &m->etags[i], err);
}

static void *part_worker(void *arg)
{
	struct mpu *m = arg;
	struct smux_error err = {0};
	unsigned i;
	int rc;

	for (;;) {
		pthread_mutex_lock(&m->lock);
		i = m->next++;
		rc = m->rc;
		pthread_mutex_unlock(&m->lock);
		if (rc < 0 || i >= m->n)
			return NULL;
		rc = put_part(m, i, &err);
		if (rc < 0) {
			pthread_mutex_lock(&m->lock);
			if (m->rc == 0) {
				m->rc = rc;
				m->err = err;
			}
			pthread_mutex_unlock(&m->lock);
			smux_cancel_fire(&m->stop, SMUX_CANCEL_ABORT);
			return NULL;
		}
	}
}

static int run_parts(struct mpu *m, const struct smux_ctx *ctx,
		     struct smux_error *err)
{
	pthread_t th[S3M_THREADS_MAX];
	unsigned nt = m->s->part_parallel, started = 0;
	struct smux_ctx child;
	int rc;

	if (nt > S3M_THREADS_MAX)
		nt = S3M_THREADS_MAX;
	if (nt > m->n)
		nt = m->n;
	if (m->src->kind == SMUX_SOURCE_CB)
		nt = 1; /* a callback may not be read from two threads */
	rc = smux_ctx_derive(&child, ctx, 0, &m->stop);
	if (rc < 0)
		return smux_error_set(
			err, SMUX_E_INVALID_ARGUMENT, m->s->base.name,
			"put \"%s\": too many cancel tokens", m->key);
	/* reset after the join below */
	/* cppcheck-suppress autoVariables */
	m->ctx = &child;
	for (unsigned i = 1; i < nt; i++) {
		if (pthread_create(&th[i], NULL, part_worker, m) != 0)
			break;
		started++;
	}
	part_worker(m); /* the calling thread is one of the workers */
	for (unsigned i = 1; i <= started; i++)
		pthread_join(th[i], NULL);
	m->ctx = NULL; /* child is this function's */
	if (m->rc < 0) {
		*err = m->err;
		/* a part cut short by another part's failure reports that
		 * failure, not its own abort */
		return m->rc;
	}
	return 0;
}

int smux__s3_mpu_put(struct s3b *s, const struct smux_ctx *ctx, const char *key,
		     const struct smux_source *src, struct s3b_call *meta_from,
		     char *etag_out, size_t etag_cap, struct smux_error *err)
{
	struct mpu m = {.s = s, .key = key, .src = src, .psize = s->part_size};
	char *upload_id = NULL;
	int rc;

	while ((src->length + m.psize - 1) / m.psize > SMUX_S3_PARTS_MAX)
		m.psize *= 2;
	if (m.psize > SMUX_S3_SINGLE_MAX)
		return smux_error_set(err, SMUX_E_INVALID_ARGUMENT,
				      s->base.name,
				      "put \"%s\": larger than S3 takes", key);
	m.n = (unsigned)((src->length + m.psize - 1) / m.psize);
	m.etags = calloc(m.n, sizeof(*m.etags));
	if (!m.etags)
		return smux_error_set(err, SMUX_E_NO_MEMORY, s->base.name,
				      NULL);
	rc = smux__s3_mpu_initiate(s, ctx, key, meta_from, &upload_id, err);
	if (rc < 0) {
		free(m.etags);
		return rc;
	}
	m.upload_id = upload_id;
	smux_cancel_init(&m.stop);
	pthread_mutex_init(&m.lock, NULL);
	rc = run_parts(&m, ctx, err);
	if (rc == 0)
		rc = smux__s3_mpu_complete(s, ctx, key, upload_id, m.etags, m.n,
					   etag_out, etag_cap, err);
	if (rc < 0)
		smux__s3_mpu_abort(s, ctx, key, upload_id);
	pthread_mutex_destroy(&m.lock);
	smux_cancel_release(&m.stop);
	for (unsigned i = 0; i < m.n; i++)
		free(m.etags[i]);
	free(m.etags);
	free(upload_id);
	return rc;
}
