// SPDX-License-Identifier: MIT
/*
 * conformance_keys.c - key validation through the dispatch wrappers: every
 * operation refuses every kind of invalid key with the right code and
 * errno and without side effects, and the longest and oddest legal keys
 * work end to end.
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

#include "conformance/conformance.h"

/*
 * Writes a key of exactly @len bytes into @buf: segments of @seg 'k's
 * separated by '/', starting with @lead (may be ""). @buf holds @len + 1.
 */
static void conf_make_key(char *buf, size_t len, size_t seg, const char *lead)
{
	size_t n = strlen(lead);

	memcpy(buf, lead, n);
	for (size_t i = n; i < len; i++)
		buf[i] = (i - n + 1) % (seg + 1) == 0 ? '/' : 'k';
	if (len && buf[len - 1] == '/')
		buf[len - 1] = 'k';
	buf[len] = '\0';
}

struct conf_bad_key {
	const char *label;
	const char *key;
	enum smux_code code;
	bool bad_prefix; /* also refused as a list prefix */
};

/* Every operation on @k fails with its code; nothing reaches the store. */
static void conf_refuse_everywhere(struct conf_env *env,
				   const struct conf_bad_key *k)
{
	const int e = k->code == SMUX_E_KEY_TOO_LONG ? ENAMETOOLONG : EINVAL;
	struct conf_list l = {0};
	struct smux_writer *w = NULL;
	struct smux_source src;
	struct smux_sink sink;
	struct smux_error err;
	struct smux_info info;

	print_message("  invalid key: %s\n", k->label);
	smux_sink_dyn(&sink);
	CONF_ERR(smux_backend_get(env->b, &env->ctx, k->key, NULL, &sink, NULL,
				  &err),
		 &err, k->code, e);
	assert_int_equal(sink.written, 0);
	smux_sink_release(&sink);
	smux_source_buf(&src, "data", 4);
	CONF_ERR(smux_backend_put(env->b, &env->ctx, k->key, &src, NULL, NULL,
				  &err),
		 &err, k->code, e);
	CONF_ERR(smux_backend_del(env->b, &env->ctx, k->key, &err), &err,
		 k->code, e);
	CONF_ERR(smux_backend_head(env->b, &env->ctx, k->key, &info, &err),
		 &err, k->code, e);
	CONF_ERR(smux_backend_copy(env->b, &env->ctx, k->key, "ok-dst", &err),
		 &err, k->code, e);
	CONF_ERR(smux_backend_copy(env->b, &env->ctx, "ok-src", k->key, &err),
		 &err, k->code, e);
	CONF_ERR(smux_backend_writer_open(env->b, &env->ctx, k->key, 0, &w,
					  &err),
		 &err, k->code, e);
	assert_null(w);
	if (k->bad_prefix) {
		CONF_ERR(conf_list_collect(env, k->key, "/", &l, &err), &err,
			 k->code, e);
		CONF_ERR(conf_list_collect(env, k->key, NULL, &l, &err), &err,
			 k->code, e);
		assert_int_equal(l.n, 0);
	}
}

void conf_test_invalid_keys(void **state)
{
	static const char *const only_src[] = {"ok-src"};
	struct conf_env *env = *state;
	char seg256[2 + 256 + 1], toolong[SMUX_KEY_MAX + 1 + 1];
	struct conf_bad_key keys[] = {
		{"empty", "", SMUX_E_INVALID_KEY, false},
		{"leading slash", "/a", SMUX_E_INVALID_KEY, true},
		{"empty segment", "a//b", SMUX_E_INVALID_KEY, true},
		{"dot-dot segment", "a/../b", SMUX_E_INVALID_KEY, true},
		{"leading dot-dot", "../a", SMUX_E_INVALID_KEY, true},
		{"dot segment", "a/./b", SMUX_E_INVALID_KEY, true},
		/* As a list prefix, a last segment only filters names. */
		{"dot-dot", "..", SMUX_E_INVALID_KEY, false},
		{"dot", ".", SMUX_E_INVALID_KEY, false},
		{"256-byte segment", seg256, SMUX_E_KEY_TOO_LONG, true},
		{"key over SMUX_KEY_MAX", toolong, SMUX_E_KEY_TOO_LONG, true},
	};

	conf_make_key(seg256, sizeof(seg256) - 1, 256, "x/");
	conf_make_key(toolong, sizeof(toolong) - 1, 200, "");
	assert_int_equal(strlen(seg256), 258);
	assert_int_equal(strlen(toolong), SMUX_KEY_MAX + 1);
	CONF_PUT(env, "ok-src", "src", 3, NULL);
	for (size_t i = 0; i < sizeof(keys) / sizeof(keys[0]); i++)
		conf_refuse_everywhere(env, &keys[i]);
	/* Nothing was created or removed by any refused call. */
	CONF_EXPECT_LIST(env, "", NULL, only_src, 1);
	CONF_EXPECT(env, "ok-src", "src", 3);
}

void conf_test_key_nul(void **state)
{
	static const struct {
		const char *key;
		size_t len;
		unsigned flags;
	} cases[] = {
		{"a\0b", 3, SMUX_KEY_OBJECT},
		{"ab\0", 3, SMUX_KEY_OBJECT},
		{"\0", 1, SMUX_KEY_ALLOW_DIR},
		{"dir\0/", 5, SMUX_KEY_ALLOW_DIR},
		{"pre\0fix", 7, SMUX_KEY_PREFIX},
	};
	struct conf_env *env = *state;
	struct smux_error err;

	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++)
		CONF_ERR(smux_key_check_n(cases[i].key, cases[i].len,
					  cases[i].flags, env->b->name, &err),
			 &err, SMUX_E_INVALID_KEY, EINVAL);
	/* The same bytes without the NUL are fine: the NUL is the fault. */
	CONF_OK(smux_key_check_n("ab", 2, SMUX_KEY_OBJECT, env->b->name, &err),
		&err);
}

void conf_test_longest_keys(void **state)
{
	struct conf_env *env = *state;
	/* the longest key this backend takes (smux_backend_key_max) */
	char seg255[2 + 255 + 1], longest[SMUX_KEY_MAX + 1];
	const char *keys[] = {
		seg255,	    longest,  "...",	  ".hidden",
		"a/..b/c",  "a/.b",   "sp ace",	  "ctrl\x01char",
		"quote\"'", "pct%41", "\xc3\xbc",
	};
	const size_t n = sizeof(keys) / sizeof(keys[0]);
	unsigned char data[sizeof(keys) / sizeof(keys[0])];
	struct conf_list l = {0};
	struct smux_error err;
	struct smux_info info;

	conf_fill(data, sizeof(data), 9);
	const bool short_seg = env->fx->flags & CONF_F_PLAIN_KEYS;

	if (short_seg)
		keys[7] = "ctrl-char"; /* not "ctrl\x01char" */

	conf_make_key(seg255, short_seg ? 2 + 200 : sizeof(seg255) - 1,
		      short_seg ? 200 : 255, "x/");
	conf_make_key(longest, smux_backend_key_max(env->b),
		      short_seg ? 200 : 250, "");
	assert_int_equal(strlen(longest), smux_backend_key_max(env->b));
	for (size_t i = 0; i < n; i++) {
		CONF_PUT(env, keys[i], data, i + 1, NULL);
		CONF_OK(smux_backend_head(env->b, &env->ctx, keys[i], &info,
					  &err),
			&err);
		assert_int_equal(info.size, i + 1);
		CONF_EXPECT(env, keys[i], data, i + 1);
	}
	/* Every one lists back under its own name. */
	CONF_OK(conf_list_collect(env, "", NULL, &l, &err), &err);
	if (!(env->fx->flags & CONF_F_NO_DOTFILES))
		assert_int_equal(l.n, n);
	for (size_t i = 0; i < n; i++) {
		size_t j = 0;

		if ((env->fx->flags & CONF_F_NO_DOTFILES) &&
		    (keys[i][0] == '.' || strstr(keys[i], "/."))) {
			print_message("  %s lists no dot files: %s not "
				      "looked for\n",
				      env->fx->name, keys[i]);
			continue;
		}
		while (j < l.n && strcmp(l.keys[j], keys[i]) != 0)
			j++;
		if (j == l.n)
			print_error("key %.40s... not listed\n", keys[i]);
		assert_true(j < l.n);
		assert_int_equal(l.info[j].size, i + 1);
	}
	conf_list_free(&l);
}
