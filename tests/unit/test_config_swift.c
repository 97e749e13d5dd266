// SPDX-License-Identifier: MIT
/*
 * test_config_swift.c - [backend] type = swift in the configuration: the
 * keys it takes and requires, their errors naming the key, credentials
 * from a file or the environment only (never rendered), and a build that
 * makes no request (a Swift that is down at mount time is a member that is
 * down).
 */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "fs/config.h"
#include "smux/backend.h"

#define ERRLEN 1024

static char dir[64], path[128];

static int load(const char *text, struct smux_config **c, char *err)
{
	FILE *f = fopen(path, "w");

	assert_non_null(f);
	fputs(text, f);
	fclose(f);
	*c = NULL;
	return smux_config_load(path, c, err, ERRLEN);
}

static int setup(void **state)
{
	(void)state;
	snprintf(dir, sizeof(dir), "/tmp/smux-cfgswift-XXXXXX");
	if (!mkdtemp(dir))
		return -1;
	snprintf(path, sizeof(path), "%s/t.conf", dir);
	return 0;
}

static int teardown(void **state)
{
	(void)state;
	unlink(path);
	rmdir(dir);
	return 0;
}

#define HEAD "[mount]\nroot = sw\n\n[backend sw]\ntype = swift\n"

static void test_required_keys(void **state)
{
	struct smux_config *c;
	char err[ERRLEN];

	(void)state;
	assert_int_equal(load(HEAD "container = c\n"
				   "credentials_env = SW_CRED\n",
			      &c, err),
			 -EINVAL);
	assert_non_null(strstr(err, "[backend sw] auth_url: missing"));
	assert_int_equal(load(HEAD "auth_url = http://127.0.0.1:1/auth/v1.0\n"
				   "credentials_env = SW_CRED\n",
			      &c, err),
			 -EINVAL);
	assert_non_null(strstr(err, "container: missing"));
	assert_int_equal(load(HEAD "auth_url = http://127.0.0.1:1/auth/v1.0\n"
				   "container = c\n",
			      &c, err),
			 -EINVAL);
	assert_non_null(strstr(err, "credentials_file or credentials_env"));
	assert_int_equal(load(HEAD "auth_url = http://127.0.0.1:1/v2.0\n"
				   "container = c\nauth_version = 3\n"
				   "credentials_env = SW_CRED\n",
			      &c, err),
			 -EINVAL);
	assert_non_null(strstr(err, "auth_version: must be 1"));
	/* keys of another type */
	assert_int_equal(load(HEAD "auth_url = http://127.0.0.1:1/v2.0\n"
				   "container = c\nbucket = b\n"
				   "credentials_env = SW_CRED\n",
			      &c, err),
			 -EINVAL);
	assert_non_null(strstr(err, "bucket: unknown key for type swift"));
}

static void test_build_no_request(void **state)
{
	struct smux_backend *root = NULL;
	struct smux_config *c;
	char err[ERRLEN], *json;

	(void)state;
	/* port 1: nothing listens; building must not ask */
	setenv("SW_CRED", "rackuser:SECRETAPIKEY", 1);
	assert_int_equal(load(HEAD "auth_url = http://127.0.0.1:1/v2.0\n"
				   "auth_version = 2\ncontainer = c\n"
				   "region = DFW\ninternal = true\n"
				   "tenant = t1\n"
				   "credentials_env = SW_CRED\n",
			      &c, err),
			 0);
	assert_int_equal(smux_config_build(c, NULL, &root, err, sizeof(err)),
			 0);
	assert_non_null(root);
	json = smux_config_json(c);
	assert_non_null(json);
	assert_null(strstr(json, "SECRETAPIKEY"));
	assert_null(strstr(json, "rackuser"));
	free(json);
	smux_backend_unref(root);
	smux_config_free(c);
	/* a malformed variable is named, its value is not */
	setenv("SW_CRED", "nocolon", 1);
	assert_int_equal(load(HEAD "auth_url = http://127.0.0.1:1/auth/v1.0\n"
				   "container = c\ncredentials_env = SW_CRED\n",
			      &c, err),
			 0);
	assert_true(smux_config_build(c, NULL, &root, err, sizeof(err)) < 0);
	assert_non_null(strstr(err, "$SW_CRED"));
	assert_null(strstr(err, "nocolon"));
	smux_config_free(c);
	/* tempauth (v1) users are account:user: the line is
	 * account:user:key */
	setenv("SW_CRED", "tester:SECRETKEY", 1);
	assert_int_equal(load(HEAD "auth_url = http://127.0.0.1:1/auth/v1.0\n"
				   "container = c\ncredentials_env = SW_CRED\n",
			      &c, err),
			 0);
	assert_true(smux_config_build(c, NULL, &root, err, sizeof(err)) < 0);
	assert_non_null(strstr(err, "account:user:key"));
	assert_null(strstr(err, "SECRETKEY"));
	smux_config_free(c);
	setenv("SW_CRED", "test:tester:SECRETKEY", 1);
	assert_int_equal(load(HEAD "auth_url = http://127.0.0.1:1/auth/v1.0\n"
				   "container = c\ncredentials_env = SW_CRED\n",
			      &c, err),
			 0);
	assert_int_equal(smux_config_build(c, NULL, &root, err, sizeof(err)),
			 0);
	smux_backend_unref(root);
	smux_config_free(c);
	unsetenv("SW_CRED");
}

/* segment_threshold and segment_size: sizes, 1 byte to 5G, errors
 * naming the key; only for type swift */
static void test_segment_keys(void **state)
{
	static const char *const bad[][2] = {
		{"segment_threshold = 6G\n", "segment_threshold"},
		{"segment_size = 6G\n", "segment_size"},
		{"segment_threshold = 0\n", "segment_threshold"},
		{"segment_size = 0\n", "segment_size"},
	};
	struct smux_backend *root = NULL;
	struct smux_config *c;
	char err[ERRLEN], text[512];

	(void)state;
	setenv("SW_CRED", "test:tester:SECRETKEY", 1);
	assert_int_equal(load(HEAD "auth_url = http://127.0.0.1:1/auth/v1.0\n"
				   "container = c\ncredentials_env = SW_CRED\n"
				   "segment_threshold = 64M\n"
				   "segment_size = 16M\n",
			      &c, err),
			 0);
	assert_int_equal(smux_config_build(c, NULL, &root, err, sizeof(err)),
			 0);
	smux_backend_unref(root);
	smux_config_free(c);
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		snprintf(text, sizeof(text),
			 HEAD "auth_url = http://127.0.0.1:1/auth/v1.0\n"
			      "container = c\ncredentials_env = SW_CRED\n%s",
			 bad[i][0]);
		root = NULL;
		if (load(text, &c, err) == 0) {
			assert_true(smux_config_build(c, NULL, &root, err,
						      sizeof(err)) < 0);
			smux_config_free(c);
		}
		assert_non_null(strstr(err, bad[i][1]));
		assert_null(strstr(err, "SECRETKEY"));
	}
	unsetenv("SW_CRED");
	/* not a key of another type */
	assert_int_equal(load("[mount]\nroot = f\n\n[backend f]\ntype = file\n"
			      "path = /tmp\nsegment_size = 1M\n",
			      &c, err),
			 -EINVAL);
	assert_non_null(strstr(err, "segment_size: unknown key for type file"));
}

/* region, internal, tenant and password_credentials are identity v2.0's:
 * with auth_version 1 (the default: tempauth) they were silently
 * ignored; now the load fails naming the file, the line and the key and
 * saying auth_version = 2 is needed (whatever the value: a file that
 * names them was written for identity v2.0) */
static void test_v2_keys_need_v2(void **state)
{
	static const char *const keys[][2] = {
		{"region = DFW\n", "region"},
		{"internal = true\n", "internal"},
		{"tenant = t1\n", "tenant"},
		{"password_credentials = true\n", "password_credentials"},
	};
	struct smux_config *c;
	char err[ERRLEN], text[512], want[256];

	(void)state;
	for (size_t i = 0; i < sizeof(keys) / sizeof(keys[0]); i++) {
		/* the default auth_version, then an explicit 1 */
		for (int ver = 0; ver < 2; ver++) {
			snprintf(text, sizeof(text),
				 HEAD
				 "auth_url = http://127.0.0.1:1/auth/v1.0\n"
				 "container = c\n"
				 "credentials_env = SW_CRED\n%s%s",
				 ver ? "auth_version = 1\n" : "", keys[i][0]);
			assert_int_equal(load(text, &c, err), -EINVAL);
			/* line 9 or 10 of the file: the key's own line */
			snprintf(want, sizeof(want),
				 "%s:%d: [backend sw] %s: ", path, 9 + ver,
				 keys[i][1]);
			assert_non_null(strstr(err, want));
			assert_non_null(strstr(err, "auth_version = 2"));
		}
	}
	/* the earliest of several is named */
	assert_int_equal(load(HEAD "auth_url = http://127.0.0.1:1/auth/v1.0\n"
				   "container = c\ntenant = t\nregion = DFW\n"
				   "credentials_env = SW_CRED\n",
			      &c, err),
			 -EINVAL);
	assert_non_null(strstr(err, "[backend sw] tenant: "));
	/* with auth_version = 2 they load */
	assert_int_equal(load(HEAD "auth_url = http://127.0.0.1:1/v2.0\n"
				   "container = c\nregion = DFW\n"
				   "internal = true\ntenant = t\n"
				   "password_credentials = true\n"
				   "auth_version = 2\n"
				   "credentials_env = SW_CRED\n",
			      &c, err),
			 0);
	smux_config_free(c);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_required_keys),
		cmocka_unit_test(test_build_no_request),
		cmocka_unit_test(test_segment_keys),
		cmocka_unit_test(test_v2_keys_need_v2),
	};

	return cmocka_run_group_tests_name("config_swift", tests, setup,
					   teardown);
}
