/* SPDX-License-Identifier: MIT */
/*
 * rcache_fetch.c - the read cache's fetches (see rcache.h for the
 * contract, rcache_internal.h for the chunk map): one ranged get per run
 * of chunks, If-Match the version the open pinned, written into the
 * entry's sparse file and marked PRESENT chunk by chunk as the bytes land
 * (gathered into writes of RC_GATHER bytes: curl hands a body over 16 KiB
 * at a time, 8192 pwrite calls for 128 MiB);
 * and the read-ahead: a window per stream of reads that grows while the
 * stream is sequential, cut into gets of at most RC_PIECE bytes that a few
 * worker threads send, under one budget of bytes queued or in flight for
 * the whole cache.
 *
 * Locks: rc->lock (rcache.c) guards the chunk maps, the queue and the
 * counters; it is dropped around every backend call and file write.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <syslog.h>
#include <unistd.h>

#include "fs/fs.h"
#include "fs/rcache_internal.h"

/* Bytes a fetch gathers before it writes them: a divisor of RC_CHUNK, so
 * every chunk's end is the end of a write and marked without delay. */
#define RC_GATHER ((size_t)256 * 1024)

/* The sink of one fetch: bytes [start, limit) of the object into the
 * entry's file; chunks are marked PRESENT as soon as they are whole. */
struct fetch_sink {
	struct smuxfs_rcache *rc;
	struct rentry *e;
	int fd;
	uint64_t start, pos, limit; /* pos: bytes written after start */
	uint64_t marked;	    /* next chunk not yet marked */
	uint64_t c1;		    /* end of the claimed chunks */
	unsigned char *buf; /* RC_GATHER bytes; NULL: none (no memory) */
	size_t held;	    /* bytes in buf, from start + pos on */
};

/* Marks the chunks the written bytes completed. Takes the lock. */
static void mark_done(struct fetch_sink *fs, bool all)
{
	uint64_t upto = fs->marked;
	uint64_t at = fs->start + fs->pos;

	while (upto < fs->c1 && (all || rc_chunk_end(fs->e, upto) <= at))
		upto++;
	if (upto == fs->marked)
		return;
	pthread_mutex_lock(&fs->rc->lock);
	for (; fs->marked < upto; fs->marked++) {
		if (fs->e->chunk[fs->marked] != RC_PRESENT) {
			fs->e->chunk[fs->marked] = RC_PRESENT;
			fs->e->present++;
		}
	}
	pthread_cond_broadcast(&fs->rc->filled);
	pthread_mutex_unlock(&fs->rc->lock);
}

/* Writes @len bytes at the sink's position and marks what they
 * completed. */
static int fetch_put(struct fetch_sink *fs, const void *data, size_t len)
{
	size_t done = 0;

	while (done < len) {
		ssize_t n =
			pwrite(fs->fd, (const char *)data + done, len - done,
			       (off_t)(fs->start + fs->pos + done));

		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0)
			return -errno;
		done += (size_t)n;
	}
	fs->pos += len;
	mark_done(fs, false);
	return 0;
}

/* Writes what the sink gathered. */
static int fetch_flush(struct fetch_sink *fs)
{
	size_t n = fs->held;

	fs->held = 0;
	return n ? fetch_put(fs, fs->buf, n) : 0;
}

static int fetch_write(void *arg, const void *data, size_t len)
{
	struct fetch_sink *fs = arg;
	const unsigned char *p = data;
	int rc;

	if (len > fs->limit - fs->start - fs->pos - fs->held)
		return -EFBIG; /* more than the version pinned has */
	if (!fs->buf)
		return fetch_put(fs, data, len);
	while (len) {
		size_t n = RC_GATHER - fs->held;

		if (n > len)
			n = len;
		memcpy(fs->buf + fs->held, p, n);
		fs->held += n;
		p += n;
		len -= n;
		/* full, or the last bytes: written (and marked) now */
		if (fs->held == RC_GATHER ||
		    fs->start + fs->pos + fs->held == fs->limit) {
			rc = fetch_flush(fs);
			if (rc)
				return rc;
		}
	}
	return 0;
}

/* A retry on another backend starts over; the same version (If-Match)
 * overwrites the same bytes, so chunks already marked stay right. */
static int fetch_rewind(void *arg)
{
	((struct fetch_sink *)arg)->pos = 0;
	((struct fetch_sink *)arg)->held = 0;
	return 0;
}

int smux__rc_fetch(struct smuxfs_rcache *rc, struct rentry *e, uint64_t c0,
		   uint64_t c1, const struct smux_ctx *ctx)
{
	/* a segment is always a range of its object */
	bool whole = !e->segment && c0 == 0 && c1 == e->nchunks;
	struct fetch_sink fs = {
		.rc = rc,
		.e = e,
		.start = rc_chunk_start(c0),
		.limit = rc_chunk_end(e, c1 - 1),
		.marked = c0,
		.c1 = c1,
	};
	struct smux_get_opts opts = {
		.offset = whole ? 0 : e->base + fs.start,
		/* whole: all of it, so a longer object is seen (EFBIG) */
		.length = whole ? SMUX_LEN_ALL : fs.limit - fs.start,
		.if_match = e->etag,
	};
	struct smux_error err;
	struct smux_sink sink;
	char msg[512];
	bool unlink_file;
	int ret, level;

	fs.fd = openat(rc->dirfd, e->name, O_WRONLY | O_CLOEXEC);
	if (fs.fd < 0) {
		ret = -errno;
		smux_log(LOG_WARNING, "read cache: opening %s: %s", e->name,
			 strerror(-ret));
		goto out_fail;
	}
	fs.buf = malloc(RC_GATHER); /* none: written as it comes */
	smux_sink_cb(&sink, fetch_write, fetch_rewind, &fs);
	ret = smux_backend_get(rc->backend, ctx, e->key, &opts, &sink, NULL,
			       &err);
	/* a body shorter than asked: its bytes still count (checked below) */
	if (!ret && fetch_flush(&fs))
		ret = smux_error_set(&err, SMUX_E_LOCAL_IO, NULL,
				     "writing the cache file");
	free(fs.buf);
	close(fs.fd);
	if (ret) {
		/* a version replaced or removed since the open is routine */
		level = LOG_WARNING;
		if (err.e.code == SMUX_E_PRECONDITION_FAILED ||
		    err.e.code == SMUX_E_KEY_NOT_FOUND ||
		    smux_ctx_state(ctx) != SMUX_CANCEL_NONE)
			level = LOG_DEBUG;
		smux_log(level, "read cache: fetch of %s failed: %s", e->key,
			 smux_error_format(&err, msg, sizeof(msg)));
		goto out_fail;
	}
	if (fs.start + fs.pos != fs.limit) {
		smux_log(LOG_WARNING,
			 "read cache: fetch of %s got %llu bytes, not %llu",
			 e->key, (unsigned long long)fs.pos,
			 (unsigned long long)(fs.limit - fs.start));
		ret = -EIO;
		goto out_fail;
	}
	mark_done(&fs, true);
	pthread_mutex_lock(&rc->lock);
	rc->fills++;
	rc->fill_bytes += fs.limit - fs.start;
	pthread_mutex_unlock(&rc->lock);
	return 0;
out_fail:
	pthread_mutex_lock(&rc->lock);
	/* the chunks it had not finished go back to missing */
	for (uint64_t c = fs.marked; c < c1; c++)
		if (e->chunk[c] == RC_INFLIGHT)
			e->chunk[c] = RC_MISSING;
	unlink_file = smux__rc_fail(rc, e);
	pthread_mutex_unlock(&rc->lock);
	if (unlink_file)
		smux__rc_unlink_name(rc, e->name);
	return ret < 0 ? ret : -EIO;
}

/* ---- read-ahead ---- */

static void *worker_main(void *arg)
{
	struct smuxfs_rcache *rc = arg;
	struct rentry *dead = NULL;
	struct smux_ctx base, ctx;
	struct rjob *j;

	smux_ctx_init(&base);
	smux_ctx_derive(&ctx, &base, 0, &rc->cancel);
	pthread_mutex_lock(&rc->lock);
	for (;;) {
		while (!rc->stopping && !rc->jobs_head)
			pthread_cond_wait(&rc->work, &rc->lock);
		if (rc->stopping)
			break;
		j = rc->jobs_head;
		rc->jobs_head = j->next;
		if (!rc->jobs_head)
			rc->jobs_tail = NULL;
		if (j->e->state == RE_FAILED || !j->e->in_table) {
			/* nobody will read it: give the chunks back */
			for (uint64_t c = j->c0; c < j->c1; c++)
				if (j->e->chunk[c] == RC_INFLIGHT)
					j->e->chunk[c] = RC_MISSING;
			pthread_cond_broadcast(&rc->filled);
		} else {
			rc->misses++;
			pthread_mutex_unlock(&rc->lock);
			smux__rc_fetch(rc, j->e, j->c0, j->c1, &ctx);
			pthread_mutex_lock(&rc->lock);
		}
		rc->ra_inflight -= j->bytes;
		smux__rc_unref(rc, j->e, &dead);
		free(j);
		if (dead) {
			pthread_mutex_unlock(&rc->lock);
			smux__rc_reap(rc, dead);
			dead = NULL;
			pthread_mutex_lock(&rc->lock);
		}
	}
	pthread_mutex_unlock(&rc->lock);
	return NULL;
}

int smux__rc_workers_start(struct smuxfs_rcache *rc)
{
	for (unsigned i = 0; i < RC_WORKERS; i++) {
		int r = pthread_create(&rc->workers[i], NULL, worker_main, rc);

		if (r)
			return -r;
		rc->nworkers++;
	}
	return 0;
}

void smux__rc_workers_stop(struct smuxfs_rcache *rc)
{
	struct rentry *dead = NULL;
	struct rjob *j;

	smux_cancel_fire(&rc->cancel, SMUX_CANCEL_ABORT);
	pthread_mutex_lock(&rc->lock);
	rc->stopping = true;
	pthread_cond_broadcast(&rc->work);
	pthread_mutex_unlock(&rc->lock);
	for (unsigned i = 0; i < rc->nworkers; i++)
		pthread_join(rc->workers[i], NULL);
	rc->nworkers = 0;
	pthread_mutex_lock(&rc->lock);
	while ((j = rc->jobs_head)) {
		rc->jobs_head = j->next;
		for (uint64_t c = j->c0; c < j->c1; c++)
			if (j->e->chunk[c] == RC_INFLIGHT)
				j->e->chunk[c] = RC_MISSING;
		rc->ra_inflight -= j->bytes;
		smux__rc_unref(rc, j->e, &dead);
		free(j);
	}
	rc->jobs_tail = NULL;
	pthread_mutex_unlock(&rc->lock);
	smux__rc_reap(rc, dead);
}

/*
 * Queues gets for the missing chunks of bytes [@from, @to) of @e, at most
 * RC_PIECE bytes each, while the budget allows. With @force the first
 * chunk is one a reader waits for: it is queued whatever the budget
 * holds, not counted in it (the reader would fetch it itself), with as
 * many chunks after it as the budget allows. Returns where queueing
 * stopped (@to when all of it is queued or present).
 */
static uint64_t queue_range(struct smuxfs_rcache *rc, struct rentry *e,
			    uint64_t from, uint64_t to, bool force)
{
	uint64_t c = from / RC_CHUNK;
	uint64_t cend = to ? (to - 1) / RC_CHUNK + 1 : 0;
	uint64_t per = RC_PIECE / RC_CHUNK;

	if (cend > e->nchunks)
		cend = e->nchunks;
	while (c < cend) {
		uint64_t c1 = c, bytes, own = 0;
		struct rjob *j;

		if (e->chunk[c] != RC_MISSING) {
			c++;
			continue;
		}
		while (c1 < cend && c1 - c < per && e->chunk[c1] == RC_MISSING)
			c1++;
		if (force) {
			own = rc_chunk_end(e, c) - rc_chunk_start(c);
			while (c1 > c + 1 &&
			       rc->ra_inflight + rc_chunk_end(e, c1 - 1) -
					       rc_chunk_start(c) - own >
				       rc->ra_budget)
				c1--;
		}
		bytes = rc_chunk_end(e, c1 - 1) - rc_chunk_start(c) - own;
		if (rc->stopping ||
		    (!force && rc->ra_inflight + bytes > rc->ra_budget)) {
			rc->ra_skipped++;
			return rc_chunk_start(c);
		}
		j = calloc(1, sizeof(*j));
		if (!j)
			return rc_chunk_start(c);
		*j = (struct rjob){.e = e, .c0 = c, .c1 = c1, .bytes = bytes};
		e->refs++;
		for (uint64_t i = c; i < c1; i++)
			e->chunk[i] = RC_INFLIGHT;
		rc->ra_inflight += bytes;
		if (rc->ra_inflight > rc->ra_inflight_max)
			rc->ra_inflight_max = rc->ra_inflight;
		rc->ra_gets++;
		rc->ra_bytes += bytes;
		if (rc->jobs_tail)
			rc->jobs_tail->next = j;
		else
			rc->jobs_head = j;
		rc->jobs_tail = j;
		pthread_cond_signal(&rc->work);
		c = c1;
		force = false;
	}
	return to;
}

/*
 * Notes that the stream @ra was served [@off, @end) (object offsets): it
 * extends the current range when within @slack of it (the kernel's reads
 * arrive slightly out of order); otherwise the current range joins the
 * earlier ones (the oldest forgotten) and this read starts a new one.
 */
static void note_served(struct smuxfs_rcache_ra *ra, uint64_t off, uint64_t end,
			uint64_t slack)
{
	if (ra->cov_end > ra->cov_start && off <= ra->cov_end + slack &&
	    end + slack >= ra->cov_start) {
		if (off < ra->cov_start)
			ra->cov_start = off;
		if (end > ra->cov_end)
			ra->cov_end = end;
		return;
	}
	if (ra->cov_end > ra->cov_start) {
		memmove(&ra->served[1], &ra->served[0],
			sizeof(ra->served) - sizeof(ra->served[0]));
		ra->served[0].start = ra->cov_start;
		ra->served[0].end = ra->cov_end;
	}
	ra->cov_start = off;
	ra->cov_end = end;
}

/*
 * The first range of whole chunks of @e at or after @at (entry offsets)
 * and before @to that the stream was served earlier (not its current
 * range): [*@s, *@t), *@s clamped to @at. False when there is none.
 */
static bool next_served(const struct rentry *e,
			const struct smuxfs_rcache_ra *ra, uint64_t at,
			uint64_t to, uint64_t *s, uint64_t *t)
{
	bool found = false;

	for (unsigned i = 0; i < SMUXFS_RCACHE_RA_SERVED; i++) {
		uint64_t a = ra->served[i].start, b = ra->served[i].end;

		if (b <= e->base || a >= e->base + e->size)
			continue;
		a = a > e->base ? a - e->base : 0;
		b -= e->base;
		/* chunks wholly inside (the entry's short last one too) */
		a = (a + RC_CHUNK - 1) / RC_CHUNK * RC_CHUNK;
		if (b < e->size)
			b = b / RC_CHUNK * RC_CHUNK;
		else
			b = e->size;
		if (a < at)
			a = at;
		if (a >= b || a >= to)
			continue;
		if (!found || a < *s || (a == *s && b > *t)) {
			*s = a;
			*t = b;
			found = true;
		}
	}
	return found;
}

/*
 * queue_range over [@from, @to) of @e minus what the stream was served
 * earlier (next_served): the kernel asked for those bytes once and has
 * them; fetching them again for read-ahead is waste, and with a cache too
 * small to keep them until the stream gets there it happened (test_rcache
 * test_readahead_skips_served). A forced first chunk is queued even when
 * served (the reader asks for it again: the kernel dropped it). Returns
 * where queueing stopped, as queue_range.
 */
static uint64_t queue_unserved(struct smuxfs_rcache *rc, struct rentry *e,
			       const struct smuxfs_rcache_ra *ra, uint64_t from,
			       uint64_t to, bool force)
{
	uint64_t s = 0, t = 0, stop;

	while (from < to) {
		if (!next_served(e, ra, from, to, &s, &t))
			return queue_range(rc, e, from, to, force);
		if (s <= from && force) {
			/* the reader's own chunk, then what follows it */
			s = rc_chunk_end(e, from / RC_CHUNK);
			t = s;
		}
		if (s > from) {
			stop = queue_range(rc, e, from, s, force);
			if (stop < s)
				return stop;
		}
		force = false;
		from = t;
	}
	return to;
}

void smux__rc_readahead(struct smuxfs_rcache *rc, struct rentry *e,
			struct smuxfs_rcache_ra *ra, uint64_t off, uint64_t len)
{
	uint64_t end = off + len, max = rc->ra_budget, from, to, mine;
	/* the kernel's own read-ahead sends reads slightly out of order:
	 * within this much behind or ahead of the last one is sequential */
	uint64_t slack = 2 * RC_CHUNK;
	bool seq, force;

	if (!ra || max == 0)
		return;
	note_served(ra, off, end, slack);
	seq = ra->started && off + slack >= ra->pos &&
	      off <= ra->pos + ra->window + slack;
	if (!seq) {
		/* a new run of reads: no read-ahead until it proves
		 * sequential (a random reader fetches its own chunks only) */
		ra->started = true;
		ra->run_start = off;
		ra->window = 0;
		ra->ahead = end;
		ra->pos = end;
	} else if (end > ra->pos) {
		ra->pos = end;
	}
	if (ra->window == 0) {
		/* from the start of the file at once; else after a run */
		if (ra->run_start != 0 && ra->pos - ra->run_start < RC_SEQ_MIN)
			return;
		ra->window = RC_SMALL;
		ra->ahead = ra->pos;
	}
	/* refill once half the window is consumed, doubling it; the first
	 * refill proved the stream sequential: at once every worker gets a
	 * piece (doubling from 1.125 MiB kept 1-2 gets in flight for the
	 * first ~100 ms of a cold 128 MiB read) */
	if (ra->ahead > ra->pos && ra->ahead - ra->pos >= ra->window / 2)
		return;
	if (ra->ahead > ra->pos) {
		ra->window *= 2;
		if (ra->window < RC_STREAM)
			ra->window = RC_STREAM;
		if (ra->window > max)
			ra->window = max;
	}
	from = ra->ahead > ra->pos ? ra->ahead : ra->pos;
	/*
	 * The chunks of this read are the reader's own to fetch, unless a
	 * proven stream (its window full) caught up with its read-ahead
	 * (the store is the slower side): then the next get starts at the
	 * read's first chunk, missing, which the budget does not count
	 * (queue_range), and the read waits for it as it lands, rather
	 * than sending a get of its own for that 1 MiB and another for the
	 * piece after it (8 of 41 requests of a cold 512 MiB read from
	 * s3rver).
	 */
	mine = ((end - 1) / RC_CHUNK + 1) * RC_CHUNK;
	force = false;
	if (ra->window >= (RC_STREAM < max ? RC_STREAM : max) &&
	    off >= e->base &&
	    e->chunk[(off - e->base) / RC_CHUNK] == RC_MISSING) {
		mine = e->base + (off - e->base) / RC_CHUNK * RC_CHUNK;
		force = true;
		from = mine;
	}
	if (from < mine)
		from = mine;
	/* this entry's bytes only (a segment: the next one's are queued
	 * when the stream reaches it) */
	to = ra->pos + ra->window;
	if (to > e->base + e->size)
		to = e->base + e->size;
	if (from < e->base || from >= to)
		return;
	ra->ahead = e->base + queue_unserved(rc, e, ra, from - e->base,
					     to - e->base, force);
}
