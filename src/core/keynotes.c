// SPDX-License-Identifier: MIT
/*
 * keynotes.c - the backends' hashed memory of keys (keynotes.h): one
 * array of slots (a header, then the note's bytes), one mutex for it.
 */
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "core/keynotes.h"
#include "smux/ctx.h"
#include "smux/mux.h"

struct slot_hdr {
	uint64_t hash; /* 0: empty slot */
	int64_t at_ns; /* CLOCK_MONOTONIC */
};

struct smux__keynotes {
	pthread_mutex_t mu;
	size_t slots, size, stride;
	int64_t ttl_ns;
	unsigned char *v; /* slots * stride bytes, under mu */
};

struct smux__keynotes *smux__keynotes_new(size_t slots, size_t size,
					  int64_t ttl_ns)
{
	struct smux__keynotes *kn = calloc(1, sizeof(*kn));

	if (!kn || !slots)
		goto out_free;
	kn->slots = slots;
	kn->size = size;
	/* the next header stays aligned */
	kn->stride = sizeof(struct slot_hdr) + ((size + 7) & ~(size_t)7);
	kn->ttl_ns = ttl_ns;
	kn->v = calloc(slots, kn->stride);
	if (!kn->v)
		goto out_free;
	pthread_mutex_init(&kn->mu, NULL);
	return kn;
out_free:
	free(kn);
	return NULL;
}

void smux__keynotes_free(struct smux__keynotes *kn)
{
	if (!kn)
		return;
	pthread_mutex_destroy(&kn->mu);
	free(kn->v);
	free(kn);
}

/* @key's slot, and its hash in *@h (never 0). */
static struct slot_hdr *slot_of(struct smux__keynotes *kn, const char *key,
				uint64_t *h)
{
	uint64_t x = smux_fnv1a(key, strlen(key));

	*h = x ? x : 1;
	return (struct slot_hdr *)(kn->v + (*h % kn->slots) * kn->stride);
}

void smux__keynotes_put(struct smux__keynotes *kn, const char *key,
			const void *note, const void *only)
{
	struct slot_hdr *s;
	uint64_t h;

	if (!kn)
		return;
	s = slot_of(kn, key, &h);
	pthread_mutex_lock(&kn->mu);
	if (note) {
		s->hash = h;
		s->at_ns = smux_now_ns();
		memcpy(s + 1, note, kn->size);
	} else if (s->hash == h &&
		   (!only || memcmp(s + 1, only, kn->size) == 0)) {
		s->hash = 0;
	}
	pthread_mutex_unlock(&kn->mu);
}

bool smux__keynotes_get(struct smux__keynotes *kn, const char *key, void *out)
{
	struct slot_hdr *s;
	uint64_t h;
	bool seen;

	if (!kn)
		return false;
	s = slot_of(kn, key, &h);
	pthread_mutex_lock(&kn->mu);
	seen = s->hash == h && smux_now_ns() - s->at_ns < kn->ttl_ns;
	if (seen)
		memcpy(out, s + 1, kn->size);
	pthread_mutex_unlock(&kn->mu);
	return seen;
}
