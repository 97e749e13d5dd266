/* SPDX-License-Identifier: MIT */
/*
 * config_opts.c - the mount options of one loaded config given to another.
 *
 * A config file read again at run time (`add NAME`, reload) knows its
 * [mount] section but not the -o options the mount was started with (-o
 * ro, state_dir=, backend_timeout=, ...): members built from it must get
 * what the mount runs with, and .smux/config must go on showing the
 * options after -o. Owns nothing; pure copying.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "fs/config_internal.h"

/* strdup of @s, NULL staying NULL; false on ENOMEM. */
static bool dup_opt(char **out, const char *s)
{
	*out = NULL;
	if (!s)
		return true;
	*out = strdup(s);
	return *out != NULL;
}

int smux_config_copy_opts(struct smux_config *dst,
			  const struct smux_config *src)
{
	struct smux_fs_opts o = src->opts;
	const struct smux_fs_opts *s = &src->opts;

	/* none of @src's strings may be freed below */
	o.root = o.cache_dir = o.state_dir = o.prefix = NULL;
	o.otlp_endpoint = o.event_webhook = NULL;
	if (!dup_opt(&o.root, s->root) ||
	    !dup_opt(&o.cache_dir, s->cache_dir) ||
	    !dup_opt(&o.state_dir, s->state_dir) ||
	    !dup_opt(&o.prefix, s->prefix) ||
	    !dup_opt(&o.otlp_endpoint, s->otlp_endpoint) ||
	    !dup_opt(&o.event_webhook, s->event_webhook)) {
		free(o.root);
		free(o.cache_dir);
		free(o.state_dir);
		free(o.prefix);
		free(o.otlp_endpoint);
		free(o.event_webhook);
		return -ENOMEM;
	}
	free(dst->opts.root);
	free(dst->opts.cache_dir);
	free(dst->opts.state_dir);
	free(dst->opts.prefix);
	free(dst->opts.otlp_endpoint);
	free(dst->opts.event_webhook);
	dst->opts = o;
	return 0;
}
