// SPDX-License-Identifier: MIT
/*
 * conformance.c - the per-test environment and the assertion helpers the
 * conformance tests share. The tests themselves live in conformance_*.c.
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

int conf_env_setup(void **state)
{
	const struct conf_fixture *fx = *state;
	struct conf_env *env = calloc(1, sizeof(*env));
	int rc;

	if (!env)
		return -1;
	env->fx = fx;
	smux_ctx_init(&env->ctx);
	rc = fx->setup(&env->priv, &env->b);
	if (rc != 0) {
		print_error("fixture %s: setup failed: %d\n", fx->name, rc);
		free(env);
		return -1;
	}
	*state = env;
	return 0;
}

int conf_env_teardown(void **state)
{
	struct conf_env *env = *state;

	smux_backend_unref(env->b);
	env->fx->teardown(env->priv);
	free(env);
	return 0;
}

static void conf_print_err(const struct smux_error *err)
{
	char buf[2 * SMUX_ERROR_MSG_MAX + 256];

	print_error("  error: %s\n", smux_error_format(err, buf, sizeof(buf)));
}

void conf_ok_at(long rc, const struct smux_error *err, const char *file,
		int line)
{
	if (rc == 0)
		return;
	print_error("expected success, got %ld\n", rc);
	if (err)
		conf_print_err(err);
	_fail(file, line);
}

void conf_err_at(long rc, const struct smux_error *err, enum smux_code code,
		 int sys_errno, const char *file, int line)
{
	if (rc == -sys_errno && err->e.code == code &&
	    err->e.sys_errno == sys_errno)
		return;
	print_error("expected %s (errno %d), got rc %ld\n",
		    smux_code_name(code), sys_errno, rc);
	conf_print_err(err);
	_fail(file, line);
}

void conf_put_at(struct conf_env *env, const char *key, const void *buf,
		 size_t len, struct smux_info *info, const char *file, int line)
{
	struct smux_source src;
	struct smux_error err;
	int rc;

	smux_source_buf(&src, buf, len);
	rc = smux_backend_put(env->b, &env->ctx, key, &src, NULL, info, &err);
	if (rc != 0)
		print_error("put %s failed\n", key);
	conf_ok_at(rc, &err, file, line);
}

void conf_expect_at(struct conf_env *env, const char *key, const void *buf,
		    size_t len, const char *file, int line)
{
	struct smux_error err;
	unsigned char *got = NULL;
	size_t got_len = 0;
	int rc;

	rc = smux_backend_get_all(env->b, &env->ctx, key, &got, &got_len, &err);
	if (rc != 0)
		print_error("get %s failed\n", key);
	conf_ok_at(rc, &err, file, line);
	if (got_len != len || (len && memcmp(got, buf, len) != 0)) {
		size_t i = 0;

		while (i < len && i < got_len &&
		       got[i] == ((const unsigned char *)buf)[i])
			i++;
		print_error("%s: got %zu bytes, expected %zu; first "
			    "difference at byte %zu\n",
			    key, got_len, len, i);
		free(got);
		_fail(file, line);
		return;
	}
	free(got);
}

void conf_absent_at(struct conf_env *env, const char *key, const char *file,
		    int line)
{
	struct smux_error err;
	struct smux_info info;
	int rc = smux_backend_head(env->b, &env->ctx, key, &info, &err);

	if (rc == 0)
		print_error("%s exists, expected it absent\n", key);
	conf_err_at(rc, &err, SMUX_E_KEY_NOT_FOUND, ENOENT, file, line);
}

void conf_fill(unsigned char *dst, size_t len, unsigned seed)
{
	uint32_t x = seed * 2654435761u + 1;

	/* Every byte value occurs, NUL included; an LCG keeps it cheap. */
	for (size_t i = 0; i < len; i++) {
		x = x * 1664525u + 1013904223u;
		dst[i] = (unsigned char)(i % 7 == 0 ? 0 : x >> 24);
	}
}

static int conf_list_cb(void *arg, const struct smux_list_entry *e)
{
	struct conf_list *l = arg;

	if (l->n == l->cap) {
		size_t cap = l->cap ? l->cap * 2 : 16;
		char **keys = realloc(l->keys, cap * sizeof(*keys));
		bool *pfx;
		struct smux_info *info;

		if (!keys)
			return -1;
		l->keys = keys;
		pfx = realloc(l->is_prefix, cap * sizeof(*pfx));
		if (!pfx)
			return -1;
		l->is_prefix = pfx;
		info = realloc(l->info, cap * sizeof(*info));
		if (!info)
			return -1;
		l->info = info;
		l->cap = cap;
	}
	l->keys[l->n] = strdup(e->key);
	if (!l->keys[l->n])
		return -1;
	l->is_prefix[l->n] = e->is_prefix;
	l->info[l->n] = e->info;
	l->n++;
	return l->stop_after && l->n >= l->stop_after;
}

int conf_list_collect(struct conf_env *env, const char *prefix,
		      const char *delim, struct conf_list *out,
		      struct smux_error *err)
{
	return smux_backend_list(env->b, &env->ctx, prefix, delim, conf_list_cb,
				 out, err);
}

void conf_list_free(struct conf_list *l)
{
	for (size_t i = 0; i < l->n; i++)
		free(l->keys[i]);
	free(l->keys);
	free(l->is_prefix);
	free(l->info);
	memset(l, 0, sizeof(*l));
}

static bool conf_list_matches(const struct conf_list *l, const char *delim,
			      const char *const *expected, size_t n)
{
	if (l->n != n)
		return false;
	for (size_t i = 0; i < n; i++) {
		size_t len = strlen(expected[i]);
		bool pfx = delim && len && expected[i][len - 1] == '/';

		if (strcmp(l->keys[i], expected[i]) != 0 ||
		    l->is_prefix[i] != pfx)
			return false;
	}
	return true;
}

void conf_expect_list_at(struct conf_env *env, const char *prefix,
			 const char *delim, const char *const *expected,
			 size_t n, const char *file, int line)
{
	struct conf_list l = {0};
	struct smux_error err;
	int rc = conf_list_collect(env, prefix, delim, &l, &err);

	if (rc != 0)
		print_error("list \"%s\" failed\n", prefix);
	conf_ok_at(rc, &err, file, line);
	if (!conf_list_matches(&l, delim, expected, n)) {
		print_error("list \"%s\" delimiter %s: got %zu entries, "
			    "expected %zu\n",
			    prefix, delim ? "\"/\"" : "none", l.n, n);
		for (size_t i = 0; i < l.n; i++)
			print_error("  got      %s%s\n", l.keys[i],
				    l.is_prefix[i] ? " (prefix)" : "");
		for (size_t i = 0; i < n; i++)
			print_error("  expected %s\n", expected[i]);
		conf_list_free(&l);
		_fail(file, line);
		return;
	}
	conf_list_free(&l);
}
