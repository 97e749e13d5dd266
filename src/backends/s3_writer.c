// SPDX-License-Identifier: MIT
/*
 * s3_writer.c - the s3 backend's writer (DESIGN section 6): a multipart
 * upload that starts while the file is still being written.
 *
 * Only opens that start empty (SMUX_WRITER_TRUNC: creates, O_TRUNC) get a
 * writer; anything else is NOT_SUPPORTED and the caller stages the object
 * as before (an S3 object cannot be changed in place, and starting from
 * its content would mean reading all of it first).
 *
 * The pending content lives in an unnamed temp file (smux_tmpfile); pread
 * reads it back. Once it passes the backend's multipart_threshold (a
 * smaller file is one PUT at commit: one request, no parts to join) and
 * the writes so far looked sequential (none went into a part before the
 * last one), the writer initiates a multipart upload (journaled by
 * s3_orphans.c, so a crash's leftover is aborted at the next start) and
 * its workers (up to part_parallel threads, started then) send every full
 * part (of part_size) in the background, read from the temp file at its
 * offset: memory stays bounded whatever the size. A write or truncate
 * into a part that was sent, or is being sent, drops that part's ETag (a
 * send under way is marked dirty and its answer thrown away), so the part
 * goes out again.
 *
 * Commit: without an upload, one put of the temp file as today (a single
 * PUT with the metadata, or s3_mpu.c's parallel upload). With one, the
 * parts never sent or dirtied go out, the upload is completed, and then
 * the metadata is set by a copy of the object onto itself. Why: S3 takes
 * metadata (x-amz-meta-mode/mtime/uid/gid) only at CreateMultipartUpload,
 * and the commit's mtime (and a create's mode and owner) arrive only with
 * the commit, long after the upload began; so the upload starts without
 * metadata and the copy (server side, no byte sent again) gives it the
 * commit's. Until that copy returns, a reader may see the new content with
 * default attributes; commit returns 0 only after it.
 *
 * Failures: a background part's failure is kept for the commit, which
 * sends the part once more before it fails; the writes go on meanwhile
 * (their bytes are whole in the temp file: a 503 on the way is no error
 * of a write(2), as it is none on a staged file). When the server lost
 * what the upload sent (InvalidPart or NoSuchUpload at the commit: a late
 * send, an upload aborted by a lifecycle rule), the commit puts the
 * staging file whole instead. Any other failure
 * at commit, a cancelled commit, and close without commit abort the upload
 * (AbortMultipartUpload, which also drops the journal record). Background
 * sends run under their own bounded deadline (the caller's context of one
 * pwrite ends with it) and the HTTP layer's transfer timeouts; close cuts
 * them short through the upload's cancel token and joins the workers, so
 * it never waits out a transfer.
 *
 * Threads: the writer is used by one thread at a time (the owner); its
 * workers share `lock` with it (see the fields). The temp file is written
 * by the owner only; workers read it with pread. A write lands in the
 * file before its parts are marked dirty, so a send that read the old
 * bytes is always thrown away.
 */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "backends/s3_internal.h"

/* Most workers of one writer. */
#define S3W_THREADS_MAX 16
/* A background part's own deadline (the HTTP layer's idle timeout fails a
 * stalled transfer long before). */
#define S3W_PART_NS (10ll * 60 * 1000000000)
/* How often a commit waiting on the workers looks at its context. */
#define S3W_POLL_NS (50ll * 1000000)

struct s3w_part {
	char *etag;  /* of the send of its current content; NULL: none */
	bool queued; /* waiting for a worker */
	bool busy;   /* a worker sends it */
	bool dirty;  /* changed while busy: that send's answer is stale */
	bool failed; /* its last send failed: not queued again until commit */
};

struct s3w {
	struct smux_writer base; /* first: downcast by s3w_from */
	struct s3b *s;		 /* base.backend holds the reference */
	int fd;			 /* the pending content */
	uint64_t psize;
	/* owner only */
	bool seq;	       /* the writes so far looked sequential */
	bool clean;	       /* nothing changed since the last commit */
	struct smux_info last; /* what the last commit stored */

	pthread_mutex_t lock;
	pthread_cond_t cond; /* work queued, a send done, quit */
	/* protected by lock (the owner writes them with it held) */
	uint64_t size;
	char *upload_id; /* NULL: no upload; freed only with busy == 0 */
	struct s3w_part *parts;
	unsigned nparts; /* entries of parts */
	unsigned queued, busy;
	int bg_rc; /* the first failed send not reported yet */
	struct smux_error bg_err;
	bool quit;
	/* a commit waits for the parts: the last, short one goes too (else
	 * only full parts are sent, so an ETag always names a whole part
	 * and a write past the end cannot leave a short part behind) */
	bool committing;
	/* fired to cut the upload's sends short (abort, close); set up
	 * again by the owner with busy == 0 */
	struct smux_cancel ustop;
	pthread_t th[S3W_THREADS_MAX];
	unsigned nth; /* owner only */
};

static const struct smux_writer_ops s3w_ops;

static struct s3w *s3w_from(struct smux_writer *w)
{
	return w && w->ops == &s3w_ops ? (struct s3w *)w : NULL;
}

static int s3w_bad(struct smux_error *err)
{
	return smux_error_set(err, SMUX_E_INVALID_ARGUMENT, NULL,
			      "not an s3 writer");
}

/* Parts of @size bytes. */
static uint64_t s3w_nparts(const struct s3w *w, uint64_t size)
{
	return (size + w->psize - 1) / w->psize;
}

/* Makes room for part @i. Lock held. */
static int s3w_parts_grow(struct s3w *w, uint64_t i)
{
	unsigned n = w->nparts ? w->nparts : 16;
	struct s3w_part *p;

	if (i < w->nparts)
		return 0;
	if (i >= SMUX_S3_PARTS_MAX)
		return -E2BIG;
	while (n <= i)
		n *= 2;
	if (n > SMUX_S3_PARTS_MAX)
		n = SMUX_S3_PARTS_MAX;
	p = realloc(w->parts, n * sizeof(*p));
	if (!p)
		return -ENOMEM;
	memset(p + w->nparts, 0, (n - w->nparts) * sizeof(*p));
	w->parts = p;
	w->nparts = n;
	return 0;
}

/* Parts touching bytes [@a, @b) changed: their sends no longer count.
 * Lock held. */
static void s3w_mark(struct s3w *w, uint64_t a, uint64_t b)
{
	for (uint64_t i = a / w->psize; a < b && i < w->nparts; i++) {
		struct s3w_part *p = &w->parts[i];

		if (i * w->psize >= b)
			break;
		free(p->etag);
		p->etag = NULL;
		if (p->busy)
			p->dirty = true;
	}
}

static void s3w_queue(struct s3w *w, unsigned i)
{
	struct s3w_part *p = &w->parts[i];

	if (p->etag || p->queued || p->busy || p->failed)
		return;
	p->queued = true;
	w->queued++;
	pthread_cond_broadcast(&w->cond);
}

/* Queues every full part not sent, while an upload runs and no send has
 * failed. Lock held. */
static void s3w_queue_full(struct s3w *w)
{
	uint64_t full = w->size / w->psize;

	if (!w->upload_id || w->bg_rc)
		return;
	for (uint64_t i = 0; i < full && i < w->nparts; i++)
		s3w_queue(w, (unsigned)i);
}

static void *s3w_worker(void *arg)
{
	struct s3w *w = arg;

	pthread_mutex_lock(&w->lock);
	for (;;) {
		struct smux_source src;
		struct smux_error err;
		struct smux_ctx ctx;
		struct s3w_part *p;
		char *etag = NULL;
		const char *uid;
		uint64_t off, len;
		unsigned i;
		int rc;

		while (!w->quit && !w->queued)
			pthread_cond_wait(&w->cond, &w->lock);
		if (w->quit)
			break;
		for (i = 0; i < w->nparts && !w->parts[i].queued; i++)
			;
		if (i == w->nparts) { /* cannot be: the count says one */
			w->queued = 0;
			continue;
		}
		p = &w->parts[i];
		p->queued = false;
		w->queued--;
		off = (uint64_t)i * w->psize;
		/* cut off by a truncate (or short, outside a commit): it is
		 * queued again once full, or by the commit */
		if (off >= w->size ||
		    (!w->committing && w->size - off < w->psize))
			continue;
		len = w->size - off < w->psize ? w->size - off : w->psize;
		p->busy = true;
		p->dirty = false;
		w->busy++;
		smux_ctx_init(&ctx);
		ctx.deadline_ns = smux_now_ns() + S3W_PART_NS;
		ctx.cancel[0] = &w->ustop;
		uid = w->upload_id;
		pthread_mutex_unlock(&w->lock);

		smux_source_fd(&src, w->fd, off, len);
		rc = smux__s3_mpu_part(w->s, &ctx, w->base.key, uid, i + 1,
				       &src, &etag, &err);

		pthread_mutex_lock(&w->lock);
		p = &w->parts[i]; /* parts may have moved */
		p->busy = false;
		w->busy--;
		if (rc == 0 && !p->dirty) {
			free(p->etag);
			p->etag = etag;
			etag = NULL;
		} else if (rc < 0 && !p->dirty) {
			p->failed = true;
			if (!w->bg_rc) {
				w->bg_rc = rc;
				w->bg_err = err;
			}
		}
		free(etag);
		p->dirty = false;
		s3w_queue_full(w); /* a dirtied part goes again */
		pthread_cond_broadcast(&w->cond);
	}
	pthread_mutex_unlock(&w->lock);
	return NULL;
}

/* Stops the upload's sends, waits for them, forgets every part and
 * aborts the upload. Owner; lock not held. */
static void s3w_abort(struct s3w *w)
{
	struct smux_ctx ctx;
	char *uid;

	pthread_mutex_lock(&w->lock);
	uid = w->upload_id;
	if (uid)
		smux_cancel_fire(&w->ustop, SMUX_CANCEL_ABORT);
	for (unsigned i = 0; i < w->nparts; i++) {
		free(w->parts[i].etag);
		w->parts[i] = (struct s3w_part){.busy = w->parts[i].busy,
						.dirty = w->parts[i].busy};
	}
	w->queued = 0;
	while (w->busy)
		pthread_cond_wait(&w->cond, &w->lock);
	w->upload_id = NULL;
	w->bg_rc = 0;
	pthread_mutex_unlock(&w->lock);
	if (!uid)
		return;
	smux_ctx_init(&ctx);
	smux__s3_mpu_abort(w->s, &ctx, w->base.key, uid);
	free(uid);
	smux_cancel_release(&w->ustop);
	smux_cancel_init(&w->ustop);
}

/* Initiates the upload and starts the workers. Owner; lock not held. A
 * failure only leaves the content to the commit's put. */
static void s3w_start(struct s3w *w, const struct smux_ctx *ctx)
{
	unsigned want = w->s->part_parallel;
	struct smux_error err;
	char *uid = NULL;

	if (want > S3W_THREADS_MAX)
		want = S3W_THREADS_MAX;
	while (w->nth < want &&
	       pthread_create(&w->th[w->nth], NULL, s3w_worker, w) == 0)
		w->nth++;
	if (!w->nth ||
	    smux__s3_mpu_initiate(w->s, ctx, w->base.key, NULL, &uid, &err)) {
		w->seq = false;
		return;
	}
	pthread_mutex_lock(&w->lock);
	w->upload_id = uid;
	s3w_queue_full(w);
	pthread_mutex_unlock(&w->lock);
}

/* The staging file refused @what with errno @e: the caller's local
 * problem (a full cache disk is ENOSPC to the program, as on a local
 * disk), never the backend's. */
static int s3w_local(struct s3w *w, struct smux_error *err, int e,
		     const char *what)
{
	smux_error_set(err, SMUX_E_LOCAL_IO, w->s->base.name,
		       "%s \"%s\": staging file: %s", what, w->base.key,
		       strerror(e));
	return smux_error_make_local(err, e);
}

static int s3w_pwrite(struct smux_writer *wr, const struct smux_ctx *ctx,
		      const void *buf, size_t len, uint64_t off,
		      struct smux_error *err)
{
	struct s3w *w = s3w_from(wr);
	const unsigned char *p = buf;
	bool drop = false, start;
	uint64_t hole;
	size_t done = 0;
	int rc;

	if (!w)
		return s3w_bad(err);
	if (off > (uint64_t)INT64_MAX || len > INT64_MAX - off)
		return smux_error_set(
			err, SMUX_E_INVALID_ARGUMENT, w->s->base.name,
			"write to \"%s\": offset out of range", wr->key);
	if (!len)
		return 0;
	/* a background part that failed is not this write's error: the
	 * content is whole in the staging file, and the commit sends the
	 * part again (s3w_finish_parts) */
	rc = smux_ctx_check(ctx, w->s->base.name, err);
	if (rc)
		return rc;
	while (done < len) {
		ssize_t n = pwrite(w->fd, p + done, len - done,
				   (off_t)(off + done));

		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0)
			return s3w_local(w, err, errno, "write to");
		done += (size_t)n;
	}
	w->clean = false;
	pthread_mutex_lock(&w->lock);
	/* a write into a part before the last one: not a stream */
	if (!w->upload_id && off < w->size / w->psize * w->psize)
		w->seq = false;
	/* a write past the end changes the hole before it too */
	hole = off > w->size ? w->size : off;
	if (off + len > w->size)
		w->size = off + len;
	if (s3w_parts_grow(w, s3w_nparts(w, w->size)) == 0) {
		s3w_mark(w, hole, off + len);
		s3w_queue_full(w);
	} else {
		/* more parts than S3 takes (or no memory): the commit puts
		 * it whole, with larger parts */
		drop = w->upload_id != NULL;
		w->seq = false;
	}
	/* up to the threshold the commit's single PUT is cheaper (s3.h) */
	start = !w->upload_id && w->seq && w->size > w->s->mpu_above;
	pthread_mutex_unlock(&w->lock);
	if (drop)
		s3w_abort(w);
	if (start)
		s3w_start(w, ctx);
	return 0;
}

static long s3w_pread(struct smux_writer *wr, void *buf, size_t len,
		      uint64_t off, struct smux_error *err)
{
	struct s3w *w = s3w_from(wr);
	unsigned char *p = buf;
	size_t done = 0;

	if (!w)
		return s3w_bad(err);
	if (len > LONG_MAX)
		len = LONG_MAX;
	while (done < len && off + done < w->size) {
		ssize_t n =
			pread(w->fd, p + done, len - done, (off_t)(off + done));

		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0)
			return s3w_local(w, err, errno, "read of");
		if (n == 0)
			break;
		done += (size_t)n;
	}
	return (long)done;
}

static int s3w_truncate(struct smux_writer *wr, const struct smux_ctx *ctx,
			uint64_t size, struct smux_error *err)
{
	struct s3w *w = s3w_from(wr);
	uint64_t old;
	int rc;

	if (!w)
		return s3w_bad(err);
	rc = smux_ctx_check(ctx, w->s->base.name, err);
	if (rc)
		return rc;
	if (size > (uint64_t)INT64_MAX)
		return s3w_local(w, err, EFBIG, "truncate of");
	if (ftruncate(w->fd, (off_t)size) < 0)
		return s3w_local(w, err, errno, "truncate of");
	w->clean = false;
	pthread_mutex_lock(&w->lock);
	old = w->size;
	w->size = size;
	/* every part from the one holding the lower end on changed (cut
	 * short, gone, or zeros added) */
	s3w_mark(w, old < size ? old : size, old < size ? size : old);
	if (s3w_parts_grow(w, s3w_nparts(w, size)) == 0)
		s3w_queue_full(w);
	pthread_mutex_unlock(&w->lock);
	return 0;
}

/* fallocate(2) on the temp file (the modes smux_writer_fallocate lets
 * through): the bytes it changes (zeros, or a size that grows) are a
 * write's for the parts. */
static int s3w_fallocate(struct smux_writer *wr, const struct smux_ctx *ctx,
			 int mode, uint64_t off, uint64_t len,
			 struct smux_error *err)
{
	struct s3w *w = s3w_from(wr);
	uint64_t end = off + len, from;
	int rc, e;

	if (!w)
		return s3w_bad(err);
	rc = smux_ctx_check(ctx, w->s->base.name, err);
	if (rc)
		return rc;
	while (fallocate(w->fd, mode, (off_t)off, (off_t)len) < 0) {
		e = errno;
		if (e == EINTR)
			continue;
		if (e != EOPNOTSUPP)
			return s3w_local(w, err, e, "fallocate of");
		rc = smux_error_set(err, SMUX_E_NOT_SUPPORTED, w->s->base.name,
				    "fallocate of \"%s\" (mode %#x): not on "
				    "the staging file",
				    wr->key, (unsigned)mode);
		err->e.sys_errno = e;
		return rc;
	}
	w->clean = false;
	pthread_mutex_lock(&w->lock);
	from = off;
	if (smux_falloc_extends(mode) && end > w->size) {
		from = off < w->size ? off : w->size;
		w->size = end;
	}
	if (end > w->size)
		end = w->size;
	if (from < end)
		s3w_mark(w, from, end);
	w->seq = false; /* no stream: the commit sends what is left */
	if (s3w_parts_grow(w, s3w_nparts(w, w->size)) == 0)
		s3w_queue_full(w);
	pthread_mutex_unlock(&w->lock);
	return 0;
}

static uint64_t s3w_size(struct smux_writer *wr)
{
	struct s3w *w = s3w_from(wr);

	return w ? w->size : 0;
}

/* Sends what is left of the upload (parts never sent, dirtied, failed) and
 * waits until parts 1..@n all have an ETag; a failed part is tried once
 * more. Owner. */
static int s3w_finish_parts(struct s3w *w, const struct smux_ctx *ctx,
			    uint64_t n, struct smux_error *err)
{
	int rc = 0, tries;

	pthread_mutex_lock(&w->lock);
	/* a failure seen before the commit was the first try */
	tries = w->bg_rc ? 1 : 2;
	w->bg_rc = 0;
	w->committing = true;
	for (;;) {
		bool missing = false;

		for (uint64_t i = 0; i < n; i++) {
			if (w->parts[i].etag)
				continue;
			missing = true;
			w->parts[i].failed = false;
			s3w_queue(w, (unsigned)i);
		}
		if (!missing)
			break;
		while ((w->queued || w->busy) && !w->bg_rc &&
		       smux_ctx_state(ctx) == SMUX_CANCEL_NONE) {
			struct timespec ts;
			int64_t t;

			clock_gettime(CLOCK_REALTIME, &ts);
			t = (int64_t)ts.tv_nsec + S3W_POLL_NS;
			ts.tv_sec += t / 1000000000;
			ts.tv_nsec = t % 1000000000;
			pthread_cond_timedwait(&w->cond, &w->lock, &ts);
		}
		if (smux_ctx_state(ctx) != SMUX_CANCEL_NONE)
			break;
		if (!w->bg_rc)
			continue; /* a part dirtied while sent: again */
		rc = w->bg_rc;
		*err = w->bg_err;
		/* the round's other sends end before the retry */
		while (w->busy)
			pthread_cond_wait(&w->cond, &w->lock);
		if (--tries == 0)
			break;
		rc = 0;
		w->bg_rc = 0;
	}
	w->committing = false;
	pthread_mutex_unlock(&w->lock);
	if (!rc)
		rc = smux_ctx_check(ctx, w->s->base.name, err);
	return rc;
}

/* The server no longer holds what the upload sent (@err from a part or
 * the complete): InvalidPart (a late send of a part replaced the one
 * listed), NoSuchUpload (a lifecycle rule or another mount's orphan sweep
 * aborted it). The content is whole in the staging file: a put of it
 * stores it. Not after a cancelled commit. */
static bool s3w_upload_lost(const struct smux_ctx *ctx,
			    const struct smux_error *err)
{
	return smux_ctx_state(ctx) == SMUX_CANCEL_NONE &&
	       (err->e.code == SMUX_E_INVALID_ARGUMENT ||
		err->e.code == SMUX_E_KEY_NOT_FOUND);
}

/* Commit through the running upload. Owner. Returns 1 when the upload was
 * lost (s3w_upload_lost): the caller puts the content whole. */
static int s3w_commit_upload(struct s3w *w, const struct smux_ctx *ctx,
			     const struct smux_put_opts *opts,
			     struct smux_info *a, struct smux_error *err)
{
	uint64_t n = s3w_nparts(w, w->size);
	char etag[SMUX_ETAG_MAX];
	char **etags;
	char *uid;
	int rc;

	rc = s3w_finish_parts(w, ctx, n, err);
	if (rc)
		return s3w_upload_lost(ctx, err) ? 1 : rc;
	etags = calloc(n, sizeof(*etags));
	if (!etags)
		return smux_error_set(err, SMUX_E_NO_MEMORY, w->s->base.name,
				      NULL);
	pthread_mutex_lock(&w->lock);
	for (uint64_t i = 0; i < n; i++)
		etags[i] = w->parts[i].etag;
	uid = w->upload_id;
	pthread_mutex_unlock(&w->lock);
	/* nothing else sends now: the workers are idle until the owner
	 * queues again */
	rc = smux__s3_mpu_complete(w->s, ctx, w->base.key, uid, etags,
				   (unsigned)n, etag, sizeof(etag), err);
	free(etags);
	if (rc)
		return s3w_upload_lost(ctx, err) ? 1 : rc;
	pthread_mutex_lock(&w->lock);
	w->upload_id = NULL; /* completed: nothing to abort */
	for (unsigned i = 0; i < w->nparts; i++) {
		free(w->parts[i].etag);
		w->parts[i].etag = NULL;
	}
	pthread_mutex_unlock(&w->lock);
	free(uid);
	/* the upload began without the commit's metadata: give it now */
	smux__s3_put_attrs(w->base.key, opts, w->size, a);
	snprintf(a->etag, sizeof(a->etag), "%s", etag);
	return smux__s3_copy_meta(w->s, ctx, w->base.key, a, a->etag,
				  sizeof(a->etag), err);
}

/* A commit with nothing new to store: @a gets what the last commit stored
 * with what @opts changes; true when that is all of it. */
static bool s3w_same(const struct s3w *w, const struct smux_put_opts *opts,
		     struct smux_info *a)
{
	struct smux_info want;

	smux__s3_put_attrs(w->base.key, opts, w->size, &want);
	*a = w->last;
	if (!opts || !(opts->flags & SMUX_PUT_OWNER))
		want = (struct smux_info){.mode = want.mode,
					  .mtime_ns = want.mtime_ns,
					  .uid = a->uid,
					  .gid = a->gid,
					  .has_owner = a->has_owner};
	if (!smux_put_has_mtime(opts))
		want.mtime_ns = a->mtime_ns;
	if (want.mode == a->mode && want.mtime_ns == a->mtime_ns &&
	    want.has_owner == a->has_owner &&
	    (!want.has_owner || (want.uid == a->uid && want.gid == a->gid)))
		return true;
	a->mode = want.mode;
	a->mtime_ns = want.mtime_ns;
	a->uid = want.uid;
	a->gid = want.gid;
	a->has_owner = want.has_owner;
	return false;
}

static int s3w_commit(struct smux_writer *wr, const struct smux_ctx *ctx,
		      const struct smux_put_opts *opts, struct smux_info *info,
		      struct smux_error *err)
{
	struct s3w *w = s3w_from(wr);
	struct smux_source src;
	struct smux_info a;
	uint64_t n;
	bool upload;
	int rc = 0;

	if (!w)
		return s3w_bad(err);
	if (w->clean) {
		/* stored and durable: at most new attributes */
		rc = s3w_same(w, opts, &a)
			     ? 0
			     : smux__s3_copy_meta(w->s, ctx, wr->key, &a,
						  a.etag, sizeof(a.etag), err);
		goto out;
	}
	n = s3w_nparts(w, w->size);
	pthread_mutex_lock(&w->lock);
	upload = w->upload_id != NULL;
	pthread_mutex_unlock(&w->lock);
	if (upload && n > 0 && n <= w->nparts)
		rc = s3w_commit_upload(w, ctx, opts, &a, err);
	if (upload && (n == 0 || n > w->nparts || rc > 0)) {
		/* nothing, too many parts, or the upload lost: a put */
		s3w_abort(w);
		upload = false;
		rc = 0;
	}
	if (!upload) {
		smux_source_fd(&src, w->fd, 0, w->size);
		rc = smux__s3_put(&w->s->base, ctx, wr->key, &src, opts, &a,
				  err);
	}
	if (rc)
		s3w_abort(w);
	/* the next round may stream again */
	w->seq = true;
out:
	if (rc)
		return rc;
	w->clean = true;
	w->last = a;
	if (info)
		*info = a;
	return 0;
}

static void s3w_close(struct smux_writer *wr)
{
	struct s3w *w = s3w_from(wr);

	if (!w)
		return;
	s3w_abort(w);
	pthread_mutex_lock(&w->lock);
	w->quit = true;
	pthread_cond_broadcast(&w->cond);
	pthread_mutex_unlock(&w->lock);
	for (unsigned i = 0; i < w->nth; i++)
		pthread_join(w->th[i], NULL);
	for (unsigned i = 0; i < w->nparts; i++)
		free(w->parts[i].etag);
	free(w->parts);
	smux_cancel_release(&w->ustop);
	pthread_cond_destroy(&w->cond);
	pthread_mutex_destroy(&w->lock);
	close(w->fd);
	smux_writer_release(&w->base);
	free(w);
}

static const struct smux_writer_ops s3w_ops = {
	.pwrite = s3w_pwrite,
	.pread = s3w_pread,
	.truncate = s3w_truncate,
	.fallocate = s3w_fallocate,
	.size = s3w_size,
	.commit = s3w_commit,
	.close = s3w_close,
};

int smux__s3_writer_open(struct smux_backend *b, const struct smux_ctx *ctx,
			 const char *key, unsigned flags,
			 struct smux_writer **out, struct smux_error *err)
{
	struct s3b *s = smux__s3_from(b);
	size_t klen = strlen(key);
	struct s3w *w;
	int fd;

	(void)ctx;
	*out = NULL;
	/* in place, or starting from the object: the caller stages */
	if (!(flags & SMUX_WRITER_TRUNC) || (flags & SMUX_WRITER_INPLACE))
		return smux_error_set(err, SMUX_E_NOT_SUPPORTED, b->name,
				      "writer for \"%s\": only a truncating "
				      "open streams",
				      key);
	if (klen == 0 || key[klen - 1] == '/')
		return smux_error_set(err, SMUX_E_IS_DIRECTORY, b->name,
				      "writer for \"%s\": a directory", key);
	fd = smux_tmpfile(b->name, "s3 writer", err);
	if (fd < 0)
		return fd;
	w = calloc(1, sizeof(*w));
	if (!w || smux_writer_init(&w->base, &s3w_ops, b, key)) {
		free(w);
		close(fd);
		return smux_error_set(err, SMUX_E_NO_MEMORY, b->name, NULL);
	}
	w->s = s;
	w->fd = fd;
	w->psize = s->part_size;
	w->seq = true;
	pthread_mutex_init(&w->lock, NULL);
	pthread_cond_init(&w->cond, NULL);
	smux_cancel_init(&w->ustop);
	*out = &w->base;
	return 0;
}
