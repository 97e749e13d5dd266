/* SPDX-License-Identifier: MIT */
/*
 * mux_ids.c - whether a file identity (smux_info.file_id) is a key's on
 * some member of a mux: each replica of a file is another file there, so
 * one file has as many identities as the tree has copies of it.
 *
 * The daemon shows an open file the st_ino the kernel last got for its
 * node when that may be another replica's copy of the same file (a drain
 * moved the answering replica; fs/told.c), but not when it is the number
 * of a file replaced behind the mount since: two files showed one st_ino
 * (s46-t2), and tar or rsync -H would take them for hard links.
 */
#include "core/mux_internal.h"

/* smux_mux_key_has_id on one member @m of @mux */
static int member_has_id(struct smux_mux *mux, const struct smux_ctx *ctx,
			 struct mux_member *m, const char *key, uint64_t id,
			 uint64_t mask)
{
	struct smux_info info;
	struct smux__call head = {
		.op = SMUX__OP_HEAD, .key = key, .info = &info};
	struct smux_error e;

	/* out of service, or behind on the key: its copy cannot be asked
	 * for (or is about to be replaced) - a mux below too */
	if (smux__health_status(&m->health) != SMUX_STATUS_UP ||
	    smux__member_stale(mux, m, key))
		return -1;
	if (smux__mux_of(m->backend))
		return smux_mux_key_has_id(m->backend, ctx, key, id, mask);
	if (smux__member_call(mux, ctx, m, &head, false, &e) < 0)
		return e.e.code == SMUX_E_KEY_NOT_FOUND ? 0 : -1;
	return (info.file_id & mask) == (id & mask);
}

int smux_mux_key_has_id(struct smux_backend *b, const struct smux_ctx *ctx,
			const char *key, uint64_t id, uint64_t mask)
{
	struct smux_mux *mux = smux__mux_of(b);
	struct mux_view *v;
	int rc = 0;

	if (!mux)
		return -1;
	v = smux__view_get(mux);
	/* the first that is not a "no" answers: the caller asks no more */
	for (unsigned i = 0; i < v->n && rc == 0; i++)
		rc = member_has_id(mux, ctx, v->m[i], key, id, mask);
	smux__view_put(v);
	return rc;
}
