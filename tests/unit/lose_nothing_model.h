/* SPDX-License-Identifier: MIT */
/*
 * lose_nothing_model.h - the model of test_lose_nothing.c: per key, the
 * set of contents the key may hold after the operations done on it so
 * far. An acknowledged operation (rc 0) leaves one content; one whose
 * outcome is unknown (it failed, but may have reached a replica) leaves
 * the old ones and the new one. A key with more than LN_POSS_MAX
 * possibilities is "wild" (anything goes) until the next acknowledged put
 * or delete. Absent is a content (s == NULL). Header-only (static
 * inline), like mux_helpers.h; include <cmocka.h> first.
 *
 * Not thread-safe: the caller serializes the operations on one key.
 */
#ifndef SMUX_TESTS_LOSE_NOTHING_MODEL_H
#define SMUX_TESTS_LOSE_NOTHING_MODEL_H

#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define LN_POSS_MAX 32

/* One content a key may hold; s == NULL: the key is absent. */
struct ln_val {
	char *s;
	size_t len;
};

/* The model of one key. */
struct ln_key {
	pthread_mutex_t lock; /* serializes operations on the key */
	char name[16];
	/* protected by lock: the contents the key may hold; wild when too
	 * many unknown outcomes piled up (anything is accepted until the
	 * next acknowledged put or delete) */
	unsigned n;
	bool wild;
	struct ln_val v[LN_POSS_MAX];
};

/* A short printable form of a content for reports. */
static inline const char *ln_show(const char *s, size_t len, char *buf,
				  size_t size)
{
	if (!s) {
		snprintf(buf, size, "(absent)");
		return buf;
	}
	snprintf(buf, size, "\"%.40s%s\" (%zu bytes)", s, len > 40 ? "..." : "",
		 len);
	return buf;
}

static inline bool ln_same(const char *a, size_t alen, const char *b,
			   size_t blen)
{
	if (!a || !b)
		return !a && !b;
	return alen == blen && memcmp(a, b, alen) == 0;
}

static inline void ln_key_clear(struct ln_key *k)
{
	for (unsigned i = 0; i < k->n; i++)
		free(k->v[i].s);
	k->n = 0;
	k->wild = false;
}

/* Adds a content (copied; @s NULL: absent) unless already there. */
static inline void ln_key_add(struct ln_key *k, const char *s, size_t len)
{
	if (k->wild)
		return;
	for (unsigned i = 0; i < k->n; i++)
		if (ln_same(k->v[i].s, k->v[i].len, s, len))
			return;
	if (k->n == LN_POSS_MAX) {
		ln_key_clear(k);
		k->wild = true;
		return;
	}
	k->v[k->n].s = NULL;
	if (s) {
		k->v[k->n].s = malloc(len + 1);
		assert_non_null(k->v[k->n].s);
		memcpy(k->v[k->n].s, s, len);
		k->v[k->n].s[len] = '\0';
	}
	k->v[k->n].len = len;
	k->n++;
}

static inline void ln_key_set(struct ln_key *k, const char *s, size_t len)
{
	ln_key_clear(k);
	ln_key_add(k, s, len);
}

static inline bool ln_key_has(const struct ln_key *k, const char *s, size_t len)
{
	if (k->wild)
		return true;
	for (unsigned i = 0; i < k->n; i++)
		if (ln_same(k->v[i].s, k->v[i].len, s, len))
			return true;
	return false;
}

/* Whether the key may be absent / present. */
static inline bool ln_key_may_absent(const struct ln_key *k)
{
	return ln_key_has(k, NULL, 0);
}

static inline bool ln_key_may_present(const struct ln_key *k)
{
	if (k->wild)
		return true;
	for (unsigned i = 0; i < k->n; i++)
		if (k->v[i].s)
			return true;
	return false;
}

/* A content a writer makes of @old (NULL: absent, a writer starts empty):
 * @data appended, or written at offset 0. Heap, NUL-terminated. */
static inline char *ln_apply(const char *old, size_t oldlen, const char *data,
			     size_t dlen, bool append, size_t *outlen)
{
	size_t n;
	char *s;

	if (!old)
		oldlen = 0;
	n = append ? oldlen + dlen : (oldlen > dlen ? oldlen : dlen);
	s = malloc(n + 1);
	assert_non_null(s);
	if (oldlen)
		memcpy(s, old, oldlen);
	memcpy(s + (append ? oldlen : 0), data, dlen);
	s[n] = '\0';
	*outlen = n;
	return s;
}

/*
 * The key after a writer that appended or wrote @data at 0: each content
 * it may have held becomes the written one (acknowledged), or either
 * (unknown).
 */
static inline void ln_key_write(struct ln_key *k, const char *data, size_t dlen,
				bool append, bool acked)
{
	struct ln_val out[LN_POSS_MAX];
	unsigned n = 0;

	if (k->wild)
		return; /* a wild key stays wild until a put or delete */
	for (unsigned i = 0; i < k->n; i++)
		out[n++].s = ln_apply(k->v[i].s, k->v[i].len, data, dlen,
				      append, &out[i].len);
	if (acked)
		ln_key_clear(k);
	for (unsigned i = 0; i < n; i++) {
		ln_key_add(k, out[i].s, out[i].len);
		free(out[i].s);
	}
}

/* The model's contents of @k as text for a report. */
static inline void ln_expect(const struct ln_key *k, char *buf, size_t size)
{
	char one[96];
	size_t off = 0;

	if (k->wild) {
		snprintf(buf, size, "(anything)");
		return;
	}
	buf[0] = '\0';
	for (unsigned i = 0; i < k->n && off < size; i++) {
		int w = snprintf(
			buf + off, size - off, "%s%s", i ? " | " : "",
			ln_show(k->v[i].s, k->v[i].len, one, sizeof(one)));

		if (w < 0)
			break;
		off += (size_t)w;
	}
}

#endif /* SMUX_TESTS_LOSE_NOTHING_MODEL_H */
