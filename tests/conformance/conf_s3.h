/* SPDX-License-Identifier: MIT */
/*
 * conf_s3.h - the s3 fixtures (conf_s3.c) registry.c lists.
 */
#ifndef SMUX_TESTS_CONF_S3_H
#define SMUX_TESTS_CONF_S3_H

#include "smux/backend.h"

int conf_s3_swift_setup(void **priv, struct smux_backend **out);
int conf_s3_s3rver_setup(void **priv, struct smux_backend **out);
void conf_s3_teardown(void *priv);

#endif /* SMUX_TESTS_CONF_S3_H */
