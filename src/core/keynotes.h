/* SPDX-License-Identifier: MIT */
/*
 * keynotes.h (internal) - a backend's small memory of what it last saw of
 * keys: a fixed table of slots indexed by the key's FNV-1a hash, each
 * holding a note (a few bytes of the user's) and when it was made, good
 * for a time given at creation. A colliding key takes the slot (a lost
 * note), so a note is a hint the backend checks or can do without, never
 * a fact it depends on.
 *
 * Owner: keynotes.c. Users: the swift backend (swift_absent.c: keys seen
 * absent or plain), the bunny backend (bunny_seen.c: files its listings
 * showed). Every function may run on any thread at once (one mutex
 * inside, never held across anything but a copy of a note); none fails.
 */
#ifndef SMUX_CORE_KEYNOTES_H
#define SMUX_CORE_KEYNOTES_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct smux__keynotes;

/* A table of @slots notes of @size bytes, each good for @ttl_ns
 * (CLOCK_MONOTONIC); NULL without memory. Free with smux__keynotes_free. */
struct smux__keynotes *smux__keynotes_new(size_t slots, size_t size,
					  int64_t ttl_ns);

/* Frees @kn; NULL is a no-op. No other call may be running on it. */
void smux__keynotes_free(struct smux__keynotes *kn);

/*
 * With @note: notes its @size bytes for @key (now). With @note NULL:
 * drops @key's note when @only is NULL or the note's bytes equal @only's.
 * @kn NULL: nothing.
 */
void smux__keynotes_put(struct smux__keynotes *kn, const char *key,
			const void *note, const void *only);

/* Whether @key has a note made within the time: its bytes into @out.
 * @kn NULL: false. */
bool smux__keynotes_get(struct smux__keynotes *kn, const char *key, void *out);

#endif /* SMUX_CORE_KEYNOTES_H */
