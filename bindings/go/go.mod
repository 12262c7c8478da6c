// SPDX-License-Identifier: Apache-2.0

module github.com/s3lect/s3lect/bindings/go

go 1.22
