#!/usr/bin/env bash
# Builds engram's Debian packages from this tree:
#   engramd        the daemon, engramctl, the systemd unit and its user,
#                  /etc/engram/engramd.toml (a conffile), man pages 1, 5, 7, 8
#   libengram0     libengram.so.0, the client library
#   libengram-server0  libengram-server.so.0, the server embedded in a process
#   libengram-dev  headers, the .so links, pkg-config and CMake files, man3
# Usage: scripts/build-deb.sh [OUT_DIR]   (default build/deb; prints the .deb paths)
# Then: sudo apt install ./build/deb/*.deb
set -euo pipefail
src=$(cd "$(dirname "$0")/.." && pwd)
out=$(mkdir -p "${1:-$src/build/deb}" && cd "${1:-$src/build/deb}" && pwd)
for tool in dpkg-deb dpkg-shlibdeps dpkg-architecture; do
  command -v "$tool" >/dev/null || { echo "build-deb: $tool is missing: apt-get install dpkg-dev" >&2; exit 1; }
done

version=$(sed -n 's/^project(engram VERSION \([0-9.]*\).*/\1/p' "$src/CMakeLists.txt")
arch=$(dpkg-architecture -qDEB_HOST_ARCH)
multiarch=$(dpkg-architecture -qDEB_HOST_MULTIARCH)

echo "build-deb: building engram $version ($arch)" >&2
cmake -S "$src" -B "$out/build" -DCMAKE_BUILD_TYPE=Release -DCMAKE_INSTALL_PREFIX=/usr \
  -DCMAKE_INSTALL_SYSCONFDIR=/etc -DCMAKE_INSTALL_LIBDIR="lib/$multiarch" \
  -DENGRAM_BUILD_TESTS=OFF -DENGRAM_BUILD_BENCH=OFF -DENGRAM_BUILD_DEMO=OFF -DENGRAM_BUILD_AGENTS=OFF >/dev/null
cmake --build "$out/build" -j"$(nproc)" >"$out/build.log" 2>&1 || { tail -30 "$out/build.log"; exit 1; }
stage=$out/stage
rm -rf "$stage"
DESTDIR="$stage/all" cmake --install "$out/build" >/dev/null
all=$stage/all
strip --strip-unneeded "$all/usr/bin/engramd" "$all/usr/bin/engramctl" "$all/usr/lib/$multiarch"/libengram.so.*.* \
  "$all/usr/lib/$multiarch"/libengram-server.so.*.*
# Debian keeps manual pages compressed.
find "$all/usr/share/man" -type f -exec gzip -9n {} +

# Moves paths (relative to the staged root) from the staged install into a
# package's tree, debian/PACKAGE as dpkg-shlibdeps expects it.
pkgs=$stage/debian
take() {
  local pkg=$1
  shift
  for p in "$@"; do
    [ -e "$all/$p" ] || [ -L "$all/$p" ] || { echo "build-deb: $p was not installed" >&2; exit 1; }
    mkdir -p "$pkgs/$pkg/$(dirname "$p")"
    mv "$all/$p" "$pkgs/$pkg/$p"
  done
}
lib=usr/lib/$multiarch
real=$lib/$(cd "$all/$lib" && echo libengram.so.0.*)  # libengram.so.0.x.y
real_server=$lib/$(cd "$all/$lib" && echo libengram-server.so.0.*)
take libengram0 "$lib"/libengram.so.0 "$real"
take libengram-server0 "$lib"/libengram-server.so.0 "$real_server"
take libengram-dev usr/include/engram "$lib"/libengram.so "$lib"/libengram-server.so "$lib"/pkgconfig "$lib"/cmake \
  usr/share/man/man3
take engramd usr/bin etc/engram usr/lib/systemd/system usr/lib/sysusers.d \
  usr/share/man/man1 usr/share/man/man5 usr/share/man/man7 usr/share/man/man8
left=$(cd "$all" && find . -type f -o -type l)
[ -z "$left" ] || { echo "build-deb: installed but in no package:" "$left" >&2; exit 1; }

# Runtime dependencies from the binaries' DT_NEEDED (dpkg-shlibdeps wants a
# debian/control to exist; libengram.so.0 is ours, named in shlibs.local).
printf 'Source: engram\n\nPackage: engramd\nArchitecture: any\n\nPackage: libengram0\nArchitecture: any\n\nPackage: libengram-server0\nArchitecture: any\n' >"$stage/debian/control"
echo "libengram 0 libengram0 (>= $version)" >"$stage/debian/shlibs.local"
echo "libengram-server 0 libengram-server0 (>= $version)" >>"$stage/debian/shlibs.local"
depends() {
  (cd "$stage" && dpkg-shlibdeps -O --warnings=0 "$@" | sed -n 's/^shlibs:Depends=//p')
}
deps_lib=$(depends "debian/libengram0/$real")
# libengram-server.so.0 needs libengram.so.0 of the same release (its
# errors go through libengram's engram_last_error, a private symbol).
deps_server="$(LD_LIBRARY_PATH="$pkgs/libengram0/$lib" depends -l"$pkgs/libengram0/$lib" \
  "debian/libengram-server0/$real_server"), libengram0 (= $version)"
# engramd needs libengram.so.0 of the same release too: its peers' streams
# are clients of the server through libengram's private relay (remote/).
deps_daemon="$(LD_LIBRARY_PATH="$pkgs/libengram0/$lib" depends -l"$pkgs/libengram0/$lib" \
  debian/engramd/usr/bin/engramd debian/engramd/usr/bin/engramctl), libengram0 (= $version)"

control() {
  local pkg=$1 deps=$2
  mkdir -p "$pkgs/$pkg/DEBIAN"
  local size
  size=$(du -sk --exclude=DEBIAN "$pkgs/$pkg" | cut -f1)
  sed -e "s/@VERSION@/$version/g" -e "s/@ARCH@/$arch/" -e "s/@SIZE@/$size/" -e "s/@DEPENDS@/$deps/" \
    "$src/dist/debian/$pkg.control" >"$pkgs/$pkg/DEBIAN/control"
}
control libengram0 "$deps_lib"
echo "libengram 0 libengram0 (>= $version)" >"$pkgs/libengram0/DEBIAN/shlibs"
echo "activate-noawait ldconfig" >"$pkgs/libengram0/DEBIAN/triggers"
control libengram-server0 "$deps_server"
echo "libengram-server 0 libengram-server0 (>= $version)" >"$pkgs/libengram-server0/DEBIAN/shlibs"
echo "activate-noawait ldconfig" >"$pkgs/libengram-server0/DEBIAN/triggers"
control libengram-dev ""
control engramd "$deps_daemon"
echo /etc/engram/engramd.toml >"$pkgs/engramd/DEBIAN/conffiles"
for s in postinst prerm postrm; do install -m 0755 "$src/dist/debian/engramd.$s" "$pkgs/engramd/DEBIAN/$s"; done

rm -f "$out"/*.deb
for pkg in libengram0 libengram-server0 libengram-dev engramd; do
  deb="$out/${pkg}_${version}_$arch.deb"
  dpkg-deb --root-owner-group -Zxz --build "$pkgs/$pkg" "$deb" >/dev/null
  echo "$deb"
done
