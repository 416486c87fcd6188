/* SPDX-License-Identifier: Apache-2.0 */
/* test/unit/suites.h - every CUnit suite the runner registers; one array per module. */
#pragma once

#include <CUnit/CUnit.h>

extern CU_SuiteInfo buf_suites[];
extern CU_SuiteInfo log_suites[];
extern CU_SuiteInfo names_suites[];
