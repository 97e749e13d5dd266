/* SPDX-License-Identifier: MIT */
/*
 * rcache.h - the on-disk read cache of the smuxfs daemon (DESIGN section
 * 6, "an on-disk read cache with a size limit for network backends").
 *
 * Owns: the files under one directory (cache_dir/read) and the in-memory
 * index over them. A cached object is one whole version of one key: the
 * pair (key, etag), the etag being the version an open pinned. The first
 * read of a cacheable pair fetches the whole object once (one get, If-Match
 * that etag) into a temporary file renamed into place when complete; every
 * later read of that pair, from any handle, is a pread of that file. The
 * total size of the files is bounded by the capacity (least recently used
 * first out); an object over capacity / SMUXFS_RCACHE_MAX_SHARE is never
 * cached. Whatever the directory held before smuxfs_rcache_new is deleted:
 * the cache lives for one daemon run.
 *
 * Never touches FUSE, the open-file table or pending (written, not yet
 * committed) content: the caller reads those elsewhere and calls this for
 * clean opens only. Staleness is impossible by construction (a new version
 * has a new etag); smuxfs_rcache_forget only frees space early.
 *
 * Threads: every function may be called from several threads at once. One
 * mutex protects the index; it is never held across a backend call or a
 * file read or write. Two reads of one missing pair fill it once: the
 * second waits for the first's fill.
 */
#ifndef SMUX_FS_RCACHE_H
#define SMUX_FS_RCACHE_H

#include <stddef.h>
#include <stdint.h>

#include "smux/backend.h"

/* Objects over capacity / SMUXFS_RCACHE_MAX_SHARE bytes are never cached. */
#define SMUXFS_RCACHE_MAX_SHARE 4
/* The index holds at most this many objects (bounds its memory). */
#define SMUXFS_RCACHE_MAX_ENTRIES 65536
/* A version whose fill failed is read through for this long before a fill
 * is tried again (no retry storm on every read of a failing object). */
#define SMUXFS_RCACHE_RETRY_MS 10000

struct smuxfs_rcache;

/* Counters, for .smux/stats. */
struct smuxfs_rcache_stats {
	uint64_t capacity;	/* bytes allowed */
	uint64_t bytes;		/* bytes charged (4 KiB blocks, incl. fills) */
	uint64_t entries;	/* objects cached or being filled */
	uint64_t hits;		/* reads served from a cache file */
	uint64_t misses;	/* fills started */
	uint64_t fills;		/* fills completed */
	uint64_t fill_failures; /* fills that failed (read through) */
	uint64_t fill_bytes;	/* bytes fetched by completed fills */
	uint64_t bypassed;	/* reads the cache did not serve */
	uint64_t evictions;	/* objects dropped for room */
};

/*
 * Creates the cache in directory @dir (created 0700 if missing; every
 * entry already in it is deleted), holding at most @capacity bytes and
 * filling from @backend (the cache takes its own reference). Returns 0
 * and *@out (smuxfs_rcache_free), or a negative errno with @why (may be
 * NULL) saying what failed.
 */
int smuxfs_rcache_new(const char *dir, uint64_t capacity,
		      struct smux_backend *backend, struct smuxfs_rcache **out,
		      char *why, size_t whylen);
/* Deletes every file of the cache and frees it; no call may be running.
 * NULL is a no-op. */
void smuxfs_rcache_free(struct smuxfs_rcache *rc);

/* Deletes the content of @dir (a read cache directory left by an earlier
 * run) when the cache is off. A missing @dir is fine. 0 or a negative
 * errno. */
int smuxfs_rcache_discard(const char *dir);

/*
 * Reads up to @len bytes at @off of version @etag (not "") of @key, whose
 * size is @size, from the cache, filling the cache first on a miss (the
 * calling thread fetches the whole object; concurrent readers of the same
 * version wait for it). Returns the bytes read (short only at the end of
 * the object), or a negative errno when the cache does not serve this
 * read: the object is too large (-EFBIG), there is no room (-ENOSPC), the
 * fill failed or failed recently (-EIO, also when the object no longer has
 * that etag) or the cache file could not be read. The caller then reads
 * from the backend itself, as without a cache.
 */
long smuxfs_rcache_read(struct smuxfs_rcache *rc, const char *key,
			const char *etag, uint64_t size, char *buf, size_t len,
			uint64_t off);

/* Drops every cached version of @key (its content changed, it was
 * removed or renamed through the mount). Reads in progress finish on the
 * file they started with. NULL @rc is a no-op. */
void smuxfs_rcache_forget(struct smuxfs_rcache *rc, const char *key);

/* A snapshot of the counters. */
void smuxfs_rcache_stats(struct smuxfs_rcache *rc,
			 struct smuxfs_rcache_stats *st);

#endif /* SMUX_FS_RCACHE_H */
