#!/usr/bin/env bash
# install_tree.sh BUILD_DIR PREFIX TOOLKIT_DIR VERSION — installs the build into PREFIX (afresh) and checks the
# CANN-shaped tree of cmake/acl_install.cmake: the headers and libraries where CANN samples look, links that resolve,
# libraries that load without LD_LIBRARY_PATH, and a set_env.sh that sets the toolkit's variables.
set -euo pipefail
build=$1 prefix=$2 toolkit_dir=$3 version=$4
fail() { echo "install_tree: $*" >&2; exit 1; }

rm -rf "$prefix"
cmake --install "$build" --prefix "$prefix" >"${prefix%/}.install.log" 2>&1 || { cat "${prefix%/}.install.log"; fail "cmake --install failed"; }
root="$prefix/$toolkit_dir"
home="$root/latest"

[[ -L $home && $(readlink "$home") == "$version" ]] || fail "$home is not a link to $version"
for f in include/acl/acl.h include/acl/acl_base.h include/acl/acl_rt.h include/acl/ops/acl_dvpp.h \
         include/hccl/hccl.h include/hccl/hccl_types.h \
         lib64/libascendcl.so lib64/libacl_dvpp.so lib64/libhccl.so \
         runtime/include/acl/acl.h runtime/lib64/stub/libascendcl.so runtime/lib64/stub/libacl_dvpp.so \
         runtime/lib64/stub/libhccl.so acllib/include/acl/acl.h acllib/lib64/stub/libascendcl.so \
         python/site-packages/acl/__init__.py; do
  [[ -e $home/$f ]] || fail "missing $home/$f"
done
[[ -d $home/opp ]] || fail "missing $home/opp"
[[ -f $root/set_env.sh ]] || fail "missing $root/set_env.sh"
# Every link in the tree resolves, and none leaves the prefix.
while IFS= read -r link; do
  target="$(readlink -f "$link")" || fail "$link does not resolve"
  [[ -e $target ]] || fail "$link -> $(readlink "$link") does not resolve"
  [[ $target == "$(readlink -f "$prefix")"/* ]] || fail "$link leaves the prefix: $target"
done < <(find "$root" -type l)
# The libraries find their dependencies by their RUNPATH alone.
for lib in libascendcl.so libacl_dvpp.so libhccl.so; do
  missing="$(env -u LD_LIBRARY_PATH ldd "$home/lib64/$lib" | grep 'not found' || true)"
  [[ -z $missing ]] || fail "$lib: $missing"
done

# set_env.sh, sourced from another directory, points every variable into the tree.
(
  cd /
  unset ASCEND_TOOLKIT_HOME ASCEND_HOME_PATH ASCEND_OPP_PATH ASCEND_AICPU_PATH TOOLCHAIN_HOME
  export LD_LIBRARY_PATH=/already/there PYTHONPATH=
  # shellcheck disable=SC1090,SC1091
  . "$root/set_env.sh"
  [[ $ASCEND_TOOLKIT_HOME == "$(cd "$home" && pwd -L)" || $ASCEND_TOOLKIT_HOME == "$home" ]] ||
    fail "ASCEND_TOOLKIT_HOME=$ASCEND_TOOLKIT_HOME, expected $home"
  [[ $ASCEND_HOME_PATH == "$ASCEND_TOOLKIT_HOME" ]] || fail "ASCEND_HOME_PATH=$ASCEND_HOME_PATH"
  [[ $ASCEND_OPP_PATH == "$ASCEND_TOOLKIT_HOME/opp" && -d $ASCEND_OPP_PATH ]] || fail "ASCEND_OPP_PATH=$ASCEND_OPP_PATH"
  [[ $ASCEND_AICPU_PATH == "$ASCEND_TOOLKIT_HOME" ]] || fail "ASCEND_AICPU_PATH=$ASCEND_AICPU_PATH"
  [[ -n $TOOLCHAIN_HOME ]] || fail "TOOLCHAIN_HOME unset"
  [[ $LD_LIBRARY_PATH == "$ASCEND_TOOLKIT_HOME/lib64:/already/there" ]] || fail "LD_LIBRARY_PATH=$LD_LIBRARY_PATH"
  [[ $PYTHONPATH == "$ASCEND_TOOLKIT_HOME/python/site-packages" ]] || fail "PYTHONPATH=$PYTHONPATH"
  [[ :$PATH: == *":$ASCEND_TOOLKIT_HOME/bin:"* ]] || fail "PATH=$PATH"
)
echo "install_tree: $root checked"
