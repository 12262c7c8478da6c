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
# The man page and completions come with the CLI (when the build made them).
if [ -f "$build/share/man/s3lect.1" ]; then
    test -f "$tmp/prefix/share/man/man1/s3lect.1"
    test -f "$tmp/prefix/share/bash-completion/completions/s3lect"
    test -f "$tmp/prefix/share/zsh/site-functions/_s3lect"
fi
# The static archive: no libs3lect.so needed at run time. `pkg-config --static`
# answers (Libs.private, Requires.private); its libcurl part names Debian's
# libcurl dependencies, whose static archives Debian does not ship, so here the
# dependencies are linked as shared libraries (the self-contained build links
# them statically, docs/build.md).
test -f "$libdir/libs3lect.a"
PKG_CONFIG_PATH="$libdir/pkgconfig" pkg-config --static --libs s3lect | grep -q -- -lpthread
deps=$(PKG_CONFIG_PATH="$libdir/pkgconfig" pkg-config --libs libcurl libcjson)
tls=$(pkg-config --libs libssl libcrypto 2>/dev/null || echo "-lssl -lcrypto")
# hiredis when the library was built with the Redis store (S3LECT_REDIS).
redis=""
if PKG_CONFIG_PATH="$libdir/pkgconfig" pkg-config --print-requires-private s3lect | grep -qx hiredis; then
    redis=$(pkg-config --libs hiredis)
fi
# shellcheck disable=SC2086
cc "$src/examples/basic.c" -I"$tmp/prefix/include" "$libdir/libs3lect.a" $deps $tls $redis -lpthread -lm \
    -o "$tmp/basic-static"
if ldd "$tmp/basic-static" | grep -q libs3lect; then
    echo "install: the program linked with libs3lect.a still needs libs3lect.so" >&2
    exit 1
fi
mv "$tmp/prefix" "$tmp/moved" # the program must not depend on where the library was
"$tmp/basic-static" "file://$tmp/lock3.json" st | grep -q "acquired leadership"
echo "install: pkg-config, find_package(s3lect) and static (pkg-config --static) consumers built and ran"
