// SPDX-License-Identifier: MIT
/*
 * test_inomap.c - src/fs/inomap.c over a mirror of two file backends
 * whose first replica is drained (so no member can say whether another
 * identity is the same file: the key keeps its number): a key keeps the
 * number it showed when another identity answers, also when the key's
 * slot of the table held another key first (a direct-mapped table
 * overwrites: a key that found its slot taken was never learned, and
 * its number moved with the answering replica once the table filled).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "fs/fs.h"
#include "mux_helpers.h"
#include "smux/file.h"

/* The table's slot of a key: FNV-1a, as inomap.c hashes it. */
static unsigned slot_of(const char *key)
{
	uint64_t h = UINT64_C(0xcbf29ce484222325);

	for (const unsigned char *p = (const unsigned char *)key; *p; p++)
		h = (h ^ *p) * UINT64_C(0x100000001b3);
	return (unsigned)(h & 32767);
}

static void test_slot_taken(void **state)
{
	char base[] = "/tmp/test_inomap.XXXXXX", dir[2][64], k2[32];
	struct smux_backend *fb[2], *mux;
	struct smux_error err;
	struct smux_ctx ctx;
	struct smuxfs fs;
	char cmd[96];
	int i;

	(void)state;
	assert_non_null(mkdtemp(base));
	for (i = 0; i < 2; i++) {
		struct smux_file_opts fo = {.path = dir[i], .no_fsync = true};
		char name[16];

		snprintf(dir[i], sizeof(dir[i]), "%s/r%d", base, i);
		assert_int_equal(mkdir(dir[i], 0755), 0);
		snprintf(name, sizeof(name), "r%d", i);
		MH_OK(smux_file_new(name, &fo, &fb[i], &err), &err);
	}
	mux = mh_mux("m", &(struct smux_mux_opts){.mode = SMUX_MODE_MIRROR}, fb,
		     NULL, 2);
	smux_ctx_init(&ctx);
	MH_OK(smux_mux_drain(mux, "r0", &ctx, &err), &err);
	memset(&fs, 0, sizeof(fs));
	fs.root = mux;

	/* a key whose slot another key holds first */
	for (i = 0;; i++) {
		snprintf(k2, sizeof(k2), "k%d", i);
		if (i > 0 && slot_of(k2) == slot_of("k0"))
			break;
	}
	assert_int_equal(smuxfs_ino_learn(&fs, "k0", 0x100, 1), 0x100);
	assert_int_equal(smuxfs_ino_learn(&fs, k2, 0x200, 1), 0x200);
	/* another identity answers for it: the first member is out, none
	 * can say it is another file, so it keeps its number */
	assert_int_equal(smuxfs_ino_learn(&fs, k2, 0x300, 1), 0x200);
	/* a key that shows its own identity is not taken for another */
	assert_int_equal(smuxfs_ino_learn(&fs, "k0", 0x400, 1), 0x400);

	smux_backend_unref(mux);
	for (i = 0; i < 2; i++)
		smux_backend_unref(fb[i]);
	snprintf(cmd, sizeof(cmd), "rm -rf %s", base);
	assert_int_equal(system(cmd), 0);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_slot_taken),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
