#!/bin/sh
# Generates configure and the Makefile.in files from a git checkout.
set -e
cd "$(dirname "$0")"
# git does not keep the empty m4/ folder that libtoolize fills.
mkdir -p m4
autoreconf --install --force --warnings=all
echo "Now run ./configure (see ./configure --help), then make."
