# SPDX-License-Identifier: Apache-2.0
# C tests of the peer layer (included by tests/c/CMakeLists.txt): the HTTP
# parser and answers with a scripted source, and the TLS server and libcurl
# client on 127.0.0.1 with certificates made at test time by the openssl
# command. (Peer mode end to end, with MinIO, is tested through Python.)
function(s3lect_peer_test name)
  add_executable(${name} ${name}.c testutil.c)
  target_include_directories(${name} PRIVATE ${S3LECT_INTERNAL_INCLUDE_DIRS})
  target_compile_definitions(${name} PRIVATE _GNU_SOURCE)
  target_link_libraries(${name} PRIVATE s3lect_static)
endfunction()

s3lect_peer_test(test_peer_http)
add_test(NAME peer_http COMMAND test_peer_http)
set_tests_properties(peer_http PROPERTIES TIMEOUT 120)
s3lect_peer_test(test_peer_batch)
add_test(NAME peer_batch COMMAND test_peer_batch)
set_tests_properties(peer_batch PROPERTIES TIMEOUT 60)

# The TLS test drives a real client with the OpenSSL API (TLS 1.1 refusal,
# slow clients), so it needs the OpenSSL build of the library.
if(S3LECT_TLS STREQUAL "OpenSSL")
  find_program(S3LECT_OPENSSL_CLI openssl)
  s3lect_peer_test(test_peer_tls)
  add_test(NAME peer_tls COMMAND test_peer_tls ${S3LECT_OPENSSL_CLI})
  set_tests_properties(peer_tls PROPERTIES TIMEOUT 300)

  # Failed peer checks of a running follower, one per class (issue 14 item
  # 10): reported once, counted in the status, S3 (here a file lock) still
  # followed. Its fake endpoints use the OpenSSL API too.
  # Every peer endpoint of a process on one listener (issue 28): real
  # electors on file locks, a raw OpenSSL client.
  s3lect_peer_test(test_peer_shared)
  add_test(NAME peer_shared COMMAND test_peer_shared)
  set_tests_properties(peer_shared PROPERTIES TIMEOUT 300)

  s3lect_peer_test(test_peer_failures)
  add_test(NAME peer_failures COMMAND test_peer_failures ${S3LECT_OPENSSL_CLI})
  set_tests_properties(peer_failures PROPERTIES TIMEOUT 300)
endif()

# Not a test by itself: tests/peer/test_peer_hub.py runs two of these
# processes (many zero-config electors each) to check batched follower checks.
add_executable(peer_hub_node peer_hub_node.c testutil.c)
target_include_directories(peer_hub_node PRIVATE ${S3LECT_INTERNAL_INCLUDE_DIRS})
target_compile_definitions(peer_hub_node PRIVATE _GNU_SOURCE)
target_link_libraries(peer_hub_node PRIVATE s3lect_static)
