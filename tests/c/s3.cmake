# SPDX-License-Identifier: Apache-2.0
# C unit tests of the S3 layer (included by tests/c/CMakeLists.txt).
# SigV4 vectors, the XML error parser and status table, credential
# precedence, the S3 store against a canned loopback server, and the probe
# tool the pytest suites use to drive the S3 store against MinIO and moto.
set(S3LECT_SIGV4_DATA ${PROJECT_SOURCE_DIR}/tests/data/aws-sigv4)
# Count the v4 case folders so that a case the test could not find fails it.
file(GLOB S3LECT_SIGV4_CASES LIST_DIRECTORIES true ${S3LECT_SIGV4_DATA}/v4/*)
list(LENGTH S3LECT_SIGV4_CASES S3LECT_SIGV4_NCASES)

function(s3lect_s3_test name)
  add_executable(${name} ${name}.c testutil.c)
  target_include_directories(${name} PRIVATE ${S3LECT_INTERNAL_INCLUDE_DIRS})
  target_compile_definitions(${name} PRIVATE _GNU_SOURCE)
  target_link_libraries(${name} PRIVATE s3lect_static)
endfunction()

s3lect_s3_test(test_sigv4)
add_test(NAME sigv4 COMMAND test_sigv4 ${S3LECT_SIGV4_DATA} ${S3LECT_SIGV4_NCASES})
s3lect_s3_test(test_s3_xml)
add_test(NAME s3_xml COMMAND test_s3_xml)
s3lect_s3_test(test_aws_creds)
add_test(NAME aws_creds COMMAND test_aws_creds)
s3lect_s3_test(test_s3_status)
add_test(NAME s3_status COMMAND test_s3_status)
set_tests_properties(s3_status PROPERTIES TIMEOUT 120)

# Not a test by itself: tests/harness/probe.py runs it against real servers.
add_executable(s3_probe s3_probe.c testutil.c)
target_include_directories(s3_probe PRIVATE ${S3LECT_INTERNAL_INCLUDE_DIRS})
target_compile_definitions(s3_probe PRIVATE _GNU_SOURCE)
target_link_libraries(s3_probe PRIVATE s3lect_static)
s3lect_s3_test(test_cred_chain)
add_test(NAME cred_chain COMMAND test_cred_chain)
set_tests_properties(cred_chain PROPERTIES TIMEOUT 120)

# Not a test by itself: tests/s3/test_s3_runtime.py runs it against MinIO.
add_executable(runtime_scale runtime_scale.c testutil.c)
target_compile_definitions(runtime_scale PRIVATE _GNU_SOURCE)
target_link_libraries(runtime_scale PRIVATE s3lect_static Threads::Threads)

# Not a test by itself: tests/s3/test_herd.py and bench/run herd run it through
# an outage of MinIO.
add_executable(herd herd.c)
target_compile_definitions(herd PRIVATE _GNU_SOURCE)
target_link_libraries(herd PRIVATE s3lect_static Threads::Threads)
