/* SPDX-License-Identifier: MIT */
/*
 * conformance.h - the storage conformance suite (the seed's
 * runStorageConformance): behaviours every backend, and every mux mode,
 * must show through the dispatch wrappers of smux/backend.h.
 *
 * Owns: the fixture interface (registry.c lists the fixtures), the per-test
 * environment, shared assertion helpers and the test functions. main.c runs
 * every test once per fixture, each on a fresh, empty backend
 * (SMUX_CONF_FIXTURE=name runs one fixture).
 */
#ifndef SMUX_TESTS_CONFORMANCE_H
#define SMUX_TESTS_CONFORMANCE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "smux/backend.h"

/* Fixture flags: what a fixture cannot do, each with the test it skips. */
enum conf_flags {
	/* Storing >= 1 GiB is impractical (conf_test_large_object). */
	CONF_F_NO_LARGE = 1u << 0,
	/* The storage keeps no permission bits and mtimes to the second
	 * only (nginx's WebDAV): the mode and exact-mtime checks of put_opts
	 * and rename are skipped and setattr whole, each saying so. */
	CONF_F_NO_ATTRS = 1u << 1,
	/* No symlinks or special files (WebDAV): a put of one must be
	 * NOT_SUPPORTED; the rest of conf_test_symlink is skipped. */
	CONF_F_NO_SPECIAL = 1u << 5,
	/* The version token has the server's 1 s resolution (nginx: size and
	 * mtime): tests that rewrite a key to the same size and expect a new
	 * etag wait for the next second first. */
	CONF_F_COARSE_ETAG = 1u << 2,
	/* Names starting with '.' are not listed (nginx dav-ext hides
	 * them): conf_test_longest_keys does not look for them in listings. */
	CONF_F_NO_DOTFILES = 1u << 3,
	/* A GET racing a PUT of the same key may be served torn by the server
	 * (Apache stats the file, then opens it by name), or a head racing
	 * an overwrite may find nothing (Swift's object server lists the
	 * object's directory, then opens the newest file, which the put's
	 * cleanup may have removed): conf_test_concurrent_* count and print
	 * such reads instead of failing on them. */
	CONF_F_RACY_GET = 1u << 4,
	/* The storage keeps no settable mtime (Bunny: the upload time): the
	 * mtime checks of put_opts and rename are skipped, saying so. */
	CONF_F_NO_MTIME = 1u << 6,
	/* Runs only when named by SMUX_CONF_FIXTURE (a server that takes
	 * minutes for the whole suite: `make check-swift`). */
	CONF_F_OPT_IN = 1u << 7,
	/* Listings carry no per-object metadata (S3's ListObjectsV2,
	 * Swift's JSON listing): a listed object's type must read as
	 * unknown (mode 0), so the daemon looks it up (head's is checked). */
	CONF_F_LIST_NO_TYPE = 1u << 8,
	/* Key segments of at most 200 bytes and no control characters
	 * (s3rver keeps each segment as a file name plus "._S3rver_object"
	 * and dies on a longer one, and lists a control character raw in
	 * its XML): conf_test_longest_keys uses 200-byte segments and no
	 * control character. */
	CONF_F_PLAIN_KEYS = 1u << 9,
	/* The kind offers no reader: reader_open must answer NOT_SUPPORTED
	 * (callers use gets), and any other kind must open one
	 * (conf_test_reader). */
	CONF_F_NO_READER = 1u << 10,
	/* The kind offers no writer: writer_open must answer NOT_SUPPORTED
	 * for every flag (callers put whole objects), and any other kind
	 * must open one (conformance_writer.c). */
	CONF_F_NO_WRITER = 1u << 11,
	/* Only a truncating writer, not in place (s3's streams an upload
	 * from empty): any other open must answer NOT_SUPPORTED. */
	CONF_F_WRITER_TRUNC_ONLY = 1u << 12,
	/* Symlinks but no FIFOs or sockets (rclone_links: a link is an
	 * object NAME.rclonelink): a put of a FIFO must be NOT_SUPPORTED. */
	CONF_F_LINKS_ONLY = 1u << 13,
	/* A put racing another put of the same key may fail BAD_RESPONSE
	 * (WebDAV: neither answer names the version stored, and the size
	 * found after it cannot tell the other writer's version from a body
	 * the server cut, which must not be acknowledged): counted and
	 * printed by conf_test_concurrent_same_key, not failed. */
	CONF_F_RACY_PUT = 1u << 14,
};

/* Polls (bounded) until the wall clock's second changes: for fixtures
 * with CONF_F_COARSE_ETAG before a same-size rewrite. */
void conf_next_second(void);

/*
 * One backend (or mux) configuration under test. Adding a backend kind or
 * a mux mode to the suite is one entry in registry.c.
 */
struct conf_fixture {
	const char *name; /* the cmocka group name */
	/* Creates a fresh, empty backend: one reference in *@out, and in
	 * *@priv whatever teardown needs. Returns 0 or a negative errno. */
	int (*setup)(void **priv, struct smux_backend **out);
	/* Releases @priv once the backend's last reference is gone. */
	void (*teardown)(void *priv);
	unsigned flags; /* enum conf_flags */
	/* Bytes of resident memory the backend itself keeps per stored byte
	 * (memory: 1, it holds objects in RAM; file: 0). Bounds the RSS
	 * growth conf_test_large_object accepts. */
	unsigned resident_bytes_per_stored_byte;
};

extern const struct conf_fixture conf_fixtures[];
extern const size_t conf_fixture_count;

/* The cmocka state of one test: a fresh backend of one fixture. */
struct conf_env {
	const struct conf_fixture *fx;
	struct smux_backend *b;
	void *priv;
	struct smux_ctx ctx; /* no deadline, no token */
};

/* Per-test setup/teardown: *state holds the fixture, then the env. */
int conf_env_setup(void **state);
int conf_env_teardown(void **state);

/* ---- assertion helpers (report the caller's file and line) ---- */

/* Asserts @rc == 0, printing @err when not. */
#define CONF_OK(rc, err) conf_ok_at((rc), (err), __FILE__, __LINE__)
void conf_ok_at(long rc, const struct smux_error *err, const char *file,
		int line);

/* Asserts a failure with @code and @sys_errno, returned as -@sys_errno. */
#define CONF_ERR(rc, err, code, sys_errno) \
	conf_err_at((rc), (err), (code), (sys_errno), __FILE__, __LINE__)
void conf_err_at(long rc, const struct smux_error *err, enum smux_code code,
		 int sys_errno, const char *file, int line);

/* Puts @len bytes of @buf under @key; fills @info when not NULL. */
#define CONF_PUT(env, key, buf, len, info) \
	conf_put_at((env), (key), (buf), (len), (info), __FILE__, __LINE__)
void conf_put_at(struct conf_env *env, const char *key, const void *buf,
		 size_t len, struct smux_info *info, const char *file,
		 int line);

/* Asserts @key holds exactly @len bytes of @buf (whole-object get). */
#define CONF_EXPECT(env, key, buf, len) \
	conf_expect_at((env), (key), (buf), (len), __FILE__, __LINE__)
void conf_expect_at(struct conf_env *env, const char *key, const void *buf,
		    size_t len, const char *file, int line);

/* Asserts head(@key) is KEY_NOT_FOUND. */
#define CONF_ABSENT(env, key) conf_absent_at((env), (key), __FILE__, __LINE__)
void conf_absent_at(struct conf_env *env, const char *key, const char *file,
		    int line);

/* Deterministic bytes (with NULs) for object @seed: dst[i] of the object. */
void conf_fill(unsigned char *dst, size_t len, unsigned seed);

/* ---- listings ---- */

struct conf_list {
	char **keys; /* owned copies */
	bool *is_prefix;
	struct smux_info *info;
	size_t n, cap;
	size_t stop_after; /* stop the listing after this many (0: never) */
};

/* Lists into @out (zeroed by the caller except stop_after). */
int conf_list_collect(struct conf_env *env, const char *prefix,
		      const char *delim, struct conf_list *out,
		      struct smux_error *err);
void conf_list_free(struct conf_list *l);

/*
 * Asserts the listing is exactly @expected, in order. With a delimiter, an
 * entry ending in '/' must be a common prefix; without one, no entry is.
 */
#define CONF_EXPECT_LIST(env, prefix, delim, expected, n)              \
	conf_expect_list_at((env), (prefix), (delim), (expected), (n), \
			    __FILE__, __LINE__)
void conf_expect_list_at(struct conf_env *env, const char *prefix,
			 const char *delim, const char *const *expected,
			 size_t n, const char *file, int line);

/* ---- the tests (one cmocka test each; main.c lists them) ---- */

/* conformance_basic.c */
void conf_test_roundtrip(void **state);
void conf_test_roundtrip_empty(void **state);
void conf_test_overwrite(void **state);
void conf_test_put_opts(void **state);
void conf_test_ranged_get(void **state);
void conf_test_if_match(void **state);
void conf_test_head(void **state);
void conf_test_missing(void **state);
void conf_test_directories(void **state);
void conf_test_delete(void **state);
void conf_test_delete_many(void **state);
void conf_test_copy(void **state);
void conf_test_healthcheck(void **state);
void conf_test_statfs(void **state);

/* conformance_keys.c */
void conf_test_invalid_keys(void **state);
void conf_test_key_nul(void **state);
void conf_test_longest_keys(void **state);

/* conformance_list.c */
void conf_test_list_delimiter(void **state);
void conf_test_list_flat(void **state);
void conf_test_list_prefixes(void **state);
void conf_test_list_stop(void **state);
void conf_test_list_many(void **state);

/* conformance_writer.c */
void conf_test_writer(void **state);
void conf_test_writer_reopen(void **state);

/* conformance_reader.c */
void conf_test_reader(void **state);

/* conformance_concurrency.c */
void conf_test_concurrent_same_key(void **state);
void conf_test_concurrent_keys(void **state);

/* conformance_attr.c */
void conf_test_rename(void **state);
void conf_test_setattr(void **state);
void conf_test_symlink(void **state);
void conf_test_sync(void **state);
/* Skipped (after checking the NOT_SUPPORTED answer) by fixtures without
 * SMUX_CAP_XATTR: memory, and every mux with a memory member. */
void conf_test_xattr(void **state);

/* conformance_large.c */
void conf_test_large_object(void **state);

#endif /* SMUX_TESTS_CONFORMANCE_H */
