#!/bin/sh
# Builds the aksandbox worker's container image from the project's Debian packages
# (`make deb` makes them; docs/kubernetes.md, "The worker image"). No registry is needed:
# the image lands in the local Docker Engine, which a single-node cluster's kubelet (or
# `kind load docker-image`, `k3s ctr images import`) takes it from.
#
# usage: contrib/image/build-worker-image.sh [--base IMAGE] [--tag TAG]
#                                            [--packages "NAME..."] DEB_DIR
#   DEB_DIR     where the .deb files are (make deb: BUILDDIR/_deb)
#   --base      a Debian 12 image whose apt reaches a mirror (default debian:bookworm-slim)
#   --tag       the image's name (default aksandbox-worker:latest)
#   --packages  the packages to install (default: the core, the CLI, and the plugins a
#               queue worker on Kubernetes uses: kubernetes, nats, redis, sqs, dynamodb,
#               signed-token)
# The build runs with the host's network (docker build --network host), so that apt can
# reach the mirror on engines without a default bridge.
set -eu
here=$(cd "$(dirname "$0")" && pwd)
base=debian:bookworm-slim
tag=aksandbox-worker:latest
packages="libaksandbox1 aksandbox aksandbox-plugin-kubernetes aksandbox-plugin-nats
aksandbox-plugin-redis aksandbox-plugin-sqs aksandbox-plugin-dynamodb
aksandbox-plugin-signed-token"
die() { echo "build-worker-image: $*" >&2; exit 1; }
usage() { sed -n '/^# usage/,/^# The build/p' "$0" | sed -e '$d' -e 's/^# \{0,1\}//' >&2; exit 2; }
while [ $# -gt 0 ]; do
	case $1 in
	--base) [ $# -ge 2 ] || usage; base=$2; shift 2 ;;
	--tag) [ $# -ge 2 ] || usage; tag=$2; shift 2 ;;
	--packages) [ $# -ge 2 ] || usage; packages=$2; shift 2 ;;
	-h | --help) usage ;;
	-*) echo "build-worker-image: unknown option $1" >&2; usage ;;
	*) break ;;
	esac
done
[ $# -eq 1 ] || usage
debs=$1
[ -d "$debs" ] || die "$debs is not a directory (make deb puts the packages in BUILDDIR/_deb)"
command -v docker >/dev/null || die "docker is not installed"

ctx=$(mktemp -d "${TMPDIR:-/tmp}/aks-worker-image.XXXXXX")
trap 'rm -rf "$ctx"' EXIT INT TERM
mkdir "$ctx/debs"
cp "$here/Dockerfile" "$ctx/Dockerfile"
arch=$(dpkg --print-architecture 2>/dev/null || echo amd64)
for p in $packages; do
	# the newest version of the package in DEB_DIR: NAME_VERSION_ARCH.deb, never -dbgsym
	f=$(ls "$debs/${p}_"*"_$arch.deb" "$debs/${p}_"*_all.deb 2>/dev/null | sort -V | tail -1)
	[ -n "$f" ] || die "no package $p in $debs (make deb builds them)"
	cp "$f" "$ctx/debs/"
done
echo "build-worker-image: $tag from $base with $(ls "$ctx/debs" | tr '\n' ' ')" >&2
docker build --network host --build-arg BASE="$base" -t "$tag" "$ctx" >"$ctx/build.log" 2>&1 ||
	{ tail -40 "$ctx/build.log" >&2; die "docker build failed (its log's end above)"; }
echo "build-worker-image: built $tag ($(docker image inspect -f '{{.Id}}' "$tag"))" >&2
