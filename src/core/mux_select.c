/* SPDX-License-Identifier: MIT */
/*
 * mux_select.c - which member an operation tries next: the selection half
 * of the six modes (seed section 3). Owns the selection snapshot (up set,
 * Walker alias table), the FNV-1a hash, the mux's random numbers and the
 * attempt cursor. Never calls a member.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "core/mux_internal.h"

uint32_t smux_fnv1a(const void *data, size_t len)
{
	const unsigned char *p = data;
	uint32_t h = 2166136261u;

	for (size_t i = 0; i < len; i++) {
		h ^= p[i];
		h *= 16777619u;
	}
	return h;
}

uint32_t smux__mux_random(struct smux_mux *mux)
{
	uint64_t x, next;

	if (mux->rng && mux->rng->next)
		return mux->rng->next(mux->rng->arg);
	/* xorshift64*, advanced with a CAS so threads never share a draw */
	x = atomic_load(&mux->rng_state);
	do {
		next = x;
		next ^= next >> 12;
		next ^= next << 25;
		next ^= next >> 27;
	} while (!atomic_compare_exchange_weak(&mux->rng_state, &x, next));
	return (uint32_t)((next * 2685821657736338717ULL) >> 32);
}

/*
 * Weighted: the two numbers of one draw (slot, then coin). With an
 * injected generator, two of its numbers in that order; else one step of
 * the internal xorshift64* gives both halves (one CAS, not two, on the
 * selection path).
 */
static void random_pair(struct smux_mux *mux, uint32_t *slot, uint32_t *coin)
{
	uint64_t x, next, out;

	if (mux->rng && mux->rng->next) {
		*slot = mux->rng->next(mux->rng->arg);
		*coin = mux->rng->next(mux->rng->arg);
		return;
	}
	x = atomic_load(&mux->rng_state);
	do {
		next = x;
		next ^= next >> 12;
		next ^= next << 25;
		next ^= next >> 27;
	} while (!atomic_compare_exchange_weak(&mux->rng_state, &x, next));
	out = next * 2685821657736338717ULL;
	*slot = (uint32_t)(out >> 32);
	*coin = (uint32_t)out;
}

void smux__sel_free_arrays(struct mux_sel *s)
{
	free(s->up);
	free(s->prob);
	free(s->alias);
	s->up = NULL;
	s->prob = NULL;
	s->alias = NULL;
}

/*
 * Vose's construction of Walker's alias table over the up members with a
 * positive weight: O(n) build, O(1) draw.
 */
static int build_alias(struct mux_sel *s)
{
	struct mux_view *v = s->view;
	unsigned n = s->n_up, n_small = 0, n_large = 0;
	unsigned *small = NULL, *large = NULL;
	double *scaled = NULL;
	int rc = -ENOMEM;

	s->total_weight = 0;
	for (unsigned i = 0; i < n; i++)
		s->total_weight += atomic_load(&v->m[s->up[i]]->weight);
	if (n == 0 || !(s->total_weight > 0))
		return 0;
	s->prob = calloc(n, sizeof(*s->prob));
	s->alias = calloc(n, sizeof(*s->alias));
	small = calloc(n, sizeof(*small));
	large = calloc(n, sizeof(*large));
	scaled = calloc(n, sizeof(*scaled));
	if (!s->prob || !s->alias || !small || !large || !scaled)
		goto out;
	for (unsigned i = 0; i < n; i++) {
		scaled[i] = atomic_load(&v->m[s->up[i]]->weight) * n /
			    s->total_weight;
		if (scaled[i] < 1.0)
			small[n_small++] = i;
		else
			large[n_large++] = i;
	}
	while (n_small && n_large) {
		unsigned l = small[--n_small], g = large[--n_large];

		s->prob[l] = scaled[l];
		s->alias[l] = g;
		scaled[g] = (scaled[g] + scaled[l]) - 1.0;
		if (scaled[g] < 1.0)
			small[n_small++] = g;
		else
			large[n_large++] = g;
	}
	while (n_large)
		s->prob[large[--n_large]] = 1.0;
	while (n_small) /* rounding leftovers */
		s->prob[small[--n_small]] = 1.0;
	s->n_alias = n;
	rc = 0;
out:
	free(small);
	free(large);
	free(scaled);
	return rc;
}

int smux__sel_build(struct mux_sel *s, struct mux_view *v, int64_t now_ms)
{
	s->view = v;
	s->n_up = 0;
	s->n_alias = 0;
	s->next_probe_ms = INT64_MAX;
	s->up = calloc(v->n ? v->n : 1, sizeof(*s->up));
	if (!s->up)
		return -ENOMEM;
	for (unsigned i = 0; i < v->n; i++) {
		struct smux__health *h = &v->m[i]->health;
		enum smux_status st;

		pthread_mutex_lock(&h->lock);
		st = h->status;
		if (st == SMUX_STATUS_DOWN &&
		    h->cooldown_until_ms < s->next_probe_ms)
			s->next_probe_ms = h->cooldown_until_ms;
		pthread_mutex_unlock(&h->lock);
		if (st == SMUX_STATUS_UP)
			s->up[s->n_up++] = i;
	}
	(void)now_ms;
	return build_alias(s);
}

int smux__sel_weighted(const struct mux_sel *s, uint32_t r1, uint32_t r2)
{
	unsigned i;

	if (s->n_alias == 0)
		return -1;
	i = (unsigned)(((uint64_t)r1 * s->n_alias) >> 32);
	if ((double)r2 / 4294967296.0 < s->prob[i])
		return (int)i;
	return (int)s->alias[i];
}

void smux__cursor_init(struct mux_cursor *c, struct smux_mux *mux,
		       const char *key, bool by_order)
{
	unsigned words;

	c->mux = mux;
	c->key = key;
	c->by_order = by_order;
	c->tried = 0;
	c->pos = 0;
	c->start = 0;
	c->n_refused = 0;
	c->sel = smux__sel_get(mux);
	words = (c->sel->view->n + 63) / 64;
	if (words <= sizeof(c->seen_small) / sizeof(c->seen_small[0])) {
		c->seen = c->seen_small;
		memset(c->seen, 0, words * sizeof(*c->seen));
	} else {
		c->seen = calloc(words, sizeof(*c->seen));
	}
	/* allocation failure degrades to "no memory of what was tried":
	 * cursor_next then stops after one attempt per position */
	if (mux->mode == SMUX_MODE_ROUND_ROBIN)
		c->start = atomic_fetch_add(&mux->rr_counter, 1);
	/* sticky-by-key: every walk starts at the key's home shard */
	if (mux->mode == SMUX_MODE_STICKY)
		c->start = smux__sticky_home(c->sel->view, key);
}

void smux__cursor_avoid(struct mux_cursor *c, struct smux_backend *const *avoid,
			unsigned n)
{
	const struct mux_view *v = c->sel->view;

	if (!c->seen)
		return; /* no memory of what was tried: nothing to mark */
	for (unsigned i = 0; i < v->n; i++)
		for (unsigned j = 0; j < n; j++)
			if (v->m[i]->backend == avoid[j])
				c->seen[i / 64] |= 1ULL << (i % 64);
}

void smux__cursor_release(struct mux_cursor *c)
{
	if (c->seen && c->seen != c->seen_small)
		free(c->seen);
	smux__sel_put(c->sel);
	c->sel = NULL;
}

/* Takes member @idx of the snapshot if health allows it now. */
static struct mux_member *take(struct mux_cursor *c, unsigned idx, bool *probe)
{
	struct mux_member *m = c->sel->view->m[idx];
	uint64_t bit = 1ULL << (idx % 64);

	if (c->seen) {
		if (c->seen[idx / 64] & bit)
			return NULL;
		c->seen[idx / 64] |= bit;
	}
	/*
	 * The clock is read only for a member that is not up. The modes
	 * that choose among up members never make a request a probe (the
	 * background thread probes: issue 9); failover and shield keep the
	 * seed's probe-on-selection in member order, bounded by the budget.
	 */
	if (!smux__health_is_up(&m->health) &&
	    (!c->by_order ||
	     !smux__health_acquire(&m->health, smux__mux_now(c->mux), probe))) {
		/* a walk that runs out looks at it again (mux_probe_wait.c) */
		if (c->by_order && c->n_refused < SMUX__CURSOR_REFUSED)
			c->refused[c->n_refused++] = idx;
		return NULL;
	}
	c->tried++;
	return smux__member_get(m);
}

/*
 * Weighted, once the re-rolls are spent: the draws may all have landed on
 * members already tried (or gone down since the snapshot) while another up
 * member with a weight was never asked. Those are taken in view order, so
 * the operation answers ALL_BACKENDS_DOWN only when every up member with a
 * weight was tried. A weight of 0 still means "no traffic".
 */
static struct mux_member *weighted_rest(struct mux_cursor *c, bool *probe)
{
	struct mux_sel *s = c->sel;
	struct mux_member *m = NULL;

	if (c->pos < s->n_up)
		c->pos = s->n_up;
	while (!m && c->pos < 2 * s->n_up) {
		unsigned idx = s->up[c->pos++ - s->n_up];

		if (atomic_load(&s->view->m[idx]->weight) > 0)
			m = take(c, idx, probe);
	}
	return m;
}

struct mux_member *smux__cursor_next(struct mux_cursor *c, bool *probe)
{
	struct mux_sel *s = c->sel;
	struct mux_member *m = NULL;

	*probe = false;
	if (c->by_order) {
		/* member order; sticky-by-key: from the key's home shard on
		 * (home, home + 1, ... mod n) */
		unsigned base = c->mux->mode == SMUX_MODE_STICKY
					? (unsigned)c->start
					: 0;

		while (!m && c->pos < s->view->n)
			m = take(c, (base + c->pos++) % s->view->n, probe);
		return m;
	}
	switch (c->mux->mode) {
	case SMUX_MODE_WEIGHTED:
		/* re-roll up to n_up times (seed 3.3), skipping repeats */
		while (!m && c->pos < s->n_up) {
			uint32_t slot, coin;
			int i;

			random_pair(c->mux, &slot, &coin);
			i = smux__sel_weighted(s, slot, coin);

			c->pos++;
			if (i < 0)
				break;
			m = take(c, s->up[i], probe);
		}
		if (!m)
			m = weighted_rest(c, probe);
		break;
	case SMUX_MODE_STICKY:
		/* fnv1a(key) % n over every member (not the healthy ones:
		 * an outage must not move a key's home), then the shards
		 * after home in order - the handoff order (mux_sticky.c) */
		while (!m && c->pos < s->view->n)
			m = take(c,
				 (unsigned)(c->start + c->pos++) % s->view->n,
				 probe);
		break;
	default: /* round-robin, and the keyless fallback */
		while (!m && c->pos < s->n_up) {
			unsigned idx = s->up[(c->start + c->pos) % s->n_up];

			c->pos++;
			m = take(c, idx, probe);
		}
		break;
	}
	return m;
}
