#!/usr/bin/env bash
# Build the local systemd base images the molecule scenarios and the lab host run on.
#
# No container registry is reachable from our CI machines, so images are made from scratch:
# debootstrap a minimal rootfs, `docker import` it, then add the systemd entrypoint with a
# three-line Dockerfile. The apt mirror is read from THIS machine's apt configuration at run
# time (override with SGLANG_IMAGE_DEBIAN_MIRROR / SGLANG_IMAGE_UBUNTU_MIRROR).
#
# An image is rebuilt only when it is missing or its recipe (this script + the Dockerfile)
# changed: the recipe hash is stored as the image label org.sglang-deploy.recipe.
#
# usage: molecule/images/build.sh [debian12] [ubuntu2404]    (default: both)
# Debian 12 must build (exit 1 otherwise). Ubuntu 24.04 is best effort: when it cannot be
# built a loud banner is printed and molecule/images/.ubuntu2404.unavailable is written so
# the scenarios that need it skip loudly (exit 0).
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
export DOCKER_BUILDKIT=0
recipe="$(cat "$0" "$here/Dockerfile.systemd" | sha256sum | cut -c1-16)"
include="systemd,systemd-sysv,dbus,python3,python3-apt,procps,iproute2,ca-certificates,sudo,gnupg,curl"

log() { printf '[images] %s\n' "$*" >&2; }

debian_mirror() {
  if [[ -n "${SGLANG_IMAGE_DEBIAN_MIRROR:-}" ]]; then echo "$SGLANG_IMAGE_DEBIAN_MIRROR"; return; fi
  local m=""
  m="$(awk '/^URIs:/{print $2; exit}' /etc/apt/sources.list.d/*.sources 2>/dev/null || true)"
  [[ -n "$m" ]] || m="$(awk '$1=="deb"{print $2; exit}' /etc/apt/sources.list 2>/dev/null || true)"
  [[ -n "$m" ]] || { log "cannot find an apt mirror in this machine's configuration"; return 1; }
  echo "$m"
}

current_recipe() { docker image inspect -f '{{ index .Config.Labels "org.sglang-deploy.recipe" }}' "$1" 2>/dev/null || true; }

build_one() { # name suite mirror [debootstrap extra args...]
  local name="$1" suite="$2" mirror="$3"; shift 3
  local image="sglang-deploy/${name}:latest"
  if [[ "$(current_recipe "$image")" == "$recipe" ]]; then
    log "$image is up to date (recipe $recipe)"; return 0
  fi
  local work; work="$(mktemp -d /var/tmp/sglang-image.XXXXXX)"
  log "debootstrap $suite from $mirror into $work/rootfs"
  local t0=$SECONDS
  if ! debootstrap --variant=minbase --include="$include" "$@" "$suite" "$work/rootfs" "$mirror" \
      >"$work/debootstrap.log" 2>&1; then
    tail -n 20 "$work/debootstrap.log" >&2
    rm -rf "$work"
    return 1
  fi
  # A container does not need these; they fail or hang without real devices.
  for unit in getty.target systemd-udevd.service systemd-udev-trigger.service \
              systemd-remount-fs.service console-getty.service serial-getty@.service \
              systemd-firstboot.service; do
    ln -sf /dev/null "$work/rootfs/etc/systemd/system/$unit"
  done
  : > "$work/rootfs/etc/machine-id"
  rm -f "$work/rootfs/var/lib/dbus/machine-id"
  rm -rf "$work/rootfs/var/cache/apt/archives/"*.deb "$work/rootfs/var/lib/apt/lists/"*
  tar -C "$work/rootfs" -c . | docker import - "sglang-deploy/${name}:rootfs" >/dev/null
  cp "$here/Dockerfile.systemd" "$work/Dockerfile"
  docker build -q --build-arg "BASE=sglang-deploy/${name}:rootfs" \
    --label "org.sglang-deploy.recipe=$recipe" -t "$image" "$work" >/dev/null
  rm -rf "$work"
  log "built $image in $((SECONDS - t0)) s (recipe $recipe)"
}

build_debian12() { build_one debian12 bookworm "$(debian_mirror)"; }

build_ubuntu2404() {
  local marker="$here/.ubuntu2404.unavailable"
  local mirror="${SGLANG_IMAGE_UBUNTU_MIRROR:-http://archive.ubuntu.com/ubuntu}"
  local why="" keyring=""
  # Debian ships no Ubuntu keyring: fetch Ubuntu's own package, pinned by sha256.
  local kr_deb="pool/main/u/ubuntu-keyring/ubuntu-keyring_2023.11.28.1_all.deb"
  local kr_sha="36de43b15853ccae0028e9a767613770c704833f82586f28eb262f0311adb8a8"
  local kr_dir; kr_dir="$(mktemp -d /var/tmp/ubuntu-keyring.XXXXXX)"
  if curl -fsS --max-time 60 -o "$kr_dir/k.deb" "$mirror/$kr_deb" \
      && echo "$kr_sha  $kr_dir/k.deb" | sha256sum -c --quiet - \
      && dpkg-deb -x "$kr_dir/k.deb" "$kr_dir/x"; then
    keyring="$kr_dir/x/usr/share/keyrings/ubuntu-archive-keyring.gpg"
  fi
  if [[ ! -e /usr/share/debootstrap/scripts/noble ]]; then
    # bookworm's debootstrap predates noble; every Ubuntu suite since gutsy uses that script.
    ln -sf gutsy /usr/share/debootstrap/scripts/noble 2>/dev/null || why="no debootstrap script for noble"
  fi
  [[ -n "$keyring" && -e "$keyring" ]] || why="${why:+$why; }Ubuntu archive keyring not available from $mirror"
  if [[ -z "$why" ]]; then
    if timeout "${SGLANG_IMAGE_UBUNTU_TIMEOUT:-600}" bash -c "$(declare -f build_one log current_recipe); \
        here='$here' recipe='$recipe' include='$include'; build_one ubuntu2404 noble '$mirror' \
        --keyring='$keyring' --components=main,universe"; then
      rm -f "$marker"; rm -rf "$kr_dir"; return 0
    fi
    why="debootstrap of noble from $mirror failed"
  fi
  rm -rf "$kr_dir"
  printf '%s\n' "$why" > "$marker"
  cat >&2 <<BANNER
################################################################################
##  UBUNTU 24.04 TEST IMAGE NOT AVAILABLE: $why
##  Scenarios that need it will be SKIPPED (loudly). Debian 12 scenarios still run.
################################################################################
BANNER
}

targets=("$@"); [[ ${#targets[@]} -gt 0 ]] || targets=(debian12 ubuntu2404)
for t in "${targets[@]}"; do
  case "$t" in
    debian12) build_debian12 ;;
    ubuntu2404) build_ubuntu2404 ;;
    *) log "unknown image '$t' (allowed: debian12, ubuntu2404)"; exit 2 ;;
  esac
done
