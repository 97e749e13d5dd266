/* SPDX-License-Identifier: MIT */
/*
 * mux_sticky_slot.c - a shard removed from a sticky-by-key mux leaves its
 * slot behind.
 *
 * Placement is fnv1a(key) % n over every shard, and the rule the handoff
 * relies on (the first shard from home on without a hint for a key has
 * its latest version, mux_sticky.c) holds only while n and the order do
 * not change. Dropping a removed shard from the view changed both: every
 * key moved home, writes made meanwhile landed on shards the old
 * placement does not ask first, and once the shard was added back its old
 * copies answered again (an older version; a key deleted meanwhile read
 * back and was listed; an in-place edit started from nothing on a shard
 * that never held the key, and its commit replaced the object with the
 * edit alone).
 *
 * So smux_mux_remove of a sticky shard (mux.c) puts an empty slot in its
 * place: a member of the same name, permanently draining, whose backend
 * (below) answers every call "out of service" and is never called by the
 * walks (they skip a draining member). The removed shard is then out of
 * service as a drained one is: its keys are unavailable (EIO), never
 * absent; writes of keys homed on it are handed off with a hint under its
 * name (kept while it is out, mux_repair.c skips a draining member);
 * deletes it misses get a delete hint. smux_mux_add of the same name fills
 * the slot (same position, so every home comes back) and the hints replay
 * onto it. A new name is appended (n grows: no rebalancing, as before).
 * The slot reports the removed backend's capabilities, key length limit
 * and the names it can never hold (it keeps a reference of the removed
 * backend for that alone), so the mux's own do not change while it is
 * out: a name it refuses is not handed off with a hint that could never
 * replay.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "core/mux_internal.h"

struct slot {
	struct smux_backend base; /* first */
	unsigned caps;
	size_t key_max;
	struct smux_backend *was; /* the removed backend: key_refused only */
};

static int out(struct smux_backend *b, struct smux_error *err)
{
	return smux_error_set(err, SMUX_E_BACKEND_DRAINING, b->name,
			      "%s was removed from the mux: out of service "
			      "until it is added back",
			      b->name);
}

static int slot_get(struct smux_backend *b, const struct smux_ctx *ctx,
		    const char *key, const struct smux_get_opts *opts,
		    struct smux_sink *sink, struct smux_info *info,
		    struct smux_error *err)
{
	return out(b, err);
}

static int slot_put(struct smux_backend *b, const struct smux_ctx *ctx,
		    const char *key, const struct smux_source *src,
		    const struct smux_put_opts *opts, struct smux_info *info,
		    struct smux_error *err)
{
	return out(b, err);
}

static int slot_del(struct smux_backend *b, const struct smux_ctx *ctx,
		    const char *key, struct smux_error *err)
{
	return out(b, err);
}

static int slot_head(struct smux_backend *b, const struct smux_ctx *ctx,
		     const char *key, struct smux_info *info,
		     struct smux_error *err)
{
	return out(b, err);
}

static int slot_list(struct smux_backend *b, const struct smux_ctx *ctx,
		     const char *prefix, const char *delimiter, smux_list_fn fn,
		     void *arg, struct smux_error *err)
{
	return out(b, err);
}

static int slot_healthcheck(struct smux_backend *b, const struct smux_ctx *ctx,
			    struct smux_error *err)
{
	return out(b, err);
}

static unsigned slot_caps(struct smux_backend *b)
{
	return ((struct slot *)b)->caps;
}

static size_t slot_key_max(struct smux_backend *b)
{
	return ((struct slot *)b)->key_max;
}

static bool slot_key_refused(struct smux_backend *b, const char *key)
{
	return smux_backend_key_refused(((struct slot *)b)->was, key);
}

static void slot_destroy(struct smux_backend *b)
{
	smux_backend_unref(((struct slot *)b)->was);
	smux_backend_release(b);
	free(b);
}

static const struct smux_backend_ops slot_ops = {
	.kind = "removed",
	.get = slot_get,
	.put = slot_put,
	.del = slot_del,
	.head = slot_head,
	.list = slot_list,
	.healthcheck = slot_healthcheck,
	.caps = slot_caps,
	.key_max = slot_key_max,
	.key_refused = slot_key_refused,
	.destroy = slot_destroy,
};

struct smux_backend *smux__sticky_slot_backend(struct smux_backend *removed)
{
	struct slot *s = calloc(1, sizeof(*s));

	if (!s)
		return NULL;
	if (smux_backend_init(&s->base, &slot_ops, removed->name) != 0) {
		free(s);
		return NULL;
	}
	s->base.depth = removed->depth;
	s->caps = smux_backend_caps(removed);
	s->key_max = smux_backend_key_max(removed);
	s->was = smux_backend_ref(removed);
	return &s->base;
}

bool smux__sticky_slot_empty(const struct mux_member *m)
{
	return m && m->backend && m->backend->ops == &slot_ops;
}
