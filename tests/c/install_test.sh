#!/bin/sh
# SPDX-License-Identifier: Apache-2.0
# Installs the build into a temporary prefix and builds the README example
# against it twice: with pkg-config and with CMake's find_package(s3lect).
set -eu
build=$1 src=$2
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
cmake --install "$build" --prefix "$tmp/prefix" >/dev/null
libdir=$(dirname "$(find "$tmp/prefix" -name s3lect.pc)")/..
pc=$(PKG_CONFIG_PATH="$libdir/pkgconfig" pkg-config --cflags --libs s3lect)
# shellcheck disable=SC2086
cc "$src/examples/basic.c" $pc -Wl,-rpath,"$libdir" -o "$tmp/basic-pc"
"$tmp/basic-pc" "file://$tmp/lock.json" pc | grep -q "acquired leadership"
mkdir "$tmp/consumer"
cat >"$tmp/consumer/CMakeLists.txt" <<CM
cmake_minimum_required(VERSION 3.18)
project(consumer C)
find_package(s3lect 0.1 REQUIRED)
add_executable(basic $src/examples/basic.c)
target_link_libraries(basic PRIVATE s3lect::s3lect)
CM
cmake -S "$tmp/consumer" -B "$tmp/consumer/b" -DCMAKE_PREFIX_PATH="$tmp/prefix" >/dev/null
cmake --build "$tmp/consumer/b" >/dev/null
"$tmp/consumer/b/basic" "file://$tmp/lock2.json" cm | grep -q "acquired leadership"
test -x "$tmp/prefix/bin/s3lect" && "$tmp/prefix/bin/s3lect" --version
echo "install: pkg-config and find_package(s3lect) consumers built and ran"
