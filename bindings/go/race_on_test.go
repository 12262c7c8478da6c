// SPDX-License-Identifier: Apache-2.0

//go:build race

package s3lect

// raceEnabled: this test binary was built with -race, so the Go programs
// the tests build and test are too.
const raceEnabled = true
