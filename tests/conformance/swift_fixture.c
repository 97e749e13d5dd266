// SPDX-License-Identifier: MIT
/*
 * swift_fixture.c - the conformance fixtures on OpenStack Swift (Debian's,
 * tests/servers/swift.sh, tempauth) and on the identity v2.0 emulator in
 * front of it (tests/servers/swift_identity.py).
 *
 * One server (and one emulator) serves every test of the process
 * (support/swift_server.h); each test gets a fresh, empty container, so
 * every backend starts empty.
 */
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include "conformance/conformance.h"
#include "smux/swift.h"
#include "support/swift_server.h"

int conf_swift_setup(void **priv, struct smux_backend **out);
int conf_swift_identity_setup(void **priv, struct smux_backend **out);
void conf_swift_teardown(void *priv);

static unsigned seq;

static int make(bool identity, struct smux_backend **out)
{
	struct smux_swift_opts o = {0};
	struct smux_error err = {0};
	char container[64], msg[600];
	struct ts_swift sw;
	int rc = ts_swift_start(&sw);

	if (rc < 0)
		return rc;
	snprintf(container, sizeof(container), "conf-%d-%u", (int)getpid(),
		 ++seq);
	o.container = container;
	o.list_page = 7; /* paging runs in every listing test */
	if (identity) {
		o.auth = SMUX_SWIFT_AUTH_V2;
		o.auth_url = sw.identity;
		o.username = TS_SWIFT_V2_USER;
		o.key = TS_SWIFT_V2_APIKEY;
	} else {
		o.auth_url = sw.auth_v1;
		o.username = sw.user_v1;
		o.key = sw.key_v1;
	}
	rc = smux_swift_new(identity ? "swift-identity" : "swift", &o, out,
			    &err);
	if (rc < 0)
		fprintf(stderr, "swift fixture: %s\n",
			smux_error_format(&err, msg, sizeof(msg)));
	return rc;
}

int conf_swift_setup(void **priv, struct smux_backend **out)
{
	*priv = NULL;
	return make(false, out);
}

int conf_swift_identity_setup(void **priv, struct smux_backend **out)
{
	*priv = NULL;
	return make(true, out);
}

void conf_swift_teardown(void *priv)
{
	(void)priv; /* the container stays; the server goes at exit */
}
