/* SPDX-License-Identifier: Apache-2.0 */
/*
 * test/unit/main.c - runs every CUnit suite; exits non-zero on any failure.
 *
 * Suites register themselves: each test/unit/test_<module>.c defines
 * `CU_SuiteInfo <module>_suites[]`, and the Makefile generates suites.gen.h from those
 * definitions. CU_basic_run_tests() reports only framework errors, so the exit code comes
 * from the failure counters. An optional argument runs only the suite of that name.
 */
#include <CUnit/Basic.h>
#include <stdio.h>
#include <string.h>

#include "suites.gen.h"

int main(int argc, char **argv)
{
    if (CU_initialize_registry() != CUE_SUCCESS)
        return 2;
    for (size_t i = 0; i < sizeof(all_suites) / sizeof(all_suites[0]); i++) {
        if (CU_register_suites(all_suites[i]) != CUE_SUCCESS) {
            fprintf(stderr, "cannot register suites: %s\n", CU_get_error_msg());
            CU_cleanup_registry();
            return 2;
        }
    }
    CU_basic_set_mode(CU_BRM_VERBOSE);
    CU_ErrorCode rc;
    if (argc > 1) {
        CU_pSuite suite = CU_get_suite(argv[1]);
        rc = suite ? CU_basic_run_suite(suite) : CUE_NOSUITE;
    } else {
        rc = CU_basic_run_tests();
    }
    unsigned failures = CU_get_number_of_failures() + CU_get_number_of_suites_failed() +
                        CU_get_number_of_tests_failed();
    unsigned run = CU_get_number_of_tests_run();
    CU_cleanup_registry();
    if (rc != CUE_SUCCESS) {
        fprintf(stderr, "unit: runner error %d\n", rc);
        return 2;
    }
    if (run == 0) {
        fprintf(stderr, "unit: no test ran\n");
        return 2;
    }
    return failures ? 1 : 0;
}
