// SPDX-License-Identifier: MIT
/*
 * test_config.c - the configuration file (src/fs/config*.c): every mode,
 * nesting and sharing, faulty, the value syntax tables, -o options, fstab
 * options, building a tree over temporary directories, the two renderings,
 * hostile input, and the golden files:
 *   tests/config/bad/NAME.conf   must fail with exactly NAME.expected
 *   tests/config/good/NAME.conf  must load
 *   config/NAME.conf             the shipped examples must load
 * Run from the repository root (the Makefile does): the golden messages
 * name files by their path relative to it.
 */
#include <dirent.h>
#include <errno.h>
#include <ftw.h>
#include <jansson.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cmocka.h>

#include "fs/config.h"
#include "fs/config_internal.h"
#include "smux/ctx.h"

#define ERRLEN 1024

/* ---- helpers ---- */

struct tmp {
	char dir[64];
	char path[128]; /* dir/test.conf */
};

static void tmp_init(struct tmp *t)
{
	snprintf(t->dir, sizeof(t->dir), "/tmp/smux-config-XXXXXX");
	assert_non_null(mkdtemp(t->dir));
	snprintf(t->path, sizeof(t->path), "%s/test.conf", t->dir);
}

static int rm_one(const char *p, const struct stat *st, int flag,
		  struct FTW *ftw)
{
	(void)st;
	(void)flag;
	(void)ftw;
	return remove(p);
}

static void tmp_release(struct tmp *t)
{
	nftw(t->dir, rm_one, 16, FTW_DEPTH | FTW_PHYS);
}

static void write_file(const char *path, const void *data, size_t len)
{
	FILE *f = fopen(path, "wb");

	assert_non_null(f);
	assert_int_equal(fwrite(data, 1, len, f), len);
	assert_int_equal(fclose(f), 0);
}

static char *read_text(const char *path)
{
	FILE *f = fopen(path, "rb");
	char *buf;
	long n;

	if (!f)
		return NULL;
	fseek(f, 0, SEEK_END);
	n = ftell(f);
	fseek(f, 0, SEEK_SET);
	buf = calloc(1, (size_t)n + 1);
	assert_non_null(buf);
	assert_int_equal(fread(buf, 1, (size_t)n, f), (size_t)n);
	fclose(f);
	return buf;
}

/* Loads @text (written to @t->path); 0 or the error with @err filled. */
static int load_text(struct tmp *t, const char *text, struct smux_config **c,
		     char *err)
{
	write_file(t->path, text, strlen(text));
	return smux_config_load(t->path, c, err, ERRLEN);
}

static struct smux_config *must_load(struct tmp *t, const char *text)
{
	struct smux_config *c = NULL;
	char err[ERRLEN];
	int rc = load_text(t, text, &c, err);

	if (rc)
		fail_msg("unexpected error: %s", err);
	assert_non_null(c);
	return c;
}

/* The message for @text, without the "PATH:" prefix. */
static const char *load_error(struct tmp *t, const char *text, char *err)
{
	struct smux_config *c = NULL;
	size_t n = strlen(t->path);

	assert_int_equal(load_text(t, text, &c, err), -EINVAL);
	assert_null(c);
	assert_memory_equal(err, t->path, n);
	return err + n;
}

static json_t *json_of(struct smux_config *c)
{
	char *s = smux_config_json(c);
	json_error_t je;
	json_t *j;

	assert_non_null(s);
	j = json_loads(s, 0, &je);
	if (!j)
		fail_msg("JSON does not parse: %s\n%s", je.text, s);
	free(s);
	return j;
}

static const char *jstr(json_t *j, const char *path1, const char *path2,
			const char *key)
{
	json_t *o = json_object_get(j, path1);

	if (path2)
		o = json_object_get(o, path2);
	o = json_object_get(o, key);
	assert_true(json_is_string(o));
	return json_string_value(o);
}

#define MOUNT_A "[mount]\nroot = a\n\n"
#define MEM(n)	"[backend " n "]\ntype = memory\n\n"

/* ---- modes and structure ---- */

static void test_every_mode(void **state)
{
	static const char *const modes[] = {"failover", "round-robin",
					    "weighted", "sticky-by-key",
					    "shield",	"mirror"};
	struct tmp t = {0};

	(void)state;
	tmp_init(&t);
	for (size_t i = 0; i < sizeof(modes) / sizeof(modes[0]); i++) {
		char text[512];
		struct smux_config *c;
		json_t *j;

		snprintf(text, sizeof(text),
			 "[mount]\nroot = m\n\n[mux m]\nmode = %s\n"
			 "backends = a b\n\n[backend a]\ntype = memory\n"
			 "weight = 1\n\n[backend b]\ntype = memory\n"
			 "weight = 2\n",
			 modes[i]);
		c = must_load(&t, text);
		j = json_of(c);
		assert_string_equal(jstr(j, "mux", "m", "mode"), modes[i]);
		assert_int_equal(
			json_array_size(json_object_get(
				json_object_get(json_object_get(j, "mux"), "m"),
				"backends")),
			2);
		json_decref(j);
		smux_config_free(c);
	}
	tmp_release(&t);
}

/* "backends = a, b" and "a,b" (as mergerfs's and many tools' lists are
 * written) list the same members as "a b": a name holds no comma */
static void test_members_with_commas(void **state)
{
	static const char *const lists[] = {"a, b", "a,b", " a ,b ", "a , b"};
	char err[ERRLEN];
	struct tmp t = {0};

	(void)state;
	tmp_init(&t);
	for (size_t i = 0; i < sizeof(lists) / sizeof(lists[0]); i++) {
		char text[256];
		struct smux_config *c;
		json_t *j, *b;

		snprintf(text, sizeof(text),
			 "[mount]\nroot = m\n\n[mux m]\nmode = mirror\n"
			 "backends = %s\n\n" MEM("a") MEM("b"),
			 lists[i]);
		c = must_load(&t, text);
		j = json_of(c);
		b = json_object_get(
			json_object_get(json_object_get(j, "mux"), "m"),
			"backends");
		assert_int_equal(json_array_size(b), 2);
		assert_string_equal(json_string_value(json_array_get(b, 0)),
				    "a");
		assert_string_equal(json_string_value(json_array_get(b, 1)),
				    "b");
		json_decref(j);
		smux_config_free(c);
	}
	/* an empty name between two commas is an error naming the line */
	assert_non_null(strstr(
		load_error(&t,
			   "[mount]\nroot = m\n\n[mux m]\nmode = mirror\n"
			   "backends = a,,b\n\n" MEM("a") MEM("b"),
			   err),
		":6: [mux m] backends: empty name between commas"));
	assert_non_null(strstr(
		load_error(&t,
			   "[mount]\nroot = m\n\n[mux m]\nmode = mirror\n"
			   "backends = a, b,\n\n" MEM("a") MEM("b"),
			   err),
		":6: [mux m] backends: empty name after the last comma"));
	tmp_release(&t);
}

static void test_mux_values_and_defaults(void **state)
{
	struct tmp t = {0};
	struct smux_config *c;
	json_t *j, *m;

	(void)state;
	tmp_init(&t);
	c = must_load(&t, "[mount]\nroot = m\n\n[mux m]\nmode = mirror\n"
			  "backends = a b\nbackend_timeout = 1500ms\n"
			  "cooldown = 2s\nmax_cooldown = 5m\n"
			  "healthcheck_interval = 1h\nwrite_quorum = 2\n"
			  "throw_on_fanout_partial = yes\nmax_inflight = 7\n"
			  "\n" MEM("a") MEM("b"));
	j = json_of(c);
	m = json_object_get(json_object_get(j, "mux"), "m");
	assert_string_equal(jstr(j, "mux", "m", "backend_timeout"), "1500ms");
	assert_string_equal(jstr(j, "mux", "m", "cooldown"), "2s");
	assert_string_equal(jstr(j, "mux", "m", "max_cooldown"), "5m");
	assert_string_equal(jstr(j, "mux", "m", "healthcheck_interval"), "1h");
	assert_int_equal(json_integer_value(json_object_get(m, "write_quorum")),
			 2);
	assert_int_equal(json_integer_value(json_object_get(m, "max_inflight")),
			 7);
	assert_true(
		json_is_true(json_object_get(m, "throw_on_fanout_partial")));
	json_decref(j);
	smux_config_free(c);

	/* defaults filled in */
	c = must_load(&t, "[mount]\nroot = m\n\n[mux m]\nmode = failover\n"
			  "backends = a\n\n" MEM("a"));
	j = json_of(c);
	m = json_object_get(json_object_get(j, "mux"), "m");
	assert_string_equal(jstr(j, "mux", "m", "backend_timeout"), "30s");
	assert_string_equal(jstr(j, "mux", "m", "cooldown"), "1s");
	assert_string_equal(jstr(j, "mux", "m", "max_cooldown"), "1m");
	assert_string_equal(jstr(j, "mux", "m", "healthcheck_interval"), "0s");
	assert_int_equal(json_integer_value(json_object_get(m, "write_quorum")),
			 1);
	assert_int_equal(json_integer_value(json_object_get(m, "max_inflight")),
			 SMUX_DEFAULT_MAX_INFLIGHT);
	assert_null(json_object_get(m, "weight"));
	json_decref(j);
	smux_config_free(c);

	/* [mount] backend_timeout is the default of every mux (s45-t1: a
	 * mirror under `backend_timeout = 2s` waited 30 s for a replica) */
	c = must_load(&t, "[mount]\nroot = m\nbackend_timeout = 2s\n\n"
			  "[mux m]\nmode = mirror\nbackends = a n\n\n"
			  "[mux n]\nmode = failover\nbackends = b\n"
			  "backend_timeout = 5s\n\n" MEM("a") MEM("b"));
	j = json_of(c);
	assert_string_equal(jstr(j, "mux", "m", "backend_timeout"), "2s");
	assert_string_equal(jstr(j, "mux", "n", "backend_timeout"), "5s");
	json_decref(j);
	smux_config_free(c);
	tmp_release(&t);
}

static void test_nested_and_faulty(void **state)
{
	struct tmp t = {0};
	struct smux_config *c;
	char *d;

	(void)state;
	tmp_init(&t);
	c = must_load(&t, "[mount]\nroot = top\n\n"
			  "[mux top]\nmode = round-robin\nbackends = l r\n\n"
			  "[mux l]\nmode = failover\nbackends = chaos s\n\n"
			  "[mux r]\nmode = failover\nbackends = s\n\n"
			  "[backend chaos]\ntype = faulty\nwraps = s\n"
			  "latency = 5ms\nerror_rate = 0.25\nhang = 2s\n"
			  "hang_rate = 0.125\nseed = 42\n\n" MEM("s"));
	d = smux_config_describe(c);
	assert_non_null(d);
	assert_string_equal(
		d, "top: mux round-robin\n"
		   "  l: mux failover\n"
		   "    chaos: faulty over s (latency 5ms, hang_rate 0.125, "
		   "hang 2s, error_rate 0.25, seed 42)\n"
		   "      s: memory\n"
		   "    s: (shared, shown above)\n"
		   "  r: mux failover\n"
		   "    s: (shared, shown above)\n"
		   "mount: root top, prefix \"\", cache_dir "
		   "/var/cache/smuxfs/top, state_dir /var/lib/smuxfs/top, "
		   "attr_timeout 1s, entry_timeout 1s, negative_timeout 1s, "
		   "cache_size 1G, allow_other no, default_permissions no, "
		   "ro no\n");
	free(d);
	smux_config_free(c);
	tmp_release(&t);
}

/* ---- value syntax ---- */

static void test_durations(void **state)
{
	static const struct {
		const char *in;
		int rc;
		int64_t ms;
	} cases[] = {
		{"500ms", 0, 500},
		{"30s", 0, 30000},
		{"30", 0, 30000},
		{"5m", 0, 300000},
		{"1h", 0, 3600000},
		{"1.5s", 0, 1500},
		{"0.5", 0, 500},
		{"0", 0, 0},
		{"8760h", 0, 8760LL * 3600000},
		{"8761h", -ERANGE, 0},
		{"99999999999999999999h", -ERANGE, 0},
		{"0.5ms", -EINVAL, 0},
		{"-1s", -EINVAL, 0},
		{"3x", -EINVAL, 0},
		{"", -EINVAL, 0},
		{"s", -EINVAL, 0},
		{"1e3s", -EINVAL, 0},
		{"inf", -EINVAL, 0},
		{"nan", -EINVAL, 0},
		{"0x10s", -EINVAL, 0},
		{"1 s", -EINVAL, 0},
		{".5s", -EINVAL, 0},
		{"1.s", -EINVAL, 0},
		{"1d", -EINVAL, 0},
	};
	char why[256];

	(void)state;
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		int64_t ms = -7;
		int rc = smux__cfg_parse_duration(cases[i].in, &ms, why,
						  sizeof(why));

		if (rc != cases[i].rc)
			fail_msg("duration \"%s\": rc %d, want %d (%s)",
				 cases[i].in, rc, cases[i].rc, why);
		if (rc == 0)
			assert_int_equal(ms, cases[i].ms);
	}
	smux__cfg_parse_duration("3x", &(int64_t){0}, why, sizeof(why));
	assert_string_equal(why,
			    "invalid duration \"3x\" (use 500ms, 30s, 5m, 1h)");
}

static void test_sizes_bools_numbers(void **state)
{
	static const struct {
		const char *in;
		int rc;
		uint64_t v;
	} sizes[] = {
		{"4096", 0, 4096},
		{"64K", 0, 65536},
		{"64k", 0, 65536},
		{"64M", 0, 64ULL << 20},
		{"10G", 0, 10ULL << 30},
		{"2T", 0, 2ULL << 40},
		{"0", 0, 0},
		{"18446744073709551615", 0, UINT64_MAX},
		{"18446744073709551616", -ERANGE, 0},
		{"16777216T", -ERANGE, 0},
		{"16777215T", 0, 16777215ULL << 40},
		{"10X", -EINVAL, 0},
		{"-1", -EINVAL, 0},
		{"1.5G", -EINVAL, 0},
		{"", -EINVAL, 0},
		{"G", -EINVAL, 0},
		{" 1", -EINVAL, 0},
	};
	static const struct {
		const char *in;
		int rc;
		bool v;
	} bools[] = {
		{"true", 0, true},    {"yes", 0, true},
		{"on", 0, true},      {"1", 0, true},
		{"TRUE", 0, true},    {"false", 0, false},
		{"no", 0, false},     {"off", 0, false},
		{"0", 0, false},      {"maybe", -EINVAL, false},
		{"", -EINVAL, false}, {"2", -EINVAL, false},
	};
	char why[256];
	uint64_t u;
	double d;
	mode_t m;
	uid_t uid;
	gid_t gid;

	(void)state;
	for (size_t i = 0; i < sizeof(sizes) / sizeof(sizes[0]); i++) {
		int rc =
			smux__cfg_parse_size(sizes[i].in, &u, why, sizeof(why));

		if (rc != sizes[i].rc)
			fail_msg("size \"%s\": rc %d (%s)", sizes[i].in, rc,
				 why);
		if (rc == 0)
			assert_true(u == sizes[i].v);
	}
	for (size_t i = 0; i < sizeof(bools) / sizeof(bools[0]); i++) {
		bool b = !bools[i].v;
		int rc =
			smux__cfg_parse_bool(bools[i].in, &b, why, sizeof(why));

		assert_int_equal(rc, bools[i].rc);
		if (rc == 0)
			assert_int_equal(b, bools[i].v);
	}
	assert_int_equal(smux__cfg_parse_count("1", &u, why, sizeof(why)), 0);
	assert_int_equal(smux__cfg_parse_count("0", &u, why, sizeof(why)),
			 -EINVAL);
	assert_int_equal(smux__cfg_parse_count("1000001", &u, why, sizeof(why)),
			 -ERANGE);
	assert_int_equal(smux__cfg_parse_count("+3", &u, why, sizeof(why)),
			 -EINVAL);
	assert_int_equal(smux__cfg_parse_rate("0.25", &d, why, sizeof(why)), 0);
	assert_true(d == 0.25);
	assert_int_equal(smux__cfg_parse_rate("1.01", &d, why, sizeof(why)),
			 -EINVAL);
	assert_int_equal(smux__cfg_parse_weight("1e3", &d, why, sizeof(why)),
			 -EINVAL);
	assert_int_equal(smux__cfg_parse_umask("022", &m, why, sizeof(why)), 0);
	assert_int_equal(m, 022);
	assert_int_equal(smux__cfg_parse_umask("0777", &m, why, sizeof(why)),
			 0);
	assert_int_equal(smux__cfg_parse_umask("1000", &m, why, sizeof(why)),
			 -EINVAL);
	assert_int_equal(smux__cfg_parse_umask("8", &m, why, sizeof(why)),
			 -EINVAL);
	assert_int_equal(smux__cfg_parse_uid("root", &uid, why, sizeof(why)),
			 0);
	assert_int_equal(uid, 0);
	assert_int_equal(smux__cfg_parse_uid("1000", &uid, why, sizeof(why)),
			 0);
	assert_int_equal(uid, 1000);
	assert_int_equal(smux__cfg_parse_gid("root", &gid, why, sizeof(why)),
			 0);
	assert_int_equal(gid, 0);
	assert_int_equal(smux__cfg_parse_gid("-1", &gid, why, sizeof(why)),
			 -EINVAL);
	assert_string_equal(why, "unknown group \"-1\"");
}

static void test_names_and_quoting(void **state)
{
	char q[SMUX__CFG_QUOTE_MAX], big[300];

	(void)state;
	assert_true(smux__cfg_name_ok("edge-a", 6));
	assert_true(smux__cfg_name_ok("a.b_c-9", 7));
	assert_false(smux__cfg_name_ok(".hidden", 7));
	assert_false(smux__cfg_name_ok("a/b", 3));
	assert_false(smux__cfg_name_ok("a b", 3));
	assert_false(smux__cfg_name_ok("", 0));
	memset(big, 'n', sizeof(big));
	assert_true(smux__cfg_name_ok(big, 63));
	assert_false(smux__cfg_name_ok(big, 64));

	assert_string_equal(smux__cfg_quote("a\"b\\c\n", 6, q, sizeof(q)),
			    "\"a\\\"b\\\\c\\x0a\"");
	smux__cfg_quote(big, sizeof(big), q, sizeof(q));
	assert_true(strlen(q) < sizeof(q));
	assert_string_equal(q + strlen(q) - 4, "...\"");
	/* a cut never splits a UTF-8 sequence */
	for (size_t i = 0; i + 1 < sizeof(big); i += 2) {
		big[i] = '\xc3';
		big[i + 1] = '\xa9';
	}
	smux__cfg_quote(big, sizeof(big) - 1, q, sizeof(q));
	assert_true(smux__cfg_utf8_ok(q, strlen(q)));
	assert_false(smux__cfg_utf8_ok("\xc3", 1));
	assert_false(smux__cfg_utf8_ok("\xed\xa0\x80", 3)); /* surrogate */
	assert_false(smux__cfg_utf8_ok("\xc0\xaf", 2));	    /* overlong */
	assert_true(smux__cfg_utf8_ok("\xf0\x9f\x98\x80", 4));
}

/* ---- mount options ---- */

static void test_mount_defaults(void **state)
{
	struct tmp t = {0};
	struct smux_config *c;
	struct smux_fs_opts *o;

	(void)state;
	tmp_init(&t);
	c = must_load(&t, "[mount]\nroot = media\n\n" MEM("media"));
	o = smux_config_opts(c);
	assert_string_equal(o->root, "media");
	assert_string_equal(o->cache_dir, "/var/cache/smuxfs/media");
	assert_string_equal(o->state_dir, "/var/lib/smuxfs/media");
	assert_string_equal(o->prefix, "");
	assert_true(o->attr_timeout == 1.0 && o->entry_timeout == 1.0 &&
		    o->negative_timeout == 1.0);
	assert_true(o->dir_cache_timeout == 60);
	assert_true(o->cache_size == (uint64_t)1 << 30);
	assert_true(o->read_ahead == 64ULL << 20);
	assert_false(o->allow_other || o->default_permissions || o->ro);
	assert_false(o->has_uid || o->has_gid || o->has_umask);
	smux_config_free(c);

	c = must_load(&t,
		      "[mount]\nroot = a\ncache_dir = /c\nstate_dir = /s\n"
		      "prefix = /photos/2026/\nattr_timeout = 250ms\n"
		      "entry_timeout = 0\nnegative_timeout = 1m\n"
		      "dir_cache_timeout = 0\n"
		      "cache_size = 64M\nread_ahead = 0\nallow_other = yes\n"
		      "default_permissions = on\nro = true\nuid = 1000\n"
		      "gid = root\numask = 027\n\n" MEM("a"));
	o = smux_config_opts(c);
	assert_string_equal(o->cache_dir, "/c");
	assert_string_equal(o->state_dir, "/s");
	assert_string_equal(o->prefix, "photos/2026");
	assert_true(o->attr_timeout == 0.25 && o->entry_timeout == 0 &&
		    o->negative_timeout == 60);
	assert_true(o->dir_cache_timeout == 0);
	assert_true(o->cache_size == 64ULL << 20);
	assert_true(o->read_ahead == 0);
	assert_true(o->allow_other && o->default_permissions && o->ro);
	assert_true(o->has_uid && o->uid == 1000);
	assert_true(o->has_gid && o->gid == 0);
	assert_true(o->has_umask && o->umask == 027);
	smux_config_free(c);
	tmp_release(&t);
}

static void test_mount_opt(void **state)
{
	static const struct {
		const char *opt;
		int rc;
		const char *msg;
	} cases[] = {
		{"cache_dir=/var/tmp/c", 1, NULL},
		{"state_dir=/var/tmp/s", 1, NULL},
		{"attr_timeout=2s", 1, NULL},
		{"entry_timeout=500ms", 1, NULL},
		{"negative_timeout=0", 1, NULL},
		{"dir_cache_timeout=30s", 1, NULL},
		{"dir_cache_timeout=soon", -EINVAL,
		 "option dir_cache_timeout: invalid duration \"soon\" (use "
		 "500ms, 30s, 5m, 1h)"},
		{"cache_size=10G", 1, NULL},
		{"read_ahead=16M", 1, NULL},
		{"uid=root", 1, NULL},
		{"gid=123", 1, NULL},
		{"umask=077", 1, NULL},
		{"allow_other", 1, NULL},
		{"default_permissions", 1, NULL},
		{"ro", 1, NULL},
		{"xattr=off", 1, NULL},
		{"xattr=sometimes", -EINVAL,
		 "option xattr: invalid value \"sometimes\" (use auto, on, "
		 "off)"},
		{"max_read=131072", 0, NULL},
		{"fsname=smuxfs", 0, NULL},
		{"cache_dirx=/a", 0, NULL},
		{"attr_timeout=3x", -EINVAL,
		 "option attr_timeout: invalid duration \"3x\" (use 500ms, "
		 "30s, 5m, 1h)"},
		{"cache_size=99999999999999999999", -ERANGE,
		 "option cache_size: size \"99999999999999999999\" is too "
		 "large"},
		{"cache_dir=relative", -EINVAL,
		 "option cache_dir: not an absolute path: \"relative\""},
		{"cache_dir=", -EINVAL, "option cache_dir: empty value"},
		{"state_dir=/\xff", -EINVAL, "option state_dir: invalid UTF-8"},
		{"uid=no-such-user-smuxfs", -EINVAL,
		 "option uid: unknown user \"no-such-user-smuxfs\""},
		{"umask=888", -EINVAL,
		 "option umask: invalid umask \"888\" (use octal from 000 to "
		 "777, e.g. 022)"},
		{"allow_other=1", -EINVAL,
		 "option allow_other: takes no value"},
		{"cache_size", -EINVAL,
		 "option cache_size: needs a value (cache_size=...)"},
	};
	struct tmp t = {0};
	struct smux_config *c;
	struct smux_fs_opts *o;
	char err[ERRLEN];

	(void)state;
	tmp_init(&t);
	c = must_load(&t, MOUNT_A MEM("a"));
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		int rc;

		err[0] = '\0';
		rc = smux_config_mount_opt(c, cases[i].opt, err, sizeof(err));
		if (rc != cases[i].rc)
			fail_msg("-o %s: rc %d, want %d (%s)", cases[i].opt, rc,
				 cases[i].rc, err);
		if (cases[i].msg)
			assert_string_equal(err, cases[i].msg);
	}
	o = smux_config_opts(c);
	assert_string_equal(o->cache_dir, "/var/tmp/c");
	assert_string_equal(o->state_dir, "/var/tmp/s");
	assert_true(o->attr_timeout == 2 && o->entry_timeout == 0.5 &&
		    o->negative_timeout == 0);
	assert_true(o->dir_cache_timeout == 30);
	assert_true(o->cache_size == 10ULL << 30);
	assert_true(o->read_ahead == 16ULL << 20);
	assert_true(o->has_uid && o->uid == 0);
	assert_true(o->has_gid && o->gid == 123);
	assert_true(o->has_umask && o->umask == 077);
	assert_true(o->allow_other && o->default_permissions && o->ro);
	assert_int_equal(o->xattr, SMUX_FS_OFF);
	assert_int_equal(smux_config_mount_opt(c, "rw", err, sizeof(err)), 1);
	assert_false(o->ro);
	smux_config_free(c);
	tmp_release(&t);
}

/* [mount] xattr: auto by default, on/off (and booleans) as given, -o
 * overrides the file. */
static void test_xattr_key(void **state)
{
	struct tmp t = {0};
	struct smux_config *c;
	char err[ERRLEN];

	(void)state;
	tmp_init(&t);
	c = must_load(&t, MOUNT_A MEM("a"));
	assert_int_equal(smux_config_opts(c)->xattr, SMUX_FS_AUTO);
	smux_config_free(c);
	c = must_load(&t, "[mount]\nroot = a\nxattr = off\n\n" MEM("a"));
	assert_int_equal(smux_config_opts(c)->xattr, SMUX_FS_OFF);
	assert_int_equal(smux_config_mount_opt(c, "xattr=on", err, sizeof(err)),
			 1);
	assert_int_equal(smux_config_opts(c)->xattr, SMUX_FS_ON);
	smux_config_free(c);
	c = must_load(&t, "[mount]\nroot = a\nxattr = yes\n\n" MEM("a"));
	assert_int_equal(smux_config_opts(c)->xattr, SMUX_FS_ON);
	smux_config_free(c);
	tmp_release(&t);
}

/* [mount] delete_batch: auto by default, on/off (and booleans) as given,
 * -o overrides the file, a bad value names the key. */
static void test_delete_batch_key(void **state)
{
	struct tmp t = {0};
	struct smux_config *c;
	char err[ERRLEN];

	(void)state;
	tmp_init(&t);
	c = must_load(&t, MOUNT_A MEM("a"));
	assert_int_equal(smux_config_opts(c)->delete_batch, SMUX_FS_AUTO);
	smux_config_free(c);
	c = must_load(&t, "[mount]\nroot = a\ndelete_batch = off\n\n" MEM("a"));
	assert_int_equal(smux_config_opts(c)->delete_batch, SMUX_FS_OFF);
	assert_int_equal(
		smux_config_mount_opt(c, "delete_batch=on", err, sizeof(err)),
		1);
	assert_int_equal(smux_config_opts(c)->delete_batch, SMUX_FS_ON);
	assert_int_equal(smux_config_mount_opt(c, "delete_batch=often", err,
					       sizeof(err)),
			 -EINVAL);
	assert_non_null(strstr(err, "delete_batch"));
	smux_config_free(c);
	tmp_release(&t);
}

/* allow_other turns on default_permissions unless the operator opts out
 * explicitly, in [mount] or with -o no_default_permissions; an explicit
 * -o default_permissions wins over an earlier opt-out. */
static void test_default_permissions(void **state)
{
	struct tmp t = {0};
	struct smux_config *c;
	struct smux_fs_opts *o;
	char err[ERRLEN];

	(void)state;
	tmp_init(&t);
	c = must_load(&t, MOUNT_A MEM("a"));
	o = smux_config_opts(c);
	assert_false(smux_fs_default_permissions(o));
	assert_int_equal(
		smux_config_mount_opt(c, "allow_other", err, sizeof(err)), 1);
	assert_true(smux_fs_default_permissions(o));
	assert_int_equal(smux_config_mount_opt(c, "no_default_permissions", err,
					       sizeof(err)),
			 1);
	assert_false(smux_fs_default_permissions(o));
	assert_int_equal(smux_config_mount_opt(c, "no_default_permissions=1",
					       err, sizeof(err)),
			 -EINVAL);
	assert_string_equal(err,
			    "option no_default_permissions: takes no value");
	assert_int_equal(smux_config_mount_opt(c, "default_permissions", err,
					       sizeof(err)),
			 1);
	assert_true(smux_fs_default_permissions(o));
	smux_config_free(c);

	c = must_load(&t, "[mount]\nroot = a\nallow_other = yes\n\n" MEM("a"));
	assert_true(smux_fs_default_permissions(smux_config_opts(c)));
	smux_config_free(c);
	c = must_load(&t, "[mount]\nroot = a\nallow_other = yes\n"
			  "default_permissions = false\n\n" MEM("a"));
	o = smux_config_opts(c);
	assert_true(o->no_default_permissions);
	assert_false(smux_fs_default_permissions(o));
	smux_config_free(c);
	/* false without allow_other: nothing to opt out of, no checks */
	c = must_load(
		&t, "[mount]\nroot = a\ndefault_permissions = no\n\n" MEM("a"));
	assert_false(smux_fs_default_permissions(smux_config_opts(c)));
	smux_config_free(c);
	tmp_release(&t);
}

static void test_ignored_opt(void **state)
{
	static const char *const yes[] = {
		"_netdev",
		"nofail",
		"noauto",
		"auto",
		"user",
		"users",
		"nouser",
		"defaults",
		"x-systemd.automount",
		"x-systemd.requires=network-online.target",
		"x-gvfs-show",
		"comment=systemd.automount",
	};
	static const char *const no[] = {
		"allow_other",	       "ro",	  "rw",
		"cache_dir=/a",	       "usr",	  "_netdevx",
		"x-systemd",	       "comment", "",
		"default_permissions",
	};

	(void)state;
	for (size_t i = 0; i < sizeof(yes) / sizeof(yes[0]); i++)
		if (!smux_config_ignored_opt(yes[i]))
			fail_msg("\"%s\" should be ignored", yes[i]);
	for (size_t i = 0; i < sizeof(no) / sizeof(no[0]); i++)
		if (smux_config_ignored_opt(no[i]))
			fail_msg("\"%s\" should not be ignored", no[i]);
}

/* ---- build ---- */

static void check_file(const char *dir, const char *name, const char *want)
{
	char path[256], *got;

	snprintf(path, sizeof(path), "%s/%s", dir, name);
	got = read_text(path);
	if (!got)
		fail_msg("%s: %s", path, strerror(errno));
	assert_string_equal(got, want);
	free(got);
}

static void test_build_file_tree(void **state)
{
	struct tmp t = {0};
	struct smux_config *c;
	struct smux_backend *root = NULL;
	struct smux_error e;
	struct smux_ctx ctx;
	char text[2048], err[ERRLEN], d1[128], d2[128], st[128];
	unsigned char *buf;
	size_t len;
	int rc;

	(void)state;
	tmp_init(&t);
	snprintf(d1, sizeof(d1), "%s/d1", t.dir);
	snprintf(d2, sizeof(d2), "%s/d2", t.dir);
	snprintf(st, sizeof(st), "%s/state", t.dir);
	assert_int_equal(mkdir(d1, 0700), 0);
	assert_int_equal(mkdir(d2, 0700), 0);
	snprintf(text, sizeof(text),
		 "[mount]\nroot = top\nstate_dir = %s\n\n"
		 "[mux top]\nmode = failover\nbackends = repl\n\n"
		 "[mux repl]\nmode = mirror\nbackends = one two\n"
		 "write_quorum = 2\n\n"
		 "[backend one]\ntype = file\npath = %s\nno_fsync = yes\n\n"
		 "[backend two]\ntype = file\npath = %s\n\n"
		 "[backend spare]\ntype = file\npath = %s/absent\n",
		 st, d1, d2, t.dir);
	c = must_load(&t, text);
	rc = smux_config_build(c, NULL, &root, err, sizeof(err));
	if (rc)
		fail_msg("build: %s", err);
	assert_non_null(root);
	assert_string_equal(root->name, "top");
	smux_ctx_init(&ctx);
	assert_int_equal(
		smux_backend_put_buf(root, &ctx, "hello.txt", "hello", 5, &e),
		0);
	check_file(d1, "hello.txt", "hello");
	check_file(d2, "hello.txt", "hello");
	assert_int_equal(
		smux_backend_get_all(root, &ctx, "hello.txt", &buf, &len, &e),
		0);
	assert_int_equal(len, 5);
	free(buf);
	/* the config can go; the tree holds what it needs */
	smux_config_free(c);
	assert_int_equal(
		smux_backend_get_all(root, &ctx, "hello.txt", &buf, &len, &e),
		0);
	free(buf);
	smux_backend_unref(root);
	tmp_release(&t);
}

/* A backend listed by two muxes is one instance: a key put through one
 * mux is found through the other. */
static void test_build_shared(void **state)
{
	struct tmp t = {0};
	struct smux_config *c;
	struct smux_backend *root = NULL;
	struct smux_error e;
	struct smux_ctx ctx;
	char text[512], err[ERRLEN];
	unsigned char *buf;
	size_t len;

	(void)state;
	tmp_init(&t);
	snprintf(text, sizeof(text),
		 "[mount]\nroot = top\nstate_dir = %s\n\n"
		 "[backend top]\ntype = faulty\nwraps = rr\n\n"
		 "[mux rr]\nmode = round-robin\nbackends = l r\n\n"
		 "[mux l]\nmode = failover\nbackends = shared\n\n"
		 "[mux r]\nmode = failover\nbackends = shared\n\n"
		 "[backend shared]\ntype = memory\n",
		 t.dir);
	c = must_load(&t, text);
	assert_int_equal(smux_config_build(c, NULL, &root, err, sizeof(err)),
			 0);
	smux_ctx_init(&ctx);
	assert_int_equal(smux_backend_put_buf(root, &ctx, "k", "v", 1, &e), 0);
	for (int i = 0; i < 4; i++) {
		assert_int_equal(
			smux_backend_get_all(root, &ctx, "k", &buf, &len, &e),
			0);
		free(buf);
	}
	smux_backend_unref(root);
	smux_config_free(c);
	tmp_release(&t);
}

static void test_build_errors(void **state)
{
	struct tmp t = {0};
	struct smux_config *c;
	struct smux_backend *root = (struct smux_backend *)&root;
	char text[512], err[ERRLEN], want[ERRLEN];

	(void)state;
	tmp_init(&t);
	snprintf(text, sizeof(text),
		 "[mount]\nroot = m\nstate_dir = %s\n\n[mux m]\n"
		 "mode = failover\nbackends = ok nope\n\n"
		 "[backend ok]\ntype = memory\n\n"
		 "[backend nope]\ntype = file\npath = %s/nope\n",
		 t.dir, t.dir);
	c = must_load(&t, text);
	assert_int_equal(smux_config_build(c, NULL, &root, err, sizeof(err)),
			 -ENOENT);
	assert_null(root);
	snprintf(want, sizeof(want),
		 "%s:14: [backend nope] path: %s/nope: No such file or "
		 "directory",
		 t.path, t.dir);
	assert_string_equal(err, want);
	smux_config_free(c);

	/* a file where a directory should be */
	snprintf(text, sizeof(text),
		 "[mount]\nroot = f\n\n[backend f]\ntype = file\n"
		 "path = %s\n",
		 t.path);
	c = must_load(&t, text);
	assert_int_equal(smux_config_build(c, NULL, &root, err, sizeof(err)),
			 -ENOTDIR);
	snprintf(want, sizeof(want),
		 "%s:6: [backend f] path: %s: Not a directory", t.path, t.path);
	assert_string_equal(err, want);
	smux_config_free(c);

	/* a hint journal that cannot be created names the mux */
	c = must_load(&t, "[mount]\nroot = m\nstate_dir = /proc/smuxfs\n\n"
			  "[mux m]\nmode = mirror\nbackends = a\n\n" MEM("a"));
	assert_true(smux_config_build(c, NULL, &root, err, sizeof(err)) < 0);
	assert_null(root);
	snprintf(want, sizeof(want), "%s:5: [mux m] ", t.path);
	assert_memory_equal(err, want, strlen(want));
	assert_non_null(strstr(err, "HINT_JOURNAL_FAILED"));
	smux_config_free(c);
	tmp_release(&t);
}

/* ---- renderings ---- */

static void test_describe(void **state)
{
	struct tmp t = {0};
	struct smux_config *c;
	char err[ERRLEN], *d;

	(void)state;
	tmp_init(&t);
	c = must_load(&t, "[mount]\nroot = media\nuid = 0\numask = 022\n\n"
			  "[mux media]\nmode = shield\n"
			  "backends = origin edge-a\nbackend_timeout = 5s\n"
			  "throw_on_fanout_partial = yes\n\n"
			  "[backend origin]\ntype = file\npath = /srv/media\n"
			  "no_fsync = yes\n\n"
			  "[backend edge-a]\ntype = memory\nweight = 2.5\n\n"
			  "[backend spare]\ntype = memory\n\n"
			  "[mux old]\nmode = mirror\nbackends = spare\n");
	assert_int_equal(
		smux_config_mount_opt(c, "attr_timeout=90s", err, sizeof(err)),
		1);
	assert_int_equal(
		smux_config_mount_opt(c, "cache_size=4096", err, sizeof(err)),
		1);
	d = smux_config_describe(c);
	assert_non_null(d);
	assert_string_equal(
		d, "media: mux shield (backend_timeout 5s, "
		   "throw_on_fanout_partial)\n"
		   "  origin: file /srv/media (no_fsync)\n"
		   "  edge-a: memory (weight 2.5)\n"
		   "mount: root media, prefix \"\", cache_dir "
		   "/var/cache/smuxfs/media, state_dir /var/lib/smuxfs/media, "
		   "attr_timeout 90s, entry_timeout 1s, negative_timeout 1s, "
		   "cache_size 4K, allow_other no, default_permissions no, "
		   "ro no, uid 0, umask 022\n"
		   "unused: [backend spare], [mux old]\n");
	free(d);
	smux_config_free(c);
	tmp_release(&t);
}

static void test_json(void **state)
{
	static const char secret[] = "/etc/smuxfs/very-secret-edge.key";
	struct tmp t = {0};
	struct smux_config *c;
	struct smux__cfg_section *s;
	json_t *j, *b;
	char *text;

	(void)state;
	tmp_init(&t);
	c = must_load(&t, "[mount]\nroot = m\nprefix = a/b\ngid = 7\n\n"
			  "[mux m]\nmode = weighted\nbackends = f x\n\n"
			  "[backend f]\ntype = file\npath = /srv/f\n"
			  "weight = 3\n\n"
			  "[backend x]\ntype = faulty\nwraps = y\n"
			  "weight = 1\nerror_rate = 0.1\n"
			  "seed = 18446744073709551615\n\n" MEM("y"));
	j = json_of(c);
	assert_string_equal(json_string_value(json_object_get(j, "config")),
			    t.path);
	assert_string_equal(jstr(j, "mount", NULL, "root"), "m");
	assert_string_equal(jstr(j, "mount", NULL, "prefix"), "a/b");
	assert_string_equal(jstr(j, "mount", NULL, "cache_size"), "1G");
	assert_int_equal(json_integer_value(json_object_get(
				 json_object_get(j, "mount"), "gid")),
			 7);
	assert_true(json_is_null(
		json_object_get(json_object_get(j, "mount"), "uid")));
	assert_string_equal(jstr(j, "backend", "f", "path"), "/srv/f");
	assert_string_equal(jstr(j, "backend", "x", "wraps"), "y");
	assert_string_equal(jstr(j, "backend", "x", "latency"), "0s");
	assert_string_equal(jstr(j, "backend", "x", "seed"),
			    "18446744073709551615");
	b = json_object_get(json_object_get(j, "backend"), "x");
	assert_true(json_real_value(json_object_get(b, "error_rate")) == 0.1);
	assert_true(json_real_value(json_object_get(b, "weight")) == 1);
	assert_null(json_object_get(
		json_object_get(json_object_get(j, "backend"), "y"), "weight"));
	json_decref(j);

	/*
	 * No type that takes a secret is available yet, so make one by hand:
	 * what an s3 backend will hold, rendered through the same tables.
	 */
	s = smux__cfg_find(c, "f");
	assert_non_null(s);
	s->v[SMUX__BK_TYPE].i = SMUX__CFG_T_S3;
	s->v[SMUX__BK_CREDENTIALS_FILE].line = 99;
	s->v[SMUX__BK_CREDENTIALS_FILE].s = strdup(secret);
	s->v[SMUX__BK_CREDENTIALS_ENV].line = 100;
	s->v[SMUX__BK_CREDENTIALS_ENV].s = strdup("SMUX_VERY_SECRET_ENV");
	text = smux_config_json(c);
	assert_non_null(text);
	assert_null(strstr(text, "very-secret"));
	assert_null(strstr(text, "VERY_SECRET"));
	j = json_loads(text, 0, NULL);
	assert_non_null(j);
	assert_string_equal(jstr(j, "backend", "f", "credentials_file"), "***");
	assert_string_equal(jstr(j, "backend", "f", "credentials_env"), "***");
	json_decref(j);
	free(text);
	text = smux_config_describe(c);
	assert_non_null(text);
	assert_null(strstr(text, "very-secret"));
	free(text);
	smux_config_free(c);
	tmp_release(&t);
}

/* ---- files and hostile input ---- */

static void test_cannot_open(void **state)
{
	struct smux_config *c = NULL;
	char err[ERRLEN];

	(void)state;
	assert_int_equal(
		smux_config_load("/nonexistent/smuxfs.conf", &c, err, ERRLEN),
		-ENOENT);
	assert_null(c);
	assert_string_equal(err, "/nonexistent/smuxfs.conf: cannot open: No "
				 "such file or directory");
	assert_int_equal(smux_config_load("/tmp", &c, err, ERRLEN), -EISDIR);
	assert_string_equal(err, "/tmp: cannot open: Is a directory");
}

static void test_hostile(void **state)
{
	struct tmp t = {0};
	struct smux_config *c = NULL;
	char err[ERRLEN], small[16];
	unsigned seed = 12345;
	char *big;

	(void)state;
	tmp_init(&t);
	/* a file over the size limit */
	big = malloc(SMUX__CFG_FILE_MAX + 10);
	assert_non_null(big);
	memset(big, ';', SMUX__CFG_FILE_MAX + 10);
	write_file(t.path, big, SMUX__CFG_FILE_MAX + 10);
	assert_int_equal(smux_config_load(t.path, &c, err, ERRLEN), -EINVAL);
	assert_non_null(strstr(err, ": file too large (more than 1048576 "
				    "bytes)"));
	free(big);

	/* an error message cut to a tiny buffer stays a C string */
	write_file(t.path, "[foo]\n", 6);
	assert_int_equal(smux_config_load(t.path, &c, small, sizeof(small)),
			 -EINVAL);
	assert_true(strlen(small) < sizeof(small));

	/* random bytes and random mutations of a valid file: never a crash,
	 * always one line naming the file */
	for (int round = 0; round < 400; round++) {
		char buf[512];
		size_t n;
		int rc;

		if (round % 2) {
			n = (size_t)(rand_r(&seed) % sizeof(buf));
			for (size_t i = 0; i < n; i++)
				buf[i] = (char)rand_r(&seed);
		} else {
			static const char base[] =
				"[mount]\nroot = m\n[mux m]\nmode = mirror\n"
				"backends = a b\n[backend a]\ntype = memory\n"
				"[backend b]\ntype = faulty\nwraps = a\n";

			n = sizeof(base) - 1;
			memcpy(buf, base, n);
			for (int k = 0; k < 3; k++)
				buf[rand_r(&seed) % n] =
					"[]=; \n\t\0#ab.-9\xff"[rand_r(&seed) %
								16];
		}
		write_file(t.path, buf, n);
		c = NULL;
		rc = smux_config_load(t.path, &c, err, ERRLEN);
		if (rc == 0) {
			char *d = smux_config_describe(c), *js;

			js = smux_config_json(c);
			assert_non_null(d);
			assert_non_null(js);
			free(d);
			free(js);
			smux_config_free(c);
			continue;
		}
		assert_null(c);
		assert_null(strchr(err, '\n'));
		assert_memory_equal(err, t.path, strlen(t.path));
	}
	tmp_release(&t);
}

static void test_syntax_messages(void **state)
{
	struct tmp t = {0};
	char err[ERRLEN];

	(void)state;
	tmp_init(&t);
	/* the first error in the file wins, whoever finds it */
	assert_string_equal(load_error(&t,
				       "[mount]\nroot = a\n[backend a]\n"
				       "garbage\n[mux x]\n",
				       err),
			    ":4: [backend a] expected \"key = value\", got "
			    "\"garbage\"");
	/* an indented line is a key, not a continuation of the last one */
	assert_string_equal(load_error(&t,
				       "[mount]\nroot = a\n[backend a]\n"
				       "type = memory\n   memory\n",
				       err),
			    ":5: [backend a] expected \"key = value\", got "
			    "\"memory\"");
	/* inline comments need a blank before ';' (inih) */
	assert_string_equal(
		load_error(&t,
			   "[mount]\nroot = a\n[backend a]\ntype = memory;x\n",
			   err),
		":4: [backend a] type: unknown type \"memory;x\" (use file, "
		"memory, faulty, http, s3, swift or bunny)");
	tmp_release(&t);
}

/* ---- golden files ---- */

static int by_name(const struct dirent **a, const struct dirent **b)
{
	return strcmp((*a)->d_name, (*b)->d_name);
}

static int conf_only(const struct dirent *d)
{
	size_t n = strlen(d->d_name);

	return n > 5 && strcmp(d->d_name + n - 5, ".conf") == 0;
}

static int expected_only(const struct dirent *d)
{
	size_t n = strlen(d->d_name);

	return n > 9 && strcmp(d->d_name + n - 9, ".expected") == 0;
}

static void test_golden_bad(void **state)
{
	static const char dir[] = "tests/config/bad";
	struct dirent **ents;
	unsigned bad = 0;
	int n;

	(void)state;
	n = scandir(dir, &ents, conf_only, by_name);
	if (n < 0)
		fail_msg("%s: %s (run from the repository root)", dir,
			 strerror(errno));
	assert_true(n >= 25);
	for (int i = 0; i < n; i++) {
		char conf[512], exp[512], err[ERRLEN], *want;
		struct smux_config *c = NULL;
		size_t len;
		int rc;

		snprintf(conf, sizeof(conf), "%s/%s", dir, ents[i]->d_name);
		snprintf(exp, sizeof(exp), "%.*s.expected",
			 (int)strlen(conf) - 5, conf);
		want = read_text(exp);
		rc = smux_config_load(conf, &c, err, sizeof(err));
		/* what a mount checks once -o is applied (-o overrides) */
		if (rc == 0 &&
		    smux_config_check_read_ahead(c, err, sizeof(err)) != 0) {
			smux_config_free(c);
			c = NULL;
			rc = -EINVAL;
		}
		if (!want) {
			print_error("%s: missing\n", exp);
			bad++;
		} else if (rc == 0) {
			print_error("%s: loaded, want: %s", conf, want);
			smux_config_free(c);
			bad++;
		} else {
			len = strlen(want);
			if (len && want[len - 1] == '\n')
				want[--len] = '\0';
			if (strcmp(err, want) != 0) {
				print_error("%s:\n  got:  %s\n  want: %s\n",
					    conf, err, want);
				bad++;
			}
		}
		free(want);
		free(ents[i]);
	}
	free(ents);

	/* and no .expected without its .conf */
	n = scandir(dir, &ents, expected_only, by_name);
	assert_true(n > 0);
	for (int i = 0; i < n; i++) {
		char conf[512];

		snprintf(conf, sizeof(conf), "%s/%.*s.conf", dir,
			 (int)strlen(ents[i]->d_name) - 9, ents[i]->d_name);
		if (access(conf, R_OK) != 0) {
			print_error("%s: no such file for %s\n", conf,
				    ents[i]->d_name);
			bad++;
		}
		free(ents[i]);
	}
	free(ents);
	assert_int_equal(bad, 0);
}

/* Loads every .conf file in @dir, with @DEMO_DIR@ replaced as scripts/demo.sh
 * does; returns how many loaded, fails on any error. */
static int load_all(const char *dir, unsigned *failed)
{
	struct dirent **ents;
	struct tmp t = {0};
	int n;

	n = scandir(dir, &ents, conf_only, by_name);
	if (n < 0)
		fail_msg("%s: %s (run from the repository root)", dir,
			 strerror(errno));
	tmp_init(&t);
	for (int i = 0; i < n; i++) {
		char path[512], err[ERRLEN], *text, *at, *d, *j;
		struct smux_config *c = NULL;
		json_t *parsed;

		snprintf(path, sizeof(path), "%s/%s", dir, ents[i]->d_name);
		text = read_text(path);
		assert_non_null(text);
		if (strstr(text, "@DEMO_DIR@")) {
			FILE *f = fopen(t.path, "w");

			assert_non_null(f);
			for (char *p = text; *p;) {
				at = strstr(p, "@DEMO_DIR@");
				if (!at) {
					fputs(p, f);
					break;
				}
				fprintf(f, "%.*s%s", (int)(at - p), p, t.dir);
				p = at + strlen("@DEMO_DIR@");
			}
			fclose(f);
			snprintf(path, sizeof(path), "%s", t.path);
		}
		free(text);
		if (smux_config_load(path, &c, err, sizeof(err)) != 0) {
			print_error("%s/%s: %s\n", dir, ents[i]->d_name, err);
			(*failed)++;
			free(ents[i]);
			continue;
		}
		d = smux_config_describe(c);
		j = smux_config_json(c);
		assert_non_null(d);
		assert_non_null(j);
		parsed = json_loads(j, 0, NULL);
		assert_non_null(parsed);
		json_decref(parsed);
		free(d);
		free(j);
		smux_config_free(c);
		free(ents[i]);
	}
	free(ents);
	tmp_release(&t);
	return n;
}

static void test_golden_good(void **state)
{
	unsigned failed = 0;

	(void)state;
	assert_true(load_all("tests/config/good", &failed) >= 10);
	assert_int_equal(failed, 0);
}

static void test_examples(void **state)
{
	static const char *const modes[] = {
		"failover", "round-robin", "weighted", "sticky-by-key",
		"shield",   "mirror",	   "nested",
	};
	unsigned failed = 0;

	(void)state;
	for (size_t i = 0; i < sizeof(modes) / sizeof(modes[0]); i++) {
		char path[128];

		snprintf(path, sizeof(path), "config/%s.conf", modes[i]);
		if (access(path, R_OK) != 0)
			fail_msg("%s: %s", path, strerror(errno));
	}
	assert_true(load_all("config", &failed) >= 7);
	assert_int_equal(failed, 0);
}

int main(void)
{
	const struct CMUnitTest structure[] = {
		cmocka_unit_test(test_every_mode),
		cmocka_unit_test(test_members_with_commas),
		cmocka_unit_test(test_mux_values_and_defaults),
		cmocka_unit_test(test_nested_and_faulty),
	};
	const struct CMUnitTest values[] = {
		cmocka_unit_test(test_durations),
		cmocka_unit_test(test_sizes_bools_numbers),
		cmocka_unit_test(test_names_and_quoting),
	};
	const struct CMUnitTest mount[] = {
		cmocka_unit_test(test_mount_defaults),
		cmocka_unit_test(test_mount_opt),
		cmocka_unit_test(test_default_permissions),
		cmocka_unit_test(test_xattr_key),
		cmocka_unit_test(test_delete_batch_key),
		cmocka_unit_test(test_ignored_opt),
	};
	const struct CMUnitTest build[] = {
		cmocka_unit_test(test_build_file_tree),
		cmocka_unit_test(test_build_shared),
		cmocka_unit_test(test_build_errors),
	};
	const struct CMUnitTest render[] = {
		cmocka_unit_test(test_describe),
		cmocka_unit_test(test_json),
	};
	const struct CMUnitTest files[] = {
		cmocka_unit_test(test_cannot_open),
		cmocka_unit_test(test_hostile),
		cmocka_unit_test(test_syntax_messages),
		cmocka_unit_test(test_golden_bad),
		cmocka_unit_test(test_golden_good),
		cmocka_unit_test(test_examples),
	};
	int fails = 0;

	fails += cmocka_run_group_tests_name("config structure", structure,
					     NULL, NULL);
	fails += cmocka_run_group_tests_name("config values", values, NULL,
					     NULL);
	fails += cmocka_run_group_tests_name("config mount options", mount,
					     NULL, NULL);
	fails += cmocka_run_group_tests_name("config build", build, NULL, NULL);
	fails += cmocka_run_group_tests_name("config render", render, NULL,
					     NULL);
	fails += cmocka_run_group_tests_name("config files", files, NULL, NULL);
	return fails ? 1 : 0;
}
