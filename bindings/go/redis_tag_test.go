// SPDX-License-Identifier: Apache-2.0

//go:build cgo && (s3lect_redis || s3lect_system)

package s3lect

// The library has the Redis store: the bundle built with the tag
// s3lect_redis, or the installed libs3lect (built with hiredis by
// scripts/test-go's CMake build, S3LECT_REDIS=AUTO).
const haveRedis = true
