/* SPDX-License-Identifier: MIT */
/*
 * mux_version.c - the version identity of an object across the members of
 * a mux (DESIGN section 6; issue 9, "version identity per member").
 *
 * An etag is a member's own version token: a file backend's is its size
 * and mtime, an object store's is whatever the store says (S3 an MD5 of
 * the content or of its parts, an HTTP server an inode, a counter, a
 * hash). Tokens of two members are not comparable, even of one kind, so
 * the mux compares them only on the member that gave them.
 *
 * Across members the identity is the one every version written through
 * the mux carries: its size and an mtime unique to that write. A fan-out
 * (a put, a writer's commit) sets one mtime on every replica
 * (smux__uniform_mtime); a store without an explicit mtime gets a unique
 * one from the backend (file, memory: smux_unique_wall_ns); every copy
 * the mux makes (hint replay, the rejoin resync, sticky-by-key's move
 * home, intent reconcile) keeps the source's. So two members holding the
 * same size and mtime hold the same write: the same content. A member
 * that missed a write holds an older mtime (or none), a newer write a
 * later one, and either is another version. A member kind that cannot
 * keep an exact mtime reports another one and is, conservatively, never
 * the same version as another member (the reader then fails with ESTALE
 * rather than stitch two versions). Computing a content hash while
 * writing was the alternative: in-place writes land at random offsets,
 * so the hash would cost a second read of the whole file at every
 * commit.
 *
 * Without an mtime on either side (0: unknown) only equal tokens match,
 * as before this rule.
 */
#include <string.h>

#include "core/mux_version.h"

bool smux__same_version(const struct smux_backend *had_on,
			const struct smux_info *had,
			const struct smux_backend *now_on,
			const struct smux_info *now)
{
	bool same_token = had->etag[0] && strcmp(had->etag, now->etag) == 0;

	if (had->size != now->size)
		return false;
	if (had_on == now_on)
		return same_token; /* the member's own token decides */
	if (had->mtime_ns && now->mtime_ns)
		return had->mtime_ns == now->mtime_ns;
	return same_token;
}

/* An mtime kept to the second only (0 ns within it). */
static bool whole_second(int64_t ns)
{
	return ns % 1000000000LL == 0;
}

bool smux__version_current(const struct smux_backend *had_on,
			   const struct smux_info *had,
			   const struct smux_backend *now_on,
			   const struct smux_info *now)
{
	if (smux__same_version(had_on, had, now_on, now))
		return true;
	if (had_on == now_on || had->size != now->size || !had->mtime_ns ||
	    !now->mtime_ns ||
	    !(whole_second(had->mtime_ns) || whole_second(now->mtime_ns)))
		return false;
	return had->mtime_ns / 1000000000LL == now->mtime_ns / 1000000000LL;
}
