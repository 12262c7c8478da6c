// SPDX-License-Identifier: Apache-2.0

//go:build !race

package s3lect

const raceEnabled = false
