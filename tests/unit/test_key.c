/* SPDX-License-Identifier: MIT */
/*
 * test_key.c - the key rules of smux/key.h: a table of keys per flag set,
 * embedded NUL bytes, the segment and key length limits at their edges,
 * the errno and code of each refusal, smux_key_is_dir.
 */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "smux/key.h"

#define ARRAY_SIZE(a) (sizeof(a) / sizeof((a)[0]))

#define K_OBJ	 SMUX_KEY_OBJECT
#define K_DIR	 SMUX_KEY_ALLOW_DIR
#define K_EMPTY	 SMUX_KEY_ALLOW_EMPTY
#define K_PREFIX SMUX_KEY_PREFIX

struct key_case {
	const char *key;
	unsigned flags;
	int rc; /* 0, -EINVAL or -ENAMETOOLONG */
};

static const struct key_case key_cases[] = {
	/* plain object keys */
	{"a", K_OBJ, 0},
	{"a/b", K_OBJ, 0},
	{"photos/2026/a.jpg", K_OBJ, 0},
	{".hidden", K_OBJ, 0},
	{"a/.b", K_OBJ, 0},
	{"...", K_OBJ, 0},
	{"..a", K_OBJ, 0},
	{"a..", K_OBJ, 0},
	{"a/b.", K_OBJ, 0},
	{"a b/c d", K_OBJ, 0},
	{"\xc3\xbc/\xc3\x9f", K_OBJ, 0},
	{"a\\b", K_OBJ, 0},
	{"-", K_OBJ, 0},
	{"", K_OBJ, -EINVAL},
	{"/", K_OBJ, -EINVAL},
	{"/a", K_OBJ, -EINVAL},
	{"a/", K_OBJ, -EINVAL},
	{"a/b/", K_OBJ, -EINVAL},
	{"a//b", K_OBJ, -EINVAL},
	{"//", K_OBJ, -EINVAL},
	{".", K_OBJ, -EINVAL},
	{"..", K_OBJ, -EINVAL},
	{"./a", K_OBJ, -EINVAL},
	{"../a", K_OBJ, -EINVAL},
	{"a/./b", K_OBJ, -EINVAL},
	{"a/../b", K_OBJ, -EINVAL},
	{"a/.", K_OBJ, -EINVAL},
	{"a/..", K_OBJ, -EINVAL},

	/* directory markers allowed */
	{"a", K_DIR, 0},
	{"a/b", K_DIR, 0},
	{"a/", K_DIR, 0},
	{"a/b/", K_DIR, 0},
	{".a/", K_DIR, 0},
	{"", K_DIR, -EINVAL},
	{"/", K_DIR, -EINVAL},
	{"/a/", K_DIR, -EINVAL},
	{"a//", K_DIR, -EINVAL},
	{"a//b/", K_DIR, -EINVAL},
	{"//", K_DIR, -EINVAL},
	{"./", K_DIR, -EINVAL},
	{"../", K_DIR, -EINVAL},
	{"a/../", K_DIR, -EINVAL},
	{"a/./b/", K_DIR, -EINVAL},

	/* the empty key allowed, markers not */
	{"", K_EMPTY, 0},
	{"a", K_EMPTY, 0},
	{"a/b", K_EMPTY, 0},
	{"a/", K_EMPTY, -EINVAL},
	{"/", K_EMPTY, -EINVAL},
	{"a//b", K_EMPTY, -EINVAL},

	/* list prefixes: "" (the root), "dir/", or a partial last segment,
	 * which is only a filter ("a/." finds "a/.hidden") */
	{"", K_PREFIX, 0},
	{"a", K_PREFIX, 0},
	{"a/", K_PREFIX, 0},
	{"a/b", K_PREFIX, 0},
	{"a/b/", K_PREFIX, 0},
	{"a/b/c", K_PREFIX, 0},
	{"a/.", K_PREFIX, 0},
	{"a/..", K_PREFIX, 0},
	{".", K_PREFIX, 0},
	{"..", K_PREFIX, 0},
	{"a/.h", K_PREFIX, 0},
	{"/", K_PREFIX, -EINVAL},
	{"/a", K_PREFIX, -EINVAL},
	{"a//", K_PREFIX, -EINVAL},
	{"a//b", K_PREFIX, -EINVAL},
	{"//", K_PREFIX, -EINVAL},
	{"./", K_PREFIX, -EINVAL},
	{"../", K_PREFIX, -EINVAL},
	{"../a", K_PREFIX, -EINVAL},
	{"a/../b", K_PREFIX, -EINVAL},
	{"a/./", K_PREFIX, -EINVAL},
	{"a/../", K_PREFIX, -EINVAL},
};

/* Checks one key both with and without an error, and what the error says. */
static void check_key(const char *key, size_t len, unsigned flags, int want)
{
	struct smux_error err;
	int rc;

	memset(&err, 0x5a, sizeof(err));
	rc = smux_key_check_n(key, len, flags, "kb", &err);
	if (rc != want)
		fail_msg("key \"%.*s\" (%zu bytes) flags %u: rc %d, want %d",
			 (int)(len > 80 ? 80 : len), key ? key : "(null)", len,
			 flags, rc, want);
	assert_int_equal(smux_key_check_n(key, len, flags, "kb", NULL), want);
	if (want == 0)
		return;
	assert_int_equal(err.e.code, want == -ENAMETOOLONG
					     ? SMUX_E_KEY_TOO_LONG
					     : SMUX_E_INVALID_KEY);
	assert_int_equal(err.e.sys_errno, -want);
	assert_string_equal(err.e.backend, "kb");
	assert_true(err.e.message[0] != '\0');
	assert_false(err.has_cause);
}

static void test_key_table(void **state)
{
	(void)state;
	for (size_t i = 0; i < ARRAY_SIZE(key_cases); i++) {
		const struct key_case *c = &key_cases[i];

		check_key(c->key, strlen(c->key), c->flags, c->rc);
		assert_int_equal(smux_key_check(c->key, c->flags, "kb", NULL),
				 c->rc);
	}
}

static void test_null_key(void **state)
{
	static const unsigned flags[] = {K_OBJ, K_DIR, K_EMPTY, K_PREFIX};

	(void)state;
	for (size_t i = 0; i < ARRAY_SIZE(flags); i++) {
		check_key(NULL, 0, flags[i], -EINVAL);
		assert_int_equal(smux_key_check(NULL, flags[i], NULL, NULL),
				 -EINVAL);
	}
}

static void test_embedded_nul(void **state)
{
	static const unsigned flags[] = {K_OBJ, K_DIR, K_EMPTY, K_PREFIX};

	(void)state;
	for (size_t i = 0; i < ARRAY_SIZE(flags); i++) {
		check_key("a\0b", 3, flags[i], -EINVAL);
		check_key("a/b\0", 4, flags[i], -EINVAL);
		check_key("\0", 1, flags[i], -EINVAL);
		check_key("a\0/", 3, flags[i], -EINVAL);
		/* only @len bytes count: a NUL after them is not seen */
		check_key("ab\0", 2, flags[i], 0);
	}
	/* and the length, not the NUL, bounds the check */
	check_key("a/b", 2, K_OBJ, -EINVAL); /* "a/" */
	check_key("a/b", 2, K_DIR, 0);
	check_key("a/b", 0, K_OBJ, -EINVAL);
	check_key("a/b", 0, K_PREFIX, 0);
}

/* A key of @len bytes of 'k' with a '/' every @seg + 1 bytes, ending in
 * '/' when @dir. Freed by the caller. */
static char *make_key(size_t len, size_t seg, bool dir)
{
	char *k = malloc(len + 1);

	assert_non_null(k);
	for (size_t i = 0; i < len; i++)
		k[i] = (i + 1) % (seg + 1) == 0 ? '/' : 'k';
	if (dir)
		k[len - 1] = '/';
	else
		assert_true(k[len - 1] != '/');
	k[len] = '\0';
	return k;
}

static void check_made(size_t len, size_t seg, bool dir, unsigned flags,
		       int want)
{
	char *k = make_key(len, seg, dir);

	assert_int_equal(strlen(k), len);
	check_key(k, len, flags, want);
	free(k);
}

static void test_segment_limit(void **state)
{
	char seg[SMUX_KEY_SEGMENT_MAX + 2];
	char key[2 * SMUX_KEY_SEGMENT_MAX + 8];

	(void)state;
	assert_int_equal(SMUX_KEY_SEGMENT_MAX, 255);

	/* 255 bytes: accepted everywhere a segment can stand */
	memset(seg, 's', 255);
	seg[255] = '\0';
	check_key(seg, 255, K_OBJ, 0);
	check_key(seg, 255, K_PREFIX, 0);
	snprintf(key, sizeof(key), "a/%s", seg);
	check_key(key, strlen(key), K_OBJ, 0);
	check_key(key, strlen(key), K_PREFIX, 0);
	snprintf(key, sizeof(key), "%s/b", seg);
	check_key(key, strlen(key), K_OBJ, 0);
	snprintf(key, sizeof(key), "%s/", seg);
	check_key(key, strlen(key), K_DIR, 0);
	check_key(key, strlen(key), K_PREFIX, 0);

	/* 256 bytes: too long, first, middle, last, marker, partial */
	memset(seg, 's', 256);
	seg[256] = '\0';
	check_key(seg, 256, K_OBJ, -ENAMETOOLONG);
	check_key(seg, 256, K_DIR, -ENAMETOOLONG);
	check_key(seg, 256, K_PREFIX, -ENAMETOOLONG);
	snprintf(key, sizeof(key), "a/%s", seg);
	check_key(key, strlen(key), K_OBJ, -ENAMETOOLONG);
	check_key(key, strlen(key), K_PREFIX, -ENAMETOOLONG);
	snprintf(key, sizeof(key), "a/%s/b", seg);
	check_key(key, strlen(key), K_OBJ, -ENAMETOOLONG);
	check_key(key, strlen(key), K_PREFIX, -ENAMETOOLONG);
	snprintf(key, sizeof(key), "%s/", seg);
	check_key(key, strlen(key), K_DIR, -ENAMETOOLONG);
	check_key(key, strlen(key), K_PREFIX, -ENAMETOOLONG);
}

static void test_key_limit(void **state)
{
	(void)state;
	/* PATH_MAX - 1: what a file backend takes */
	assert_int_equal(SMUX_KEY_MAX, 4095);

	/* exactly 4095 bytes: accepted */
	check_made(4095, 100, false, K_OBJ, 0);
	check_made(4095, 100, false, K_PREFIX, 0);
	check_made(4095, 100, true, K_DIR, 0);
	check_made(4095, 100, true, K_PREFIX, 0);
	check_made(4095, 254, false, K_OBJ, 0);
	check_made(4095, 255, true, K_DIR, 0);
	check_made(4095, 255, true, K_PREFIX, 0);
	/* 4096 bytes: too long, though every segment is fine */
	check_made(4096, 100, false, K_OBJ, -ENAMETOOLONG);
	check_made(4096, 100, false, K_DIR, -ENAMETOOLONG);
	check_made(4096, 100, false, K_PREFIX, -ENAMETOOLONG);
	check_made(4096, 100, true, K_DIR, -ENAMETOOLONG);
	check_made(4096, 100, true, K_PREFIX, -ENAMETOOLONG);
	check_made(8192, 100, false, K_OBJ, -ENAMETOOLONG);
}

static void test_is_dir(void **state)
{
	(void)state;
	assert_true(smux_key_is_dir("a/"));
	assert_true(smux_key_is_dir("a/b/"));
	assert_true(smux_key_is_dir("/"));
	assert_false(smux_key_is_dir("a"));
	assert_false(smux_key_is_dir("a/b"));
	assert_false(smux_key_is_dir("/a"));
	assert_false(smux_key_is_dir(""));
	assert_false(smux_key_is_dir(NULL));
}

int main(void)
{
	const struct CMUnitTest rules[] = {
		cmocka_unit_test(test_key_table),
		cmocka_unit_test(test_null_key),
		cmocka_unit_test(test_embedded_nul),
		cmocka_unit_test(test_is_dir),
	};
	const struct CMUnitTest limits[] = {
		cmocka_unit_test(test_segment_limit),
		cmocka_unit_test(test_key_limit),
	};
	int failed = 0;

	failed += cmocka_run_group_tests_name("key_rules", rules, NULL, NULL);
	failed += cmocka_run_group_tests_name("key_limits", limits, NULL, NULL);
	return failed ? 1 : 0;
}
