/* SPDX-License-Identifier: Apache-2.0 */
/*
 * controllers/agentargs.h - `hostdevd agent`'s command line and environment, read into a
 * struct agent_config (controllers/agent.h). Logs what is wrong with an option.
 */
#pragma once

#include "controllers/agent.h"

/* Parses argv (after the "agent" word) and the environment into `ret`. Returns 0, 1 when
 * --help was printed, or -EINVAL after printing what is wrong. */
int agentargs_parse(int argc, char **argv, struct agent_config *ret);
