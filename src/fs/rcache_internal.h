/* SPDX-License-Identifier: MIT */
/*
 * rcache_internal.h - what rcache.c (the index and the read interface) and
 * rcache_fetch.c (ranged fetches into the sparse files, the read-ahead
 * workers) share, and rcache_copy.c reads (a whole cached version as a
 * local copy). Nothing outside these files includes it.
 *
 * A cached version is one sparse file of the object's size, cut into
 * chunks of RC_CHUNK bytes (the last one shorter), each MISSING, INFLIGHT
 * (a ranged get writing it, If-Match the pinned etag) or PRESENT (its
 * bytes are on disk). A reader waits only for the chunks of its own range;
 * a fetch marks each chunk PRESENT as its bytes land, not at the end.
 */
#ifndef SMUX_FS_RCACHE_INTERNAL_H
#define SMUX_FS_RCACHE_INTERNAL_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

#include "fs/rcache.h"
#include "smux/ctx.h"

#define RC_BUCKETS  16384
#define RC_BLOCK    4096ULL
#define RC_HASH_HEX 64
/* HASH "-" GEN(16 hex) NUL */
#define RC_NAME_LEN (RC_HASH_HEX + 1 + 16 + 1)

/* Granularity of the sparse file's map (a random read fetches one). */
#define RC_CHUNK (1024ULL * 1024)
/* An object this small is fetched whole by its first read: one get. It is
 * also the first read-ahead window (Mountpoint's 1 MiB + 128 KiB, which
 * covers the kernel's 128 KiB read-ahead tail). */
#define RC_SMALL (RC_CHUNK + 128 * 1024ULL)
/* A run of reads not starting at 0 gets read-ahead once this long. */
#define RC_SEQ_MIN (512 * 1024ULL)
/* Chunks read ahead and not read yet are kept before others (make_room)
 * while a read took their entry this recently; a stream that stopped
 * longer ago no longer holds them. */
#define RC_WAITING_NS (5 * 1000000000LL)
/* The most bytes one read-ahead get asks for: s3rver's cost is per
 * request as much as per byte (32 gets of 16 MiB: 0.75 s for 512 MiB, 64
 * of 8 MiB: 0.9 s, with curl); s3fs-tuned uses 16 MiB too. */
#define RC_PIECE (16 * RC_CHUNK)
/* Threads sending read-ahead gets (so at most this many in flight): the
 * default budget's four pieces and the one a stream that outran its
 * read-ahead queues past the budget, and one spare. */
#define RC_WORKERS 6
/* The window of a stream once it proved sequential (its first refill):
 * a get of RC_PIECE for every worker at once. */
#define RC_STREAM (RC_WORKERS * RC_PIECE)

enum rentry_state {
	RE_READY,  /* the sparse file exists; chunks say what it holds */
	RE_FAILED, /* a fetch failed at failed_ns; no file */
};

enum rchunk_state {
	RC_MISSING = 0,
	RC_INFLIGHT,
	RC_PRESENT,
};

struct rentry {
	/* set at creation, never changed */
	char *key;
	char *etag;
	/* a whole object (base 0), or a segment of one too large to be
	 * cached whole: bytes [base, base + size) of it */
	uint64_t base;
	uint64_t size;
	bool segment;
	uint64_t nchunks; /* at least 1 (an empty object has one, empty) */
	char name[RC_NAME_LEN];
	/* protected by rc->lock */
	enum rentry_state state;
	uint8_t *chunk;	  /* nchunks enum rchunk_state */
	uint64_t present; /* chunks PRESENT */
	/* chunks a read was served from (1 each, after chunk[]'s nchunks
	 * bytes): PRESENT ones not among them were read ahead and wait for
	 * their reader */
	uint8_t *served;
	uint64_t nserved;
	int64_t used_ns; /* when a read last took it */
	uint64_t charge; /* bytes counted in rc->bytes */
	int64_t failed_ns;
	unsigned refs; /* the table's (while in_table) + readers + fetches */
	bool in_table;
	bool has_file;		      /* the file was created, not unlinked */
	struct rentry *hnext;	      /* hash chain */
	struct rentry *lprev, *lnext; /* LRU list */
	struct rentry *dnext;	      /* reap list (refs == 0) */
};

/* One read-ahead get waiting for (or running on) a worker. */
struct rjob {
	struct rentry *e; /* a reference */
	uint64_t c0, c1;  /* chunks [c0, c1), INFLIGHT, claimed for it */
	uint64_t bytes;	  /* counted in rc->ra_inflight */
	struct rjob *next;
};

struct smuxfs_rcache {
	int dirfd;
	uint64_t capacity;
	uint64_t max_object;
	uint64_t seg_size; /* segments of larger objects; 0: not cached */
	struct smux_backend *backend; /* one reference */

	pthread_mutex_t lock;
	pthread_cond_t filled; /* broadcast when chunks change state */
	pthread_cond_t work;   /* jobs queued, or stopping */
	/* protected by lock: */
	struct rentry *buckets[RC_BUCKETS];
	struct rentry *lru_head, *lru_tail;
	uint64_t gen;
	uint64_t bytes, entries;
	uint64_t hits, misses, fills, fill_failures, fill_bytes, evictions;
	/* read-ahead: the global budget, what is queued or in flight */
	uint64_t ra_budget;
	uint64_t ra_inflight, ra_inflight_max;
	uint64_t ra_gets, ra_bytes, ra_skipped;
	struct rjob *jobs_head, *jobs_tail;
	bool stopping;
	/* fired by smuxfs_rcache_free: running gets stop */
	struct smux_cancel cancel;
	pthread_t workers[RC_WORKERS];
	unsigned nworkers;
	/* counted without the lock */
	atomic_ullong bypassed;
};

/* Chunk bounds of @e: bytes [rc_chunk_start, rc_chunk_end) of chunk @c. */
static inline uint64_t rc_chunk_start(uint64_t c)
{
	return c * RC_CHUNK;
}

static inline uint64_t rc_chunk_end(const struct rentry *e, uint64_t c)
{
	uint64_t end = (c + 1) * RC_CHUNK;

	return end < e->size ? end : e->size;
}

/* ---- rcache.c (callers hold rc->lock unless said) ---- */

/* Drops one reference; the entry goes on @dead (reaped after unlocking)
 * when it was the last one. */
void smux__rc_unref(struct smuxfs_rcache *rc, struct rentry *e,
		    struct rentry **dead);
/* Marks @e failed (served no more for SMUXFS_RCACHE_RETRY_MS), frees its
 * charge and wakes waiters. Returns true when the caller must unlink its
 * file after unlocking (smux__rc_unlink_name). */
bool smux__rc_fail(struct smuxfs_rcache *rc, struct rentry *e);
/* Without the lock: deletes the cache file named @name. */
void smux__rc_unlink_name(struct smuxfs_rcache *rc, const char *name);
/* Without the lock: deletes the files of dropped entries, frees them. */
void smux__rc_reap(struct smuxfs_rcache *rc, struct rentry *dead);

/* ---- rcache_fetch.c ---- */

/*
 * Without the lock: fetches chunks [c0, c1) of @e (claimed INFLIGHT by
 * the caller) with one ranged get If-Match its etag into its file, with
 * context @ctx, marking chunks PRESENT as they land. On failure the entry
 * is failed (smux__rc_fail) and its file deleted. 0 or a negative errno.
 */
int smux__rc_fetch(struct smuxfs_rcache *rc, struct rentry *e, uint64_t c0,
		   uint64_t c1, const struct smux_ctx *ctx);

/* Starts the read-ahead workers. 0 or a negative errno. */
int smux__rc_workers_start(struct smuxfs_rcache *rc);
/* Cancels running read-ahead gets, drops queued ones, joins the
 * workers. Without the lock. */
void smux__rc_workers_stop(struct smuxfs_rcache *rc);

/*
 * With the lock: the read of [@off, @off + @len) of @e by the stream @ra
 * (may be NULL: no read-ahead) was just asked for; updates @ra's window
 * (sequential reads grow it, others reset it) and queues read-ahead gets
 * for the MISSING chunks ahead of the read, as the global budget allows.
 */
void smux__rc_readahead(struct smuxfs_rcache *rc, struct rentry *e,
			struct smuxfs_rcache_ra *ra, uint64_t off,
			uint64_t len);

#endif /* SMUX_FS_RCACHE_INTERNAL_H */
