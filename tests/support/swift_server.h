/* SPDX-License-Identifier: MIT */
/*
 * support/swift_server.h - one OpenStack Swift (tests/servers/swift.sh,
 * tempauth user test:tester / testing) and one identity v2.0 emulator in
 * front of it (tests/servers/swift_identity.py) per test process.
 *
 * Swift takes seconds to start, so the first call starts both and later
 * calls return them; a guardian child stops Swift and removes its
 * directory when the process ends, even by a crash (the emulator dies
 * with the process: PR_SET_PDEATHSIG). With SMUX_TEST_SWIFT_DIR set to the
 * directory of a Swift already started by `swift.sh start DIR`, that one
 * is used (and left running): one Swift for several test binaries.
 */
#ifndef SMUX_TESTS_SUPPORT_SWIFT_SERVER_H
#define SMUX_TESTS_SUPPORT_SWIFT_SERVER_H

#include <stddef.h>

/* Credentials the emulator takes (RAX-KSKEY and password forms). */
#define TS_SWIFT_V2_USER     "rackuser"
#define TS_SWIFT_V2_APIKEY   "0123456789abcdef0123456789abcdef"
#define TS_SWIFT_V2_PASSWORD "rackpass"
/* A tempauth user of the same account without .admin (swift.sh): it may
 * do only what a container's ACL grants it. */
#define TS_SWIFT_READER_USER "test:reader"
#define TS_SWIFT_READER_KEY  "reader"

struct ts_swift {
	const char *auth_v1;  /* http://127.0.0.1:P/auth/v1.0 */
	const char *user_v1;  /* test:tester */
	const char *key_v1;   /* testing */
	const char *identity; /* http://127.0.0.1:Q/v2.0 */
	const char *control;  /* http://127.0.0.1:Q/control */
};

/* Starts them once. 0 and *@out, or a negative errno (printed). */
int ts_swift_start(struct ts_swift *out);

/*
 * Starts the emulator alone (no Swift behind it: a storage request with a
 * valid token gets 204 to a HEAD, [] to a listing, 404 otherwise), once;
 * it stops and its directory goes at exit. Only identity and control are
 * set in *@out. Use one of the two starters per process.
 */
int ts_swift_identity_alone(struct ts_swift *out);

/*
 * POSTs @json to the emulator's /control (knobs: see
 * tests/servers/swift_identity.py). With @answer, GET /control/stats
 * instead and its body goes there (NUL-terminated, @cap bytes). 0 or a
 * negative errno.
 */
int ts_swift_control(const char *json, char *answer, size_t cap);

#endif /* SMUX_TESTS_SUPPORT_SWIFT_SERVER_H */
