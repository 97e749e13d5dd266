/* SPDX-License-Identifier: MIT */
/*
 * rcache.h - the on-disk read cache of the smuxfs daemon (DESIGN section
 * 6, "an on-disk read cache with a size limit for network backends").
 *
 * Owns: the files under one directory (cache_dir/read), the in-memory
 * index over them and the read-ahead workers. A cached object is one
 * version of one key: the pair (key, etag), the etag being the version an
 * open pinned, kept in a sparse file with a map of the 1 MiB chunks it
 * holds (rcache_internal.h). A read waits only for the chunks of its own
 * range: the reading thread fetches the missing ones itself with one
 * ranged get (If-Match that etag); an object up to RC_SMALL bytes is
 * fetched whole by its first read. A stream of sequential reads (struct
 * smuxfs_rcache_ra, one per open handle) also queues read-ahead: ranged
 * gets of up to RC_PIECE (16 MiB) ahead of the reader, in a window that
 * starts at 1 MiB + 128 KiB, is a get for each worker once the stream
 * proved sequential and doubles as the reader consumes it, sent by a few
 * worker threads; a read that is not sequential resets the window (a
 * random reader fetches only its own chunks). The bytes of read-ahead
 * queued or in flight, over all open files, never exceed one global
 * budget (smuxfs_rcache_set_readahead). Every later read of a chunk, from
 * any handle, is a pread of that file. The total size of the files is
 * bounded by the capacity (each object charged whole when first read;
 * least recently used first out); an object over capacity /
 * SMUXFS_RCACHE_MAX_SHARE is cached in segments, each an entry of its own
 * (SMUXFS_RCACHE_SEGMENT). The cache files the directory held before
 * smuxfs_rcache_new are deleted: the cache lives for one daemon run.
 *
 * Never touches FUSE, the open-file table or pending (written, not yet
 * committed) content: the caller reads those elsewhere and calls this for
 * clean opens only. Staleness is impossible by construction (a new version
 * has a new etag); smuxfs_rcache_forget only frees space early.
 *
 * Threads: every function may be called from several threads at once. One
 * mutex protects the index; it is never held across a backend call or a
 * file read or write. Two reads of one missing chunk fetch it once: the
 * second waits for the first's fetch.
 */
#ifndef SMUX_FS_RCACHE_H
#define SMUX_FS_RCACHE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "smux/backend.h"

/* Objects over capacity / SMUXFS_RCACHE_MAX_SHARE bytes are cached in
 * segments of at most that much and SMUXFS_RCACHE_SEGMENT, each one an
 * entry of its own (charged, evicted and read ahead on its own). */
#define SMUXFS_RCACHE_MAX_SHARE 4
#define SMUXFS_RCACHE_SEGMENT	(64ULL * 1024 * 1024)
/* The index holds at most this many objects (bounds its memory). */
#define SMUXFS_RCACHE_MAX_ENTRIES 65536
/* A version whose fill failed is read through for this long before a fill
 * is tried again (no retry storm on every read of a failing object). */
#define SMUXFS_RCACHE_RETRY_MS 10000

/* Default read-ahead budget (bytes queued or in flight, all files). */
#define SMUXFS_RCACHE_RA_DEFAULT (64ULL * 1024 * 1024)

struct smuxfs_rcache;

/* Earlier ranges of reads a stream remembers (struct smuxfs_rcache_ra). */
#define SMUXFS_RCACHE_RA_SERVED 4

/* The read-ahead state of one stream of reads (one open handle), owned by
 * the caller, zeroed before its first read; the cache updates it under
 * its lock. */
struct smuxfs_rcache_ra {
	uint64_t pos;	    /* end of the last read */
	uint64_t ahead;	    /* end of what read-ahead was queued up to */
	uint64_t window;    /* bytes to keep ahead; 0 = not sequential */
	uint64_t run_start; /* where the current run of reads began */
	bool started;	    /* a read was seen */
	/* the bytes this handle was served, as ranges of reads that follow
	 * each other: the current one, and the last few before it (newest
	 * first), which read-ahead does not fetch again: the kernel keeps
	 * them in its page cache and asks again only if it dropped them */
	uint64_t cov_start, cov_end;
	struct {
		uint64_t start, end;
	} served[SMUXFS_RCACHE_RA_SERVED];
};

/* Counters, for .smux/stats. */
struct smuxfs_rcache_stats {
	uint64_t capacity;	/* bytes allowed */
	uint64_t bytes;		/* bytes charged (4 KiB blocks, incl. fills) */
	uint64_t entries;	/* objects cached or being filled */
	uint64_t hits;		/* reads served from a cache file */
	uint64_t misses;	/* fetches started (readers' and read-ahead) */
	uint64_t fills;		/* fetches completed */
	uint64_t fill_failures; /* fetches that failed (read through) */
	uint64_t fill_bytes;	/* bytes fetched by completed fetches */
	uint64_t ra_gets;	/* read-ahead gets queued */
	uint64_t ra_bytes;	/* bytes they asked for */
	uint64_t ra_skipped;	/* read-ahead left out: budget used up */
	uint64_t ra_budget;	/* the budget */
	uint64_t ra_inflight_max; /* most read-ahead bytes at once */
	uint64_t ra_inflight;	  /* read-ahead bytes queued or in flight */
	uint64_t bypassed;	  /* reads the cache did not serve */
	uint64_t evictions;	  /* objects dropped for room */
};

/*
 * Creates the cache in directory @dir (created 0700 if missing; the cache
 * files an earlier run left in it are deleted), holding at most @capacity
 * bytes and filling from @backend (the cache takes its own reference).
 * The directory is held (flock) until smuxfs_rcache_free. Returns 0 and
 * *@out (smuxfs_rcache_free), or a negative errno with @why (may be NULL)
 * saying what failed: -EBUSY when a live cache of another mount holds
 * @dir (nothing in it is touched).
 */
int smuxfs_rcache_new(const char *dir, uint64_t capacity,
		      struct smux_backend *backend, struct smuxfs_rcache **out,
		      char *why, size_t whylen);
/* Deletes every file of the cache and frees it; no call may be running.
 * NULL is a no-op. */
void smuxfs_rcache_free(struct smuxfs_rcache *rc);

/* Deletes the cache files of an earlier run from @dir when the cache is
 * off; a missing @dir, or one a live cache of another mount holds (left
 * alone), is fine. 0 or a negative errno. */
int smuxfs_rcache_discard(const char *dir);

/*
 * Reads up to @len bytes at @off of version @etag (not "") of @key, whose
 * size is @size, from the cache, fetching the missing chunks of the range
 * first (the calling thread fetches them; concurrent readers of the same
 * chunks wait for it). Returns the bytes read (short only at the end of
 * the object), or a negative errno when the cache does not serve this
 * read: the object is too large (-EFBIG), there is no room (-ENOSPC), the
 * fill failed or failed recently (-EIO, also when the object no longer has
 * that etag) or the cache file could not be read. The caller then reads
 * from the backend itself, as without a cache.
 */
long smuxfs_rcache_read(struct smuxfs_rcache *rc, const char *key,
			const char *etag, uint64_t size, char *buf, size_t len,
			uint64_t off);

/*
 * smuxfs_rcache_read for the stream @ra (NULL: as smuxfs_rcache_read, no
 * read-ahead): a sequential stream gets read-ahead queued in its window.
 */
long smuxfs_rcache_read_ra(struct smuxfs_rcache *rc,
			   struct smuxfs_rcache_ra *ra, const char *key,
			   const char *etag, uint64_t size, char *buf,
			   size_t len, uint64_t off);

/* Sets the read-ahead budget: the most bytes of read-ahead gets queued or
 * in flight at once, over every open file (0: no read-ahead), at most half
 * the cache's capacity. Before the first read. */
void smuxfs_rcache_set_readahead(struct smuxfs_rcache *rc, uint64_t budget);

/* Whether some version of @key is cached (whole or in part). False for a
 * NULL @rc. */
bool smuxfs_rcache_has(struct smuxfs_rcache *rc, const char *key);

/* Drops every cached version of @key (its content changed, it was
 * removed or renamed through the mount). Reads in progress finish on the
 * file they started with. NULL @rc is a no-op. */
void smuxfs_rcache_forget(struct smuxfs_rcache *rc, const char *key);

/*
 * A read-only fd of a cached version of @key held whole (every chunk on
 * disk; not a segment), its size in *@size: a local copy of the content
 * for a backend without a server-side copy (rcache_copy.c). Which version
 * it is the caller does not learn: the user verifies it. -ENOENT when none
 * (or @rc is NULL).
 */
int smuxfs_rcache_open_copy(struct smuxfs_rcache *rc, const char *key,
			    uint64_t *size);

/* A snapshot of the counters. */
void smuxfs_rcache_stats(struct smuxfs_rcache *rc,
			 struct smuxfs_rcache_stats *st);

#endif /* SMUX_FS_RCACHE_H */
