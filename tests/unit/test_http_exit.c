/* SPDX-License-Identifier: MIT */
/*
 * test_http_exit.c - the process exits while a worker is still inside a
 * network call (backends/http_client.c: OpenSSL is not torn down at
 * exit).
 *
 * A worker stuck in a member call is left to finish it in the background
 * (core/bulkhead_orphans.c), so at an unmount one can still be inside
 * curl and OpenSSL when the daemon exits. OpenSSL's own exit handler freed
 * its providers and tables under it: CI's ASan lane crashed at the unmount
 * of test_tls (SEGV near NULL in a library, thread T12, a health probe of
 * an untrusted TLS server), and a probe stuck in a handshake with a server
 * that never answers gave a heap-use-after-free at exit.
 *
 * Here each case runs in a forked child that makes an HTTP client (the
 * first use of OpenSSL in the process, as in the daemon), holds a digest
 * half done (a connection's state), and exits. An exit handler registered
 * before OpenSSL was initialized runs after OpenSSL's (atexit runs them in
 * reverse): it stands for the worker, finishing that digest and starting
 * an HMAC, as curl and a request signer do. Both must work.
 *
 * Not in TSAN_TESTS: ThreadSanitizer refuses threads in a child forked
 * from a threaded process.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <openssl/evp.h>
#include <openssl/hmac.h>

#include "backends/http_client.h"
#include "support/fork_child.h"

static int report_fd = -1;
static EVP_MD_CTX *in_flight; /* begun before the exit */

static void report(char c)
{
	if (write(report_fd, &c, 1) != 1)
		_exit(90);
}

/* After OpenSSL's exit handler, if it has one: the worker's calls. */
static void worker_after_exit(void)
{
	unsigned char md[EVP_MAX_MD_SIZE];
	unsigned int len = 0;
	bool ok;

	ok = EVP_DigestUpdate(in_flight, "tail", 4) == 1 &&
	     EVP_DigestFinal_ex(in_flight, md, &len) == 1 && len == 32;
	EVP_MD_CTX_free(in_flight);
	in_flight = NULL;
	ok = ok &&
	     HMAC(EVP_sha256(), "key", 3, (const unsigned char *)"msg", 3, md,
		  &len) &&
	     len == 32;
	report(ok ? 'K' : 'F');
}

static void child_exits_with_a_worker_in_openssl(int fd)
{
	struct smux__http_opts o = {.backend = "exit"};
	struct smux__http *h = NULL;
	struct smux_error err;

	report_fd = fd;
	/* before any use of OpenSSL: runs after its exit handler */
	if (atexit(worker_after_exit))
		_exit(91);
	if (smux__http_new(&o, &h, &err))
		_exit(92);
	in_flight = EVP_MD_CTX_new();
	if (!in_flight ||
	    EVP_DigestInit_ex(in_flight, EVP_sha256(), NULL) != 1 ||
	    EVP_DigestUpdate(in_flight, "head", 4) != 1)
		_exit(93);
	smux__http_free(h);
	exit(0);
}

static void test_openssl_outlives_exit(void **state)
{
	char got[8];

	(void)state;
	fc_run_child(child_exits_with_a_worker_in_openssl, got, sizeof(got));
	assert_string_equal(got, "K");
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_openssl_outlives_exit),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
