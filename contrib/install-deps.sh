#!/bin/sh
# Installs what aksandbox needs to build and test on Debian 12, from Debian's
# own packages. Idempotent: installs only what is missing.
set -eu
packages="build-essential autoconf automake libtool pkg-config autoconf-archive
  libyaml-dev libjson-c-dev libmicrohttpd-dev libssl-dev libcmocka-dev python3 hyperfine clang clang-format libclang-rt-14-dev valgrind
  libcurl4-openssl-dev libarchive-dev libwebsockets-dev docker.io runsc debootstrap
  libhiredis-dev redis-server
  libnats-dev nats-server
  libseccomp-dev bubblewrap
  libxml2-dev sudo
  curl git python3-pip openssl iproute2 python3-yaml
  debhelper dpkg-dev fakeroot lintian"
# curl, git, python3-pip, openssl, iproute2: the egress tests run these clients inside
# sandboxes that see this host's /usr (bubblewrap), and make their test certificates.
# libxml2-dev: the AWS plugins read STS's XML answers; sudo: the ec2_ssm tests' fake instance
# runs a user's commands with `sudo -u` as SSM's agent does.
# python3-yaml: k8s-manifests.test reads the rendered manifests with Debian's python3.
# debhelper, dpkg-dev, fakeroot, lintian: `make deb` and contrib/deb-test.sh (docs/packaging.md).
# The MCP tests drive the server with the official TypeScript SDK: Node.js and npm (the
# machine's own when present, else Debian's).
command -v node >/dev/null && command -v npm >/dev/null || packages="$packages nodejs npm"
missing=""
for p in $packages; do
	dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" ||
		missing="$missing $p"
done
[ -z "$missing" ] && exit 0
sudo=""
[ "$(id -u)" -eq 0 ] || sudo="sudo"
echo "installing:$missing"
$sudo apt-get update -qq
# shellcheck disable=SC2086
DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends $missing >/dev/null
