/* SPDX-License-Identifier: Apache-2.0 */
/*
 * controllers/controllerargs.h - `hostdevd controller`'s command line and environment, read into a
 * struct controller_config (controllers/controller.h). Logs what is wrong with an option.
 */
#pragma once

#include "controllers/controller.h"

/* Parses argv (after "controller"). Returns 0, 1 (--help printed) or -EINVAL (logged). */
int controllerargs_parse(int argc, char **argv, struct controller_config *ret);
