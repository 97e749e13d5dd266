/* SPDX-License-Identifier: MIT */
/*
 * support/bunny_server.h - the Bunny Storage emulator
 * (tests/servers/bunny_emu.py) for tests: start it on loopback in a temp
 * directory, turn its fault knobs, read its counters.
 */
#ifndef SMUX_TESTS_SUPPORT_BUNNY_SERVER_H
#define SMUX_TESTS_SUPPORT_BUNNY_SERVER_H

#include <stddef.h>

#include "support/test_server.h"

/* The zone and password the emulator is started with. */
#define TS_BUNNY_ZONE "zone"
#define TS_BUNNY_KEY  "emu-secret"

/*
 * Starts the emulator with its files under @dir (a fresh temp directory
 * the caller removes) and writes "http://127.0.0.1:PORT" to @url. 0,
 * -ENOENT when python3 or the script is missing, or a negative errno.
 */
int ts_bunny_start(struct ts_server *s, const char *dir, char *url, size_t cap);

/* Makes another zone @zone with password @key on a running emulator (one
 * server, a fresh zone per test). 0 or -EIO. */
int ts_bunny_zone(const struct ts_server *s, const char *zone, const char *key);

/* Sets knobs: @query is "name=value[&name=value]". 0 or -EIO. */
int ts_bunny_set(const struct ts_server *s, const char *query);

/* Reads one integer counter of /_emu/stats ("served429", "by_method.PUT",
 * ...); -1 when it cannot be read. */
long ts_bunny_stat(const struct ts_server *s, const char *name);

#endif /* SMUX_TESTS_SUPPORT_BUNNY_SERVER_H */
