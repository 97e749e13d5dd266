/* SPDX-License-Identifier: MIT */
/*
 * attrstore.h (internal) - what an object-store backend last knew of each
 * of its objects' attributes, kept across restarts, so a listing can give
 * complete attributes without a HEAD per entry (issue 10, issue 12).
 *
 * Owner: attrstore.c. Users: the s3 and swift backends, each with its own
 * store. Every function may be called from any thread at once (one lock
 * inside); none does I/O other than the store's own file, and none ever
 * fails the caller's operation: the store is a cache, a failure to read
 * or write it only costs the HEAD it would have saved.
 */
#ifndef SMUX_CORE_ATTRSTORE_H
#define SMUX_CORE_ATTRSTORE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "smux/backend.h"

struct smux__attrstore;

/* The default bound on entries (attrstore_max in the configuration). */
#define SMUX_ATTRSTORE_MAX_DEFAULT 1000000

/*
 * Opens (or creates) the store at @path, an SQLite file whose parent
 * directories are created (0700); @path NULL keeps it in memory only.
 * @identity names what the keys belong to (kind, endpoint, bucket or
 * container, prefix): a store written for another identity is emptied.
 * @max_entries bounds it (0: SMUX_ATTRSTORE_MAX_DEFAULT); over it, the
 * entries written longest ago are evicted. A file that is not a store of
 * ours (garbage, another schema, corrupt) is removed and made anew; one
 * that cannot be made at all leaves the store in memory. Returns NULL
 * only without memory. The caller owns the result (smux__attrstore_free).
 */
struct smux__attrstore *smux__attrstore_open(const char *path,
					     const char *identity,
					     size_t max_entries);

/* Closes @st; NULL is a no-op. No other call may be running on it. */
void smux__attrstore_free(struct smux__attrstore *st);

/*
 * Records what the backend itself knows of @key: @info as its own PUT,
 * copy, setattr or HEAD saw it (etag, size, mode, owner, stored mtime),
 * @lastmod_ns the server's Last-Modified of that version (0 = not known:
 * the next matching listing records it). A key ending in '/', a
 * directory, an entry without etag or mode, is not kept (and any older
 * entry of @key is dropped). @key: any bytes but NUL.
 */
void smux__attrstore_put(struct smux__attrstore *st, const char *key,
			 const struct smux_info *info, int64_t lastmod_ns);

/* Drops @key (a DELETE, or a change whose result is not known). */
void smux__attrstore_forget(struct smux__attrstore *st, const char *key);

/*
 * A listing's entry for @key: @info holds what the listing said (size,
 * etag, and mtime_ns = the server's Last-Modified). When the stored entry
 * has the same etag and size, and the same Last-Modified once one was
 * recorded (to the second when the recorded one has no finer part), fills
 * @info's mode, owner and mtime from it and returns true; the first match
 * after a put records the listing's Last-Modified. Otherwise leaves @info
 * alone and returns false (the caller asks with a HEAD, which puts).
 */
bool smux__attrstore_fill(struct smux__attrstore *st, const char *key,
			  struct smux_info *info);

/* Entries held now (for tests and the statistics). */
size_t smux__attrstore_count(struct smux__attrstore *st);

/* Whether the store lives in a file (false: memory only). */
bool smux__attrstore_persistent(struct smux__attrstore *st);

/* Creates @dir and its missing parents (0700). 0 or -errno. */
int smux__mkdirs(const char *dir);

#endif
